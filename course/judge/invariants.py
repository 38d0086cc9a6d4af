"""The loop's promises, checked on a finished run.

`check_run(...)` returns the broken promises in plain words, each naming the message, event or
request it is about; an empty list means the run kept every promise the chapter makes. Messages
and events are numbered from 1, as the transcript and timeline sections of a snapshot number them.

The promises (README "Guarantees" lists the test proving each):
  - the caller's messages are unchanged and the transcript starts with them;
  - the transcript is JSON;
  - every tool call is answered once, by a result with its id and name, in call order, before the
    next assistant message and before the end (`check_pairing`);
  - only the last assistant message may end the run, and the run's reason is the one its last
    assistant message calls for; `steps` is the number of assistant messages appended, which is
    the number of model requests, and never more than `max_steps`;
  - calls of a message that is not `toolUse` are answered by skipped results
    (`details: {"skipped": true, "reason": <stopReason>}`) and never started;
  - `turn_end` comes once, last, with the result's reason and steps;
  - the events tell the same story as the messages: each `assistant_message` event carries the
    appended message, right after the model event that ended its stream; each executed call has
    one `tool_start` (in call order) and one `tool_end` carrying its appended result; each skipped
    call one `tool_skipped` carrying its result; `tool_progress` only for a running call; the next
    request's model events only once the batch has ended;
  - request n saw exactly the transcript before the n-th appended assistant message, with the
    context's system prompt and the registry's tool definitions.
"""

from __future__ import annotations

import collections
import itertools
import json
import reprlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from course.runtime.messages import strict_json

# What a report shows of a value a broken loop handed over: bounded in depth and length, never recursing.
_reprs = reprlib.Repr()
_reprs.maxlevel, _reprs.maxstring, _reprs.maxother = 3, 60, 60
_short_repr = _reprs.repr


def _key(value: Any) -> str:
    """`value` as canonical text for comparing, at any depth (deep values take the slow, iterative path)."""
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=_short_repr)
    except (RecursionError, ValueError):  # nested too deep for the encoder, or a circular reference
        return _iterative_key(value)


def _iterative_key(value: Any) -> str:
    out: list[str] = []
    stack: list[Any] = [value]
    seen: set[int] = set()
    while stack:
        item = stack.pop()
        if isinstance(item, _Token):
            out.append(item.text)
        elif isinstance(item, (dict, list, tuple)):
            if id(item) in seen:
                out.append("<circular>")
                continue
            seen.add(id(item))
            if isinstance(item, dict):
                entries = sorted(item.items(), key=lambda entry: str(entry[0]))
                stack.append(_Token("}"))
                for n, (name, child) in enumerate(reversed(entries)):
                    stack += [child, _Token(json.dumps(str(name), ensure_ascii=False) + ": ")]
                    if n < len(entries) - 1:
                        stack.append(_Token(", "))
                stack.append(_Token("{"))
            else:
                stack.append(_Token("]"))
                for n, child in enumerate(reversed(item)):
                    stack.append(child)
                    if n < len(item) - 1:
                        stack.append(_Token(", "))
                stack.append(_Token("["))
        else:
            try:
                out.append(json.dumps(item, ensure_ascii=False))
            except (TypeError, ValueError):
                out.append(json.dumps(_short_repr(item), ensure_ascii=False))
    return "".join(out)


class _Token:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _calls(message: dict) -> list[dict]:
    content = message.get("content")
    return [b for b in content if isinstance(b, dict) and b.get("type") == "toolCall"] if isinstance(content, list) else []


def _shown(value: Any) -> str:
    """A value for a report: itself if a string, else a bounded repr (a broken loop may hand over anything)."""
    return value if isinstance(value, str) else _short_repr(value)


def _field(value: Any, name: str) -> str:
    """`value[name]` as text: a broken loop may put anything in an event."""
    found = value.get(name) if isinstance(value, dict) else None
    return found if isinstance(found, str) else _short_repr(found)


