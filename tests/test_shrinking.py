"""Generated plans are Hypothesis strategies, choice by choice (`course.judge.drawing`): a failing plan shrinks to
the smallest that still diverges from the reference, the plans a section publishes stay the same for the same seed
(or secret) and as varied as before, and `course check` shows the shrunk plan beside the first failing one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from course.judge import differential, shrunk
from chapters.ch06_tool_execution.judge import ch06_plans
from chapters.ch07_agent_loop.judge import ch07_plans

CH07, CH06 = "ch07_agent_loop", "ch06_tool_execution"
LOOPS = Path(__file__).resolve().parents[1] / "chapters" / CH07 / "judge" / "loops"


def calls(plan: dict) -> int:
    return sum(len(step["calls"]) for step in plan["steps"])


def test_the_simplest_plan_of_a_section_is_its_simplest_case():
    from hypothesis import find

    plan = find(ch07_plans.STRATEGIES["concurrent"], lambda plan: True)
    assert plan["observer"] == "absent" and plan["mutateAt"] is None and not plan["mutateAfter"]
    assert [(step["stopReason"], len(step["calls"])) for step in plan["steps"]] == [("toolUse", 2)]
    assert plan["steps"][0]["finishOrder"] == ["s1c0", "s1c1"]  # in call order
    assert {call["does"] for call in plan["steps"][0]["calls"]} == {"succeed"}
    # a plan that needs a later call to finish first shrinks to one answer of few calls, every other choice simplest
    smallest = find(ch07_plans.STRATEGIES["concurrent"],
                    lambda plan: any(step["finishOrder"] != sorted(step["finishOrder"]) for step in plan["steps"]))
    assert len(smallest["steps"]) == 1 and calls(smallest) <= 3 and smallest["observer"] == "absent"
    assert {call["does"] for call in smallest["steps"][0]["calls"]} == {"succeed"}


@pytest.mark.parametrize("module,section", [(CH07, "abort"), (CH06, "in_the_loop")])
def test_drawing_twice_gives_the_same_plans_for_the_same_seed_or_secret(module, section):
    for seed in (None, "a secret of the grader's"):
        first = differential._draw_plans(module, section, seed=seed, multiplier=1)
        assert differential._draw_plans(module, section, seed=seed, multiplier=1) == first
    assert differential._draw_plans(module, section, seed="another", multiplier=1) != first


@pytest.mark.parametrize("section", ch07_plans.CHAPTER_SECTIONS + tuple(ch07_plans.HARDENING_SECTIONS))
def test_a_sections_plans_are_no_near_copies(section):
    plans = differential.draw_plans(CH07, section)
    pinned = len(differential.pinned_plans(CH07, section))
    drawn = plans[pinned:]
    assert len({json.dumps(plan, sort_keys=True) for plan in drawn}) == len(drawn)
    if section not in ("pure_stop", "hardening_pure_stop"):  # (a pure stop has one shape)
        shapes = {tuple((step["stopReason"], tuple(c["does"] for c in step["calls"])) for step in plan["steps"])
                  for plan in drawn}
        assert len(shapes) >= len(drawn) * 2 // 3
    # the first drawn plan is the simplest one: a plan of the section's first kind, with the fewest calls
    assert calls(drawn[0]) == min(calls(plan) for plan in drawn)


def test_every_chapter_06_section_draws_distinct_plans():
    for section in ch06_plans.STRATEGIES:
        drawn = differential.draw_plans(CH06, section)[len(differential.pinned_plans(CH06, section)):]
        assert len({json.dumps(plan, sort_keys=True) for plan in drawn}) == len(drawn), section


def test_a_wrong_loop_fails_and_the_plan_shown_is_shrunk_to_fewer_answers_and_calls(tmp_path):
    """The path `course check` takes after a generated section failed: the section in a plain pytest child."""
    student = tmp_path / "student"
    student.mkdir()
    shutil.copy(LOOPS / "ch07_tool_end_once_the_batch_ended.py", student / f"{CH07}.py")
    found = shrunk.smallest_plans(f"chapters/{CH07}/test_{CH07}.py", str(student), False, None, ["concurrent"],
                                  hardening=False)
    assert set(found) == {"concurrent"}
    first, smallest = found["concurrent"]["first"]["plan"], found["concurrent"]["smallest"]["plan"]
    assert (len(smallest["steps"]), calls(smallest)) < (len(first["steps"]), calls(first)) or calls(smallest) < calls(first)
    assert calls(smallest) == 2  # two calls finishing out of call order: the least that shows the mistake
    problem = found["concurrent"]["smallest"]["problem"]
    assert problem.startswith("plan: kind: batch") and "first divergence" in problem
    assert json.loads(problem.split("plan (JSON): ", 1)[1].splitlines()[0]) == smallest


def test_in_plain_pytest_a_section_a_wrong_loop_fails_is_found_again_and_shrunk(tmp_path, monkeypatch):
    """A section that passes runs its plans alone (no Hypothesis engine); one that diverges is handed to the
    Hypothesis test, which finds the plan again and shrinks it: the failure is the same either way."""
    from course.recorder import impl

    student = tmp_path / "student"
    student.mkdir()
    shutil.copy(LOOPS / "ch07_tool_end_once_the_batch_ended.py", student / f"{CH07}.py")
    monkeypatch.setattr(impl, "_current", impl.Implementation(student))
    real, handed = differential._section_test, []
    monkeypatch.setattr(differential, "_section_test", lambda *args, **kwargs: handed.append(args[1]) or real(*args, **kwargs))
    differential.compare_section(CH07, "pure_stop")  # (this mistake shows only where tools run together)
    with pytest.raises(AssertionError) as failed:
        differential.compare_section(CH07, "concurrent")
    problem = str(failed.value)
    assert problem.startswith("plan: kind: batch") and "first divergence" in problem
    smallest = json.loads(problem.split("plan (JSON): ", 1)[1].splitlines()[0])
    assert calls(smallest) == 2
    assert any(note.startswith("Hypothesis shrank plan ") for note in failed.value.__notes__)
    assert handed == ["concurrent"]
