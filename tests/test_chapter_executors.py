"""The chapter is the contract, for chapter 06: executors written from the chapter 06 text alone pass, executors
that break one of its sentences fail, and are shown that sentence (issue 21).

`tests/chapter_loops/` holds two student-style `ch06_tool_execution.py` modules written from the chapter text in
different styles (`steps`: the four steps in the chapter's order, each failure returned where it is found;
`refusals`: the checks as functions raising a `Refused` caught in one place), with nothing beyond the chapter (a
tool's output is trusted to be a ToolOutput). Each is judged like a student's code: the chapter's test module
through `--impl`, in a worker process (`course.judge.mutants.run_variants`). The wrong executors are the same
executors with one of the chapter's sentences broken (`tests/chapter_loops/wrong_executors.py`); the first plan
each fails, in the section that holds the executor to that sentence, must quote it (as `course check` does).
"""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from chapter_loops.wrong_executors import WRONG_EXECUTORS, WrongExecutor
from course.judge import contracts, differential, mutants, starter
from course.judge.index import expected_scenarios
from course.judge.render import render_record
from course.manifest import HARDENING, find_chapter
from course.recorder import impl

ROOT = Path(__file__).resolve().parent.parent
CH06 = find_chapter("06")
LOOPS = Path(__file__).parent / "chapter_loops"
CITES = contracts.for_chapter(CH06.module).cites
SCENARIOS = expected_scenarios(CH06, ROOT)
BEYOND_THE_CHAPTER = {e.scenario for e in SCENARIOS if e.track == HARDENING}
"""The hardening track's scenarios (加固): a tool returning something that is no ToolOutput, chapter 07's loop
with collaborators that break their contracts. An executor written from the text alone fails these, and
nothing else."""
CHAPTER_SECTIONS = [e.generated for e in SCENARIOS if e.generated and e.track != HARDENING]


@dataclass(frozen=True)
class ChapterExecutor:
    """An executor written from the chapter text, as a variant `run_variants` can judge."""

    name: str

    def source(self, reference: str = "") -> str:
        return (LOOPS / f"{self.name}_executor.py").read_text(encoding="utf-8")


EXECUTORS = [ChapterExecutor("steps"), ChapterExecutor("refusals")]


@pytest.fixture(scope="module")
def outcomes() -> dict[str, mutants.Outcome]:
    """Every executor judged once by the chapter's whole test module (fixed tests and generated sections)."""
    judged = mutants.run_variants([(CH06, executor) for executor in [*EXECUTORS, *WRONG_EXECUTORS,
                                                                     mutants.Starter(CH06)]], timeout=120)
    for outcome in judged:
        assert outcome.error is None, f"{outcome.variant} could not be judged: {outcome.error}"
    return {outcome.variant: outcome for outcome in judged}


def test_both_tracks_are_there():
    assert len(CHAPTER_SECTIONS) == 5 and {"test_generated[hardening_outputs]",
                                           "test_generated[hardening_in_the_loop]"} <= BEYOND_THE_CHAPTER


@pytest.mark.commands  # judges whole implementations in worker processes (seconds each)
@pytest.mark.parametrize("executor", [e.name for e in EXECUTORS])
def test_an_executor_written_from_the_chapter_fails_only_the_hardening_track(outcomes, executor):
    """It passes every fixed test and every generated section of the chapter track; whatever it fails is beyond
    the chapter (and it does fail that: a tool returning garbage is not the chapter's)."""
    failed = set(outcomes[executor].failed)
    assert failed <= BEYOND_THE_CHAPTER, f"{executor} fails {sorted(failed - BEYOND_THE_CHAPTER)} of the chapter track"
    assert "test_generated[hardening_outputs]" in failed and "TestHardening::test_tool_returning_garbage" in failed
    assert outcomes[executor].passed == len(SCENARIOS) - len(BEYOND_THE_CHAPTER)  # every one of the chapter's ran


@pytest.mark.commands  # judges whole implementations in worker processes (seconds each)
@pytest.mark.parametrize("wrong", WRONG_EXECUTORS, ids=lambda wrong: wrong.name)
def test_an_executor_breaking_a_sentence_fails_the_chapter_track(outcomes, wrong):
    """...in the fixed tests that cite the sentence (and no other) and in the sections whose plans do."""
    failed = outcomes[wrong.name].failed
    fixed = [name for name in failed if not name.startswith("test_generated[") and name not in BEYOND_THE_CHAPTER]
    assert sorted(fixed) == sorted(wrong.caught_by), f"{wrong.name} breaks {wrong.cite}"
    assert {f"test_generated[{section}]" for section in wrong.sections} <= set(failed)
    if wrong.caught_by:  # (and the first of them is one that cites the sentence)
        assert wrong.cite in next(e.cites for e in SCENARIOS if e.scenario == wrong.caught_by[0])


