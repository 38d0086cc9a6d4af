"""What every check of a chapter holds a student to: a sentence of the chapter text, or a promise the
project adds beyond the chapter.

Each chapter's checks are in two tracks:

- the chapter track, held to the chapter text and nothing else: each of its fixed tests names the
  sentences it enforces (`@pytest.mark.cites("pure-stop", ...)`), each kind of generated plan too
  (the chapter's judge scenarios module, `cites_of(plan)`); the names are keys of the chapter's
  `CITES` here, each a `Cite`: the section heading and line of the chapter text and a short quote of
  that line, stored here so that it prints where the text itself is not at hand;
- the hardening track, `加固`: what the project adds beyond the chapter (robustness against a model that
  raises, an executor's malformed answers, an observer that raises, the caller's cancellation, ...).
  Its tests are in the section `加固` and name the promise they hold (`@pytest.mark.hardening("name")`),
  a key of the chapter's `PROMISES`. It never decides whether the chapter passes: `course check`,
  `status`, `hint` and `grade` leave it out unless asked (`--hardening`), and label it as beyond the
  chapter wherever it appears.

A chapter's table is `chapters/<module>/judge/contract.py` (`CITES`, `PROMISES`); a chapter without one
has nothing to cite yet, and nothing breaks. Its text is the manifest's `Chapter.text_path` (a path from
the repository root); `quote_problems` checks every stored quote against it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from course.manifest import HARDENING, JUDGE, Chapter, chapter_part
BEYOND = f"{HARDENING} (beyond the chapter)"
"""How the hardening track is labelled wherever it appears."""
CHAPTER_TRACK = "chapter"


def track_of(section: str | None) -> str:
    """The track of a check in `section`: the hardening track is the section `加固`."""
    return HARDENING if section == HARDENING else CHAPTER_TRACK


@dataclass(frozen=True)
class Cite:
    """A sentence of the chapter text: where it is, and a short quote of it (exactly as that line has it)."""

    heading: str
    """The heading of the section the line is in (without its `#`)."""
    line: int
    """1-based line of the chapter text."""
    quote: str

    def text(self) -> str:
        return f"「{self.heading}」 line {self.line}: {self.quote}"


@dataclass(frozen=True)
class Promise:
    """What the project promises beyond the chapter (the hardening track), by name."""

    name: str
    says: str

    def text(self) -> str:
        return f"{BEYOND}, promise {self.name}: {self.says}"


@dataclass(frozen=True)
class Contract:
    """One chapter's citations and hardening promises."""

    cites: dict[str, Cite] = field(default_factory=dict)
    promises: dict[str, Promise] = field(default_factory=dict)

    def lines(self, names: tuple[str, ...] | list[str]) -> list[str]:
        """Each named citation or promise as a student reads it (a name neither knows is shown as such:
        `test_contracts` fails on it)."""
        found = []
        for name in names:
            if name in self.cites:
                found.append(self.cites[name].text())
            elif name in self.promises:
                found.append(self.promises[name].text())
            else:
                found.append(f"(no citation named {name!r})")
        return found

    def unknown(self, names: tuple[str, ...] | list[str]) -> list[str]:
        return [name for name in names if name not in self.cites and name not in self.promises]


def for_chapter(module: str) -> Contract:
    """The chapter's table; an empty one for a chapter that has none yet."""
    table = chapter_part(module, f"{JUDGE}.contract")
    if table is None:
        return Contract()
    return Contract(dict(getattr(table, "CITES", {})), dict(getattr(table, "PROMISES", {})))


def text_path(chapter: Chapter, root: Path) -> Path | None:
    """Where the chapter's text is, when it is there (the manifest's `text`, else its folder's text.txt)."""
    path = root / chapter.text_path
    return path if path.is_file() else None


def headings(lines: list[str]) -> dict[int, str]:
    """1-based line -> the heading of the section it is in (`#title` lines; none before the first)."""
    found, current = {}, None
    for number, line in enumerate(lines, 1):
        if line.startswith("#"):
            current = line.lstrip("#").strip()
        if current is not None:
            found[number] = current
    return found


def quote_problems(contract: Contract, text: str) -> list[str]:
    """Every stored citation whose quote is not on its line of `text`, or whose heading is not that line's."""
    lines = text.splitlines()
    under = headings(lines)
    problems = []
    for name, cite in contract.cites.items():
        if not 1 <= cite.line <= len(lines):
            problems.append(f"{name}: line {cite.line} is not in the text ({len(lines)} lines)")
            continue
        if cite.quote not in lines[cite.line - 1]:
            problems.append(f"{name}: line {cite.line} does not hold {cite.quote!r}; it reads {lines[cite.line - 1]!r}")
        if under.get(cite.line) != cite.heading:
            problems.append(f"{name}: line {cite.line} is under 「{under.get(cite.line)}」, not 「{cite.heading}」")
    return problems