def _name(call_or_result: Any) -> str:
    if not isinstance(call_or_result, dict):
        return _short_repr(call_or_result)
    if call_or_result.get("role") == "toolResult":
        return f"{_field(call_or_result, 'toolName')}({_field(call_or_result, 'toolCallId')})"
    return f"{_field(call_or_result, 'name')}({_field(call_or_result, 'id')})"


def finishes_for(message: dict) -> tuple[str, ...]:
    """The reasons a run may finish with when `message` is its last assistant message."""
    stop_reason = message.get("stopReason")
    if stop_reason == "toolUse":
        # A complete batch ran; only an abort or the step bound ends the run here.
        return ("aborted", "maxSteps") if _calls(message) else ("error",)
    if stop_reason == "stop":
        return ("error",) if _calls(message) else ("stop",)
    return (_shown(stop_reason),)


def check_pairing(messages: list[dict], first: int = 0) -> list[str]:
    """Every tool call is answered once, in call order, by a result with its id and name,
    before the next assistant message and before the end. Messages before `first` are input."""
    problems: list[str] = []
    open_calls: collections.deque[dict] = collections.deque()
    opened_at = 0
    answered: dict[str, int] = {}  # call id -> the message that answered it

    def close(before: str) -> None:
        for call in open_calls:
            problems.append(f"tool call {_name(call)} of message {opened_at} has no result before {before}")
        open_calls.clear()

    for index, message in enumerate(messages[first:], first + 1):
        role = message.get("role")
        if role == "assistant":
            close(f"message {index}")
            open_calls.extend(_calls(message))
            opened_at = index
        elif role == "toolResult":
            call_id = _field(message, "toolCallId")
            if not open_calls:
                if call_id in answered:
                    problems.append(f"message {index} answers {call_id} again (message {answered[call_id]} already did)")
                else:
                    problems.append(f"message {index} answers {call_id}, which no open tool call has")
                continue
            expected = open_calls.popleft()
            answered[_field(expected, "id")] = index
            if call_id != _field(expected, "id") or message.get("toolName") != expected.get("name"):
                problems.append(
                    f"message {index} is the result for {_name(message)}, expected {_name(expected)} next, in call order"
                )
    close("the end of the run")
    return problems


def _check_transcript(messages: list[dict], first: int, reason: str, steps: int, max_steps: int | None) -> list[str]:
    problems: list[str] = []
    try:
        strict_json(messages)
    except (TypeError, ValueError) as error:
        for index, message in enumerate(messages, 1):
            try:
                strict_json(message)
            except (TypeError, ValueError) as message_error:
                problems.append(f"message {index} is not JSON: {message_error}")
        if not problems:
            problems.append(f"the transcript is not JSON: {error}")

    assistants = [i for i in range(first, len(messages)) if messages[i].get("role") == "assistant"]
    for i in assistants[:-1]:
        message = messages[i]
        if message.get("stopReason") != "toolUse" or not _calls(message):
            problems.append(
                f"message {i + 1} (stopReason {_shown(message.get('stopReason'))}, {len(_calls(message))} tool calls) "
                f"ends the run, but the model was asked again"
            )
    if not assistants:
        if (reason, steps) != ("aborted", 0):
            problems.append(f"no assistant message was appended, so only (aborted, 0) can end the run, not ({reason}, {steps})")
    elif reason not in finishes_for(messages[assistants[-1]]):
        last = messages[assistants[-1]]
        problems.append(
            f"the run finished {reason}, but its last assistant message (message {assistants[-1] + 1}, stopReason "
            f"{_shown(last.get('stopReason'))}, {len(_calls(last))} tool calls) finishes {' or '.join(finishes_for(last))}"
        )
    if steps != len(assistants):
        problems.append(f"steps is {steps}, but {len(assistants)} assistant messages were appended (one per request)")
    if max_steps is not None and isinstance(steps, int):
        if steps > max_steps:
            problems.append(f"steps is {steps}, more than max_steps {max_steps}")
        if reason == "maxSteps" and steps != max_steps:
            problems.append(f"the run finished maxSteps after {steps} steps, but max_steps is {max_steps}")

    for i in assistants:
        stop_reason = messages[i].get("stopReason")
        if stop_reason == "toolUse":
            continue
        for index in range(i + 1, min(i + 1 + len(_calls(messages[i])), len(messages))):
            result = messages[index]
            if result.get("role") != "toolResult":
                break
            details = result.get("details")
            if result.get("isError") is not True or not isinstance(details, dict) \
                    or details.get("skipped") is not True or details.get("reason") != stop_reason:
                problems.append(
                    f"message {index + 1} answers a call of message {i + 1} (stopReason {_shown(stop_reason)}), so it must be "
                    f'a skipped error result with details {{"skipped": true, "reason": "{_shown(stop_reason)}"}}'
                )
    return problems


