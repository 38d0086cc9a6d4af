"""Chapter 06's generated plans and the chapter's notation of an execution.

The plans are drawn in `chapters.ch06_tool_execution.judge.ch06_plans`, in two tracks: the chapter's five sections
draw only inputs inside the chapter's contract, each plan of a kind that names the sentences of the
chapter it enforces (`cites_of`); the hardening sections (加固) draw tools returning something that is no
ToolOutput, and chapter 07's plans with every freedom of the loop's collaborators. A plan's shape is
`chapters.ch06_tool_execution.scenarios`'s (`ExecutionPlan`, `LoopRunPlan`).

What is compared is what the chapter promises: the result (or what the executor raised), the tools that
ran and what they received, the progress the caller saw, whether the call was left as it was; for a
chapter 07 run, chapter 07's notation, less what the executor's own schedule decides (below).
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from chapters.ch07_agent_loop.judge import plans as ch07
from chapters.ch06_tool_execution.judge.ch06_plans import (  # noqa: F401 — the chapter's scenarios module offers them
    EXAMPLES, EXTRAS, HARDENING_SECTIONS, KINDS, MALFORMED, MEGABYTE, PINNED, PINNED_EXCEPTIONS, SEED_KEYS, STRATEGIES,
    WRONG, beyond_the_chapter, cites_of, text,
)
from course.judge.timeline import json_text
from chapters.ch06_tool_execution.scenarios import long_text


def _path(path: tuple) -> str:
    return "/".join(str(step) for step in path) or "arguments"


# --- the chapter's notation ---------------------------------------------------------------------

NOT_JSON_ERROR = re.compile(r"^(Tool .* returned output that is not JSON): .*\Z", re.DOTALL)


SHOWN_WHOLE = 2_000
"""Longer texts are shown by their ends, length and digest: still exact, and a cut shows in the length."""


def _shown(result: Any) -> Any:
    """The result as the chapter promises it: the text after "...is not JSON:" is json's own wording, not
    compared; a text over SHOWN_WHOLE is shown in short (`long_text`, as the recorder keeps any over KEPT_WHOLE)."""
    if not isinstance(result, dict) or not isinstance(result.get("content"), list):
        return result
    content = []
    for block in result["content"]:
        if isinstance(block, dict) and isinstance(block.get("text"), str) and NOT_JSON_ERROR.match(block["text"]):
            block = {**block, "text": NOT_JSON_ERROR.sub(r"\1: …", block["text"])}
        if isinstance(block, dict) and isinstance(block.get("text"), str) and len(block["text"]) > SHOWN_WHOLE:
            block = {**block, "text": long_text(block["text"])}
        content.append(block)
    return {**result, "content": content}


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _listed(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def render_execution(record: dict) -> str:
    """The result as JSON (all a fixed snapshot of a result holds), or what was raised instead; for a
    whole execution, under `## result`, followed by what else the execution did."""
    out = ["## result\n"] if "runs" in record else []
    if "result" in record:
        out.append(json_text(_shown(record["result"])) + "\n")
    raised = record.get("raised")
    if raised is not None:
        kind, message = (raised.get("type"), raised.get("message")) if isinstance(raised, dict) else (raised, None)
        out.append(f"raised {kind}" + (f": {message}" if message else "") + "\n")
    if "neverEnded" in record:
        out.append(f"never ended: {record['neverEnded']}\n")
    if "runs" in record:
        lines = [f"{run.get('tool')} got {_compact(run.get('received'))}"
                 + ("" if run.get("callersSignal") else " and not the caller's signal")
                 if isinstance(run, dict) else _compact(run) for run in _listed(record["runs"])]
        out.append("## tools that ran\n" + "".join(f"{line}\n" for line in lines or ["none"]))
    if "progress" in record:
        lines = [f"{n}. {_compact(content)}" for n, content in enumerate(_listed(record["progress"]), 1)]
        out.append("## progress the caller saw\n" + "".join(f"{line}\n" for line in lines or ["none"]))
    if "toolWhenTheExecutorEnded" in record:
        out.append(f"## the waiting tool, when the executor ended\n{record['toolWhenTheExecutorEnded']}\n")
    if "callUnchanged" in record:
        after = "unchanged" if record["callUnchanged"] is True else f"changed: {_compact(record.get('callAfter'))}"
        out.append(f"## the call afterwards\n{after}\n")
    return "".join(out)


# --- a chapter 07 run with this chapter's executor ----------------------------------------------
# The calls of a batch run at the same time, so when each of them reaches a point depends on how many
# turns of the event loop its executor takes: a correct executor may yield before it runs the tool,
# run the tool in a task of its own, or validate in a thread. What the chapter 06 executor decides
# is each call's own story: its result, its progress, whether its tool ran and with what, whether it
# was cancelled with the run. So a batch's events are compared call by call (each call's in its own
# order, the calls in call order), its results' timestamps as the batch's set of them, and when an
# observer raised, or the caller cancelled the run, while a batch of several calls ran, which of them
# had ended by then not at all (that no task is left running still is).

_BATCH_EVENTS = ("tool_start", "tool_progress", "tool_end")


def _event_call(event: Any) -> Any:
    if not isinstance(event, dict):
        return None
    if event.get("type") == "tool_start":
        return event["call"].get("id") if isinstance(event.get("call"), dict) else None
    if event.get("type") == "tool_progress":
        return event.get("callId")
    if event.get("type") == "tool_end":
        return event["result"].get("toolCallId") if isinstance(event.get("result"), dict) else None
    return None


def _windows(events: list) -> list[tuple[int, int]]:
    """(start, end) of each batch's events: a tool_start and the tool events that follow it."""
    found, n = [], 0
    while n < len(events):
        if isinstance(events[n], dict) and events[n].get("type") == "tool_start":
            start = n
            while n < len(events) and isinstance(events[n], dict) and events[n].get("type") in _BATCH_EVENTS:
                n += 1
            found.append((start, n))
        else:
            n += 1
    return found


