"""`pytest -k ch07`: a keyword that needs a chapter collects that chapter's folder alone.

Collecting every test module of the course (compiling it, rewriting its asserts, importing what it imports) costs
seconds; a student rerunning one chapter's tests many times an hour should pay for that chapter's only. When every
test `-k` could select names a chapter (`ch07`, `"ch07 and round_trip"`, `"ch07 or ch08"`), and no path was given,
the other folders of the test paths are not collected: the course-wide tests in `tests/` that mention a chapter in
their ids (`test_shrinking[ch07_agent_loop-abort]`) are the harness's, not the chapter's, and
`pytest -k <anything else>` collects everything as before.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

from course.manifest import CHAPTERS

OPERATORS = {"and", "or", "not", "true", "false"}
CHAPTER_WORD = re.compile(r"ch\d\d\w*")
"""A `-k` identifier naming a chapter: its number, or the start of its module's name."""
IDENTIFIER = re.compile(r"[\w:+\-.\[\]\\/]+")
"""What pytest's `-k` grammar takes as one identifier (a name matched as a substring, case aside)."""
MOST_OTHER_WORDS = 8
"""Identifiers besides the chapters' that are tried every way (2**8 evaluations of the expression at the most)."""


def chapter_folders(keyword: str, root: Path) -> list[Path] | None:
    """The folders under `root` (pytest's root directory: a copy of the course may be tested with the course
    installed from elsewhere) of the chapters a `-k` expression can select something of, when it selects nothing
    outside them; None when it may (or when it cannot be read here: pytest then says what is wrong with it)."""
    if not keyword.strip() or not re.fullmatch(r"[\w\s()\-:+.\[\]\\/]+", keyword):
        return None  # (nothing given, or keyword arguments and quotes this reading does not try)
    try:
        from _pytest.mark.expression import Expression

        expression = Expression.compile(keyword)
    except Exception:  # (a malformed expression: pytest's own collection reports it)
        return None
    words = sorted({word.lower() for word in IDENTIFIER.findall(keyword)} - OPERATORS)
    named = {chapter: {w for w in words if CHAPTER_WORD.fullmatch(w) and chapter.module.startswith(w)}
             for chapter in CHAPTERS}
    others = [w for w in words if not any(w in names for names in named.values())]
    if len(others) > MOST_OTHER_WORDS or not any(named.values()):
        return None
    if _can_select(expression, others, true=set()):
        return None  # it selects something naming no chapter
    return [(root / chapter.folder).resolve() for chapter, names in named.items()
            if _can_select(expression, others, names)]


def _can_select(expression, others: list[str], true: set[str]) -> bool:
    """Whether `expression` holds for some truth of the `others` identifiers, with only `true` of the chapters'."""
    for values in itertools.product((False, True), repeat=len(others)):
        truth = dict(zip(others, values))
        if expression.evaluate(lambda name, **_: truth.get(name.lower(), name.lower() in true)):
            return True
    return False


def left_out(path: Path, folders: list[Path]) -> bool:
    """Whether `path` (a directory or file pytest is about to collect) lies outside every one of `folders` and
    leads to none of them."""
    path = path.resolve()
    return not any(path == folder or folder in path.parents or path in folder.parents for folder in folders)