def _results_of(messages: list[dict], assistant: int) -> list[int]:
    """Indices of the tool results following the assistant message at `assistant`."""
    found = []
    for index in range(assistant + 1, len(messages)):
        if messages[index].get("role") != "toolResult":
            break
        found.append(index)
    return found


# Each LoopEvent's fields, exactly as the chapter declares them: an observer reads these and nothing else
# (an extra field, such as the live transcript, hands it what the loop must keep to itself).
EVENT_FIELDS = {
    "model_event": {"type", "event"}, "assistant_message": {"type", "message"}, "tool_start": {"type", "call"},
    "tool_progress": {"type", "callId", "content"}, "tool_end": {"type", "result"}, "tool_skipped": {"type", "result"},
    "turn_end": {"type", "reason", "steps"},
}


def _event_shape(n: int, event: dict) -> str | None:
    """What is wrong with the fields of event `n`, or None (its type is checked where it is read)."""
    kind = event.get("type")
    fields = EVENT_FIELDS.get(kind) if isinstance(kind, str) else None
    if fields is None:
        return None
    if set(event) != fields:
        extra, missing = sorted(set(event) - fields), sorted(fields - set(event))
        said = ", ".join([*(f"an extra field {name!r}" for name in extra), *(f"no {name!r}" for name in missing)])
        return f"event {n} {kind} has {said}: the chapter's {kind} has exactly {', '.join(sorted(fields))}"
    inner = {"model_event": "event", "tool_start": "call", "tool_progress": "content"}.get(kind)
    wanted = list if kind == "tool_progress" else dict
    if inner is not None and not isinstance(event[inner], wanted):
        return f"event {n} {kind}'s {inner} is {type(event[inner]).__name__}, not a {wanted.__name__}"
    return None


class _Waiting:
    """The positions of a batch's calls still waiting for their tool_start (or tool_skipped), in call order.

    Taking the first one, finding one by its call id and removing one each cost a constant (amortised):
    a forged message of a hundred thousand calls is checked in the time it takes to read it."""

    def __init__(self, calls: list[dict]) -> None:
        self.order = collections.deque(range(len(calls)))
        self.gone: set[int] = set()
        self.by_id: dict[str, collections.deque[int]] = {}
        for position, call in enumerate(calls):
            if isinstance(call.get("id"), str):  # (an id of another type matches no event's id: those are texts)
                self.by_id.setdefault(call["id"], collections.deque()).append(position)

    def first(self) -> int | None:
        while self.order and self.order[0] in self.gone:
            self.order.popleft()
        return self.order[0] if self.order else None

    def find(self, call_id: str) -> int | None:
        same = self.by_id.get(call_id) if isinstance(call_id, str) else None
        while same and same[0] in self.gone:
            same.popleft()
        return same[0] if same else None

    def remove(self, position: int) -> None:
        self.gone.add(position)

    def left(self) -> list[int]:
        return [position for position in self.order if position not in self.gone]


def _check_events(events: list[dict], messages: list[dict], first: int, reason: str, steps: int) -> list[str]:
    problems: list[str] = [shape for n, event in enumerate(events, 1) if (shape := _event_shape(n, event))]
    problems += _check_turn_end(events, reason, steps)
    return problems + _EventOrder(events, messages, first).check()