def _call_by_call(window: list) -> list:
    """A batch's events: its tool_start events as they came, then each call's other events, in call order."""
    starts = [e for e in window if e.get("type") == "tool_start"]
    order = [_event_call(e) for e in starts]
    rest = [e for e in window if e.get("type") != "tool_start"]
    place = {call_id: n for n, call_id in reversed(list(enumerate(order)))}
    return starts + sorted(rest, key=lambda e: place.get(_event_call(e), len(order)))


def _same_times(transcript: list, events: list | None) -> None:
    """Each run of consecutive tool results (a batch's) gets its timestamps in sorted order, in place; the
    tool_end events carrying those results get the same."""
    n, renamed = 0, {}
    while n < len(transcript):
        end = n
        while end < len(transcript) and isinstance(transcript[end], dict) and transcript[end].get("role") == "toolResult":
            end += 1
        if end - n > 1:
            stamps = [m.get("timestamp") for m in transcript[n:end]]
            if all(isinstance(t, int) and not isinstance(t, bool) for t in stamps):
                for message, stamp in zip(transcript[n:end], sorted(stamps)):
                    renamed[(message.get("toolCallId"), message["timestamp"])] = stamp
                    message["timestamp"] = stamp
        n = max(end, n + 1)
    for event in events or []:
        result = event.get("result") if isinstance(event, dict) and event.get("type") == "tool_end" else None
        if isinstance(result, dict) and (result.get("toolCallId"), result.get("timestamp")) in renamed:
            result["timestamp"] = renamed[(result["toolCallId"], result["timestamp"])]


