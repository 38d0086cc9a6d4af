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

from course.manifest import Chapter
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


def _docs(test_file: Path) -> dict[str, tuple[str | None, str | None]]:
    """`Class::test` (or `test`) -> (section, first docstring line), from the module's source."""
    found: dict[str, tuple[str | None, str | None]] = {}
    try:
        with _parsing:
            tree = ast.parse(test_file.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return found

    def section_of(node) -> str | None:
        for decorator in getattr(node, "decorator_list", []):
            if (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute)
                    and decorator.func.attr == "section" and decorator.args
                    and isinstance(decorator.args[0], ast.Constant)):
                return decorator.args[0].value
        return None

    def doc(node) -> str | None:
        text = ast.get_docstring(node)
        return text.strip().splitlines()[0] if text else None

    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            section = section_of(node)
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name.startswith("test"):
                    found[f"{node.name}::{item.name}"] = (section_of(item) or section, doc(item))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            found[node.name] = (section_of(node), doc(node))
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
        section, purpose = docs.get(name.split("[")[0], (None, None))
        files = [fixed[name][i] for i in sorted(fixed[name])]
        found.append(Expected(name, section, _purpose(purpose, name), files))
    try:
        sections = recorder_scenarios.for_chapter(chapter.module).SECTIONS
    except ImportError:
        sections = {}
    purpose = docs.get(GENERATED_TEST, (None, None))[1] or \
        "generated plans of this section: every run must be the reference's run of the same plan."
    for key, name in sections.items():
        found.append(Expected(f"{GENERATED_TEST}[{key}]", name, purpose, generated=key))
    return found
