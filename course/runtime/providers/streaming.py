"""What both providers share: the message a stream is building, abort racing, and the stream's end.

`SDKModel.stream()` opens the SDK's stream and hands each item to the provider's reader, which
turns it into model events through a `Draft`; every network step is awaited through an
`AbortRace`. `provider_stream` holds all of it to the stream contract: whatever the HTTP client
raises becomes an `error` end, an aborted signal an `aborted` end, and the end event is sent only
once the SDK stream is closed.
"""

from __future__ import annotations

import asyncio
import copy
import importlib
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from course.runtime.abort import AbortSignal
from course.runtime.clock import now
from course.runtime.messages import AssistantMessage, StopReason, TextContent, ToolCall, assistant_message
from course.runtime.stream import AssistantMessageEventStream, ErrorEvent, ModelEvent, ModelRequest

ABORTED = "Request was aborted"
INSTALL_HINT = "the providers need the official SDKs: pip install -e '.[providers]'"
T = TypeVar("T")


def parse_arguments(raw: str) -> dict[str, Any]:
    """Tool-call arguments as far as they parse.

    A stream cut short (a `length` stop) keeps what parses, less a string cut short:
    `{"a": 1, "b": "x` gives `{"a": 1}`. Text that is not a JSON object, even in part, gives `{}`;
    it never raises.
    """
    if not raw.strip():
        return {}
    import jiter  # comes with the providers extra, like the SDKs (see `sdk` below)

    try:
        value = jiter.from_json(raw.encode(), partial_mode=True)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class Draft:
    """The assistant message a provider stream is building, and the model event each piece makes.

    A tool call joins `content` when its block ends (with `toolcall_end`); one still streaming when
    the stream fails is left out, so every tool call in a message has had its `toolcall_end`.
    """

    def __init__(self) -> None:
        self.timestamp = now()
        self.content: list[TextContent | ToolCall] = []
        self._text_open = False
        self._call: ToolCall | None = None
        self._call_key: object = None
        self._raw_arguments = ""

    def text(self, delta: str) -> list[ModelEvent]:
        """A piece of text: it continues the text block being streamed, or starts one."""
        if not delta:
            return []
        events = self._end_call()
        if not self._text_open:
            self.content.append({"type": "text", "text": ""})
            self._text_open = True
        block = self.content[-1]
        block["text"] += delta
        return events + [{"type": "text_delta", "contentIndex": len(self.content) - 1, "delta": delta}]

    def tool_call(self, key: object, *, id: str | None = None, name: str | None = None,
                  arguments: str | None = None) -> list[ModelEvent]:
        """A piece of the tool call the provider calls `key`; its id and name come with the first piece."""
        events: list[ModelEvent] = []
        if self._call is None or key != self._call_key:
            events += self.end_block()
            self._call = {"type": "toolCall", "id": "", "name": "", "arguments": {}}
            self._call_key = key
            self._raw_arguments = ""
        if id and not self._call["id"]:
            self._call["id"] = id
        if name and not self._call["name"]:
            self._call["name"] = name
        if arguments:
            self._raw_arguments += arguments
            events.append({"type": "toolcall_delta", "contentIndex": len(self.content), "delta": arguments})
        return events

    def end_block(self) -> list[ModelEvent]:
        """The block being streamed is complete: a tool call gets its parsed arguments and `toolcall_end`."""
        self._text_open = False
        return self._end_call()

    def _end_call(self) -> list[ModelEvent]:
        call, self._call = self._call, None
        if call is None:
            return []
        call["arguments"] = parse_arguments(self._raw_arguments)
        if not call["id"]:  # a few OpenAI-compatible servers send none; the transcript needs one to pair results
            call["id"] = f"call_{uuid.uuid4().hex[:12]}"
        self.content.append(call)
        return [{"type": "toolcall_end", "contentIndex": len(self.content) - 1, "toolCall": call}]

    def done(self, stop_reason: Literal["stop", "toolUse", "length"]) -> list[ModelEvent]:
        """The provider finished normally: close the open block and end with `done`."""
        return self.end_block() + [{"type": "done", "reason": stop_reason, "message": self._message(stop_reason)}]

    def failed(self, reason: StopReason, error_message: str) -> ErrorEvent:
        """The stream broke off: end with what was complete (and any text) and the reason in `errorMessage`."""
        self._call = None
        return {"type": "error", "reason": reason, "error": self._message(reason, error_message)}

    def refused(self, error_message: str) -> list[ModelEvent]:
        """The provider ended normally but withheld the answer (a content filter, a refusal)."""
        return self.end_block() + [self.failed("error", error_message)]

    def _message(self, stop_reason: StopReason, error_message: str | None = None) -> AssistantMessage:
        return assistant_message(self.content, stop_reason, error_message=error_message, timestamp=self.timestamp)


class Aborted(Exception):
    """The abort signal fired while a network step was awaited."""


