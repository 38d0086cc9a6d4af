"""The chapter is the contract: loops written from the chapter 07 text alone pass, loops that break one of its
sentences fail (issue 21).

`tests/chapter_loops/` holds three student-style `ch07_agent_loop.py` modules written from the chapter text in
different styles (asyncio.gather, asyncio.TaskGroup, asyncio.as_completed with results put back in call order),
with nothing beyond the chapter: no guarded model, no checked executor, no transcript kept on an exception, no
check of the options. Each is judged like a student's code: the chapter's test module through `--impl`, in a
worker process (`course.judge.mutants.run_variants`). The wrong loops are the same loops with one of the
chapter's sentences broken (`tests/chapter_loops/wrong_loops.py`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

from chapter_loops.wrong_loops import WRONG_LOOPS
from course.judge import mutants, starter
from course.judge.index import expected_scenarios
from course.manifest import HARDENING, find_chapter

CH07 = find_chapter("07")
LOOPS = Path(__file__).parent / "chapter_loops"
SECTIONS = ["pure_stop", "round_trip", "terminals", "concurrent", "abort"]

BEYOND_THE_CHAPTER = {e.scenario for e in expected_scenarios(CH07, Path(__file__).parent.parent) if e.track == HARDENING}
"""The hardening track's scenarios (加固): they hold a loop to more than the chapter says (a raising model, an
executor's malformed answers, max_steps checked, no progress after a call ended, ...). The gate judges every loop
on both tracks; a loop written from the text alone fails these, and nothing else."""


@dataclass(frozen=True)
class ChapterLoop:
    """A loop written from the chapter text, as a variant `run_variants` can judge."""

    name: str

    def source(self, reference: str = "") -> str:
        return (LOOPS / f"{self.name}_loop.py").read_text(encoding="utf-8")


CHAPTER_LOOPS = [ChapterLoop("gather"), ChapterLoop("taskgroup"), ChapterLoop("as_completed")]


def _patched(source: str, find: str, replace: str) -> str:
    assert source.count(find) == 1, find
    return source.replace(find, replace)


@dataclass(frozen=True)
class OptedIn:
    """The gather loop with every opt-in of `course.runtime.hardening`, as a student would add them: the
    runtime's helpers, not the reference's code, give it what goes beyond the chapter."""

    name: str = "gather-opted-in"

    def source(self, reference: str = "") -> str:
        source = ChapterLoop("gather").source()
        head, loop = source.split("    for steps in range(1, options.max_steps + 1):\n")
        loop = "    async with guard:\n" + "".join(f"    {line}" if line.strip() else line
                                                for line in f"    for steps in range(1, options.max_steps + 1):\n{loop}"
                                                .splitlines(keepends=True))
        source = head + loop
        for find, replace in [
            ("from course.runtime.tools import ToolExecutionContext, error_result\n",
             "from course.runtime.tools import ToolExecutionContext, error_result\n"
             "from course.runtime.hardening import RunGuard, check_loop_options, checked, guard_stream\n"),
            ("    messages = copy.deepcopy(options.context[\"messages\"])\n"
             "    execute_tool_call = options.execute_tool_call or (\n",
             "    check_loop_options(options)\n"
             "    messages = copy.deepcopy(options.context[\"messages\"])\n"
             "    guard = RunGuard(messages)\n\n"
             "    def emit(options, event):  # every event is noted by the guard first\n"
             "        guard.note(event)\n"
             "        emit_to_observer(options, event)\n\n"
             "    execute_tool_call = guard.watch(checked(options.execute_tool_call)) if options.execute_tool_call \\\n"
             "        else guard.watch(\n"),
            ("async def run_agent_loop(", "emit_to_observer = emit\n\n\nasync def run_agent_loop("),
            # Beyond the chapter too, with no helper (one expression): an exception without a message is named by
            # its type. (The chapter keeps error.message, which may be empty.)
            ("result = error_result(call, str(error))", "result = error_result(call, str(error) or type(error).__name__)"),
            ("stream = options.model.stream(\n", "stream = guard_stream(lambda: options.model.stream(\n"),
            ("                signal=options.signal,\n            )\n", "                signal=options.signal,\n            ))\n"),
        ]:
            source = _patched(source, find, replace)
        return source


@pytest.fixture(scope="module")
def outcomes() -> dict[str, mutants.Outcome]:
    """Every loop judged once by the chapter's whole test module (fixed tests and generated sections)."""
    judged = mutants.run_variants([(CH07, loop) for loop in [*CHAPTER_LOOPS, OptedIn(), *WRONG_LOOPS, mutants.Starter(CH07)]],
                                  timeout=120)
    for outcome in judged:
        assert outcome.error is None, f"{outcome.variant} could not be judged: {outcome.error}"
    return {outcome.variant: outcome for outcome in judged}


