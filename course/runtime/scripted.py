"""ScriptedModel: an offline model that answers from a script, for tests and the demo."""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Awaitable, Callable, Iterator
from typing import Union

from course.runtime.abort import AbortSignal
from course.runtime.clock import now
from course.runtime.messages import AssistantMessage, StopReason, TextContent, ToolCall, assistant_message, encoding_function
from course.runtime.stream import (
    CHECKED_STREAMS, AssistantMessageEventStream, ModelEvent, ModelRequest, error_event,
)

Response = Union[AssistantMessage, Callable[[ModelRequest], AssistantMessage | Awaitable[AssistantMessage]]]


# The streamed arguments' text, as a provider sends it; one encoder built once, not one per call.
compact_json = encoding_function(json.JSONEncoder(ensure_ascii=False, separators=(",", ":")))


# The timestamp of an answer written before the run: the model stamps the real one when it streams it.
UNSTAMPED = 0


def answer(content: list[TextContent | ToolCall], stop_reason: StopReason, *,
           error_message: str | None = None) -> AssistantMessage:
    """A scripted answer, built before the run without reading the clock: `ScriptedModel` stamps
    it when it streams it, so a transcript's timestamps follow the run alone (the chapter's README
    round trip reads user 1, assistant 2, toolResult 3, assistant 4)."""
    return assistant_message(content, stop_reason, error_message=error_message, timestamp=UNSTAMPED)


class ScriptedModel:
    """Answers the n-th request with the n-th scripted response.

    A response is an assistant message (a template: the model stamps its timestamp on a deep copy
    when it answers) or a function of the request returning one (stamped on a shallow copy, so its
    content blocks go into the transcript as the function built them). Each request is kept as a
    deep copy in `requests` unless `record_requests=False` (benchmarks, where copying would dominate).
    """

    def __init__(self, responses: list[Response], *, record_requests: bool = True) -> None:
        self.responses = list(responses)
        self.requests: list[ModelRequest] = []
        self.request_count = 0
        self._record = record_requests

    def stream(self, request: ModelRequest, *, signal: AbortSignal | None = None) -> AssistantMessageEventStream:
        index = self.request_count
        self.request_count += 1
        if self._record:
            self.requests.append(copy.deepcopy(request))
        return _ScriptedStream(self, index, request, signal)


def scripted_events(message: AssistantMessage, signal: AbortSignal | None) -> Iterator[ModelEvent]:
    """The events a provider would stream for `message`, block by block, watching `signal` between them."""
    yield {"type": "start"}
    streamed = 0
    for block in message["content"]:
        if signal is not None and signal.aborted:
            break
        if block["type"] == "text":
            yield {"type": "text_delta", "contentIndex": streamed, "delta": block["text"]}
        elif block["type"] == "toolCall":
            yield {"type": "toolcall_delta", "contentIndex": streamed, "delta": compact_json(block["arguments"])}
            yield {"type": "toolcall_end", "contentIndex": streamed, "toolCall": block}
        streamed += 1

    if signal is not None and signal.aborted:
        # Like a provider: an aborted answer keeps what was fully streamed before the abort.
        yield error_event("aborted", "Request was aborted", message["content"][:streamed])
    elif message["stopReason"] in ("error", "aborted"):
        yield {"type": "error", "reason": message["stopReason"], "error": message}
    else:
        yield {"type": "done", "reason": message["stopReason"], "message": message}


class _ScriptedStream(AssistantMessageEventStream):
    """A scripted answer's stream: the answer is made on the first read, its events by a plain generator
    as the consumer asks (an async generator per answer would cost more than streaming it)."""

    def __init__(self, model: ScriptedModel, index: int, request: ModelRequest, signal: AbortSignal | None) -> None:
        super().__init__()
        self._pulls = True
        self._model, self._index, self._request, self._signal = model, index, request, signal
        self._events: Iterator[ModelEvent] | None = None

    async def __anext__(self) -> ModelEvent:
        if self._queue:
            return self._queue.popleft()
        if self._final is not None:
            raise StopAsyncIteration
        return self._next() if self._events is not None else await self._first()

    async def _first(self) -> ModelEvent:
        """The first event: the answer is made (and awaited, if its function is async) on the first read,
        and stamped now."""
        signal, responses = self._signal, self._model.responses
        if signal is not None and signal.aborted:
            return self._checked(error_event("aborted", "Request was aborted"))
        if self._index >= len(responses):
            return self._checked(error_event("error", f"ScriptedModel has no response for request {self._index + 1}"))
        response = responses[self._index]
        try:
            if callable(response):
                response = response(self._request)  # read-only: it is the loop's own list
                if type(response) is not dict and inspect.isawaitable(response):
                    response = await response
                # Built for this request: a shallow copy keeps the stamp off the function's object, and a
                # deep copy per step would be most of a benchmark step's cost.
                message: AssistantMessage = response.copy() if type(response) is dict else copy.copy(response)
            else:
                message = copy.deepcopy(response)  # a template, possibly reused: the transcript gets its own
            message["timestamp"] = now()
        except Exception as exc:  # a scripted function that raised: the answer ends in error, like a provider's
            return self._checked(error_event("error", str(exc) or type(exc).__name__))
        self._events = scripted_events(message, signal)
        return self._next()

    def _next(self) -> ModelEvent:
        try:
            event = next(self._events)
        except Exception as exc:  # a message the model cannot stream (a malformed block): an error, checked
            return self._checked(error_event("error", str(exc) or type(exc).__name__))
        kind = event["type"]
        if kind != "done" and kind != "error":
            return event
        return self._checked(event)


CHECKED_STREAMS.add(_ScriptedStream)
