"""The model side: model events and the stream a provider returns from `model.stream()`."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any, Literal, Protocol, TypedDict

from course.runtime.abort import AbortSignal
from course.runtime.messages import AssistantMessage, ToolCall, assistant_message, certainly_json, check_json


class StartEvent(TypedDict):
    type: Literal["start"]


class TextDeltaEvent(TypedDict):
    type: Literal["text_delta"]
    contentIndex: int
    delta: str


class ToolCallDeltaEvent(TypedDict):
    type: Literal["toolcall_delta"]
    contentIndex: int
    delta: str


class ToolCallEndEvent(TypedDict):
    type: Literal["toolcall_end"]
    contentIndex: int
    toolCall: ToolCall


class DoneEvent(TypedDict):
    type: Literal["done"]
    reason: Literal["stop", "toolUse", "length"]
    message: AssistantMessage


class ErrorEvent(TypedDict):
    type: Literal["error"]
    reason: Literal["error", "aborted"]
    error: AssistantMessage


ModelEvent = StartEvent | TextDeltaEvent | ToolCallDeltaEvent | ToolCallEndEvent | DoneEvent | ErrorEvent


class ModelRequest(TypedDict):
    systemPrompt: str
    messages: list[Any]
    tools: list[dict[str, Any]]


class Model(Protocol):
    def stream(self, request: ModelRequest, *, signal: AbortSignal | None = None) -> "AssistantMessageEventStream": ...


def error_event(reason: Literal["error", "aborted"], error_message: str, content: list | None = None) -> ErrorEvent:
    """The event that ends a failed stream, carrying an assistant message with `errorMessage`."""
    message = assistant_message(content or [], reason, error_message=error_message)
    return {"type": "error", "reason": reason, "error": message}


class AssistantMessageEventStream:
    """`async for event in stream` yields model events; `await stream.result()` gives the final message.

    Events come either from `push()` (a provider filling the stream from its own task) or, when a
    `source` async iterator is given, are pulled from it as the consumer asks. Either way the stream
    never raises: a source that fails or stops early ends it with an `error` event.
    """

    def __init__(self, source: AsyncIterator[ModelEvent] | None = None) -> None:
        self._source = source.__aiter__() if source is not None else None
        self._pulls = source is not None
        """Pulled from a source as the consumer asks, rather than filled by push()."""
        self._queue: deque[ModelEvent] = deque()
        self._final: AssistantMessage | None = None
        self._wakeup: asyncio.Future[None] | None = None

    def push(self, event: ModelEvent) -> None:
        """Add one event; `done` or `error` ends the stream and later pushes are ignored.

        The stream holds its provider to the contract here, once per event: something that is not a
        model event, or a final message that is not a well-formed assistant message, ends the stream
        with an `error` event saying so instead.
        """
        if self._final is not None:
            return
        self._queue.append(self._checked(event))
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    def _checked(self, event: object) -> ModelEvent:
        """`event` as the stream passes it on: a final event ends the stream (`_final`), and whatever
        breaks the contract is replaced by the `error` event that says so."""
        kind = event.get("type") if isinstance(event, dict) else None
        if kind == "done" or kind == "error":
            problem = assistant_problem(event.get("message" if kind == "done" else "error"))
            if problem is not None:
                event = error_event("error", problem)
            self._final = event["message" if event["type"] == "done" else "error"]
        elif not isinstance(kind, str):
            event = stream_failed(not_an_event(event))
            self._final = event["error"]
        return event

    async def _pushed(self) -> None:
        """Wait for the provider's next push."""
        self._wakeup = asyncio.get_running_loop().create_future()
        await self._wakeup

    async def _ended(self, event: object) -> ModelEvent:
        """The event that ends the stream (or breaks its contract), checked; the source is closed as soon
        as the answer is complete."""
        event = self._checked(event)
        if self._final is not None:
            await self._close_source()
        return event

    async def _close_source(self) -> None:
        # Closed here, once the answer is complete, rather than by the garbage collector: an async
        # generator left suspended costs a thread-safe callback and a clean-up task when collected.
        close = getattr(self._source, "aclose", None)
        self._source = None  # closed once, even if the answer's last step fails after it
        if close is None:
            return
        try:
            await close()
        except Exception:
            pass  # the answer is already complete; a provider's failing clean-up must not change it

    def __aiter__(self) -> "AssistantMessageEventStream":
        return self

    async def __anext__(self) -> ModelEvent:
        if self._queue:
            return self._queue.popleft()
        if self._final is not None:
            raise StopAsyncIteration
        if not self._pulls:
            while not self._queue:
                await self._pushed()
            return self._queue.popleft()
        # Pulled from the source as the consumer asks, read here: no queue and no second coroutine between.
        try:
            event = await self._source.__anext__()
        except StopAsyncIteration:
            event = error_event("error", "Model stream ended without a done or error event")
        except Exception as exc:  # a provider bug must end the stream, not the run
            event = error_event("error", str(exc) or type(exc).__name__)
        if type(event) is dict:  # most events: a plain dict whose type does not end the stream
            kind = event.get("type")
            if type(kind) is str and kind != "done" and kind != "error":
                return event
        return await self._ended(event)

    async def result(self) -> AssistantMessage:
        """The final assistant message (waits for, or pulls, the rest of the stream)."""
        if self._final is not None:
            return self._final  # the usual case: read after the stream was iterated to its end
        if not self._pulls:
            while self._final is None:
                await self._pushed()
            return self._final
        pulled: list[ModelEvent] = []
        try:
            while self._final is None:
                pulled.append(await self.__anext__())  # queued events first, so their order is kept
        finally:
            self._queue.extend(pulled)  # still to be iterated, in order, even if this was cancelled
        return self._final


