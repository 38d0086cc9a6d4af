"""Every function in `course/` reads at once: at most MAX_LINES lines, decorators and docstring included."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

COURSE = Path(__file__).resolve().parent.parent / "course"
MAX_LINES = 60
ALLOWED: dict[str, str] = {}
"""Functions allowed to be longer ("path::qualified name": why). Keep it empty."""


def function_lengths(path: Path) -> list[tuple[str, int]]:
    """Each function and method in `path` with its length in lines (a nested one is counted in its own right
    and in the function holding it)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                found.append((name, child.end_lineno - start + 1))
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def too_long() -> dict[str, int]:
    root = COURSE.parent
    return {f"{path.relative_to(root).as_posix()}::{name}": length
            for path in sorted(COURSE.rglob("*.py"))
            for name, length in function_lengths(path) if length > MAX_LINES}


def test_no_function_in_the_harness_is_longer_than_sixty_lines():
    over = {key: length for key, length in too_long().items() if key not in ALLOWED}
    assert not over, "split these functions by what they do:\n" + "\n".join(
        f"  {length} lines: {key}" for key, length in sorted(over.items(), key=lambda item: -item[1]))


def test_the_allow_list_names_only_functions_still_too_long():
    fine_now = sorted(set(ALLOWED) - set(too_long()))
    assert not fine_now, "remove these from ALLOWED: " + ", ".join(fine_now)


@pytest.mark.parametrize("lines, over", [(MAX_LINES, False), (MAX_LINES + 1, True)])
def test_the_count_can_fail(tmp_path, lines, over):
    body = "".join(f"        x{n} = {n}\n" for n in range(lines - 2))  # with its decorator and def line: `lines`
    source = tmp_path / "long.py"
    source.write_text(f"class A:\n    @staticmethod\n    def f():\n{body}", encoding="utf-8")
    (name, length), = function_lengths(source)
    assert name == "A.f" and length == lines
    assert (length > MAX_LINES) is over
