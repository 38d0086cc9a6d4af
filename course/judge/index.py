"""The scenarios the judge expects of a chapter, found without running or importing anything:
the chapter's stored snapshots (every fixed scenario has at least one) and its generated sections.

A scenario's section and purpose come from its test module's source (`ast`): the class's
`@pytest.mark.section(...)` and the test's one-line docstring.
"""

from __future__ import annotations

import ast
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

from course.manifest import HARDENING, Chapter
from course.recorder import scenarios as recorder_scenarios

GENERATED_TEST = "test_generated"


@dataclass
class Expected:
    scenario: str
    """The node id within the test file, e.g. `TestNonExecutingTerminals::test_terminal_row[length]`."""
    section: str | None = None
    purpose: str | None = None
    """The test's one-line docstring (`{param}` filled in)."""
    snapshots: list[Path] = field(default_factory=list)
    """A fixed scenario's stored snapshots, in the order the test asserts them."""
    generated: str | None = None
    """A generated scenario's section id."""
    cites: tuple[str, ...] = ()
    """What a fixed scenario enforces: names of the chapter's citations (`@pytest.mark.cites`) or hardening
    promises (`@pytest.mark.hardening`), `course.judge.contracts`. (A generated scenario's depend on its plan.)"""

    @property
    def track(self) -> str:
        """The chapter track, or the hardening track (the section 加固)."""
        return HARDENING if self.section == HARDENING else "chapter"


_INDEXED = re.compile(r"^(?P<base>.*(?:\]|[A-Za-z_0-9]))\.(?P<n>\d+)$")


def _snapshot_name(file: Path) -> tuple[str, int]:
    """`TestX.test_y[p].1.txt` -> (`TestX::test_y[p]`, 1)."""
    name = file.name.removesuffix(".txt")
    index = 0
    match = _INDEXED.match(name)
    if match and not name.endswith("]"):
        name, index = match["base"], int(match["n"])
    head, dot, rest = name.partition(".")
    if dot and head.startswith("Test") and not head.count("["):
        name = f"{head}::{rest}"
    return name, index


_parsing = threading.Lock()  # CPython 3.11's parser is not safe to run in two threads at once (grading does)


@dataclass(frozen=True)
class _Doc:
    """What a test's source says of it: its section, its docstring's first line, what it cites."""

    section: str | None = None
    purpose: str | None = None
    cites: tuple[str, ...] = ()
    """`cites` and `hardening` marks' names, for every case."""
    per_case: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """A `cites` mark's keywords: a parameter id and that case's own names (before those of every case)."""

    def cites_for(self, scenario: str) -> tuple[str, ...]:
        """The case's own names first (a `cites` keyword named as its parameter id), then those of every case."""
        case = scenario[scenario.index("[") + 1:-1] if scenario.endswith("]") and "[" in scenario else None
        own = dict(self.per_case).get(case, ()) if case is not None else ()
        return tuple(dict.fromkeys((*own, *self.cites)))


def _strings(node: ast.expr) -> tuple[str, ...]:
    """A mark argument's names: a string, or a tuple or list of strings (anything else names nothing)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return (node.value,)
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(n for item in node.elts for n in _strings(item))
    return ()


def _marks(node, name: str) -> list[ast.Call]:
    """The `@pytest.mark.<name>(...)` decorators of a class or function."""
    return [d for d in getattr(node, "decorator_list", []) if isinstance(d, ast.Call)
            and isinstance(d.func, ast.Attribute) and d.func.attr == name]


def _cited(node) -> tuple[tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...]]:
    names: list[str] = []
    per_case: list[tuple[str, tuple[str, ...]]] = []
    for mark in _marks(node, "cites") + _marks(node, "hardening"):
        names += [n for arg in mark.args for n in _strings(arg)]
        per_case += [(k.arg, _strings(k.value)) for k in mark.keywords if k.arg]
    return tuple(dict.fromkeys(names)), tuple(per_case)


def _docs(test_file: Path) -> dict[str, _Doc]:
    """`Class::test` (or `test`) -> what its source says of it (section, docstring, citations)."""
    found: dict[str, _Doc] = {}
    try:
        with _parsing:
            tree = ast.parse(test_file.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return found

    def section_of(node) -> str | None:
        for mark in _marks(node, "section"):
            if mark.args and isinstance(mark.args[0], ast.Constant):
                return mark.args[0].value
        return None

    def about(node, section: str | None, inherited=((), ())) -> _Doc:
        cites, per_case = _cited(node)
        return _Doc(section_of(node) or section, doc(node), cites or inherited[0], per_case or inherited[1])

    def doc(node) -> str | None:
        text = ast.get_docstring(node)
        return text.strip().splitlines()[0] if text else None

    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            section, inherited = section_of(node), _cited(node)
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name.startswith("test"):
                    found[f"{node.name}::{item.name}"] = about(item, section, inherited)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            found[node.name] = about(node, None)
    return found


def _purpose(template: str | None, scenario: str) -> str | None:
    """A docstring's `{name}` filled in with the scenario's parameter id."""
    if template is None or "[" not in scenario or "{" not in template:
        return template
    value = scenario[scenario.index("[") + 1:-1]
    return re.sub(r"\{[a-z_]+\}", lambda _: value, template)


def expected_scenarios(chapter: Chapter, root: Path) -> list[Expected]:
    """Every scenario of the chapter, in test-module order."""
    docs = _docs(root / chapter.test_file)
    snapshot_dir = root / chapter.snapshot_dir
    fixed: dict[str, dict[int, Path]] = {}
    for file in sorted(snapshot_dir.glob("*.txt")) if snapshot_dir.is_dir() else []:
        name, index = _snapshot_name(file)
        fixed.setdefault(name, {})[index] = file
    order = list(docs)
    found = []
    for name in sorted(fixed, key=lambda n: (order.index(n.split("[")[0]) if n.split("[")[0] in order else len(order), n)):
        about = docs.get(name.split("[")[0], _Doc())
        files = [fixed[name][i] for i in sorted(fixed[name])]
        found.append(Expected(name, about.section, _purpose(about.purpose, name), files, cites=about.cites_for(name)))
    try:
        sections = recorder_scenarios.for_chapter(chapter.module).SECTIONS
    except ImportError:
        sections = {}
    purpose = docs.get(GENERATED_TEST, _Doc()).purpose or \
        "generated plans of this section: every run must be the reference's run of the same plan."
    for key, name in sections.items():
        found.append(Expected(f"{GENERATED_TEST}[{key}]", name, purpose, generated=key))
    return found