@pytest.mark.commands  # judges whole implementations in worker processes (seconds each)
@pytest.mark.parametrize("loop", [loop.name for loop in CHAPTER_LOOPS])
def test_a_loop_written_from_the_chapter_passes_every_fixed_test(outcomes, loop):
    fixed_failures = [name for name in outcomes[loop].failed
                      if not name.startswith("test_generated[") and name not in BEYOND_THE_CHAPTER]
    assert fixed_failures == [], f"{loop} (written from the chapter text alone) fails {fixed_failures}"
    assert outcomes[loop].passed >= 20  # the fixed tests ran (a loop that passes nothing is not a pass)


@pytest.mark.commands  # judges whole implementations in worker processes (seconds each)
@pytest.mark.parametrize("loop", [loop.name for loop in CHAPTER_LOOPS])
def test_a_loop_written_from_the_chapter_fails_only_the_hardening_track(outcomes, loop):
    """Whatever such a loop fails is beyond the chapter: the hardening track's scenarios, which the chapter's
    verdict never counts (and it does fail them: they are not the chapter's)."""
    failed = set(outcomes[loop].failed)
    assert failed <= BEYOND_THE_CHAPTER, f"{loop} fails {sorted(failed - BEYOND_THE_CHAPTER)} of the chapter track"
    assert failed, f"{loop} passes the hardening track too: it is not a loop written from the chapter alone"


@pytest.mark.commands  # judges whole implementations in worker processes (seconds each)
@pytest.mark.parametrize("loop", [loop.name for loop in CHAPTER_LOOPS])
@pytest.mark.parametrize("section", SECTIONS)
def test_a_loop_written_from_the_chapter_passes_the_generated_plans(outcomes, loop, section):
    assert f"test_generated[{section}]" not in outcomes[loop].failed


@pytest.mark.commands  # judges whole implementations in worker processes (seconds each)
def test_a_chapter_loop_opting_into_the_runtime_passes_everything(outcomes):
    """The hardening the chapter's tests hold a loop to today comes from the runtime: the gather loop with the
    opt-ins passes every test, those beyond the chapter and the generated plans included."""
    assert outcomes["gather-opted-in"].failed == [] and outcomes["gather-opted-in"].passed >= 35


@pytest.mark.commands  # judges whole implementations in worker processes (seconds each)
@pytest.mark.parametrize("wrong", WRONG_LOOPS, ids=lambda wrong: wrong.name)
def test_a_loop_breaking_a_sentence_of_the_chapter_fails_its_fixed_test(outcomes, wrong):
    """...and only the fixed tests of that sentence: the others pass, as they pass the loop it was made from."""
    failed = outcomes[wrong.name].failed
    assert set(wrong.caught_by) <= set(failed), \
        f"{wrong.name} breaks 「{wrong.sentence}」 yet passes {sorted(set(wrong.caught_by) - set(failed))}"
    fixed = [name for name in failed if not name.startswith("test_generated[") and name not in BEYOND_THE_CHAPTER]
    assert sorted(fixed) == sorted(wrong.caught_by)


TAUGHT = {
    "checkpoints.ch06_tool_execution": {"execute_tool_call"},
    "course.runtime.abort": {"AbortSignal"},
    "course.runtime.messages": {"AssistantMessage", "Message", "TextContent", "ToolCall", "ToolResultMessage",
                                "tool_calls"},
    "course.runtime.stream": {"Model", "ModelEvent"},
    "course.runtime.tools": {"Registry", "ToolExecutionContext", "error_result"},
}
"""What chapter 07's starter may import from the course: the chapter's types, chapter 06's executor and the
runtime pieces the chapter's fragments use (its signal, its message and stream types, its Registry)."""


def test_the_starter_asks_only_for_what_the_chapter_teaches():
    source = starter.starter_source(CH07)
    tree = ast.parse(source)
    imported = {node.module: {alias.name for alias in node.names} for node in tree.body
                if isinstance(node, ast.ImportFrom) and node.module.startswith(("course", "checkpoints"))}
    assert imported == TAUGHT
    for beyond in ("加固", "hardening", "checked", "result_problem", "guard_stream", "RunGuard", "check_loop_options",
                   "exc.transcript", "finished_results", "cancelling", "besides what the chapter shows"):
        assert beyond not in source, f"the chapter 07 starter names {beyond!r}, which the chapter does not teach"


@pytest.mark.commands  # judges whole implementations in worker processes (seconds each)
def test_an_untouched_starter_fails_every_fixed_test(outcomes):
    judged = outcomes["starter"]
    fixed = [name for name in judged.failed if not name.startswith("test_generated[")]
    assert judged.passed == 0 and len(fixed) >= 20, (judged.passed, judged.failed)


@pytest.mark.parametrize("loop", CHAPTER_LOOPS, ids=lambda loop: loop.name)
def test_the_chapter_loops_use_nothing_beyond_the_chapter(loop):
    """What a loop opts into beyond the chapter, it imports: none of these does."""
    beyond = starter.beyond_the_chapter(mutants.reference_source(CH07))
    imported = {alias.asname or alias.name for node in ast.walk(ast.parse(loop.source()))
                if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    modules = {node.module for node in ast.walk(ast.parse(loop.source())) if isinstance(node, ast.ImportFrom)}
    assert beyond and not imported & beyond and not {"course.runtime.hardening", "course.runtime.loop_inputs"} & modules