class AbortRace:
    """Awaits one network step at a time and gives it up as soon as the signal is aborted.

    Giving up cancels the step (the HTTP client then drops the connection) and raises `Aborted`;
    the provider's `finally` closes the stream it had opened. Without a signal a step is simply awaited.
    """

    def __init__(self, signal: AbortSignal | None) -> None:
        self._signal = signal
        self._aborted: asyncio.Future[Any] | None = None

    async def __call__(self, step: Awaitable[T]) -> T:
        if self._signal is None:
            return await step
        if self._signal.aborted:
            if asyncio.iscoroutine(step):
                step.close()  # never started: close it so it does not warn about never being awaited
            raise Aborted
        if self._aborted is None:
            self._aborted = asyncio.ensure_future(self._signal.wait())
        work = asyncio.ensure_future(step)
        try:
            await asyncio.wait({work, self._aborted}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not work.done():
                work.cancel()
        if work.done() and not work.cancelled():
            # A step that finished as the signal fired still counts: what it opened must be closed by the
            # caller's `finally`, and the next step sees the abort.
            return work.result()
        await asyncio.wait({work})  # let the cancelled step unwind before the stream is closed
        raise Aborted

    async def next(self, items: AsyncIterator[T]) -> T | None:
        """The iterator's next item, or None at its end."""
        async def pull() -> T | None:
            try:
                return await items.__anext__()
            except StopAsyncIteration:
                return None
        return await self(pull())

    def close(self) -> None:
        if self._aborted is not None and not self._aborted.done():
            self._aborted.cancel()


def sdk(name: str) -> Any:
    """The SDK module `name`, imported on first use.

    Importing the SDKs takes seconds; done lazily, collecting the test suite (or running one chapter)
    never pays for it, and the mapping functions work without the providers extra.
    """
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ImportError(f"{name} is not installed: {INSTALL_HINT}") from exc


def as_dict(item: Any) -> dict[str, Any]:
    """An SDK stream item as the JSON the server sent (the SDKs build their models without validating)."""
    if isinstance(item, dict):
        return item
    return item.to_dict(warnings=False)


def describe_error(exc: BaseException) -> str:
    """The exception's own words, plus its cause's (the SDKs wrap `httpx` errors in vaguer ones)."""
    message = str(exc) or type(exc).__name__
    if not str(exc) and "Timeout" in type(exc).__name__:  # httpx's timeouts have no words of their own
        message = f"Request timed out ({type(exc).__name__})"
    if isinstance(exc, json.JSONDecodeError):  # the SDKs let it through from an event's data line
        message = f"Malformed server-sent event: {message}"
    cause = exc.__cause__
    if cause is not None and str(cause) and str(cause) not in message:
        message = f"{message} ({str(cause)})"
    return message


async def read_sdk_stream(opening: Awaitable[Any], reader: Any, race: AbortRace) -> AsyncIterator[ModelEvent]:
    """Open an SDK stream, then hand each item to `reader` (`.read(item)`, `.end()` give model events).

    The SDK stream is closed whatever happens, before the end event leaves `provider_stream`.
    """
    items = await race(opening)
    try:
        yield {"type": "start"}
        while (item := await race.next(items)) is not None:
            for event in reader.read(as_dict(item)):
                yield event
        for event in reader.end():
            yield event
    finally:
        await items.close()


@dataclass(kw_only=True)
class SDKModel:
    """What both providers' models share: the SDK's HTTP settings, request recording, and `stream()`.

    A model sets `client` in `__post_init__` and says how to open its SDK stream (`_open`) and how
    to read it (`_reader`).
    """

    timeout: float = 60.0
    """Seconds the HTTP client waits to connect, and between reads of the stream."""
    max_retries: int = 2
    """How often the SDK retries a failed request (connection errors, 408/429/5xx) before giving up."""
    http_client: Any = None
    """Your own HTTP client for the SDK, e.g. `openai.DefaultAsyncHttpxClient(proxy=...)`; default the SDK's."""
    record_requests: bool = False
    """Keep a deep copy of every request in `requests`, as ScriptedModel does (the harness checks them)."""
    requests: list[ModelRequest] = field(default_factory=list, init=False, repr=False)
    client: Any = field(default=None, init=False, repr=False)

    def _http_settings(self) -> dict[str, Any]:
        return {"timeout": self.timeout, "max_retries": self.max_retries, "http_client": self.http_client}

    def _open(self, request: ModelRequest) -> Awaitable[Any]:
        raise NotImplementedError

    def _reader(self, draft: Draft) -> Any:
        raise NotImplementedError

    def stream(self, request: ModelRequest, *, signal: AbortSignal | None = None) -> AssistantMessageEventStream:
        if self.record_requests:
            self.requests.append(copy.deepcopy(request))
        return provider_stream(lambda draft, race: read_sdk_stream(self._open(request), self._reader(draft), race),
                               signal)

    async def aclose(self) -> None:
        """Close the HTTP client's connections."""
        await self.client.close()


ProviderEvents = Callable[[Draft, AbortRace], AsyncIterator[ModelEvent]]


def provider_stream(events: ProviderEvents, signal: AbortSignal | None) -> AssistantMessageEventStream:
    """The stream `model.stream()` returns: pulls `events` as the consumer asks and never raises."""

    async def run() -> AsyncIterator[ModelEvent]:
        draft = Draft()
        race = AbortRace(signal)
        end: ModelEvent | None = None
        try:
            async for event in events(draft, race):
                if event["type"] in ("done", "error"):
                    end = event  # held back until the generator has finished and closed its HTTP stream
                else:
                    yield event
        except Aborted:
            end = draft.failed("aborted", ABORTED)
        except Exception as exc:  # HTTP errors, timeouts, broken SSE: all end the stream, never the run
            end = draft.failed("error", describe_error(exc))
        finally:
            race.close()
        yield end if end is not None else draft.failed("error", "Provider stream ended without a stop reason")

    return AssistantMessageEventStream(run())