def _check_turn_end(events: list[dict], reason: str, steps: int) -> list[str]:
    """One turn_end, the last event, saying what the result says."""
    problems: list[str] = []
    ends = [i for i, e in enumerate(events) if e.get("type") == "turn_end"]
    if len(ends) != 1:
        problems.append(f"turn_end was emitted {len(ends)} times, expected once")
    elif ends[0] != len(events) - 1:
        problems.append(f"turn_end is event {ends[0] + 1}, but {len(events) - 1 - ends[0]} events follow it")
    for i in ends[:1]:
        if (events[i].get("reason"), events[i].get("steps")) != (reason, steps):
            problems.append(
                f"event {i + 1} turn_end says ({_shown(events[i].get('reason'))}, {_shown(events[i].get('steps'))}), "
                f"the result says ({reason}, {steps})"
            )
    return problems


@dataclass
class _Batch:
    """The tool calls of the latest assistant_message event."""

    at: int
    """The assistant message's index in the transcript."""
    calls: list
    results: list[int]
    """The indexes of the message's tool results in the transcript."""
    executed: bool
    """Whether its calls run (stopReason toolUse) or are skipped."""
    waiting: _Waiting
    """The calls without their tool_start / tool_skipped yet."""


class _EventOrder:
    """The events in order against the transcript: each assistant message announced once, after the model event
    that carries it; its calls started (or skipped) in call order, each ended once, before the next request.
    (Each report is a `problems.append(...)`, as everywhere in this module: tests/test_hints.py reads them.)"""

    def __init__(self, events: list[dict], messages: list[dict], first: int) -> None:
        self.events, self.messages = events, messages
        self.assistants = [i for i in range(first, len(messages)) if messages[i].get("role") == "assistant"]
        self.seen_assistants = 0
        self.batch: _Batch | None = None
        self.running: dict[str, tuple[int, int]] = {}  # call id -> (its tool_start event, its position in the batch)
        self.problems: list[str] = []

    def check(self) -> list[str]:
        problems = self.problems
        for i, event in enumerate(self.events):
            kind = event.get("type")
            if kind == "model_event":
                self._model_event(i)
            elif kind == "assistant_message":
                self._assistant_message(i, event)
            elif kind in ("tool_start", "tool_skipped"):
                self._tool_start_or_skipped(i + 1, kind, event)
            elif kind == "tool_progress":
                if _field(event, "callId") not in self.running:
                    problems.append(f"event {i + 1} tool_progress names {_short_repr(event.get('callId'))}, "
                                    "which is not running")
            elif kind == "tool_end":
                self._tool_end(i + 1, event)
            elif kind != "turn_end":
                problems.append(f"event {i + 1} has an unknown type {_short_repr(kind)}")
        self._close_batch()
        if self.seen_assistants < len(self.assistants):
            problems.append(f"{len(self.assistants)} assistant messages were appended, but only "
                            f"{self.seen_assistants} assistant_message events were emitted")
        return self.problems

    def _model_event(self, i: int) -> None:
        problems = self.problems
        running = self.running
        if running and self.events[i - 1].get("type") != "model_event":
            names = ", ".join(itertools.islice(running, 3)) + (f" and {len(running) - 3} more" if len(running) > 3 else "")
            problems.append(f"event {i + 1} starts the next model request while {names} is still running")

    def _assistant_message(self, i: int, event: dict) -> None:
        problems = self.problems
        n, events, messages = i + 1, self.events, self.messages
        self._close_batch()
        self.seen_assistants += 1
        if self.seen_assistants > len(self.assistants):
            problems.append(f"event {n} assistant_message has no assistant message in the transcript")
            self.batch = None
            return
        at = self.assistants[self.seen_assistants - 1]
        if _key(event.get("message")) != _key(messages[at]):
            problems.append(f"event {n} assistant_message does not carry message {at + 1}, the assistant "
                            "message appended")
        before = events[i - 1].get("event") if i > 0 and events[i - 1].get("type") == "model_event" else None
        carried = before.get("message", before.get("error")) if isinstance(before, dict) else None
        if not isinstance(before, dict) or before.get("type") not in ("done", "error") \
                or _key(carried) != _key(event.get("message")):
            problems.append(f"event {n} assistant_message does not follow the done/error model event that "
                            "carries it")
        self.batch = _Batch(at, _calls(messages[at]), _results_of(messages, at),
                            messages[at].get("stopReason") == "toolUse", _Waiting(_calls(messages[at])))

    def _tool_start_or_skipped(self, n: int, kind: str, event: dict) -> None:
        problems = self.problems
        batch, result = self.batch, event.get("result")
        call_id = _field(event.get("call"), "id") if kind == "tool_start" else _field(result, "toolCallId")
        wanted = kind == "tool_start"
        if batch is None or batch.executed != wanted:
            stop_reason = None if batch is None else self.messages[batch.at].get("stopReason")
            problems.append(f"event {n} {kind} for {call_id}, but the latest assistant message "
                            f"(stopReason {_shown(stop_reason)}) does not {'run' if wanted else 'skip'} its calls")
            return
        next_one = batch.waiting.first()
        in_order = next_one is not None and batch.calls[next_one].get("id") == call_id
        position = next_one if in_order else batch.waiting.find(call_id)
        if position is None:
            problems.append(f"event {n} {kind} for {call_id}, which is no call of message {batch.at + 1} "
                            f"still waiting for one")
            return
        if not in_order:
            problems.append(f"event {n} {kind} for {call_id}, expected "
                            f"{_shown(batch.calls[next_one].get('id'))} next, in call order")
        batch.waiting.remove(position)
        if not wanted:
            self._compare_result(n, kind, position, result)
            return
        self.running[call_id] = (n, position)
        if _key(event.get("call")) != _key(batch.calls[position]):
            problems.append(f"event {n} tool_start does not carry call {call_id} as the assistant message holds it")

    def _tool_end(self, n: int, event: dict) -> None:
        problems = self.problems
        result = event.get("result")
        call_id = _field(result, "toolCallId")
        if call_id not in self.running:
            problems.append(f"event {n} tool_end for {call_id}, which is not running")
            return
        _, position = self.running.pop(call_id)
        self._compare_result(n, "tool_end", position, result)

    def _close_batch(self) -> None:
        """The batch is over: every call must have had its event, every tool its end."""
        problems = self.problems
        batch = self.batch
        if batch is None:
            return
        where = f"message {batch.at + 1}"
        missing = "never got a tool_start" if batch.executed else "has no tool_skipped event"
        for position in batch.waiting.left():
            problems.append(f"tool call {_name(batch.calls[position])} of {where} {missing}")
        for call_id, (started_at, _) in self.running.items():
            problems.append(f"tool {call_id} started (event {started_at}) but never ended")
        self.running.clear()

    def _compare_result(self, n: int, kind: str, position: int, carried: Any) -> None:
        problems = self.problems
        results = self.batch.results
        if position >= len(results):
            problems.append(f"event {n} {kind} carries a result for {_name(carried)} that is not in the "
                            "transcript")
        elif _key(carried) != _key(self.messages[results[position]]):
            problems.append(f"event {n} {kind} carries a different result from message {results[position] + 1}")


