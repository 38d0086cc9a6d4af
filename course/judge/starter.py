"""`course start NN`: the chapter's starter module, derived from the reference checkpoint.

The starter keeps what a student builds on — the module docstring, imports, types (TypedDicts,
dataclasses, aliases), the chapter's data tables and every public function's signature and
docstring — and replaces each function body with `raise NotImplementedError`; private helpers
(`_name`) are left out. It is derived from
the reference each time, so the two never drift apart.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
from pathlib import Path

from course.recorder.impl import REFERENCE_PACKAGE
from course.manifest import Chapter, find_chapter

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_KEPT = (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.ClassDef, *_FUNCTIONS)


def _first_line(node: ast.stmt) -> int:
    """0-based index of the node's first line, decorators included."""
    return min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))]) - 1


def _stubbed_body(function: ast.FunctionDef | ast.AsyncFunctionDef, chapter: Chapter) -> tuple[int, int, list[str]]:
    """(first, end, replacement): the body's lines after the docstring become one `raise`."""
    has_docstring = ast.get_docstring(function) is not None
    first = function.body[0].end_lineno if has_docstring else function.body[0].lineno - 1
    indent = " " * function.body[0].col_offset
    message = f"{function.name}: yours to write (chapter {chapter.number})"
    return first, function.end_lineno, [f"{indent}raise NotImplementedError({message!r})\n"]


def starter_source(chapter: Chapter, source: str | None = None) -> str:
    """The starter module's text for `chapter`: the reference's own lines (comments and layout
    kept), with each function's body after its docstring replaced. `source` is the reference's
    text, read from `checkpoints/` when not given."""
    if source is None:
        reference = Path(importlib.util.find_spec(f"{REFERENCE_PACKAGE}.{chapter.module}").origin)
        source = reference.read_text(encoding="utf-8")
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, list[str]]] = []
    tree = ast.parse(source)
    for index, node in enumerate(tree.body):
        if index == 0 and ast.get_docstring(tree) is not None:
            continue
        if isinstance(node, _FUNCTIONS):
            edits.append((_first_line(node), node.end_lineno, []) if node.name.startswith("_")
                         else _stubbed_body(node, chapter))
        elif isinstance(node, ast.ClassDef):
            edits += [_stubbed_body(n, chapter) for n in node.body if isinstance(n, _FUNCTIONS)]
        elif not isinstance(node, _KEPT):
            edits.append((_first_line(node), node.end_lineno, []))
    for first, end, replacement in sorted(edits, reverse=True):
        lines[first:end] = replacement
    header = (f"# Starter for chapter {chapter.number} ({chapter.title}), written by `course start {chapter.number}`.\n"
              f"# Replace each `raise NotImplementedError` with your code; check it with `course check {chapter.number}`.\n")
    return header + "".join(lines)


def start(args: argparse.Namespace) -> int:
    """Write the chapter's starter module into the student's directory, never over an existing file."""
    chapter = find_chapter(args.chapter)
    directory = Path(args.dir)
    target = directory / f"{chapter.module}.py"
    if target.exists():
        print(f"course start: {target} already exists; it is left as it is "
              f"(delete it yourself to start the chapter over)")
        return 1
    directory.mkdir(parents=True, exist_ok=True)
    target.write_text(starter_source(chapter), encoding="utf-8")
    impl_option = "" if args.dir == "student" else f" --impl={args.dir}"
    print(f"wrote {target} — chapter {chapter.number}, {chapter.title}")
    print(f"next: fill in its functions, then run `course check {chapter.number}{impl_option}`")
    return 0


def register(commands) -> None:
    parser = commands.add_parser("start", help="write a chapter's starter module (never overwrites)")
    parser.add_argument("chapter", metavar="NN", help="the chapter number, e.g. 07")
    parser.add_argument("--dir", default="student", help="your modules' directory (default: ./student)")
    parser.set_defaults(handler=start)