_STOP_REASONS = ("stop", "toolUse", "length", "error", "aborted")


def assistant_problem(message: object) -> str | None:
    """What makes `message` not a well-formed assistant message, or None."""
    if _certainly_well_formed(message):
        return None  # the common case, decided in one pass
    return _assistant_problem_in_full(message)


def _certainly_well_formed(message: object) -> bool:
    """True if `message` is certainly a well-formed assistant message a transcript may hold, seen in one
    pass: an exact dict whose blocks have exactly their own fields and whose values are plain JSON.
    False leaves it to the full check, which decides and says why."""
    if type(message) is not dict or message.get("role") != "assistant" or message.get("stopReason") not in _STOP_REASONS:
        return False
    content = message.get("content")
    if type(content) is not list:
        return False
    for key, value in message.items():  # role and stopReason are checked above, content below
        if key != "content" and key != "role" and key != "stopReason" and not (
                type(key) is str and key.isascii() and certainly_json(value, 2)):
            return False
    for block in content:
        if type(block) is not dict:
            return False
        kind = block.get("type")
        if kind == "text":
            if len(block) != 2 or not (type(block.get("text")) is str and certainly_json(block["text"], 3)):
                return False
        elif kind == "toolCall":
            if len(block) != 4:
                return False  # argumentsError, argumentsText or fields of its own: the full check
            id_, name, arguments = block.get("id"), block.get("name"), block.get("arguments")
            if type(id_) is not str or type(name) is not str or type(arguments) is not dict \
                    or not (id_.isascii() and name.isascii() and certainly_json(arguments, 4)):
                return False
        else:
            return False
    return True


