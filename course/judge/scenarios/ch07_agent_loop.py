"""Chapter 07's generated plans, one strategy per chapter section, and the notation of their runs.

A plan's shape is `course.recorder.scenarios.ch07_agent_loop`'s docstring. Every strategy can draw every
freedom of the loop's collaborators (the caller's messages and context, the registry and executor, the
observer, the model's answers, the tools, aborts and cancellation); each leans towards its section:
  纯文本 stop  final answers without calls of every stop reason, observers absent, present or raising
  单工具往返   rounds of one call, executors answering right, wrong or raising, progress at every moment
  非执行终态   a final answer of every stop reason with zero to seven calls
  并发工具     batches of two to seven calls finishing in every order
  取消与上限   aborts before the start, at any event, inside a tool; cancellation; max_steps from 1 up

What is compared is what the chapter promises: how the run ended (reason and steps, or the exception and
`exc.transcript`), every event in order, the transcript, every request the model received, how many tools
ran, the caller's messages and context afterwards, and that no task is left running. Left out: the wording
of the error result the loop makes of an injected executor's malformed answer (it must be an error result
for the right call, not the answer's own content), and of the errorMessage when the model fails (it must
name what failed).
"""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import strategies as st

from course.judge.invariants import (
    _check_events, _check_requests, _check_transcript, _key, check_pairing, signal_problems,
)
from course.judge.timeline import event_line, json_text, message_row, request_row
from course.recorder.scenarios.ch07_agent_loop import MODEL_FAILURES as FAILING_MODELS, answers_own_texts

RUNNING = ["succeed", "succeed", "succeed", "succeed", "raise", "raise_empty", "report_error", "not_json", "garbage"]
INJECTED_ONLY = ["wrong_call", "wrong_tool", "wrong_role", "no_content", "error_not_bool"]
REFUSED = ["bad_arguments", "unknown_tool"]
HOLDING = ["hold", "ignore_cancel"]
HOOKED = ["tool_end", "tool_start", "assistant_message", "tool_progress", "model_event", "tool_skipped", "turn_end"]
"""The events an observer's hook may fire at (the n-th of a type): where a loop's order and bookkeeping show."""
FOCUS = {
    "pure_stop": ["assistant_message", "turn_end", "model_event"],
    "round_trip": ["tool_start", "tool_progress", "tool_end", "assistant_message"],
    # assistant_message twice: an abort once the terminal answer is complete must not change how the run ends
    "terminals": ["tool_skipped", "tool_skipped", "assistant_message", "assistant_message", "turn_end"],
    "concurrent": ["tool_end", "tool_progress", "tool_start"],
    # assistant_message twice: an abort between a toolUse answer and its batch must still run the batch
    "abort": ["tool_end", "tool_progress", "model_event", "assistant_message", "assistant_message", "tool_start"],
}
"""The events a section's hooks fire at more often than the others: where its mistakes show."""
TERMINAL = ["stop", "length", "error", "aborted", *FAILING_MODELS, "toolUse"]

EXAMPLES = {"pure_stop": 25, "round_trip": 30, "terminals": 30, "concurrent": 30, "abort": 40}


def _runs(executor: str, registry: bool, does: str) -> bool:
    return executor == "injected" or (registry and does not in REFUSED)


class Draw:
    """The choices of one plan, made by a random generator seeded from the one number Hypothesis draws.

    Hypothesis pays per draw and, with a few dozen plans per section, draws mostly the simplest ones
    and their near copies; one seed per plan makes every plan of the default profile a different one,
    as quickly as it can be built. A failing plan is shown in words (`describe`) and as JSON.
    """

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)

    def integers(self, low: int, high: int) -> int:
        return self.random.randint(low, high)

    def sampled_from(self, choices: list):
        return self.random.choice(choices)

    def booleans(self) -> bool:
        return self.random.random() < 0.5

    def permutations(self, items: list) -> list:
        return self.random.sample(items, len(items))


PROGRESS = [(0, False), (1, False), (2, False), (0, True), (1, True)]
"""(progress reports while it runs, whether it reports again after it returned), by drawn code; the report
as it starts is drawn per step."""