def _check_requests(requests: list[dict], messages: list[dict], first: int, steps: int,
                    system_prompt: str | None, definitions: list[dict] | None) -> list[str]:
    problems: list[str] = []
    if len(requests) != steps:
        problems.append(f"steps is {steps}, but {len(requests)} model requests were made")
    assistants = [i for i in range(first, len(messages)) if messages[i].get("role") == "assistant"]
    # Each message's key once, each request's messages compared one by one: the work is the size of the
    # record, never the number of requests times the transcript (a forged record of thousands of requests).
    keys: list[str] = []
    tools = _key(definitions) if definitions is not None else None
    for n, request in enumerate(requests, 1):
        if not isinstance(request, dict):
            problems.append(f"request {n} is {type(request).__name__}, not a request dict")
            continue
        seen = request.get("messages")
        if n <= len(assistants):
            answer = assistants[n - 1]  # the messages before its answer: messages[:answer]
            if isinstance(seen, list) and len(seen) == answer:
                while len(keys) < answer:
                    keys.append(_key(messages[len(keys)]))
                at = next((i for i, message in enumerate(seen, 1) if _key(message) != keys[i - 1]), None)
                if at is not None:
                    problems.append(f"request {n} saw message {at} other than the transcript holds it (of the "
                                    f"{answer} messages before its answer, message {answer + 1}): the "
                                    f"request did not carry this run's messages, or the message changed after it was sent")
            else:
                saw = f"{len(seen)} messages" if isinstance(seen, list) else _short_repr(seen)
                problems.append(f"request {n} saw {saw}, not the {answer} messages before "
                                f"its answer (message {answer + 1})")
        if system_prompt is not None and request.get("systemPrompt") != system_prompt:
            problems.append(f"request {n} has a different system prompt")
        if tools is not None and _key(request.get("tools")) != tools:
            problems.append(f"request {n} does not carry the registry's tool definitions")
        extra = sorted(str(key) for key in request if key not in ("systemPrompt", "messages", "tools"))
        if extra:
            problems.append(f"request {n} carries {', '.join(map(_short_repr, extra[:5]))} besides the chapter's "
                            "systemPrompt, messages and tools: the caller's context is not the request")
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
    max_steps: int | None = None,
    requests_without_signal: list[int] = (),
) -> list[str]:
    """Every promise the run broke, in plain words; [] when it kept them all.

    `input_messages` is a copy of the caller's messages taken before the run and
    `caller_messages_after` the caller's list after it; `requests` are the requests the model
    received (None when the model does not record them); `max_steps` the bound the run had;
    `requests_without_signal` the requests whose `stream()` was not handed the run's signal.
    """
    try:
        problems = _check_run(input_messages, messages, events, requests, reason, steps, caller_messages_after,
                              system_prompt, definitions, max_steps)
        return problems + signal_problems(requests_without_signal)
    except Exception as error:  # the arguments themselves are not lists, say: still a report
        return [f"the run could not be read: {type(error).__name__}: {_short_repr(str(error))}"]


