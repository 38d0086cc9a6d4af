"""ScriptedModel: an offline model that answers from a script, for tests and the demo."""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Union

from course.runtime.abort import AbortSignal
from course.runtime.clock import now
from course.runtime.messages import AssistantMessage, StopReason, TextContent, ToolCall, assistant_message, encoding_function
from course.runtime.stream import AssistantMessageEventStream, ModelEvent, ModelRequest, error_event

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
        return AssistantMessageEventStream(self._answer(index, request, signal))

    async def _answer(self, index: int, request: ModelRequest, signal: AbortSignal | None) -> AsyncIterator[ModelEvent]:
        if signal is not None and signal.aborted:
            yield error_event("aborted", "Request was aborted")
            return
        if index >= len(self.responses):
            yield error_event("error", f"ScriptedModel has no response for request {index + 1}")
            return
        response = self.responses[index]
        if callable(response):
            response = response(request)  # read-only: it is the loop's own list
            if type(response) is not dict and inspect.isawaitable(response):
                response = await response
            # Built for this request: a shallow copy keeps the stamp off the function's object, and a deep
            # copy per step would be most of a benchmark step's cost.
            message: AssistantMessage = response.copy() if type(response) is dict else copy.copy(response)
        else:
            message = copy.deepcopy(response)  # a template, possibly reused: the transcript gets its own
        message["timestamp"] = now()

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
