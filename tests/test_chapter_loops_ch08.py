"""The chapter is the contract, for chapter 08 (issue 21): read tools written from the chapter text alone pass,
tools that break one of its sentences fail, and what fails quotes that sentence.

`tests/chapter_loops/` holds two student-style `ch08_workspace_read.py` modules written from the chapter 08 text
in different styles (`ch08_path_walk.py`, `ch08_walker.py`), with nothing beyond the chapter (no descriptor held
per directory, no O_NOFOLLOW, no fstat after the open), and wrong tools made from them
(`ch08_wrong_tools.py`). Each is judged like a student's code: the chapter's test module through `--impl`, in a
worker process (`course.judge.mutants.run_variants`), the hardening track included (the gate's `--hardening`).
Slow (each tool runs the whole module, generated plans included): `pytest -m commands` runs it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

from chapter_loops.ch08_wrong_tools import WRONG_TOOLS
from course.judge import contracts, mutants, starter
from course.judge.index import expected_scenarios
from course.manifest import HARDENING, find_chapter

pytestmark = [pytest.mark.commands, pytest.mark.timeout(1800)]

CH08 = find_chapter("08")
ROOT = Path(__file__).resolve().parent.parent
TOOLS = Path(__file__).parent / "chapter_loops"
SECTIONS = ["roundtrip", "escape", "refuse", "truncate", "abort"]
SCENARIOS = {e.scenario: e for e in expected_scenarios(CH08, ROOT)}
BEYOND_THE_CHAPTER = {name for name, e in SCENARIOS.items() if e.track == HARDENING}
"""The five tests of section 加固 (a file or directory swapped between the check and the open)."""


@dataclass(frozen=True)
class ChapterTool:
    """A tool written from the chapter text, as a variant `run_variants` can judge."""

    name: str

    def source(self, reference: str = "") -> str:
        return (TOOLS / f"ch08_{self.name}.py").read_text(encoding="utf-8")


CHAPTER_TOOLS = [ChapterTool("path_walk"), ChapterTool("walker")]


@pytest.fixture(scope="module")
def outcomes() -> dict[str, mutants.Outcome]:
    judged = mutants.run_variants([(CH08, tool) for tool in [*CHAPTER_TOOLS, *WRONG_TOOLS, mutants.Starter(CH08)]],
                                  timeout=300)
    for outcome in judged:
        assert outcome.error is None, f"{outcome.variant} could not be judged: {outcome.error}"
    return {outcome.variant: outcome for outcome in judged}


@pytest.mark.parametrize("tool", [tool.name for tool in CHAPTER_TOOLS])
def test_a_tool_written_from_the_chapter_fails_only_the_hardening_track(outcomes, tool):
    failed = set(outcomes[tool].failed)
    assert failed <= BEYOND_THE_CHAPTER, f"{tool} fails {sorted(failed - BEYOND_THE_CHAPTER)} of the chapter track"
    assert failed == BEYOND_THE_CHAPTER, f"{tool} passes {sorted(BEYOND_THE_CHAPTER - failed)} of 加固"
    assert outcomes[tool].passed >= 80  # the chapter's fixed tests and its generated sections ran


@pytest.mark.parametrize("wrong", WRONG_TOOLS, ids=lambda wrong: wrong.name)
def test_a_tool_breaking_a_sentence_fails_the_chapter_track_quoting_it(outcomes, wrong):
    failed = outcomes[wrong.name].failed
    assert set(wrong.caught_by) <= set(failed), f"{wrong.name} passes {sorted(set(wrong.caught_by) - set(failed))}"
    quoted = {name for test in failed if test in SCENARIOS and SCENARIOS[test].track != HARDENING
              for name in SCENARIOS[test].cites}
    assert wrong.sentence in quoted, \
        f"{wrong.name} breaks {contracts.for_chapter(CH08.module).cites[wrong.sentence].text()}; no failure quotes it"


def test_the_wrong_tools_break_sentences_the_chapter_has():
    cites = contracts.for_chapter(CH08.module).cites
    assert all(wrong.sentence in cites for wrong in WRONG_TOOLS)


def test_an_untouched_starter_fails_every_fixed_test(outcomes):
    judged = outcomes["starter"]
    fixed = [name for name in judged.failed if not name.startswith("test_generated[")]
    assert judged.passed == 0 and len(fixed) >= 80, (judged.passed, judged.failed)


TAUGHT = {
    "course.runtime.messages": {"text"},
    "course.runtime.tools": {"Tool", "ToolExecutionContext", "ToolOutput"},
}
"""What chapter 08's starter may import from the course: the message and tool types the chapter's fragments use."""


def test_the_starter_asks_only_for_what_the_chapter_teaches():
    source = starter.starter_source(CH08)
    imported = {node.module: {alias.name for alias in node.names} for node in ast.parse(source).body
                if isinstance(node, ast.ImportFrom) and node.module.startswith(("course", "checkpoints"))}
    assert imported == TAUGHT
    for beyond in ("加固", "hardening", "HeldWalk", "held_walk", "O_NOFOLLOW", "O_NONBLOCK", "fstat"):
        assert beyond not in source, f"the chapter 08 starter names {beyond!r}, which the chapter does not teach"
    for taught in ("MESSAGES", "FILE_KINDS", "NOTICES", "PROGRESS", "DEFAULT_MAX_LINES", "DEFAULT_MAX_BYTES",
                   "MAX_PATH_BYTES", "MAX_NAME_BYTES", "MAX_SYMLINKS", "def create_read_tool"):
        assert taught in source


@pytest.mark.parametrize("tool", CHAPTER_TOOLS, ids=lambda tool: tool.name)
def test_the_chapter_tools_use_nothing_beyond_the_chapter(tool):
    beyond = starter.beyond_the_chapter(mutants.reference_source(CH08))
    tree = ast.parse(tool.source())
    imported = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                for alias in node.names}
    assert beyond == {"HeldWalk"} and not imported & beyond
    used = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    assert not used & {"O_NOFOLLOW", "O_NONBLOCK", "fstat"}, f"{tool.name} uses {used & {'O_NOFOLLOW', 'fstat'}}"
