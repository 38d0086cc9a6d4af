"""The hints as data: each chapter's `chapters/<module>/judge/hints.toml` read into what its sections promise,
the passages of its text that say so, and the kinds of broken promise the invariant checker reports (with
`classify`, which sorts a report line into its kind). `course.judge.hints` gives them as steps; the report
(`course.judge.report`) counts a kind once."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass

from course.manifest import CHAPTERS, ROOT, Chapter


@dataclass(frozen=True)
class Passage:
    """Lines of a chapter text: its section title and the line range."""

    chapter: str
    title: str
    first: int
    last: int

    def __str__(self) -> str:
        lines = f"line {self.first}" if self.first == self.last else f"lines {self.first}-{self.last}"
        return f"chapter {self.chapter}, section 「{self.title}」, {lines}"


def cite(passages: tuple[Passage, ...]) -> str:
    """Passages as one citation, those of one section together:
    `chapter 07, section 「…」, lines 210-221 and 229; chapter 07, section 「…」, line 162`."""
    grouped: dict[tuple[str, str], list[Passage]] = {}
    for passage in passages:
        grouped.setdefault((passage.chapter, passage.title), []).append(passage)
    parts = []
    for (chapter, title), found in grouped.items():
        ranges = [str(p.first) if p.first == p.last else f"{p.first}-{p.last}" for p in found]
        word = "line" if len(found) == 1 and found[0].first == found[0].last else "lines"
        parts.append(f"chapter {chapter}, section 「{title}」, {word} {' and '.join(ranges)}")
    return "; ".join(parts)


@dataclass(frozen=True)
class Section:
    """What a section of a chapter promises (step 1) and where the text says it (step 2)."""

    promise: str
    passages: tuple[Passage, ...] = ()
    look_for: str = ""
    """What to look for in those lines."""
    elsewhere: str = ""
    """For a chapter whose text is not here: where the promise is described instead."""


BEYOND_THE_CHAPTER = Section(
    promise="This scenario is in the hardening track (加固): beyond the chapter. It holds your code to what the "
            "project adds to the chapter's text (a model that raises, an executor's malformed answers, an observer "
            "that raises, the caller's cancellation, ...), never to whether the chapter passes.",
    elsewhere="the promise named below (the chapter text does not make it; the reference checkpoint and "
              "course/runtime/ show one way to keep it)",
)
"""Every chapter's 加固 section."""

@dataclass(frozen=True)
class Kind:
    """A kind of broken promise: the report lines it covers (regular expressions over their wording),
    what the promise asks, and the lines of a chapter text about it."""

    name: str
    patterns: tuple[str, ...]
    asks: str
    passages: tuple[Passage, ...] = ()


def _passages(rows: list[dict], chapter: str) -> tuple[Passage, ...]:
    return tuple(Passage(row.get("chapter", chapter), row["section"], *row["lines"]) for row in rows)


def _chapter_hints(chapter: Chapter) -> dict:
    """The chapter's hints file, `chapters/<module>/judge/hints.toml` (optional: {} without one)."""
    path = ROOT / chapter.judge_dir / "hints.toml"
    return tomllib.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _load() -> tuple[dict[str, str], dict[str, dict[str, Section]], tuple[Kind, ...]]:
    titles, sections, kinds = {}, {}, []
    for chapter in CHAPTERS:
        data = _chapter_hints(chapter)
        if "text_title" in data:
            titles[chapter.number] = data["text_title"]
        if data.get("sections"):
            sections[chapter.number] = {
                name: Section(promise=row["promise"], passages=_passages(row.get("passages", []), chapter.number),
                              look_for=row.get("look_for", ""), elsewhere=row.get("elsewhere", ""))
                for name, row in data["sections"].items()}
        kinds += [Kind(row["name"], tuple(row["patterns"]), row["asks"], _passages(row.get("passages", []), chapter.number))
                  for row in data.get("kinds", [])]
    return titles, sections, tuple(kinds)


CHAPTER_TEXT, SECTIONS, KINDS = _load()
"""Per chapter number: the title (first line) of the text its line numbers refer to; what each section
promises and where; and, from every chapter, the kinds of broken promise the invariant checker reports."""

_COMPILED = [(kind, [re.compile(p) for p in kind.patterns]) for kind in KINDS]


def classify(line: str) -> Kind | None:
    """The kind of one of the invariant checker's report lines; None for a line no kind describes."""
    for kind, patterns in _COMPILED:
        if any(p.search(line) for p in patterns):
            return kind
    return None