def signal_problems(requests_without_signal: list[int]) -> list[str]:
    """The broken promise of each model request (numbered from 1) whose `stream()` lacked the run's signal."""
    return [f"request {_short_repr(n)}'s model.stream() was not handed the run's own signal (options.signal)"
            for n in requests_without_signal]


def _check_run(input_messages, messages, events, requests, reason, steps, caller_messages_after, system_prompt,
               definitions, max_steps) -> list[str]:
    # What a report prints of them must not recurse: a broken loop may return anything as reason or steps.
    reason = _shown(reason)
    steps = steps if isinstance(steps, int) else _short_repr(steps)
    max_steps = max_steps if max_steps is None or isinstance(max_steps, int) else None
    problems = [f"message {n} is {type(m).__name__}, not a message dict" for n, m in enumerate(messages, 1)
                if not isinstance(m, dict)]
    problems += [f"event {n} is {type(e).__name__}, not an event dict" for n, e in enumerate(events, 1)
                 if not isinstance(e, dict)]
    if problems:
        return problems  # nothing else can be read from such a run
    if caller_messages_after is not None and _key(caller_messages_after) != _key(input_messages):
        problems.append("the caller's context['messages'] was changed")
    if _key(messages[: len(input_messages)]) != _key(input_messages):
        problems.append("the transcript does not start with the input messages")
    first = len(input_messages)
    problems += _guarded("tool-call pairing", lambda: check_pairing(messages, first=first))
    problems += _guarded("the transcript", lambda: _check_transcript(messages, first, reason, steps, max_steps))
    problems += _guarded("the events", lambda: _check_events(events, messages, first, reason, steps))
    if requests is not None:
        problems += _guarded("the requests", lambda: _check_requests(requests, messages, first, steps, system_prompt,
                                                                     definitions))
    return problems


def _guarded(what: str, check: Callable[[], list[str]]) -> list[str]:
    """A check's reports; a run so broken that reading it fails is a report too, never an exception."""
    try:
        return check()
    except Exception as error:  # e.g. RecursionError formatting a value nested thousands deep
        return [f"{what} could not be read: {type(error).__name__}: {_short_repr(str(error))}"]
