"""The chapters of the course, in order: `course/catalogue.toml` (one `[[chapters]]` table each,
read with tomllib) as `Chapter`s. A minimal chapter is its entry there, one checkpoint module
(`checkpoints/<module>.py`) and one test module (`tests/test_<module>.py`): `course new NN "title"`
writes all three (docs/instructors.md)."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path

HARDENING = "加固"
"""The hardening track, as a section name: what the project adds beyond a chapter's text. Its checks are
labelled as beyond the chapter wherever they appear and never decide whether a chapter passes."""


@dataclass(frozen=True)
class Chapter:
    number: str
    """Two digits, as students type it: `course check 07`."""
    module: str
    """The checkpoint module's name, in `checkpoints/` and in a student's directory."""
    title: str
    """What the chapter builds."""
    names: tuple[str, ...] = ()
    """What the chapter's tests use of the module: a module without one of them cannot be judged."""
    runs_in: tuple[str, ...] = ()
    """Later chapters' reference modules the chapter's generated scenarios run its module in (chapter 06's
    `in_the_loop`: the reference loop of chapter 07): a graded copy holds their files."""
    weights: dict[str, float] = field(default_factory=dict, hash=False, compare=False)
    """Points per section for `course grade` (a section not listed is worth 1), earned in proportion
    to the section's scenarios passed."""
    text: str | None = field(default=None, compare=False)
    """The chapter's text, as a path from the repository root (it may be absent: what cites it still
    prints its stored quotes, `course.judge.contracts`)."""
    hardening_weight: float = field(default=0.0, compare=False)
    """Points of the hardening track (加固, beyond the chapter) in `course grade`: 0 leaves it out unless
    `--hardening WEIGHT` asks for it; it never decides whether the chapter passes."""

    @property
    def keyword(self) -> str:
        """What `pytest -k` selects the chapter by."""
        return f"ch{self.number}"

    @property
    def test_file(self) -> str:
        return f"tests/test_{self.module}.py"

    @property
    def snapshot_dir(self) -> str:
        """Where the chapter's snapshot files live (one per scenario)."""
        return f"tests/__snapshots__/test_{self.module}"


CATALOGUE = Path(__file__).with_name("catalogue.toml")
"""The declarative list of the chapters (rustlings' info.toml is the model)."""
REQUIRED = ("number", "module", "title")


class CatalogueError(ValueError):
    """The catalogue cannot be read as chapters: the message names the file, the chapter and what is wrong."""


def _field_problem(entry: dict) -> str | None:
    """What is wrong with the fields the harness reads of an entry, in words; None when nothing is."""
    number, module = entry.get("number"), entry.get("module")
    if not (isinstance(number, str) and re.fullmatch(r"\d\d", number)):
        return f"number {number!r} is not two digits in quotes (\"07\")"
    if not (isinstance(module, str) and module.isidentifier() and module.startswith(f"ch{number}_")):
        return f"module {module!r} is not a Python module name starting with ch{number}_"
    if not (isinstance(entry["title"], str) and entry["title"].strip()):
        return "its title is not a text"
    for key in ("names", "runs_in"):
        if not all(isinstance(name, str) and name.isidentifier() for name in entry.get(key, ())):
            return f"{key} is not a list of Python names"
    weights = entry.get("weights", {})
    if not isinstance(weights, dict) or not all(
            isinstance(w, (int, float)) and not isinstance(w, bool) and w >= 0 for w in weights.values()):
        return "weights is not a table of section = points (numbers, at least 0)"
    if not isinstance(entry.get("text", ""), str):
        return "text is not a path (from the repository root) in quotes"
    weight = entry.get("hardening_weight", 0)
    if not isinstance(weight, (int, float)) or isinstance(weight, bool) or weight < 0:
        return "hardening_weight is not a number of points, at least 0"
    return None


def _chapter(entry: object, position: int, path: Path) -> Chapter:
    """One [[chapters]] table as a Chapter: its keys are Chapter's fields (a TOML array becomes a tuple)."""
    where = f"{path}: chapter {position}"
    if not isinstance(entry, dict):
        raise CatalogueError(f"{where} is not a table")
    where += f" ({entry.get('module') or entry.get('number') or 'no module'})"
    known = {f.name for f in fields(Chapter)}
    unknown, missing = sorted(set(entry) - known), [key for key in REQUIRED if key not in entry]
    if missing:
        raise CatalogueError(f"{where} has no {', '.join(missing)}")
    if unknown:
        raise CatalogueError(f"{where} has unknown keys {', '.join(unknown)} (a chapter's keys: {', '.join(sorted(known))})")
    problem = _field_problem(entry)
    if problem is not None:
        raise CatalogueError(f"{where}: {problem}")
    return Chapter(**{key: tuple(value) if isinstance(value, list) else value for key, value in entry.items()})


def load_catalogue(path: Path = CATALOGUE) -> list[Chapter]:
    """The chapters the catalogue lists, in its order (their numbers rising); CatalogueError says what is wrong."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise CatalogueError(f"{path}: cannot be read as TOML: {error}") from None
    entries = data.get("chapters")
    if not isinstance(entries, list) or not entries:
        raise CatalogueError(f"{path}: no [[chapters]] tables")
    chapters = [_chapter(entry, n, path) for n, entry in enumerate(entries, 1)]
    for earlier, later in zip(chapters, chapters[1:]):
        if later.number <= earlier.number:
            raise CatalogueError(f"{path}: chapter {later.number} comes after chapter {earlier.number}: "
                                 "the chapters are listed once each, in the order of their numbers")
    return chapters


CHAPTERS: list[Chapter] = load_catalogue()


def find_chapter(number: str) -> Chapter:
    wanted = number.removeprefix("ch").zfill(2)
    for chapter in CHAPTERS:
        if chapter.number == wanted:
            return chapter
    known = ", ".join(c.number for c in CHAPTERS)
    raise LookupError(f"No chapter {number!r}; the chapters are {known}")
