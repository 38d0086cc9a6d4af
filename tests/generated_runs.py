"""Random scripted runs of the chapter 07 loop, for the property tests in test_properties.py.

A generated run is a script of model answers (random stop reasons, 0-3 tool calls each, some
answers that make the model raise), an executor (injected, or the chapter 06 one over a
registry), what each call's tool does (succeed, raise, report an error, report progress, answer
the wrong call, return garbage or output that is not JSON, abort the run), the order in which the
calls of a batch finish, where the run is aborted (before it starts, at any event, inside a tool)
and `max_steps`. Batches finish in the generated order through asyncio.Event gates, never sleeps.

This module imports Hypothesis, which costs start-up time; test_properties.py imports it only
when its tests run, so `pytest -k ch07` does not pay for it.
"""

from __future__ import annotations

import asyncio
import copy
import os
import random
from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, note, seed, settings
from hypothesis import strategies as st

from course.runtime.abort import AbortController
from course.runtime.clock import StepClock, use_clock
from course.recorder.harness import Run, load_checkpoint, run_loop
from course.judge.invariants import check_run
from course.runtime.messages import assistant_message, text, tool_call, tool_result
from course.runtime.scripted import ScriptedModel
from course.runtime.tools import Registry, Tool

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


# What a call's tool does once its gate opens. Only an injected executor can answer the wrong
# call; only the chapter 06 executor refuses calls (bad arguments, unknown tool) before any tool runs.
RUNNING = ["succeed", "succeed", "succeed", "raise", "raise_empty", "report_error", "abort", "not_json", "garbage"]
INJECTED_ONLY = ["wrong_call"]
REFUSED = ["bad_arguments", "unknown_tool"]
IS_ERROR = {"succeed": False, "abort": False, "raise": True, "raise_empty": True, "report_error": True,
            "not_json": True, "garbage": True, "wrong_call": True, "bad_arguments": True, "unknown_tool": True}
STOP_REASONS = ["toolUse", "stop", "length", "error", "aborted", "model_raises"]


@dataclass
class CallPlan:
    id: str
    does: str
    progress: int
    """How many progress reports the tool makes before it finishes."""


@dataclass
class StepPlan:
    stop_reason: str
    with_text: bool
    calls: list[CallPlan]
    finish_order: list[str]
    """The ids of the calls whose tool runs, in the order they finish."""


@dataclass
class RunPlan:
    registry: bool
    """Tools run through the chapter 06 executor over a registry (else an injected executor)."""
    steps: list[StepPlan]
    max_steps: int
    abort_before_start: bool
    abort_at_event: int | None
    """The observer aborts the run when it sees this event (numbered from 1)."""


@st.composite
def step_plans(draw, number: int, registry: bool, goes_on: bool) -> StepPlan:
    """One scripted answer; one that `goes_on` is a toolUse with calls, so the run continues after it."""
    stop_reason = "toolUse" if goes_on else draw(st.sampled_from(STOP_REASONS))
    does = st.sampled_from(RUNNING + (REFUSED if registry else INJECTED_ONLY))
    calls = [CallPlan(id=f"s{number}c{i}", does=draw(does), progress=draw(st.integers(0, 2)))
             for i in range(draw(st.integers(1, 3) if goes_on else st.integers(0, 2)))]
    running = [c.id for c in calls if c.does not in REFUSED]
    return StepPlan(stop_reason=stop_reason, with_text=draw(st.booleans()), calls=calls,
                    finish_order=draw(st.permutations(running)))


@st.composite
def run_plans(draw) -> RunPlan:
    registry = draw(st.booleans())
    going_on = draw(st.integers(0, 4))
    steps = [draw(step_plans(n, registry, goes_on=True)) for n in range(1, going_on + 1)]
    if draw(st.integers(0, 3)) > 0:  # else the script runs out and the scripted model answers with an error
        steps.append(draw(step_plans(going_on + 1, registry, goes_on=False)))
    return RunPlan(
        registry=registry,
        steps=steps,
        max_steps=6 - draw(st.integers(0, 5)),  # mostly loose: small bounds come up, but less often
        abort_before_start=draw(st.integers(0, 9)) == 9,  # rarely: such a run ends at once
        abort_at_event=draw(st.integers(1, 40)) if draw(st.integers(0, 3)) == 3 else None,  # a quarter of the runs
    )


@dataclass
class Batch:
    """Opens the gates of one step's calls one at a time, in the generated finish order, once all
    of them are running."""

    order: list[str]
    gates: dict[str, asyncio.Event] = field(init=False)
    started: int = 0

    def __post_init__(self) -> None:
        self.gates = {call_id: asyncio.Event() for call_id in self.order}

    async def wait_for_turn(self, call_id: str) -> None:
        self.started += 1
        if self.started == len(self.order):
            self.gates[self.order[0]].set()
        await self.gates[call_id].wait()

    def finished(self, call_id: str) -> None:
        position = self.order.index(call_id)
        if position + 1 < len(self.order):
            self.gates[self.order[position + 1]].set()


