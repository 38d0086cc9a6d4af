"""`course start NN`: the chapter's starter module, derived from the reference checkpoint.

The starter keeps what a student builds on — the module docstring, imports, types (TypedDicts,
dataclasses, aliases), the chapter's data tables and every public function's signature and
docstring — and replaces each function body with `raise NotImplementedError`; private helpers
(`_name`) are left out. It is derived from the reference each time, so the two never drift apart.

It asks only for what the chapter teaches: what the reference opts into beyond the chapter (the
hardening track) is marked `加固` there, and the starter leaves out every top-level statement whose
lines carry the mark (the opt-in imports) and every paragraph of the module docstring that names it.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
from pathlib import Path

from course.recorder.impl import REFERENCE_PACKAGE
from course.manifest import Chapter, find_chapter

HARDENING_MARK = "加固"
"""Marks what the reference does beyond the chapter, for the hardening track: never in a starter."""
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


def _marked(node: ast.stmt, lines: list[str]) -> bool:
    """Whether a top-level statement (not a function) is an opt-in beyond the chapter."""
    return not isinstance(node, _FUNCTIONS) and HARDENING_MARK in "".join(lines[_first_line(node):node.end_lineno])


def beyond_the_chapter(source: str) -> set[str]:
    """The names the reference's marked statements bind (its opt-in imports): none is in the starter."""
    lines = source.splitlines(keepends=True)
    names: set[str] = set()
    for node in ast.parse(source).body:
        if _marked(node, lines) and isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif _marked(node, lines):
            names.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    return names


def _chapter_docstring(tree: ast.Module) -> str:
    """The module docstring without the paragraphs about what goes beyond the chapter."""
    paragraphs = ast.get_docstring(tree, clean=False).split("\n\n")
    kept = "\n\n".join(p for p in paragraphs if HARDENING_MARK not in p).rstrip("\n")
    return f'"""{kept}\n"""\n'


def starter_source(chapter: Chapter, source: str | None = None) -> str:
    """The starter module's text for `chapter`: the reference's own lines (comments and layout
    kept), with each function's body after its docstring replaced. `source` is the reference's
    text, read from its chapter folder (through `checkpoints`) when not given."""
    if source is None:
        reference = Path(importlib.util.find_spec(f"{REFERENCE_PACKAGE}.{chapter.module}").origin)
        source = reference.read_text(encoding="utf-8")
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, list[str]]] = []
    tree = ast.parse(source)
    for index, node in enumerate(tree.body):
        if index == 0 and ast.get_docstring(tree) is not None:
            edits.append((node.lineno - 1, node.end_lineno, [_chapter_docstring(tree)]))
        elif _marked(node, lines):
            edits.append((_first_line(node), node.end_lineno, []))  # an opt-in beyond the chapter
        elif isinstance(node, _FUNCTIONS):
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