def _load(variant, directory: Path):
    path = directory / f"{CH06.module}.py"
    path.write_text(variant.source(), encoding="utf-8")
    name = f"_tiny_pi_chapter_executor_{variant.name.replace('-', '_')}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _first_failure(executor, section: str) -> str | None:
    """What `course check` says of the section's first failing plan (None: every plan runs as the reference's)."""
    plans = differential.draw_plans(CH06.module, section)
    wanted = differential.expected_renders(CH06.module, section, plans)
    with asyncio.Runner() as runner:
        for plan, want in zip(plans, wanted):
            record = differential.run_plan(
                CH06.module, plan, lambda module: executor if module == CH06.module else impl.load_reference(module),
                runner)
            said = differential.verdict(CH06.module, plan, render_record(record), want)
            if said is not None:
                return said
    return None


@pytest.mark.parametrize("wrong,section", [(w, s) for w in WRONG_EXECUTORS for s in w.sections],
                         ids=lambda value: value.name if isinstance(value, WrongExecutor) else value)
def test_the_first_failing_plan_quotes_the_sentence_broken(wrong, section, tmp_path):
    said = _first_failure(_load(wrong, tmp_path), section)
    assert said is not None, f"{wrong.name} passes every plan of {section}"
    assert f"enforces: {CITES[wrong.cite].text()}" in said.splitlines(), said


TAUGHT = {
    "course.runtime.messages": {"ToolCall", "ToolResultMessage", "arguments_problem", "json_copy", "tool_result"},
    "course.runtime.tools": {"Registry", "ToolExecutionContext", "error_result"},
    "jsonschema.exceptions": {"best_match"},
}
"""What chapter 06's starter may import: the names of the chapter's table of Python counterparts."""


def test_the_starter_asks_only_for_what_the_chapter_teaches():
    source = starter.starter_source(CH06)
    imported = {node.module: {alias.name for alias in node.names} for node in ast.parse(source).body
                if isinstance(node, ast.ImportFrom) and node.module != "__future__"}
    assert imported == TAUGHT
    text = (ROOT / CH06.text_path).read_text(encoding="utf-8")
    assert all(name in text for names in TAUGHT.values() for name in names - {"ToolCall", "ToolResultMessage"})
    for beyond in ("加固", "hardening", "output_problem", "check_json", "not a dict with a content list"):
        assert beyond not in source, f"the chapter 06 starter names {beyond!r}, which the chapter does not teach"


@pytest.mark.commands  # judges whole implementations in worker processes (seconds each)
def test_an_untouched_starter_fails_every_fixed_test(outcomes):
    judged = outcomes["starter"]
    fixed = [name for name in judged.failed if not name.startswith("test_generated[")]
    # (the runtime's own refusals, of a bad schema and of a name registered twice, pass whatever is written)
    assert judged.passed == 4 and len(fixed) >= 12, (judged.passed, judged.failed)


@pytest.mark.parametrize("executor", [*EXECUTORS, *WRONG_EXECUTORS], ids=lambda e: e.name)
def test_the_chapter_executors_use_nothing_beyond_the_chapter(executor):
    beyond = starter.beyond_the_chapter(mutants.reference_source(CH06))
    tree = ast.parse(executor.source())
    imported = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                for alias in node.names}
    modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert beyond == {"output_problem"} and not imported & beyond and "course.runtime.hardening" not in modules


# --- `course check 06`, as a student runs it ------------------------------------------------------

HIDDEN_SEED = 20240611


def _check(directory: Path, *options: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TINY_PI_CACHE": str(directory.parent / "cache")}
    return subprocess.run([sys.executable, "-m", "course", "check", CH06.number, "--impl", str(directory), *options],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)


def _written(variant, tmp_path: Path) -> Path:
    directory = tmp_path / variant.name
    directory.mkdir()
    (directory / f"{CH06.module}.py").write_text(variant.source(), encoding="utf-8")
    return directory


@pytest.mark.commands
@pytest.mark.parametrize("seed", [False, True], ids=["published plans", "hidden seed"])
@pytest.mark.parametrize("executor", EXECUTORS, ids=lambda e: e.name)
def test_course_check_passes_an_executor_written_from_the_chapter(executor, seed, tmp_path):
    run = _check(_written(executor, tmp_path), *(["--seed", str(HIDDEN_SEED)] if seed else []))
    last = run.stdout.rstrip().splitlines()[-1]
    assert run.returncode == 0 and last.endswith("scenarios pass — chapter 06 passes"), run.stdout + run.stderr
    assert "FAIL" not in run.stdout and "加固" not in run.stdout.split("\n", 3)[3]  # the hardening track was not judged
    if seed:
        assert run.stdout.splitlines()[2].endswith(f"; the generated plans of seed {HIDDEN_SEED}")


@pytest.mark.commands
def test_course_check_quotes_the_sentence_a_wrong_executor_breaks(tmp_path):
    wrong = next(w for w in WRONG_EXECUTORS if w.name == "arguments-before-the-name")
    run = _check(_written(wrong, tmp_path))
    assert run.returncode == 1, run.stdout + run.stderr
    assert "  FAIL    test_generated[arguments]" in run.stdout
    assert f"        enforces: {CITES[wrong.cite].text()}" in run.stdout, run.stdout
