"""Correct implementations that are not the reference pass: the judge compares only what a chapter promises.

Each alternative is the reference with one harmless change (a text patch that must apply exactly once, as
the gallery's mistakes are made), judged on every plan the default profile draws for each generated section
(the plans `course check` runs), against the reference's runs of the same plans. Each was once failed by the
judge, for something the chapter leaves free: how many turns of the event loop an execution takes, and so
when a call of a batch ends among its siblings, or which siblings had started when an observer raised.
"""

import asyncio
import importlib.util
import sys

import pytest

from course.judge import differential
from course.judge.mutants import Mutant, reference_source
from course.judge.render import render_record
from course.manifest import find_chapter
from course.recorder import impl
from chapters.ch06_tool_execution import scenarios as recorder

CH06 = find_chapter("06")
TOOL_RUN = 'output = await tool.execute(json_copy(call["arguments"]), context)'
VALIDATION = 'error = best_match(tool.validator.iter_errors(call["arguments"]))'
ALTERNATIVES = [
    Mutant("yields-before-the-tool", "工具执行", "an await asyncio.sleep(0) before the tool runs",
           TOOL_RUN, 'await __import__("asyncio").sleep(0)\n' + TOOL_RUN),
    Mutant("tool-in-its-own-task", "工具执行", "the tool runs in a task of its own, awaited (and so cancelled with it)",
           TOOL_RUN, 'output = await __import__("asyncio").ensure_future(tool.execute(json_copy(call["arguments"]), '
                     'context))'),
    Mutant("yields-first-and-last", "工具执行", "an await asyncio.sleep(0) before anything, and before it returns",
           'tool = registry.get(call["name"])', 'await __import__("asyncio").sleep(0)\ntool = registry.get(call["name"])',
           also=(("return tool_result(\n", 'await __import__("asyncio").sleep(0)\nreturn tool_result(\n'),)),
    Mutant("validates-in-a-thread", "工具执行", "the arguments are validated in a thread (asyncio.to_thread)",
           VALIDATION, 'error = await __import__("asyncio").to_thread(\n'
                       '    lambda: best_match(tool.validator.iter_errors(call["arguments"])))'),
]


def load(alternative: Mutant, directory):
    path = directory / f"{CH06.module}.py"
    path.write_text(alternative.source(reference_source(CH06)), encoding="utf-8")
    name = f"_tiny_pi_alternative_{alternative.name.replace('-', '_')}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("alternative", [pytest.param(a, id=a.name) for a in ALTERNATIVES])
def test_a_correct_chapter_06_executor_passes_every_generated_plan(alternative, tmp_path):
    executor = load(alternative, tmp_path)
    failures = []
    with asyncio.Runner() as runner:
        for section in recorder.SECTIONS:
            plans = differential.draw_plans(CH06.module, section)
            wanted = differential.expected_renders(CH06.module, section, plans)
            for plan, want in zip(plans, wanted):
                record = differential.run_plan(
                    CH06.module, plan, lambda module: executor if module == CH06.module else impl.load_reference(module),
                    runner)
                problem = differential.verdict(CH06.module, plan, render_record(record), want)
                if problem is not None:
                    failures.append(f"{section}: {problem}")
    assert not failures, f"{len(failures)} plan(s) fail; the first:\n{failures[0]}"


def test_work_handed_to_a_thread_takes_the_same_turns_in_every_run():
    # The event loop waits for its default executor's work where it is handed over: an execution that
    # validates in a thread ends after as many turns of the event loop whatever the thread's speed.
    turns = []

    async def count(slow: float):
        import time

        async def execute():
            await asyncio.to_thread(time.sleep, slow)

        loop = asyncio.get_running_loop()
        loop.set_default_executor(recorder.WaitingExecutor(max_workers=1))
        task = asyncio.ensure_future(execute())
        n = 0
        while not task.done():
            n += 1
            await asyncio.sleep(0)
        turns.append(n)

    for slow in (0, 0.05):
        asyncio.run(count(slow))
    assert turns[0] == turns[1] <= 3, turns
