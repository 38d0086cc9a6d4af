"""The chapters of the course, in order: `course/catalogue.toml` (one `[[chapters]]` table each,
read with tomllib) as `Chapter`s. Everything of a chapter is in its folder, `chapters/<module>/`, found
there by convention (`Chapter`'s paths): a minimal chapter is its entry in the catalogue, its checkpoint
module (`chapters/<module>/<module>.py`) and its test module (`chapters/<module>/test_<module>.py`);
`course new NN "title"` writes all three (docs/instructors.md). What never runs beside student code is
in the folder's `judge/`, which a graded copy leaves out."""

from __future__ import annotations

import importlib
import re
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import ModuleType

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
    """The chapter's text, as a path from the repository root, when it is not its folder's `text.txt` (it
    may be absent: what cites it still prints its stored quotes, `course.judge.contracts`)."""
    hardening_weight: float = field(default=0.0, compare=False)
    """Points of the hardening track (加固, beyond the chapter) in `course grade`: 0 leaves it out unless
    `--hardening WEIGHT` asks for it; it never decides whether the chapter passes."""
    masked_calls: tuple[str, ...] = field(default=(), compare=False)
    """The module's coroutine functions its fixed scenarios call directly (not through the loop): a masked
    scenario's test gets them run on the masked call (`course.recorder.mask`)."""
    masked_tools: dict[str, tuple[str, ...]] = field(default_factory=dict, hash=False, compare=False)
    """The module's functions that make a tool working in a workspace (`create_read_tool(root)`), each with the
    argument texts its tool is called with that name the workspace's content (`oldText`): a masked scenario's
    test gets the tool working on the masked workspace (`course.recorder.workspace_mask`)."""
    masked_beside: tuple[str, ...] = field(default=(), compare=False)
    """Names the chapter's tests make beside a tool's workspace, outside it (`secret.txt`): masked with the
    workspace (where they stand, in link targets and in the paths a tool is called with), so a path climbing out
    of the workspace to one of them is not the published path either."""
    published_form: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    """Fixed scenarios ("Class::test_name") that cannot run masked, and why: they run and are judged in their
    published form, and a grade with a secret says so with the points they carry."""
    replayable: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    """Fixed scenarios ("Class::test_name") that run masked, but whose right answer depends on nothing a mask can
    change (the tool is never called, or its call names nothing of the workspace), and why: a tool replaying the
    published answers passes them, and a grade with a secret says so with the points they carry."""
    unmasked: str = field(default="", compare=False)
    """Why a mask cannot take the chapter's fixed scenarios from a replay of the published records, if it
    cannot: said on stderr at every grade with a secret."""

    @property
    def keyword(self) -> str:
        """What `pytest -k` selects the chapter by."""
        return f"ch{self.number}"

    @property
    def folder(self) -> str:
        """The chapter's folder, from the repository root: everything of the chapter is in it."""
        return f"{FOLDER}/{self.module}"

    @property
    def reference_file(self) -> str:
        """The reference checkpoint (importable as `checkpoints.<module>`, checkpoints/__init__.py)."""
        return f"{self.folder}/{self.module}.py"

    @property
    def test_file(self) -> str:
        return f"{self.folder}/test_{self.module}.py"

    @property
    def snapshot_dir(self) -> str:
        """Where the chapter's snapshot files live (one per scenario)."""
        return f"{self.folder}/__snapshots__/test_{self.module}"

    @property
    def judge_dir(self) -> str:
        """What never runs beside student code (a graded copy leaves it out): plans, gallery, hints, ..."""
        return f"{self.folder}/{JUDGE}"

    @property
    def text_path(self) -> str:
        """The chapter's text, from the repository root: the catalogue's `text`, else its folder's text.txt."""
        return self.text or f"{self.folder}/text.txt"

    @property
    def package(self) -> str:
        """The folder as a Python package name: `<package>.scenarios`, `<package>.judge.plans`, ..."""
        return f"{FOLDER}.{self.module}"


