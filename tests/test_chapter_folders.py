"""One folder per chapter: the generic machinery under course/ knows no chapter by name, and every chapter's
files are in its folder, found there by convention (course.manifest.Chapter's paths)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from course.manifest import CHAPTERS, FOLDER, JUDGE

ROOT = Path(__file__).resolve().parent.parent
CHAPTER_NAME = re.compile(r"\bch\d\d(_\w+)?\b")
"""A chapter's module or keyword (`ch07_agent_loop`, `ch07`)."""


def _docstrings(tree: ast.Module) -> set[int]:
    """The ids of the docstring constants (prose may name a chapter as an example; code may not)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    for node in ast.walk(tree):  # (an attribute's docstring: a string statement after an assignment)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            found.add(id(node.value))
    return found


def chapter_names_in(source: str) -> list[str]:
    """The string constants of code (not its prose) that name a chapter: a chapter module or keyword, or a
    chapter's number as the whole string (a key)."""
    tree = ast.parse(source)
    prose = _docstrings(tree)
    numbers = {chapter.number for chapter in CHAPTERS}
    return [f"line {node.lineno}: {node.value!r}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose
            and (CHAPTER_NAME.search(node.value) or node.value in numbers)]


@pytest.mark.parametrize("path", sorted((ROOT / "course").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_generic_module_names_a_chapter(path):
    assert chapter_names_in(path.read_text(encoding="utf-8")) == []


def test_the_check_finds_a_chapter_named_in_code():
    assert chapter_names_in('"""Chapter ch07_agent_loop, in prose."""\nX = {"07": 1}\nload("ch08_workspace_read")\n') \
        == ["line 2: '07'", "line 3: 'ch08_workspace_read'"]


def test_every_chapter_is_one_folder_and_nothing_of_it_is_left_in_the_old_places():
    for chapter in CHAPTERS:
        assert (ROOT / chapter.reference_file).is_file() and (ROOT / chapter.test_file).is_file(), chapter.number
    old = [path for place in ("checkpoints", "tests", "course/recorder/scenarios", "course/judge/scenarios",
                              "course/judge/gallery", "course/judge/contracts", "docs/chapters")
           for path in (ROOT / place).rglob("*") if re.match(r"(test_)?ch\d\d_", path.name)
           and "__pycache__" not in path.parts and "chapter_loops" not in path.parts]
    # (tests/chapter_loops/ holds the harness's own right and wrong implementations, not a chapter's files)
    assert old == []


def test_what_never_runs_beside_student_code_is_in_each_chapters_judge_folder():
    for chapter in CHAPTERS:
        outside = [p.name for p in (ROOT / chapter.folder).iterdir()
                   if p.name in ("plans.py", "gallery.py", "contract.py", "hints.toml", "signatures.json", "pinned.json")]
        assert outside == [], chapter.number
    assert chapter.judge_dir == f"{FOLDER}/{chapter.module}/{JUDGE}"