def _assistant_problem_in_full(message: object) -> str | None:
    if not isinstance(message, dict) or message.get("role") != "assistant":
        return f"Model returned {type(message).__name__} instead of an assistant message"
    if message.get("stopReason") not in _STOP_REASONS:
        return f"Model returned an unknown stopReason {message.get('stopReason')!r}"
    content = message.get("content")
    if not isinstance(content, list):
        return "Model returned an assistant message whose content is not a list"
    for index, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            continue
        if kind == "toolCall" and isinstance(block.get("id"), str) and isinstance(block.get("name"), str) \
                and isinstance(block.get("arguments"), dict) \
                and isinstance(block.get("argumentsError", ""), str) and isinstance(block.get("argumentsText", ""), str):
            continue
        return f"Model returned a malformed content block at index {index}"
    try:
        check_json(message)  # the transcript must stay JSON every provider and terminal accepts
    except (TypeError, ValueError) as error:
        return f"Model returned a message that is not JSON: {error}"
    return None


def not_an_event(event: object) -> str:
    return f"the stream yielded {event!r:.80}, which is not a model event"


def stream_failed(why: str) -> ErrorEvent:
    return error_event("error", f"Model stream failed: {why}")


def guard_stream(open_stream: Callable[[], AssistantMessageEventStream]) -> AssistantMessageEventStream:
    """Hold a provider to the stream contract whatever it does.

    `open_stream()` raising, its iteration raising or yielding something that is not an event,
    its `result()` raising or returning something that is not an assistant message: each ends the
    returned stream with an `error` event whose message has `stopReason: "error"` and an
    `errorMessage`. Cancellation is never caught.
    """
    try:
        stream = open_stream()
    except Exception as exc:
        failed = AssistantMessageEventStream()
        failed.push(stream_failed(str(exc) or type(exc).__name__))
        return failed
    if type(stream) in CHECKED_STREAMS:
        return stream  # checks every event itself and never raises: no second layer needed
    return _ForeignStream(stream)


CHECKED_STREAMS: set[type] = {AssistantMessageEventStream}
"""The runtime's own stream classes, exactly (not their subclasses): each holds its events to the contract
itself, so guard_stream passes them through as they are."""


class _ForeignStream(AssistantMessageEventStream):
    """Any other object that claims to be a stream, read through one layer: its `result()` is the answer.

    Each event it yields is checked as `push` checks it, and so is the final message. Its iterator is
    closed as soon as the answer is complete (the final event, the end, a failure, or a non-event),
    never left suspended for the garbage collector.
    """

    def __init__(self, stream: object) -> None:
        super().__init__()
        self._pulls = True
        self._stream = stream
        self._events: AsyncIterator[ModelEvent] | None = None

    async def __anext__(self) -> ModelEvent:
        if self._queue:
            return self._queue.popleft()
        if self._final is not None:
            raise StopAsyncIteration
        try:
            events = self._events
            if events is None:
                if not hasattr(type(self._stream), "__aiter__"):
                    raise TypeError(f"'async for' requires an object with __aiter__ method, "
                                    f"got {type(self._stream).__name__}")
                events = self._events = self._source = self._stream.__aiter__()
            try:
                event = await events.__anext__()
            except StopAsyncIteration:
                event = None
            if type(event) is dict:  # most events: a plain dict whose type does not end the stream
                kind = event.get("type")
                if type(kind) is str and kind != "done" and kind != "error":
                    return event
            return await self._last(event)
        except Exception as exc:
            await self._close_source()
            return self._checked(stream_failed(str(exc) or type(exc).__name__))

    async def _last(self, event: object) -> ModelEvent:
        """After an event that is not an ordinary one (the final event, the end, or a non-event): the
        stream's `result()` is the answer."""
        if event is not None and not (isinstance(event, dict) and event.get("type") in ("done", "error")):
            return await self._ended(event)  # ends the stream itself if `event` is not a model event
        await self._close_source()
        message = await self._stream.result()
        if event is not None and (event.get("message") or event.get("error")) is message:
            return self._checked(event)
        reason = message.get("stopReason") if isinstance(message, dict) else None
        if reason in ("error", "aborted"):
            return self._checked({"type": "error", "reason": reason, "error": message})
        return self._checked({"type": "done", "reason": reason, "message": message})
