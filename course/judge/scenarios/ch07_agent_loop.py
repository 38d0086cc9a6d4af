"""Chapter 07's generated plans (see `course.recorder.scenarios.ch07_agent_loop` for their shape)."""

from __future__ import annotations

from hypothesis import strategies as st

RUNNING = ["succeed", "succeed", "succeed", "raise", "raise_empty", "report_error", "abort", "not_json", "garbage"]
INJECTED_ONLY = ["wrong_call"]
REFUSED = ["bad_arguments", "unknown_tool"]
STOP_REASONS = ["toolUse", "stop", "length", "error", "aborted", "model_raises"]


@st.composite
def step_plans(draw, number: int, registry: bool, goes_on: bool) -> dict:
    stop_reason = "toolUse" if goes_on else draw(st.sampled_from(STOP_REASONS))
    does = st.sampled_from(RUNNING + (REFUSED if registry else INJECTED_ONLY))
    calls = [{"id": f"s{number}c{i}", "does": draw(does), "progress": draw(st.integers(0, 2))}
             for i in range(draw(st.integers(1, 3) if goes_on else st.integers(0, 2)))]
    running = [c["id"] for c in calls if c["does"] not in REFUSED]
    return {"stopReason": stop_reason, "text": draw(st.booleans()), "calls": calls,
            "finishOrder": draw(st.permutations(running))}


@st.composite
def run_plans(draw) -> dict:
    registry = draw(st.booleans())
    going_on = draw(st.integers(0, 4))
    steps = [draw(step_plans(n, registry, goes_on=True)) for n in range(1, going_on + 1)]
    if draw(st.integers(0, 3)) > 0:
        steps.append(draw(step_plans(going_on + 1, registry, goes_on=False)))
    return {"registry": registry, "steps": steps, "maxSteps": 6 - draw(st.integers(0, 5)),
            "abortBeforeStart": draw(st.integers(0, 9)) == 9,
            "abortAtEvent": draw(st.integers(1, 40)) if draw(st.integers(0, 3)) == 3 else None}


STRATEGIES = {"loop": run_plans()}
RENDERERS: dict = {}


def describe(plan: dict) -> str:
    steps = []
    for n, step in enumerate(plan["steps"], 1):
        calls = ", ".join(f"{c['id']} {c['does']}" + (f" (progress x{c['progress']})" if c["progress"] else "")
                          for c in step["calls"]) or "no calls"
        order = " → ".join(step["finishOrder"])
        steps.append(f"answer {n}: {step['stopReason']}{' with text' if step['text'] else ''}; {calls}"
                     + (f"; finishing {order}" if len(step["finishOrder"]) > 1 else ""))
    extra = [f"max_steps {plan['maxSteps']}", "registry tools" if plan["registry"] else "injected executor"]
    if plan["abortBeforeStart"]:
        extra.append("aborted before the start")
    if plan["abortAtEvent"]:
        extra.append(f"aborted at event {plan['abortAtEvent']}")
    return " | ".join(steps + extra) if steps else " | ".join(["no scripted answers", *extra])
