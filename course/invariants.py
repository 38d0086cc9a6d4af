"""The loop's promises, checked on a finished run.

`check_run(...)` returns the broken promises in plain words, each naming the message or event
index it is about; an empty list means the run kept every promise the chapter makes.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)


def check_pairing(messages: list[dict], first: int = 0) -> list[str]:
    """Every tool call is answered once, in call order, by a result with its id and name,
    before the next assistant message and before the end."""
    problems: list[str] = []
    open_calls: list[dict] = []
    opened_at = -1

    def close(at: str) -> None:
        for call in open_calls:
            problems.append(f"tool call {call['id']} of message {opened_at} has no result before {at}")
        open_calls.clear()

    for index, message in enumerate(messages):
        if index < first:
            continue
        role = message.get("role")
        if role == "assistant":
            close(f"message {index}")
            open_calls[:] = [b for b in message.get("content", []) if b.get("type") == "toolCall"]
            opened_at = index
        elif role == "toolResult":
            if not open_calls:
                problems.append(f"message {index} answers {message.get('toolCallId')}, which no open tool call has")
                continue
            expected = open_calls.pop(0)
            if message.get("toolCallId") != expected["id"] or message.get("toolName") != expected["name"]:
                problems.append(
                    f"message {index} is the result for {message.get('toolName')}({message.get('toolCallId')}), "
                    f"expected {expected['name']}({expected['id']}) next, in call order"
                )
    close("the end of the run")
    return problems


def check_run(
    *,
    input_messages: list[dict],
    messages: list[dict],
    events: list[dict],
    requests: list[dict] | None,
    reason: str,
    steps: int,
    caller_messages_after: list[dict] | None = None,
    system_prompt: str | None = None,
    definitions: list[dict] | None = None,
) -> list[str]:
    problems: list[str] = []

    if caller_messages_after is not None and _key(caller_messages_after) != _key(input_messages):
        problems.append("the caller's context['messages'] was changed")
    if messages[: len(input_messages)] != input_messages:
        problems.append("the transcript does not start with the input messages")

    ends = [i for i, e in enumerate(events) if e.get("type") == "turn_end"]
    if len(ends) != 1:
        problems.append(f"turn_end was emitted {len(ends)} times, expected once")
    elif ends[0] != len(events) - 1:
        problems.append(f"turn_end is event {ends[0]}, but events follow it")
    for i in ends[:1]:
        if (events[i].get("reason"), events[i].get("steps")) != (reason, steps):
            problems.append(
                f"event {i} turn_end says ({events[i].get('reason')}, {events[i].get('steps')}), "
                f"the result says ({reason}, {steps})"
            )

    added = messages[len(input_messages):]
    announced = [e["message"] for e in events if e.get("type") == "assistant_message"]
    appended = [m for m in added if m.get("role") == "assistant"]
    if _key(announced) != _key(appended):
        problems.append(
            f"assistant_message events ({len(announced)}) do not match the assistant messages appended ({len(appended)})"
        )
    reported = Counter(_key(e["result"]) for e in events if e.get("type") in ("tool_end", "tool_skipped"))
    results = Counter(_key(m) for m in added if m.get("role") == "toolResult")
    if reported != results:
        problems.append(
            f"tool_end/tool_skipped events ({sum(reported.values())}) do not match the tool results appended "
            f"({sum(results.values())})"
        )

    running: set[str] = set()
    for i, event in enumerate(events):
        kind = event.get("type")
        if kind == "tool_start":
            running.add(event["call"]["id"])
        elif kind == "tool_progress" and event.get("callId") not in running:
            problems.append(f"event {i} tool_progress names {event.get('callId')!r}, which is not running")
        elif kind == "tool_end":
            call_id = event["result"].get("toolCallId")
            if call_id not in running:
                problems.append(f"event {i} tool_end for {call_id}, which had no tool_start")
            running.discard(call_id)
    for call_id in sorted(running):
        problems.append(f"tool {call_id} started but never ended")

    problems += check_pairing(messages, first=len(input_messages))

    if requests is not None:
        if len(requests) != steps:
            problems.append(f"steps is {steps}, but {len(requests)} model requests were made")
        for n, request in enumerate(requests, 1):
            seen = request.get("messages", [])
            if _key(seen) != _key(messages[: len(seen)]):
                problems.append(f"request {n} saw messages that are not a prefix of the transcript")
            else:
                problems += [f"request {n}: {p}" for p in check_pairing(seen, first=len(input_messages))]
            if system_prompt is not None and request.get("systemPrompt") != system_prompt:
                problems.append(f"request {n} has a different system prompt")
            if definitions is not None and _key(request.get("tools")) != _key(definitions):
                problems.append(f"request {n} does not carry the registry's tool definitions")
    return problems
