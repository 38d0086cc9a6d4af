"""Property tests: the chapter 07 loop keeps its promises on every generated scripted run.

What a generated run is, the Hypothesis profiles, and how to reproduce a failure: generated_runs.py
and docs/guarantees.md. Hypothesis is imported only when this test runs, so collecting
the suite (`pytest -k ch07`) does not pay for it.
"""

import importlib
import sys

from _pytest.assertion.rewrite import AssertionRewritingHook


def import_hypothesis_without_assert_rewriting() -> None:
    """pytest rewrites the asserts of every module of a distribution that registers a pytest
    plugin, Hypothesis included (even with the plugin disabled): about 1.3 s of compiling on each
    run where bytecode is not cached, more than the 500 runs take. Hypothesis needs no rewriting."""
    hooks = [finder for finder in sys.meta_path if isinstance(finder, AssertionRewritingHook)]
    for hook in hooks:
        sys.meta_path.remove(hook)
    try:
        importlib.import_module("hypothesis.strategies")
    finally:
        sys.meta_path[:0] = hooks


def test_every_generated_run_keeps_the_loops_promises():
    import_hypothesis_without_assert_rewriting()
    import generated_runs

    generated_runs.every_generated_run_keeps_the_promises()


def test_the_checker_reports_and_never_crashes_on_a_broken_loops_output():
    import_hypothesis_without_assert_rewriting()
    import generated_runs

    generated_runs.the_checker_reports_and_never_crashes()


def test_pinned_plans_run_first_and_the_reference_keeps_its_promises_on_them():
    """Cases a wrong loop was once found to pass, which drawn plans reach only by luck: every run includes them."""
    import asyncio

    from checkpoints import ch07_agent_loop as reference
    from course.judge import differential
    from course.judge.render import render_record

    sections = [s for s in differential.judge_scenarios.for_chapter("ch07_agent_loop").STRATEGIES
                if differential.pinned_plans("ch07_agent_loop", s)]
    assert sections == ["abort", "hardening_terminals", "hardening_abort"]  # the chapter track's, then 加固's
    for section in sections:
        pinned = differential.pinned_plans("ch07_agent_loop", section)
        assert differential.draw_plans("ch07_agent_loop", section)[: len(pinned)] == pinned
        assert differential.draw_plans("ch07_agent_loop", section, seed=7)[: len(pinned)] == pinned
        for plan in pinned:
            with asyncio.Runner() as runner:
                rendered = render_record(differential.run_plan("ch07_agent_loop", plan, lambda name: reference, runner))
            assert "invariants       hold" in rendered, rendered


def test_chapter_06_pins_one_plan_of_every_rare_kind():
    """Every malformed output, every wrong value against every type, extra keys holding what JSON cannot, a
    megabyte of text and every shape of exception are run in every profile, not drawn by luck."""
    import asyncio
    import json

    from checkpoints import ch06_tool_execution as reference
    from course.judge import differential
    from course.judge.render import render_record
    from chapters.ch06_tool_execution.judge import plans as scenarios

    module = "ch06_tool_execution"
    for section in ("arguments", "outputs", "failures", "hardening_outputs"):
        pinned = differential.pinned_plans(module, section)
        assert pinned and differential.draw_plans(module, section)[: len(pinned)] == pinned
        assert differential.draw_plans(module, section, seed=7)[: len(pinned)] == pinned
    malformed = [plan["does"]["outcome"]["returns"] for plan in differential.pinned_plans(module, "hardening_outputs")]
    assert all(bad in malformed for bad in scenarios.MALFORMED)  # (the hardening track's: beyond the chapter)
    returned = [plan["does"]["outcome"]["returns"] for plan in differential.pinned_plans(module, "outputs")]
    assert any(json.dumps(scenarios.MEGABYTE) in json.dumps(output) for output in returned)
    assert all({"content": [scenarios.text("done")], **extra} in returned
               for extra in scenarios.EXTRAS if "$" in json.dumps(extra))
    wrong = {(plan["tools"][0]["parameters"]["properties"]["limit"]["type"], json.dumps(plan["call"]["arguments"]["limit"]))
             for plan in differential.pinned_plans(module, "arguments") if "limit" in plan["call"]["arguments"]}
    assert ("integer", '"7"') in wrong and {json.dumps(w) for w in scenarios.WRONG} == {w for _, w in wrong}
    raised = [plan["does"]["outcome"]["raises"] for plan in differential.pinned_plans(module, "failures")]
    assert {"group", "cause", "context", "notes"} <= {key for spec in raised for key in spec}

    def text_of(plan):
        with asyncio.Runner() as runner:
            rendered = render_record(differential.run_plan(module, plan, lambda name: reference, runner))
        return json.loads(rendered.split("## tools that ran")[0].removeprefix("## result\n"))["content"][0]["text"]

    texts = {why: text_of(plan) for why, plan in zip([why for why, _ in scenarios.PINNED_EXCEPTIONS],
                                                     differential.pinned_plans(module, "failures"))}
    assert list(texts.values())[:4] == ["several things failed (2 sub-exceptions)", " (1 sub-exception)",
                                        "the read failed", "RuntimeError"]
    assert "(5,250 characters" in texts["a message of several KB is the whole text, uncut"]
    assert [texts[why] for why in list(texts)[-4:]] == ["('a', 'b')", "'R'", "RuntimeError",
                                                        "refused by the tool (2 reasons given)"]
