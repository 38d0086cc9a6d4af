"""Chapter 07's generated plans and the notation of their runs.

The plans are drawn in `chapters.ch07_agent_loop.judge.ch07_plans`, in two tracks: the chapter's five sections
draw only inputs inside the chapter's contract, each plan of a kind that names the sentences of the
chapter it enforces (`cites_of`); the hardening sections (加固) draw every freedom of the loop's
collaborators, as all sections did before the tracks were split. A plan is a `Plan`
(`chapters.ch07_agent_loop.scenarios`).

What is compared is what the chapter promises: how the run ended (reason and steps, or the exception and
`exc.transcript`), every event in order, the transcript, every request the model received, how many tools
ran, the caller's messages and context afterwards, and that no task is left running. Left out: the wording
of the error result the loop makes of an injected executor's malformed answer (it must be an error result
for the right call, not the answer's own content), and of the errorMessage when the model fails (it must
name what failed).
"""

from __future__ import annotations

import json
from typing import Any

from course.judge.invariants import (
    _check_events, _check_requests, _check_transcript, _key, check_pairing, signal_problems,
)
from course.judge.timeline import event_line, json_text, message_row, request_row
from chapters.ch07_agent_loop.scenarios import MODEL_FAILURES as FAILING_MODELS, Call, Plan, answers_own_texts
from chapters.ch07_agent_loop.judge.ch07_plans import (  # noqa: F401 — the chapter's scenarios module offers them
    ANY_STRATEGIES, EXAMPLES, HARDENING_SECTIONS, KINDS, SEED_KEYS, STRATEGIES, beyond_the_chapter, cites_of,
)


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

def _call_words(call: Call) -> str:
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


def describe(plan: Plan) -> str:
    lines = [f"kind: {plan['kind']}"] if plan.get("kind") else []
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
        said = f" with text {step['text']!r}" if isinstance(step["text"], str) and step["text"] else \
            (" with text" if step["text"] else "")
        lines.append(f"answer {n}: {step['stopReason']}{said}: {calls}"
                     + (f"; finishing {order}" if len(step["finishOrder"]) > 1 else ""))
    if not plan["steps"]:
        lines.append("no scripted answers")
    return "\n  ".join(lines)
