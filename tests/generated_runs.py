"""The property tests in test_properties.py: the chapter 07 loop keeps its promises on every generated run,
and the invariant checker answers whatever a broken loop hands it.

The runs are chapter 07's generated scenarios: the plans of `chapters.ch07_agent_loop.judge.plans` (every
section's strategy), run by `chapters.ch07_agent_loop.scenarios`. `pytest -k ch07` requires each run of
a student's loop to render as the reference's; this property requires the reference's (or `--impl`'s) own runs
to keep every promise the notation checks, so the oracle itself is tested on the same plans, never twice.

This module imports Hypothesis, which costs start-up time; test_properties.py imports it only
when its tests run, so `pytest -k ch07` does not pay for it.
"""

from __future__ import annotations

import asyncio
import os
import random

from hypothesis import HealthCheck, given, note, seed, settings
from hypothesis import strategies as st

from course.judge.invariants import check_run

PROFILE_ENV = "TINY_PI_HYPOTHESIS_PROFILE"
SEED_ENV = "TINY_PI_HYPOTHESIS_SEED"

# "default": what the suite and CI run; the same 500 runs every time (derandomized), so a failure
# reproduces by running the same command again. "long": 20,000 fresh random runs, for hunting.
_COMMON = {"deadline": None, "print_blob": True, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("tiny-pi-default", max_examples=500, derandomize=True, database=None, **_COMMON)
settings.register_profile("tiny-pi-long", max_examples=20_000, **_COMMON)
PROFILES = ("default", "long")


def chosen_settings() -> tuple[str, settings, int | None]:
    """The profile named by $TINY_PI_HYPOTHESIS_PROFILE, and the seed of a random profile."""
    name = os.environ.get(PROFILE_ENV) or "default"
    if name not in PROFILES:
        raise ValueError(f"{PROFILE_ENV}={name!r}: choose one of {', '.join(PROFILES)}")
    profile = settings.get_profile(f"tiny-pi-{name}")
    if profile.derandomize:
        return name, profile, None
    return name, profile, int(os.environ.get(SEED_ENV) or random.randrange(2**32))


# The plans are chapter 07's generated scenarios (chapters/ch07_agent_loop/judge/plans.py), one strategy per
# chapter section; `pytest -k ch07` compares each run with the reference's run of the same plan. Here the
# runs of the implementation under test (the reference, in a plain run) are held to the loop's promises
# themselves: the oracle must keep them, or the comparison would pass a loop for matching a broken one.
MODULE = "ch07_agent_loop"
IS_ERROR = {"succeed": False, "abort": False, "hold": False, "ignore_cancel": False, "watch": False,
            "raise": True, "raise_empty": True, "report_error": True, "not_json": True, "garbage": True,
            "wrong_call": True, "wrong_tool": True, "wrong_role": True, "no_content": True, "error_not_bool": True,
            "bad_arguments": True, "unknown_tool": True}


def outcome_problems(plan: dict, record: dict) -> list[str]:
    """What the plan says about each executed call that the run did not do (beyond the invariants)."""
    calls = {call["id"]: call for step in plan["steps"] for call in step["calls"]}
    problems = []
    events = record["events"] or []
    for event in events:
        if event["type"] == "tool_end":
            result = event["result"]
            call = calls[result["toolCallId"]]
            refused = call["id"] not in record["executions"]  # the chapter 06 executor refused it: no such tool
            if result["isError"] != (refused or IS_ERROR[call["does"]]):
                problems.append(f"{call['id']} ({call['does']}) ended with isError {result['isError']}")
    progress = [e["callId"] for e in events if e["type"] == "tool_progress"]
    for event in events:
        if event["type"] == "tool_end":
            call = calls[event["result"]["toolCallId"]]
            ran = call["id"] in record["executions"]
            holds = call["does"] in ("hold", "ignore_cancel", "watch")  # they report only as they start
            expected = (call["before"] + (0 if holds else call["during"])) if ran else 0
            if progress.count(call["id"]) != expected:
                problems.append(f"{call['id']} reported progress {expected} times, the events show "
                                f"{progress.count(call['id'])}")
    return problems


def every_generated_run_keeps_the_promises() -> None:
    """The property: on every generated run, the invariants hold, no task is left running, and each call
    did what its tool did."""
    from course.judge import differential
    from course.judge.render import render_record
    from chapters.ch07_agent_loop.judge import plans as scenarios
    from course.recorder.impl import load_checkpoint

    name, profile, chosen_seed = chosen_settings()
    runner = asyncio.Runner()  # one event loop for all the runs of this test
    sections = list(scenarios.STRATEGIES)

    @settings(profile)
    @given(st.sampled_from(sections).flatmap(lambda section: scenarios.STRATEGIES[section]))
    def check(plan: dict) -> None:
        record = differential.run_plan(MODULE, plan, load_checkpoint, runner)
        rendered = render_record(record)
        problems = [line.strip() for line in rendered.splitlines() if line.strip().startswith("broken ")]
        if record.get("tasksLeft"):
            problems.append(f"{record['tasksLeft']} task(s) still running after the run")
        if record.get("outcome") == "still running":
            problems.append("the run never ended")
        problems += outcome_problems(plan, record)
        if problems:
            note("plan: " + scenarios.describe(plan))
            note(rendered)
            if chosen_seed is not None:
                note(f"profile {name}, seed {chosen_seed}: rerun with {PROFILE_ENV}={name} {SEED_ENV}={chosen_seed}")
        assert problems == [], "\n".join(problems)

    if chosen_seed is not None:
        check = seed(chosen_seed)(check)
    with runner:
        check()


# Runs as a broken loop might report them: the right shapes with wrong or odd values anywhere.
_odd = st.none() | st.integers(0, 2) | st.lists(st.integers(0, 1), max_size=1) | st.sampled_from(["c1", "c2"])
_call = st.fixed_dictionaries({"type": st.just("toolCall"), "id": _odd, "name": _odd})
_message = st.fixed_dictionaries({
    "role": st.just("assistant"), "content": st.lists(_call, max_size=2) | _odd,
    "stopReason": st.sampled_from(["toolUse", "stop", "length", "error"]) | _odd,
}) | st.fixed_dictionaries({
    "role": st.just("toolResult"), "toolCallId": _odd, "toolName": _odd, "isError": _odd, "content": _odd,
    "details": _odd | st.fixed_dictionaries({"skipped": _odd, "reason": _odd}),
})
_model_event = st.fixed_dictionaries({"type": st.sampled_from(["done", "error", "start"]) | _odd},
                                     optional={"message": _message | _odd, "error": _message | _odd})
_event = st.fixed_dictionaries(
    {"type": st.sampled_from(["model_event", "assistant_message", "tool_start", "tool_end", "tool_skipped",
                              "tool_progress", "turn_end", "other"])},
    optional={"message": _message | _odd, "event": _model_event | _odd, "call": _call | _odd,
              "result": _message | _odd, "callId": _odd, "reason": _odd, "steps": _odd})
_request = st.fixed_dictionaries({}, optional={"messages": st.lists(_message, max_size=3) | _odd,
                                               "systemPrompt": _odd, "tools": _odd})


def the_checker_reports_and_never_crashes() -> None:
    """Whatever a broken loop hands it, check_run answers with a list of reports, never an exception
    (it runs inside every scenario test of a student's loop)."""
    name, profile, chosen_seed = chosen_settings()
    user = {"role": "user", "content": "go", "timestamp": 0}

    @settings(profile, max_examples=profile.max_examples // 5)  # cheap to find: 100 by default
    @given(st.lists(_message, max_size=5), st.lists(_event, max_size=8), st.none() | st.lists(_request, max_size=3),
           _odd, _odd, st.none() | st.integers(0, 3))
    def check(messages, events, requests, reason, steps, max_steps):
        problems = check_run(input_messages=[user], messages=[user, *messages], events=events, requests=requests,
                             reason=reason, steps=steps, max_steps=max_steps, caller_messages_after=[user],
                             system_prompt="You are tiny-pi.", definitions=[])
        assert all(isinstance(problem, str) for problem in problems)

    if chosen_seed is not None:
        check = seed(chosen_seed)(check)
    check()
