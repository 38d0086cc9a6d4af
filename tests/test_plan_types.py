"""Chapter 07's plans are the types that describe them: every drawn and pinned plan is a `Plan`, and a plan's JSON
is the plan itself (the pinned file reads back byte for byte)."""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path

import pytest

from course.judge import differential
from chapters.ch07_agent_loop.judge import ch07_plans
from chapters.ch07_agent_loop.scenarios import Plan

PINNED = differential.pinned_file("ch07_agent_loop")


def problems(value: object, kind: object, where: str = "plan") -> list[str]:
    """Where `value` (JSON) is not of type `kind` (a TypedDict, list[...], Literal[...], a union, a class)."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if typing.is_typeddict(kind):
        if not isinstance(value, dict):
            return [f"{where} is not an object"]
        # (Read from the hints: under `from __future__ import annotations`, __required_keys__ misses NotRequired.)
        hints = typing.get_type_hints(kind, include_extras=True)
        optional = {key for key, hint in hints.items() if typing.get_origin(hint) is typing.NotRequired}
        found = [f"{where} has no {key!r}" for key in hints if key not in value and key not in optional]
        found += [f"{where} has {key!r}, not one of its fields" for key in value if key not in hints]
        for key in [key for key in value if key in hints]:
            hint = typing.get_args(hints[key])[0] if key in optional else hints[key]
            found += problems(value[key], hint, f"{where}.{key}")
        return found
    if origin is typing.Literal:
        return [] if value in args else [f"{where} is {value!r}, not one of {args}"]
    if origin in (typing.Union, types.UnionType):
        return [] if any(not problems(value, option, where) for option in args) else [f"{where} is {value!r}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{where} is not a list"]
        return [problem for n, item in enumerate(value) for problem in problems(item, args[0], f"{where}[{n}]")]
    if kind is type(None):
        return [] if value is None else [f"{where} is not null"]
    if kind is int and isinstance(value, bool):
        return [f"{where} is a bool, not an int"]
    return [] if isinstance(value, kind) else [f"{where} is {type(value).__name__}, not {kind.__name__}"]


def test_the_check_can_fail():
    plan = json.loads(PINNED.read_text(encoding="utf-8"))["abort"][0]["plan"]
    assert problems(plan, Plan) == []
    wrong = {**plan, "executor": "mine", "steps": [{**plan["steps"][0], "calls": [{"id": 1}]}], "extra": True}
    del wrong["observer"]
    assert sorted(problems(wrong, Plan)) == sorted([
        "plan has no 'observer'", "plan has 'extra', not one of its fields",
        "plan.executor is 'mine', not one of ('chapter06', 'injected')",
        "plan.steps[0].calls[0] has no 'does'", "plan.steps[0].calls[0] has no 'before'",
        "plan.steps[0].calls[0] has no 'during'", "plan.steps[0].calls[0] has no 'late'",
        "plan.steps[0].calls[0].id is int, not str"])


def test_the_pinned_plans_are_plans_and_their_json_reads_back_byte_for_byte():
    text = PINNED.read_text(encoding="utf-8")
    pinned = json.loads(text)
    assert json.dumps(pinned, indent=1, ensure_ascii=False) + "\n" == text
    for section, entries in pinned.items():
        for entry in entries:
            assert problems(entry["plan"], Plan, f"{section}: {entry['why']}") == []


@pytest.mark.parametrize("section", sorted(ch07_plans.STRATEGIES))
def test_every_drawn_plan_is_a_plan(section):
    for seed in (None, 7):
        plans = differential._draw_plans("ch07_agent_loop", section, seed=seed, multiplier=1)
        assert plans
        assert [problem for plan in plans for problem in problems(plan, Plan)] == []