def step_plans(draw: "Draw", number: int, world: dict, *, reason: str, calls: tuple[int, int],
               extra: tuple[str, ...] = (), holders: bool = False) -> dict:
    """One scripted answer with its calls: what each call's tool does, its progress, the finish order."""
    choices = RUNNING + (INJECTED_ONLY if world["executor"] == "injected" else REFUSED) + list(extra)
    count = draw.integers(*calls)
    # One call of the step may report progress as it starts (only one: which call's tool starts first is free).
    before_at = draw.integers(0, 2 * count) - 1 if count else -1
    text_and_holders = draw.integers(0, 1 + 2 * count * holders)
    planned = []
    for i in range(count):
        code = draw.integers(0, len(choices) * len(PROGRESS) - 1)
        during, late = PROGRESS[code // len(choices)]
        planned.append({"id": f"s{number}c{i}", "does": choices[code % len(choices)], "before": int(i == before_at),
                        "during": during, "late": late})
    if holders and planned:  # a cancellation during this batch: some of its calls run until cancelled
        first = (text_and_holders // 2) % count
        planned[first]["does"] = HOLDING[text_and_holders // 2 // count % 2] if count else "hold"
        if text_and_holders % 2 and count > 1:
            planned[(first + 1) % count]["does"] = "ignore_cancel"
    running = [c["id"] for c in planned
               if _runs(world["executor"], world["registry"], c["does"]) and c["does"] not in HOLDING + ["watch"]]
    return {"stopReason": reason, "text": text_and_holders % 2 == 1, "calls": planned,
            "finishOrder": draw.permutations(running)}


def hold_last(step: dict) -> None:
    """The step's last call to finish runs on instead, until it is cancelled (or for a while, then answers)."""
    last = step["finishOrder"].pop()
    next(c for c in step["calls"] if c["id"] == last)["does"] = "hold"


def abort_first(step: dict, *, holding_sibling: bool) -> None:
    """The step's first call to finish aborts the run; with `holding_sibling`, its last one runs on until it is
    cancelled (or for a while, then answers anyway): an abort is no reason to cut a running tool short."""
    order = step["finishOrder"]
    if holding_sibling and len(order) >= 2:
        hold_last(step)
    if order:
        next(c for c in step["calls"] if c["id"] == order[0])["does"] = "abort"


def plans(draw: "Draw", section: str) -> dict:
    shape = draw.integers(0, 3 * 2 * 4 * 2 - 1)
    world = {
        "input": ["one", "one", "history"][shape % 3],
        "staleTools": shape // 3 % 2 == 1,
        "registry": shape // 6 % 4 != 3,
        "executor": ["chapter06", "injected"][shape // 24 % 2],
    }
    steps: list[dict] = []
    cancel = None
    if section == "pure_stop":
        for _ in range(draw.sampled_from([0, 0, 0, 1])):
            steps.append(step_plans(draw, len(steps) + 1, world, reason="toolUse", calls=(1, 2)))
        reason = draw.sampled_from(["stop"] * 6 + ["error", *FAILING_MODELS, "length", "aborted"])
        steps.append(step_plans(draw, len(steps) + 1, world, reason=reason, calls=(0, 0)))
    elif section == "round_trip":
        for _ in range(draw.integers(1, 3)):
            steps.append(step_plans(draw, len(steps) + 1, world, reason="toolUse", calls=(1, 1), extra=("abort",)))
        if draw.integers(0, 4) > 0:
            steps.append(step_plans(draw, len(steps) + 1, world, reason="stop", calls=(0, 0)))
    elif section == "terminals":
        for _ in range(draw.sampled_from([0, 0, 1, 2])):
            steps.append(step_plans(draw, len(steps) + 1, world, reason="toolUse", calls=(1, 2)))
        reason = draw.sampled_from(TERMINAL)
        most = 0 if reason == "toolUse" else 7
        steps.append(step_plans(draw, len(steps) + 1, world, reason=reason, calls=(0, most)))
    elif section == "concurrent":
        for _ in range(draw.sampled_from([1, 1, 2])):
            steps.append(step_plans(draw, len(steps) + 1, world, reason="toolUse", calls=(2, 7)))
        if draw.integers(0, 3) > 0:
            steps.append(step_plans(draw, len(steps) + 1, world, reason="stop", calls=(0, 0)))
    else:  # abort
        going_on = draw.integers(1, 3)
        cancel_kind = draw.sampled_from([None, None, None, "streaming", "batch"])
        cancel_step = draw.integers(1, going_on)
        for n in range(1, going_on + 1):
            cancelled_here = cancel_kind == "batch" and n == cancel_step
            steps.append(step_plans(draw, n, world, reason="toolUse", calls=(1, 4) if cancelled_here else (1, 3),
                                         extra=("watch",) if cancel_kind else ("abort", "abort", "watch"),
                                         holders=cancelled_here))
        if draw.booleans():
            steps.append(step_plans(draw, going_on + 1, world, reason=draw.sampled_from(TERMINAL), calls=(0, 2)))
        if cancel_kind is not None:
            cancel = {"step": cancel_step, "during": cancel_kind}
        if cancel_kind != "streaming" and draw.booleans():
            # The first call of a batch to finish aborts the run while its siblings still run (or hold, until
            # the caller cancels): the abort must not cut them short, nor turn the cancellation into an end.
            busiest = max(steps[:going_on], key=lambda step: len(step["finishOrder"]))
            abort_first(steps[cancel_step - 1] if cancel_kind else busiest, holding_sibling=not cancel_kind)
    observer = "present" if draw.integers(0, 4) < 4 or cancel is not None else "absent"  # a cancellation's events show what it did
    odds = {"abort": (3, 1, 5), "concurrent": (2, 8, 5), "terminals": (2, 2, 5), "pure_stop": (2, 6, 5)}.get(
        section, (3, 6, 5))
    if cancel is not None:  # the cancellation is the point of the plan: other ways to end it come seldom
        odds = (8, 1000, 5)

    # A section's own events are aimed at where its mistakes show: the first of each, and the last answer
    # (where a terminal answer is, or the end of the run).
    targets = [[kind, n] for kind in HOOKED for n in (1, 2, 3)] + 3 * [
        [kind, len(steps) if kind == "assistant_message" and steps else 1] for kind in FOCUS[section]]

    def hook(one_in: int):
        """None, or [event type, n]: the hook fires at the n-th event of that type (one plan in `one_in`)."""
        code = draw.integers(0, one_in * len(targets) - 1)
        return targets[code] if observer == "present" and code < len(targets) else None

    raise_at, abort_at, mutate_at = hook(odds[0]), hook(odds[1]), hook(odds[2])
    if cancel is not None:
        # An observer raising while the caller cancels: which of the two reaches the caller is asyncio's choice
        # (a TaskGroup prefers the error), not the chapter's, so no plan has both.
        raise_at = None
    elif raise_at is not None and draw.booleans():
        # The observer raises while a tool of the busiest batch holds: the loop must cancel it, not wait for it.
        batches = [step for step in steps if step["stopReason"] == "toolUse" and len(step["finishOrder"]) >= 2]
        if batches:
            hold_last(max(batches, key=lambda step: len(step["finishOrder"])))
    max_steps = draw.sampled_from([None, None, None, 1, 2, 3, 4, 6] if section != "abort"
                                  else [None, 1, 1, 2, 2, 3, 4])
    flags = draw.integers(0, 4 * (4 if section == "abort" else 20) - 1)
    world["contextExtra"] = flags % 3 == 1
    return {**world, "observer": observer, "raiseAt": raise_at, "abortAt": abort_at, "mutateAt": mutate_at,
            "mutateAfter": flags % 4 == 3, "abortBeforeStart": flags // 4 == 1 and cancel is None,
            "maxSteps": max_steps, "cancel": cancel, "steps": steps}


def _strategy(section: str):
    return st.integers(0, 2**64 - 1).map(lambda seed: plans(Draw(seed), section))


STRATEGIES = {section: _strategy(section) for section in ("pure_stop", "round_trip", "terminals", "concurrent", "abort")}


# --- the notation of a run ------------------------------------------------------------------------

LOOSE_TEXT = "<an error result saying what was wrong with the executor's answer>"
MODEL_FAILURES = tuple(FAILING_MODELS.values())
"""What a failing model raises or hands over: an errorMessage holding one names what failed."""


def _loosen(value: Any, loose: dict) -> Any:
    """The record with what the chapter leaves open replaced by what it promises (see the module docstring)."""
    if isinstance(value, list):
        return [_loosen(item, loose) for item in value]
    if not isinstance(value, dict):
        return value
    out = {key: _loosen(item, loose) for key, item in value.items()}
    if out.get("role") == "toolResult" and out.get("isError") is True and isinstance(out.get("toolCallId"), str) \
            and loose.get(out["toolCallId"]) == out.get("toolName") \
            and not _executors_own(out.get("content"), out["toolCallId"]):
        out["content"] = [{"type": "text", "text": LOOSE_TEXT}]
    message = out.get("errorMessage")
    if isinstance(message, str):
        for failure in MODEL_FAILURES:
            if failure in message:
                out["errorMessage"] = f"<names what failed: {failure}>"
    return out


def _executors_own(content: Any, call_id: str) -> bool:
    """Whether `content` holds a text the malformed answer itself carried: the loop's wording is free, but
    passing the answer on as the error result is keeping it."""
    texts = {block.get("text") for block in content if isinstance(block, dict)} if isinstance(content, list) else set()
    return bool(texts & answers_own_texts(call_id))


def _lines(render, items: Any, what: str) -> list[str]:
    if not isinstance(items, list):
        return [f"not a list of {what}: {_json(items)}"]
    out = []
    for n, item in enumerate(items, 1):
        try:
            line = render(item)
        except Exception:  # a broken loop may hand out anything: it is shown, never a crash of the judge
            line = f"unreadable {what[:-1]}: {_json(item)}"
        out.append(f"{n:>2}  {line}")
    return out


def _json(value: Any, indent: int | None = None) -> str:
    if indent is not None:
        return json_text(value, default=repr)
    return json.dumps(value, ensure_ascii=False, default=repr)


def _problems(record: dict) -> list[str]:
    """The loop's promises the run broke (for a run that raised: those about what formed before)."""
    transcript = record.get("transcript")
    inputs = record.get("inputMessages") or []
    if not isinstance(transcript, list) or not all(isinstance(m, dict) for m in transcript):
        return [] if record.get("outcome") == "still running" else ["the transcript is not a list of message dicts"]
    events = record.get("events")
    if events is not None and (not isinstance(events, list) or not all(isinstance(e, dict) for e in events)):
        return ["the events are not a list of event dicts"]
    problems = []
    if record.get("callerMessagesAfter") != "as the caller left them":
        problems.append("the caller's context['messages'] was changed")
    if record.get("contextAfter") != "as the caller left it":
        problems.append("the caller's context was changed")
    options_after = record.get("optionsAfter", "as the caller made them")
    if options_after != "as the caller made them":
        changed = ", ".join(map(str, options_after)) if isinstance(options_after, list) else _json(options_after)
        problems.append(f"the run changed its options ({changed}): the caller may run them again")
    if record.get("sharedObjects"):
        problems.append(f"the transcript holds the same list or object in {record['sharedObjects'] + 1} places or "
                        "more: a caller changing one message would change another")
    if _key(transcript[: len(inputs)]) != _key(inputs):
        problems.append("the transcript does not start with the input messages")
    first = len(inputs)
    requests = record.get("requests") if isinstance(record.get("requests"), list) else []
    if record.get("outcome") != "returned":
        return problems + _check_requests(requests, transcript, first, len(requests), record.get("systemPrompt"),
                                          record.get("definitions"))
    reason, steps = record.get("reason"), record.get("steps")
    problems += check_pairing(transcript, first=first)
    problems += _check_transcript(transcript, first, reason, steps, record.get("maxSteps"))
    if events is not None:
        problems += _check_events(events, transcript, first, reason, steps)
    problems += _check_requests(requests, transcript, first, steps, record.get("systemPrompt"),
                                record.get("definitions"))
    return problems


def _requests(record: dict) -> Any:
    """The requests with their messages spelled out (the recorder writes a transcript prefix as its length)."""
    requests, transcript = record.get("requests"), record.get("transcript")
    if not isinstance(requests, list):
        return requests
    spelled = []
    for request in requests:
        seen = request.get("messages") if isinstance(request, dict) else None
        if isinstance(seen, dict) and isinstance(seen.get("transcriptPrefix"), int) and isinstance(transcript, list):
            request = {**request, "messages": transcript[: seen["transcriptPrefix"]]}
        spelled.append(request)
    return spelled


def render_plan_run(record: dict) -> str:
    try:
        if not isinstance(record, dict):
            raise TypeError(f"a record is a dict, not {type(record).__name__}")
        record = {**record, "requests": _requests(record)}
        loose = record.get("loose") or {}
        if loose or any(failure in _json(record) for failure in MODEL_FAILURES):
            record = _loosen(record, loose if isinstance(loose, dict) else {})
        return _render(record)
    except Exception as error:  # never raises: a record this cannot read is shown as it is
        return f"## record\nch07 plan run that cannot be rendered ({type(error).__name__}: {error})\n{_json(record)[:2000]}\n"


def _render(record: dict) -> str:
    try:
        problems = _problems(record) + signal_problems(record.get("requestsWithoutTheRunsSignal") or [])
    except Exception as error:
        problems = [f"the run cannot be checked ({type(error).__name__}: {error})"]
    outcome = record.get("outcome")
    if outcome == "returned":
        ended = f"returned {record.get('reason')} after {record.get('steps')} steps"
    elif outcome == "raised":
        ended = f"raised {record.get('raised')}: {record.get('message')}"
    else:
        ended = "still running after every turn of the event loop it was given"
    requests = record.get("requests")
    out = ["## observations", f"run              {ended}",
           f"model requests   {len(requests) if isinstance(requests, list) else requests}",
           f"tool executions  {len(record.get('executions') or [])}",
           *([f"without signal   {', '.join(map(str, record['withoutTheRunsSignal']))} (their context lacks the "
              "run's signal)"] if record.get("withoutTheRunsSignal") else []),
           *(["after cancel     the loop read the model's answer again after the run was cancelled"]
             if record.get("answerReadAfterCancel") else []),
           *([f"never stopped    {', '.join(map(str, record['holdersNotStopped']))} (held until they gave up: "
              "nothing cancelled them)"] if record.get("holdersNotStopped") else []),
           f"tasks left       {record.get('tasksLeft')}",
           f"invariants       {'hold' if not problems else f'{len(problems)} broken'}"]
    out += [f"  broken {n}  {problem}" for n, problem in enumerate(problems, 1)]
    out += ["", "## timeline"]
    events = record.get("events")
    out += ["(no observer was given)"] if events is None else _lines(event_line, events, "events")
    transcript = record.get("transcript")
    out += ["", "## transcript" if outcome == "returned" else "## transcript (exc.transcript)"]
    out += _lines(message_row, transcript, "messages") if transcript != "<no transcript>" else ["<no transcript>"]
    out += ["", "## requests", *_lines(request_row, requests, "requests")]
    out += ["", "## caller", f"messages  {_json(record.get('callerMessagesAfter'))}",
            f"context   {_json(record.get('contextAfter'))}"]
    out += ["", "## messages", _json(transcript, indent=2)]
    return "\n".join(out) + "\n"


RENDERERS = {"ch07-plan-run": render_plan_run}


# --- a plan in words --------------------------------------------------------------------------------

def _call_words(call: dict) -> str:
    words = [call["id"], call["does"]]
    if call["before"]:
        words.append("reports progress as it starts")
    if call["during"]:
        words.append(f"reports progress x{call['during']}")
    if call["late"]:
        words.append("reports progress again after it returned")
    return " ".join(words)


def _nth(hook: list) -> str:
    kind, n = hook
    return f"the {n}{['st', 'nd', 'rd'][n - 1] if n <= 3 else 'th'} {kind} event"


def describe(plan: dict) -> str:
    lines = []
    caller = ["one user message" if plan["input"] == "one" else "an earlier round and a new question"]
    if plan["staleTools"]:
        caller.append('stale context["tools"]')
    caller.append(("registry with the probe tool" if plan["registry"] else "empty registry") + ", "
                  + ("the chapter 06 executor" if plan["executor"] == "chapter06" else "an injected executor"))
    caller.append(f"max_steps {plan['maxSteps']}" if plan["maxSteps"] is not None else "default max_steps")
    lines.append("caller: " + "; ".join(caller))
    if plan["observer"] == "absent":
        lines.append("observer: none given")
    else:
        hooks = [f"{what} at {_nth(plan[key])}" for key, what in (
            ("raiseAt", "raises"), ("abortAt", "aborts the run"), ("mutateAt", "the caller changes its messages"))
            if plan[key]]
        lines.append("observer: " + (", ".join(hooks) or "only watches"))
    if plan["abortBeforeStart"]:
        lines.append("the signal is aborted before the start")
    if plan["mutateAfter"]:
        lines.append("after the run the caller changes its messages")
    if plan["cancel"]:
        lines.append(f"the task running the loop is cancelled during step {plan['cancel']['step']}'s "
                     + ("model stream" if plan["cancel"]["during"] == "streaming" else "tool batch"))
    for n, step in enumerate(plan["steps"], 1):
        calls = "; ".join(_call_words(c) for c in step["calls"]) or "no calls"
        order = " → ".join(step["finishOrder"])
        lines.append(f"answer {n}: {step['stopReason']}{' with text' if step['text'] else ''}: {calls}"
                     + (f"; finishing {order}" if len(step["finishOrder"]) > 1 else ""))
    if not plan["steps"]:
        lines.append("no scripted answers")
    return "\n  ".join(lines)