async def _no_plan(arguments, context):
    raise AssertionError("the probe tool runs only inside execute_plan")


# Made once: checking a tool's schema costs more than a whole scripted run.
PROBE = Tool(name="probe", description="does what the plan says", execute=_no_plan, parameters={
    "type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"], "additionalProperties": False})


def _answer(step: StepPlan):
    if step.stop_reason == "model_raises":
        def raising(request):
            raise ConnectionError("model connection reset")
        return raising
    content = [text("let me see")] if step.with_text else []
    for call in step.calls:
        name = "nope" if call.does == "unknown_tool" else "probe"
        content.append(tool_call(call.id, name, {"key": 7 if call.does == "bad_arguments" else call.id}))
    error = "upstream failed" if step.stop_reason in ("error", "aborted") else None
    return assistant_message(content, step.stop_reason, error_message=error)


async def execute_plan(plan: RunPlan) -> Run:
    """Run the loop on the plan; `Run.problems` lists every promise it broke."""
    controller = AbortController()
    calls = {call.id: call for step in plan.steps for call in step.calls}
    batches: dict[str, Batch] = {}
    for step in plan.steps:
        batch = Batch(step.finish_order)
        batches.update((call_id, batch) for call_id in step.finish_order)

    async def behave(call_id: str, context, make_result):
        """What the tool of `call_id` does; `make_result(content, is_error)` shapes its answer
        (a tool result for an injected executor, a tool output for a registry tool)."""
        batch = batches[call_id]
        await batch.wait_for_turn(call_id)
        try:
            for n in range(calls[call_id].progress):
                context.report_progress([text(f"{call_id} progress {n + 1}")])
            does = calls[call_id].does
            if does == "raise":
                raise RuntimeError(f"{call_id} failed")
            if does == "raise_empty":
                raise KeyError()
            if does == "abort":
                controller.abort()
            if does == "not_json":
                return make_result([text("ok"), {"type": "text", "text": {1, 2}}], False)
            if does == "garbage":
                return f"{call_id} done"
            if does == "wrong_call":
                return tool_result(tool_call("someone-else", "probe", {}), [text("not yours")])
            return make_result([text(f"{call_id} done")], does == "report_error")
        finally:
            batch.finished(call_id)

    async def injected(call, context):
        return await behave(call["id"], context, lambda content, is_error: tool_result(call, content, is_error=is_error))

    async def probe(arguments, context):
        return await behave(arguments["key"], context, lambda content, is_error: {"content": content, "isError": is_error})

    events_seen = 0

    def observe(event):
        nonlocal events_seen
        events_seen += 1
        if events_seen == plan.abort_at_event:
            controller.abort()

    if plan.abort_before_start:
        controller.abort()
    tool = copy.copy(PROBE)
    tool.execute = probe
    return await run_loop(
        load_checkpoint("ch07_agent_loop"),
        model=ScriptedModel([_answer(step) for step in plan.steps]),
        context={"systemPrompt": "You are tiny-pi.", "messages": [{"role": "user", "content": "go", "timestamp": 0}]},
        tools=Registry([tool] if plan.registry else []),
        execute_tool_call=None if plan.registry else injected,
        signal=controller.signal,
        max_steps=plan.max_steps,
        on_event=observe,
    )


def outcome_problems(plan: RunPlan, run: Run) -> list[str]:
    """What the plan says about each executed call that the run did not do (beyond the invariants)."""
    calls = {call.id: call for step in plan.steps for call in step.calls}
    problems = []
    for event in run.events:
        if event["type"] == "tool_end":
            result = event["result"]
            call = calls[result["toolCallId"]]
            if result["isError"] != IS_ERROR[call.does]:
                problems.append(f"{call.id} ({call.does}) ended with isError {result['isError']}")
    progress = [e["callId"] for e in run.events if e["type"] == "tool_progress"]
    for call_id in {e["call"]["id"] for e in run.events if e["type"] == "tool_start"}:
        call = calls[call_id]
        expected = 0 if call.does in REFUSED else call.progress
        if progress.count(call_id) != expected:
            problems.append(f"{call_id} reported progress {expected} times, the events show {progress.count(call_id)}")
    return problems


def every_generated_run_keeps_the_promises() -> None:
    """The property: on every generated run, the invariants hold and each call did what its tool did."""
    name, profile, chosen_seed = chosen_settings()

    runner = asyncio.Runner()  # one event loop for all the runs of this test

    @settings(profile)
    @given(run_plans())
    def check(plan: RunPlan) -> None:
        with use_clock(StepClock()):
            run = runner.run(execute_plan(plan))
        left_running = asyncio.all_tasks(runner.get_loop())  # the run's own task is done by now
        problems = run.problems + outcome_problems(plan, run) + [f"{task!r} is still running" for task in left_running]
        if problems:
            note(run.without_messages_json().render())
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