FOLDER = "chapters"
"""Where the chapters' folders are, from the repository root."""
JUDGE = "judge"
"""The part of a chapter's folder that never runs beside student code."""
ROOT = Path(__file__).resolve().parents[1]
"""The repository (the course's checkout)."""
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
    for key in ("names", "runs_in", "masked_calls"):
        if not all(isinstance(name, str) and name.isidentifier() for name in entry.get(key, ())):
            return f"{key} is not a list of Python names"
    beside = entry.get("masked_beside", [])
    if not isinstance(beside, list) or not all(
            isinstance(name, str) and name not in ("", ".", "..") and "/" not in name for name in beside):
        return "masked_beside is not a list of file names (no /, not . or ..)"
    weights = entry.get("weights", {})
    if not isinstance(weights, dict) or not all(
            isinstance(w, (int, float)) and not isinstance(w, bool) and w >= 0 for w in weights.values()):
        return "weights is not a table of section = points (numbers, at least 0)"
    if not isinstance(entry.get("text", ""), str):
        return "text is not a path (from the repository root) in quotes"
    if not isinstance(entry.get("unmasked", ""), str):
        return "unmasked is not a text"
    tools = entry.get("masked_tools", {})
    if not isinstance(tools, dict) or not all(
            name.isidentifier() and isinstance(keys, list) and all(isinstance(k, str) for k in keys)
            for name, keys in tools.items()):
        return "masked_tools is not a table of function = [argument names]"
    for key in ("published_form", "replayable"):
        table = entry.get(key, {})
        if not isinstance(table, dict) or not all(isinstance(why, str) for why in table.values()):
            return f"{key} is not a table of \"Class::test\" = why"
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
    values = {key: tuple(value) if isinstance(value, list) else value for key, value in entry.items()}
    if "masked_tools" in values:
        values["masked_tools"] = {name: tuple(keys) for name, keys in values["masked_tools"].items()}
    return Chapter(**values)


def load_catalogue(path: Path = CATALOGUE) -> list[Chapter]:
    """The chapters the catalogue lists, in its order (their numbers rising); CatalogueError says what is wrong."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise CatalogueError(f"{path}: cannot be read as TOML: {error}") from None
    entries = data.get("chapters")
    _demo_problem(data.get("demo", {}), path)
    if not isinstance(entries, list) or not entries:
        raise CatalogueError(f"{path}: no [[chapters]] tables")
    chapters = [_chapter(entry, n, path) for n, entry in enumerate(entries, 1)]
    for earlier, later in zip(chapters, chapters[1:]):
        if later.number <= earlier.number:
            raise CatalogueError(f"{path}: chapter {later.number} comes after chapter {earlier.number}: "
                                 "the chapters are listed once each, in the order of their numbers")
    return chapters


def _demo_problem(demo: object, path: Path) -> None:
    if not isinstance(demo, dict) or not all(isinstance(v, str) for v in demo.values()):
        raise CatalogueError(f"{path}: [demo] is not a table of chapter numbers in quotes")


CHAPTERS: list[Chapter] = load_catalogue()


def demo_chapters(path: Path = CATALOGUE) -> dict[str, str]:
    """`course demo`'s chapters by role (`loop`, `workspace`): the catalogue's [demo] table."""
    return dict(tomllib.loads(path.read_text(encoding="utf-8")).get("demo", {}))


def find_chapter(number: str) -> Chapter:
    wanted = number.removeprefix("ch").zfill(2)
    for chapter in CHAPTERS:
        if chapter.number == wanted:
            return chapter
    known = ", ".join(c.number for c in CHAPTERS)
    raise LookupError(f"No chapter {number!r}; the chapters are {known}")


def chapter_part(module: str, part: str) -> ModuleType | None:
    """A module of the chapter's folder (`part`: "judge.gallery", "judge.contract", ...), or None when the
    chapter has none: those parts are optional. One that is there but fails to import raises."""
    name = f"{FOLDER}.{module}.{part}"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as missing:
        if missing.name and missing.name.startswith(f"{FOLDER}.{module}") and name.startswith(missing.name):
            return None
        raise