def scheduling_free(record: dict) -> dict:
    """A chapter 07 run with the executor under test, less what its executor's schedule decides (above)."""
    record = copy.deepcopy(record)
    events = record.get("events")
    transcript = record.get("transcript")
    if isinstance(events, list) and all(isinstance(e, dict) for e in events):
        windows = _windows(events)
        message = record.get("message")
        cut_short = record.get("raised") == "CancelledError" or (
            isinstance(message, str) and re.fullmatch(r"observer broke at (tool_end|tool_progress) \d+", message))
        if record.get("outcome") == "raised" and cut_short and windows and windows[-1][1] == len(events):
            start, end = windows[-1]
            cut = {_event_call(e) for e in events[start:end] if e.get("type") == "tool_start"}
            if len(cut) > 1:  # which calls of the batch ended before the raise or the cancel: their schedule
                events[start:end] = [e for e in events[start:end] if e.get("type") == "tool_start"]
                if isinstance(transcript, list):
                    record["transcript"] = transcript = [
                        m for m in transcript if not (isinstance(m, dict) and m.get("role") == "toolResult"
                                                      and m.get("toolCallId") in cut)]
                if isinstance(record.get("executions"), list):
                    record["executions"] = [c for c in record["executions"] if c not in cut]
                if isinstance(record.get("withoutTheRunsSignal"), list):
                    record["withoutTheRunsSignal"] = [c for c in record["withoutTheRunsSignal"] if c not in cut]
        for start, end in _windows(events):
            events[start:end] = _call_by_call(events[start:end])
    if isinstance(transcript, list):
        _same_times(transcript, events if isinstance(events, list) else None)
    return record


def render_loop_run(record: dict) -> str:
    try:
        record = scheduling_free(record)
    except Exception:  # a record this cannot read is shown as chapter 07 shows it
        pass
    return ch07.render_plan_run({**record, "kind": "ch07-plan-run"})


RENDERERS = {"tool-execution": render_execution, "ch06-loop-run": render_loop_run}


# --- the plan in words --------------------------------------------------------------------------

def _exception_words(spec: dict) -> str:
    if "group" in spec:
        inner = ", ".join(_exception_words(one) for one in spec["group"])
        words = f"ExceptionGroup({', '.join(_compact(a) for a in spec['args'])}, [{inner}])"
    else:
        words = f"{spec['type']}({', '.join(_compact(a) for a in spec['args'])})"
    if spec.get("notes"):
        words += f" with notes {_compact(spec['notes'])}"
    if "cause" in spec:
        words += f" from {_exception_words(spec['cause'])}"
    if "context" in spec:
        words += f" while handling {_exception_words(spec['context'])}"
    return words


def describe(plan: dict) -> str:
    kind = f"kind: {plan['kind']}\n  " if plan.get("kind") else ""
    if "loopPlan" in plan:
        loop_plan = {key: value for key, value in plan["loopPlan"].items() if key != "kind"}
        return kind + "the reference chapter 07 loop with your execute_tool_call: " + ch07.describe(loop_plan)
    tools = ", ".join(f"{tool['name']} {_compact(tool['parameters'])}" for tool in plan["tools"])
    call = plan["call"]
    parts = [f"call {call['id']!r} to {call['name']!r} with {_compact(call['arguments'])}"]
    if plan.get("brokenBy"):
        parts.append(f"the arguments break the schema: {plan['brokenBy']}")
    if plan.get("notJson"):
        parts.append(f"the arguments are not valid JSON ({plan['notJson']}): the tool must not run")
    if plan.get("signalAborted"):
        parts.append("the caller's signal is already aborted")
    does = plan["does"]
    doing = []
    if does["progress"]:
        doing.append("reports progress " + ", ".join(_compact(content) for content in does["progress"]))
    if does["meddle"]:
        changes = ", ".join(f"{change['op']} {change.get('key', '')} at {_path(tuple(change['at']))}".replace("  ", " ")
                            for change in does["meddle"])
        doing.append(f"changes its arguments ({changes}) " + ("during its run" if does["meddleWhen"] == "during"
                                                               else "after the executor returned"))
    outcome = does["outcome"]
    if "returns" in outcome:
        doing.append(f"returns {_compact(outcome['returns'])}")
    elif "raises" in outcome:
        doing.append(f"raises {_exception_words(outcome['raises'])}")
    elif outcome.get("cancelled") == "raised":
        doing.append("raises asyncio.CancelledError")
    else:
        doing.append("waits until the task executing it is cancelled")
    parts.append("the called tool " + ", then ".join(doing))
    return kind + " | ".join(parts + [f"registry: {tools}"])


