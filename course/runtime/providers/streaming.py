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
import datetime
import email.utils
import functools
import html
import importlib
import json
import math
import re
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from course.runtime.abort import AbortSignal
from course.runtime.clock import now
from course.runtime.messages import (
    MAX_DEPTH, AssistantMessage, StopReason, TextContent, ToolCall, assistant_message, strict_json, utf8_text,
)
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


def final_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    """A finished tool call's arguments: `(the object, None)`, or `({}, why)` when `raw` is not one.

    Only a complete JSON object counts (an empty text is `{}`, as servers send for a tool without
    parameters): text that is not JSON, JSON cut short, a JSON value that is not an object, NaN or
    Infinity, a string that is not UTF-8 or nesting deeper than MAX_DEPTH each give the reason, briefly.
    Unlike `parse_arguments` (what a preview may show), nothing partial is ever kept.
    """
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw, parse_constant=_no_constant)
    except RecursionError:
        return {}, f"it is nested deeper than {MAX_DEPTH} levels"
    except json.JSONDecodeError as error:
        if error.msg != "Extra data" and (error.pos >= len(raw.rstrip()) or _a_beginning(raw)):
            return {}, "cut short before its JSON ended"
        return {}, f"{error.msg} at character {error.pos + 1}"
    except ValueError as error:  # NaN / Infinity, or an integer too long to read
        return {}, str(error)
    if not isinstance(value, dict):
        return {}, f"a JSON {_JSON_KINDS.get(type(value), type(value).__name__)}, not an object"
    try:
        strict_json(value)
    except (TypeError, ValueError) as error:
        return {}, str(error)
    return value, None


_JSON_KINDS = {list: "array", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}


def _a_beginning(raw: str) -> bool:
    """Whether `raw` is the start of some JSON text (what a stream cut short leaves)."""
    import jiter

    try:
        jiter.from_json(raw.encode(), partial_mode="trailing-strings")
    except ValueError:
        return False
    return True


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


NAMELESS = "call_sent_without_a_name"
"""The name a tool call the model sent without one is given. Both APIs refuse an empty name in the
transcript sent back, and dropping the call would hide the model's mistake from it (and leave deltas
already streamed without their call): kept under this name, the call is answered by the executor's
`Tool call_sent_without_a_name not found` and the conversation goes on with the model told."""


def as_text(value: Any) -> str | None:
    """A tool call's id or name as text: a number a server sent becomes its digits; anything else that
    is not text counts as not sent."""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return None


def _whole_characters(held: str, piece: str) -> tuple[str, str]:
    """`held + piece` up to its last whole character, as UTF-8 text, and a trailing high surrogate held back.

    A server may cut a character outside the BMP between its UTF-16 halves, one JSON escape in each piece:
    the high half waits for the next piece, and two halves that meet are one character. A half left alone
    is written as its escape (`utf8_text`).
    """
    piece = held + piece
    held = ""
    if "\ud800" <= piece[-1] <= "\udbff":
        piece, held = piece[:-1], piece[-1]
    try:
        piece.encode("utf-8")
    except UnicodeEncodeError:
        piece = utf8_text(piece.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass"))
    return piece, held


class _OpenCall:
    """A tool call still streaming: what its pieces said so far."""

    __slots__ = ("index", "id", "name", "parts", "held", "whole")

    def __init__(self, index: int) -> None:
        self.index = index  # its place in `content` once it ends
        self.id: str | None = None
        self.name: str | None = None
        # Its argument pieces, joined when it ends: appending to a string kept in an attribute copies it
        # each time (quadratic in its length).
        self.parts: list[str] = []
        self.held = ""  # a high surrogate waiting for its other half (see _whole_characters)
        self.whole: Any = None  # arguments the server gave whole rather than in pieces (Anthropic's `input`)


class Draft:
    """The assistant message a provider stream is building, and the model event each piece makes.

    A tool call joins `content` when its block ends (with `toolcall_end`); one still streaming when
    the stream fails is left out, so every tool call in a message has had its `toolcall_end`. Several
    calls may stream at once (a server may interleave their pieces): they end together, in the order
    they began, when text follows them or the answer ends.
    """

    def __init__(self) -> None:
        self.timestamp = now()
        self.content: list[TextContent | ToolCall] = []
        self._text_open = False
        # The pieces of the open text block, joined when it ends (see _OpenCall.parts).
        self._text_parts: list[str] = []
        self._text_held = ""  # a high surrogate waiting for its other half (see _whole_characters)
        self._calls: dict[object, _OpenCall] = {}  # the calls still streaming, by the provider's key

    def text(self, delta: str) -> list[ModelEvent]:
        """A piece of text: it continues the text block being streamed, or starts one."""
        if not delta:
            return []
        # A lone surrogate from the server must not make the transcript unsendable.
        delta, self._text_held = _whole_characters(self._text_held, delta)
        events = self._end_calls()
        if not self._text_open:
            self.content.append({"type": "text", "text": ""})
            self._text_open = True
        if not delta:
            return events
        self._text_parts.append(delta)
        return events + [{"type": "text_delta", "contentIndex": len(self.content) - 1, "delta": delta}]

    def tool_call(self, key: object, *, id: Any = None, name: Any = None, arguments: str | None = None,
                  whole: Any = None) -> list[ModelEvent]:
        """A piece of the tool call the provider calls `key` (a new key starts a call); its id and name
        come with the first piece that has them (see `as_text`). `whole` is arguments given whole, used if
        no piece brings any."""
        events: list[ModelEvent] = []
        call = self._calls.get(key)
        if call is None:
            events += self._close_text()
            call = self._calls[key] = _OpenCall(len(self.content) + len(self._calls))
        if not call.id:
            call.id = as_text(id)
        if not call.name:
            call.name = as_text(name)
        if whole is not None:
            call.whole = whole
        if arguments:
            arguments, call.held = _whole_characters(call.held, arguments)
            if arguments:
                call.parts.append(arguments)
                events.append({"type": "toolcall_delta", "contentIndex": call.index, "delta": arguments})
        return events

    def end_block(self) -> list[ModelEvent]:
        """The block being streamed is complete: a tool call gets its arguments and `toolcall_end`.

        Arguments that are not a complete JSON object leave the call with `arguments` `{}`, `argumentsError`
        (why) and `argumentsText` (what the model wrote): the executor answers it with an error result and
        the next request sends the text back as it was written.
        """
        return self._close_text() + self._end_calls()

    def _close_text(self) -> list[ModelEvent]:
        if not self._text_open:
            return []
        events: list[ModelEvent] = []
        if self._text_held:  # half a character ends the block: its escape
            self._text_parts.append(utf8_text(self._text_held))
            events.append({"type": "text_delta", "contentIndex": len(self.content) - 1, "delta": self._text_parts[-1]})
        self.content[-1]["text"] = "".join(self._text_parts)
        self._text_open, self._text_parts, self._text_held = False, [], ""
        return events

    def _end_calls(self) -> list[ModelEvent]:
        events: list[ModelEvent] = []
        calls, self._calls = self._calls, {}
        for call in calls.values():
            events += self._end_call(call)
        return events

    def _end_call(self, open_call: _OpenCall) -> list[ModelEvent]:
        events: list[ModelEvent] = []
        if open_call.held:  # half a character ends the arguments: its escape
            open_call.parts.append(utf8_text(open_call.held))
            events.append({"type": "toolcall_delta", "contentIndex": open_call.index, "delta": open_call.parts[-1]})
        if not open_call.parts and open_call.whole not in (None, {}):
            # Given whole (no input deltas followed): the same JSON text a delta would have brought.
            open_call.parts.append(json.dumps(open_call.whole, ensure_ascii=False))
            events.append({"type": "toolcall_delta", "contentIndex": open_call.index, "delta": open_call.parts[0]})
        raw = "".join(open_call.parts)
        call: ToolCall = {"type": "toolCall", "id": open_call.id or "", "name": open_call.name or NAMELESS,
                          "arguments": {}}
        call["arguments"], error = final_arguments(raw)
        if error is not None:
            call["argumentsError"] = error
            call["argumentsText"] = raw
        # A few OpenAI-compatible servers send no id, or one id for two calls: each result in the transcript
        # must answer exactly one call, so such a call gets an id of its own.
        if not call["id"] or any(block["type"] == "toolCall" and block["id"] == call["id"] for block in self.content):
            call["id"] = f"call_{uuid.uuid4().hex[:12]}"
        self.content.append(call)
        return events + [{"type": "toolcall_end", "contentIndex": len(self.content) - 1, "toolCall": call}]

    def done(self, stop_reason: Literal["stop", "toolUse", "length"], said: str = "") -> list[ModelEvent]:
        """The provider finished normally (`said` is how its API put it): close the open block and end with `done`.

        A `toolUse` answer without a tool call ends as an error instead: the loop has nothing to run and
        nothing to send back, and would end without saying why.
        """
        events = self.end_block()
        if stop_reason == "toolUse" and not any(block["type"] == "toolCall" for block in self.content):
            return events + [self.failed("error", f"The model asked to use tools ({said or stop_reason}) but sent no "
                                                  "tool call")]
        return events + [{"type": "done", "reason": stop_reason, "message": self._message(stop_reason)}]

    def failed(self, reason: StopReason, error_message: str) -> ErrorEvent:
        """The stream broke off: end with what was complete (and any text) and the reason in `errorMessage`."""
        self._calls = {}
        return {"type": "error", "reason": reason, "error": self._message(reason, error_message)}

    def refused(self, error_message: str) -> list[ModelEvent]:
        """The provider ended normally but withheld the answer (a content filter, a refusal)."""
        return self.end_block() + [self.failed("error", error_message)]

    def _message(self, stop_reason: StopReason, error_message: str | None = None) -> AssistantMessage:
        # Done and refused have closed the text already; on a failure a held half goes into the text as its
        # escape without a delta, as no event may follow the end.
        self._close_text()
        return assistant_message(self.content, stop_reason, error_message=error_message, timestamp=self.timestamp)


class Aborted(Exception):
    """The abort signal fired while a network step (or a wait before a retry) was awaited."""


class OverBudget(Exception):
    """The request's time budget ran out while a step was awaited."""


class AbortRace:
    """Awaits one network step at a time and gives it up as soon as the signal is aborted or the
    request's deadline (event-loop time) passes.

    Giving up cancels the step (the HTTP client then drops the connection) and raises `Aborted` or
    `OverBudget`; the provider's `finally` closes the stream it had opened. Without a signal and a
    deadline a step is simply awaited.
    """

    def __init__(self, signal: AbortSignal | None, deadline: float | None = None) -> None:
        self._signal = signal
        self._deadline = deadline
        self._aborted: asyncio.Future[Any] | None = None

    async def __call__(self, step: Awaitable[T]) -> T:
        if self._signal is None and self._deadline is None:
            return await step
        left = None if self._deadline is None else self._deadline - asyncio.get_running_loop().time()
        if (self._signal is not None and self._signal.aborted) or (left is not None and left <= 0):
            if asyncio.iscoroutine(step):
                step.close()  # never started: close it so it does not warn about never being awaited
            raise Aborted if self._signal is not None and self._signal.aborted else OverBudget
        waiting = {work := asyncio.ensure_future(step)}
        if self._signal is not None:
            if self._aborted is None:
                self._aborted = asyncio.ensure_future(self._signal.wait())
            waiting.add(self._aborted)
        try:
            await asyncio.wait(waiting, timeout=left, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not work.done():
                work.cancel()
        if work.done() and not work.cancelled():
            # A step that finished as the signal fired still counts: what it opened must be closed by the
            # caller's `finally`, and the next step sees the abort.
            return work.result()
        await asyncio.wait({work})  # let the cancelled step unwind before the stream is closed
        raise Aborted if self._signal is not None and self._signal.aborted else OverBudget

    def seconds_left(self) -> float | None:
        return None if self._deadline is None else self._deadline - asyncio.get_running_loop().time()

    async def next(self, items: AsyncIterator[T]) -> T | object:
        """The iterator's next item, or END at its end (an item may be None: an event whose data is `null`)."""
        async def pull() -> T | object:
            try:
                return await items.__anext__()
            except StopAsyncIteration:
                return END
        return await self(pull())

    def close(self) -> None:
        if self._aborted is not None and not self._aborted.done():
            self._aborted.cancel()


END = object()
"""What `AbortRace.next` gives at the end of the items."""


class GaveUp(Exception):
    """A request that failed and will not be tried again; the message says why."""


retry_sleep = asyncio.sleep
"""How a wait before a retry is slept (tests replace it to see the waits without sleeping them)."""
RETRY_STATUSES = frozenset({408, 409, 429})  # and every 5xx, as the official SDKs retry
# httpx's errors (by name) that a URL the client cannot use causes: the same request would fail again.
_NOT_RETRIED = frozenset({"UnsupportedProtocol", "InvalidURL", "LocalProtocolError"})


def retry_wait(exc: BaseException, attempt: int) -> float | None:
    """Seconds to wait before retrying after `exc` on attempt `attempt` (0 first), or None if it is not retried.

    Like the official SDKs: connection errors and timeouts, and HTTP 408, 409, 429 and 5xx, unless the
    server says `x-should-retry: false`; the wait is the server's `retry-after-ms` / `retry-after`
    (seconds or an HTTP date), else 0.5 s doubling per attempt up to 8 s.
    """
    if any(type(link).__name__ in _NOT_RETRIED for link in _chain(exc)):
        return None
    status = getattr(exc, "status_code", None)
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    if isinstance(status, int):
        should = str(headers.get("x-should-retry", "")).lower()
        if should == "false" or (should != "true" and status not in RETRY_STATUSES and status < 500):
            return None
    elif not any(kind.__name__ == "APIConnectionError" for kind in type(exc).__mro__):
        return None
    asked = _retry_after(headers)
    return asked if asked is not None else min(0.5 * 2 ** attempt, 8.0)


def _retry_after(headers: Any) -> float | None:
    try:
        milliseconds = headers.get("retry-after-ms")
        if milliseconds is not None:
            return _wait(float(milliseconds) / 1000)
        seconds = headers.get("retry-after")
        if seconds is None:
            return None
        try:
            return _wait(float(seconds))
        except ValueError:
            when = email.utils.parsedate_to_datetime(seconds)
            return max((when - datetime.datetime.now(datetime.timezone.utc)).total_seconds(), 0.0)
    except (TypeError, ValueError, OverflowError):
        return None


def _wait(seconds: float) -> float | None:
    """A server's wait, never negative; "nan" is no wait at all (it would compare as neither over the
    budget nor under it, and a timer of NaN seconds never fires in order)."""
    return None if math.isnan(seconds) else max(seconds, 0.0)


async def open_with_retries(open_stream: Callable[[], Awaitable[Any]], race: AbortRace, max_retries: int,
                            budget: float) -> Any:
    """`open_stream()`, tried again after each retryable failure up to `max_retries` times.

    Every attempt and every wait goes through `race`: an abort ends a wait at once, and a wait the
    request's time budget has no room for is not started; the request ends at once with `GaveUp` saying
    what happened instead. Only opening is retried: once events have reached the consumer they stand.
    """
    attempt = 0
    while True:
        try:
            return await race(open_stream())
        except (Aborted, OverBudget):
            raise
        except Exception as exc:
            wait = retry_wait(exc, attempt)
            if wait is None:
                raise
            what = describe_error(exc)
            if getattr(exc, "status_code", None) == 429:
                what = f"Rate limited (HTTP 429): {what}"
            if attempt >= max_retries:
                raise GaveUp(f"{what} (gave up after {attempt + 1} attempts)" if attempt else what) from exc
            left = race.seconds_left()
            if left is not None and wait > left:
                raise GaveUp(f"{what} (the server asked to retry after {wait:g} s, more than the {max(left, 0):.3g} s "
                             f"left of the request's time budget of {budget:g} s)") from exc
            attempt += 1
            await race(retry_sleep(wait))


def check_base_url(url: str | None, variable: str) -> None:
    """Raise ValueError saying what is wrong with `url`, unless it is None (the SDK's default) or usable;
    `variable` is the environment variable the URL came from, if it came from one.

    A bad base URL is a configuration error: found when the model is made, it is said once, in words,
    rather than raised from inside the SDK's client, retried as a connection error, or (Anthropic, a URL
    without a scheme is taken as no base URL at all) blamed on the API key.
    """
    if url is None:
        return
    problem = _url_problem(url)
    if problem is not None:
        source = f" (from ${variable})" if variable else ""
        raise ValueError(f"The base URL {url!r}{source} is not usable: {problem}")


def _url_problem(url: str) -> str | None:
    import urllib.parse

    if not url.strip():
        return "it is empty"
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError as error:  # e.g. an IPv6 address without its closing bracket
        return f"it does not parse as a URL ({error})"
    if "://" not in url:
        guess = f" (did you mean http://{url}?)" if url == url.strip() and " " not in url else ""
        return f"it does not start with http:// or https://{guess}"
    if parts.scheme not in ("http", "https"):
        return f"its scheme is {parts.scheme}://; the providers speak http:// and https://"
    odd = next((n for n, c in enumerate(url) if c.isspace() or not c.isprintable()), None)
    if odd is not None:  # a space pasted in, a NUL: the HTTP client refuses them (a traceback from the SDK)
        return f"it holds {url[odd]!r} at character {odd + 1}"
    try:
        parts.port
    except ValueError:
        return f"its port {parts.netloc.rpartition(':')[2]!r} is not a number from 0 to 65535"
    if not parts.hostname:
        return "it names no host"
    return None


LOCAL_KEY = "no-key"
"""The key sent to a server on the loopback interface when none is set: local servers check none."""


def on_loopback(base_url: str | None) -> bool:
    """Whether `base_url` names this machine (localhost, 127.0.0.0/8, ::1)."""
    import ipaddress
    import urllib.parse

    try:
        host = urllib.parse.urlsplit(base_url or "").hostname
    except ValueError:
        return False
    if host is None:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def sdk(name: str) -> Any:
    """The SDK module `name`, imported on first use.

    Importing the SDKs takes seconds; done lazily, collecting the test suite (or running one chapter)
    never pays for it, and the mapping functions work without the providers extra.
    """
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ImportError(f"{name} is not installed: {INSTALL_HINT}") from exc


class MalformedEvent(Exception):
    """An event the server sent that does not have the API's shape; the message says which part and how."""


_KINDS = {dict: "an object", list: "an array", str: "a string", int: "an integer"}


def expect(value: Any, kind: type, where: str) -> Any:
    """`value`, if it is None (absent) or of `kind`; otherwise MalformedEvent saying what `where` is instead."""
    if value is None or (isinstance(value, kind) and not (kind is int and isinstance(value, bool))):
        return value
    raise MalformedEvent(f"{where} is {excerpt(json.dumps(value, ensure_ascii=False, default=str), 80)}, "
                         f"not {_KINDS[kind]}")


def as_dict(item: Any) -> dict[str, Any]:
    """An SDK stream item as the JSON the server sent (the SDKs build their models without validating, and
    give an event's data as it is when it is not an object)."""
    if isinstance(item, dict):
        return item
    to_dict = getattr(item, "to_dict", None)
    if to_dict is None:
        raise MalformedEvent(f"its data is {excerpt(json.dumps(item, ensure_ascii=False, default=str), 80)}, "
                             "not a JSON object")
    return to_dict(warnings=False)


EXCERPT = 200
"""Characters of a server's body an error message quotes at most (an HTML error page can be megabytes)."""


def excerpt(text: str, limit: int = EXCERPT) -> str:
    """`text` on one line, cut to `limit` characters."""
    text = " ".join(text[: limit * 50].split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def body_excerpt(body: Any) -> str:
    """What an error response's body says, briefly: the error's `message` when it is the APIs' JSON,
    an HTML page's title (or its text), else the body itself, cut to EXCERPT characters."""
    if isinstance(body, dict):
        error = body.get("error", body)
        message = error.get("message") if isinstance(error, dict) else error
        if isinstance(message, str) and message.strip():
            return excerpt(message)
        return excerpt(json.dumps(body, ensure_ascii=False))
    if isinstance(body, str):
        head = body[: EXCERPT * 50]
        if head.lstrip().startswith("<"):  # a proxy's or a gateway's page: its title says the most
            title = re.search(r"<title[^>]*>(.*?)</title>", head, re.IGNORECASE | re.DOTALL)
            words = title.group(1) if title and title.group(1).strip() else re.sub(r"<[^>]*>", " ", head)
            return excerpt("HTML page: " + html.unescape(words))
        return excerpt(head)
    return "" if body is None else excerpt(json.dumps(body, ensure_ascii=False, default=str))


def _status_error(exc: BaseException) -> str:
    # The SDKs word these differently (OpenAI drops a body that is not its JSON, Anthropic quotes all
    # of it): both are said as the status and an excerpt of the body.
    status, detail = exc.status_code, body_excerpt(getattr(exc, "body", None))
    if 200 <= status < 300:  # Anthropic's `event: error` inside a stream that began with 200
        return f"The server sent an error event: {detail or 'without details'}"
    return f"Error code: {status} - {detail}" if detail else f"Error code: {status}"


# httpx's errors, by class name (each SDK brings its own httpx), in words; the class and its own words
# (often none) follow in brackets.
_TRANSPORT_WORDS = {
    "ConnectTimeout": "Connecting to the server timed out",
    "ReadTimeout": "Reading the answer timed out",
    "WriteTimeout": "Sending the request timed out",
    "PoolTimeout": "Waiting for a free connection timed out",
    "TimeoutException": "The request timed out",
    "ConnectError": "Could not connect to the server",
    "ReadError": "The connection was reset or broken while the answer was being read",
    "WriteError": "The connection was reset or broken while the request was being sent",
    "RemoteProtocolError": "The server broke off the HTTP response",
    "LocalProtocolError": "The request could not be sent",
    "ProxyError": "The proxy failed",
    "UnsupportedProtocol": "The base URL must start with http:// or https://",
    "DecodingError": "The server's answer could not be decoded",
    "TooManyRedirects": "The server redirected too many times",
    "TransportError": "The connection failed",
}


def _one(exc: BaseException) -> BaseException:
    """An exception group's first exception (anyio's task groups wrap a connection's failure in one)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _chain(exc: BaseException) -> list[BaseException]:
    """`exc` and what caused it, outermost first."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(chain) < 8:
        chain.append(_one(current))
        current = chain[-1].__cause__ or chain[-1].__context__
    return chain


def describe_error(exc: BaseException) -> str:
    """What went wrong, in words, with the technical detail short after them.

    The SDKs' status errors say the status and an excerpt of the body; an httpx error anywhere in the
    chain (the SDKs wrap them in vaguer ones) says what happened to the connection; an event the server
    garbled says so. Anything else: the exception's own words, plus its cause's.
    """
    exc = _one(exc)
    if isinstance(getattr(exc, "status_code", None), int) and hasattr(exc, "body"):
        return _status_error(exc)
    if isinstance(exc, MalformedEvent):
        return f"The server sent a malformed event: {exc}"
    if isinstance(exc, json.JSONDecodeError):  # the SDKs let it through from an event's data line
        return f"The server sent a malformed event: its data is not JSON ({exc})"
    if isinstance(exc, UnicodeDecodeError):
        return f"The server sent text that is not UTF-8 ({exc})"
    for link in _chain(exc):
        words = next((_TRANSPORT_WORDS[k.__name__] for k in type(link).__mro__ if k.__name__ in _TRANSPORT_WORDS), None)
        if words is not None:
            detail = excerpt(str(link))
            return f"{words} ({type(link).__name__}: {detail})" if detail else f"{words} ({type(link).__name__})"
    message = str(exc) or type(exc).__name__
    cause = exc.__cause__
    if cause is not None and str(cause) and str(cause) not in message:
        message = f"{message} ({str(cause)})"
    return message


def read_one(reader: Any, item: Any) -> list[ModelEvent]:
    """The model events of one SDK stream item; an item the reader cannot read is a MalformedEvent."""
    event = as_dict(item)
    try:
        return reader.read(event)
    except MalformedEvent:
        raise
    except (AttributeError, TypeError, ValueError, KeyError, IndexError) as exc:
        # A shape the reader's checks did not foresee: said as the event, not as the reader's internals.
        shown = excerpt(json.dumps(event, ensure_ascii=False, default=str), 120)
        raise MalformedEvent(f"{shown} ({type(exc).__name__})") from exc


HEAD = 1000
"""Bytes of a response body kept to quote when the server sent no event."""


def tap_body(items: Any) -> bytearray | None:
    """The first HEAD bytes of the body an SDK stream reads, kept as it reads them (None where the stream's
    response cannot be tapped): what to quote when the server sent no event the SDK could parse."""
    response = getattr(items, "response", None)
    stream = getattr(response, "stream", None)
    # The SDK's own httpx (a module of whatever name), whose Response insists on its own byte stream class.
    base = getattr(sys.modules.get(type(response).__module__.partition(".")[0]), "AsyncByteStream", None)
    if base is None or not isinstance(stream, base):
        return None
    head = bytearray()
    response.stream = _tapped(base)(stream, head)
    return head


@functools.cache
def _tapped(base: type) -> type:
    class Tapped(base):  # type: ignore[valid-type, misc]
        def __init__(self, inner: Any, head: bytearray) -> None:
            self._inner, self._head = inner, head

        async def __aiter__(self) -> AsyncIterator[bytes]:
            async for chunk in self._inner:
                if len(self._head) < HEAD:
                    self._head += chunk[: HEAD - len(self._head)]
                yield chunk

        async def aclose(self) -> None:
            await self._inner.aclose()

    return Tapped


def no_event(items: Any, head: bytearray) -> str:
    """What a response that held no event sent (a 200 that is an error in JSON, a login page, nothing)."""
    content_type = getattr(items.response, "headers", {}).get("content-type", "none")
    if not head.strip():
        return f"The server sent no event (Content-Type {content_type}); its answer was empty"
    return (f"The server sent no event (Content-Type {content_type}); its answer began: "
            f"{excerpt(head.decode('utf-8', 'replace'))}")


async def read_sdk_stream(opening: Awaitable[Any], reader: Any, race: AbortRace) -> AsyncIterator[ModelEvent]:
    """Open an SDK stream (`opening` gives it), then hand each item to `reader` (`.read(item)`, `.end()`
    give model events on its `.draft`).

    The SDK stream is closed whatever happens, before the end event leaves `provider_stream`.
    """
    items = await opening
    head = tap_body(items)
    read_any = False
    try:
        yield {"type": "start"}
        while (item := await race.next(items)) is not END:
            read_any = True
            for event in read_one(reader, item):
                yield event
        ends = reader.end()
        if not read_any and head is not None and ends[-1]["type"] == "error":
            ends[-1] = reader.draft.failed("error", no_event(items, head))  # the reader's reason says less
        for event in ends:
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
    """How often a failed request is tried again (connection errors, timeouts, 408/409/429/5xx) before giving up."""
    time_budget: float = 600.0
    """Seconds one request may take in all: every attempt, the waits before retries and the whole stream.

    A `retry-after` longer than what is left of it ends the request at once; running out mid-stream ends
    it with an `error` saying so."""
    http_client: Any = None
    """Your own HTTP client for the SDK, e.g. `openai.DefaultAsyncHttpxClient(proxy=...)`; default the SDK's."""
    record_requests: bool = False
    """Keep a deep copy of every request in `requests`, as ScriptedModel does (the harness checks them)."""
    requests: list[ModelRequest] = field(default_factory=list, init=False, repr=False)
    client: Any = field(default=None, init=False, repr=False)

    def _http_settings(self) -> dict[str, Any]:
        # The SDK does not retry by itself: `stream()` does, within the time budget and the abort signal.
        return {"timeout": self.timeout, "max_retries": 0, "http_client": self.http_client}

    def _open(self, request: ModelRequest) -> Awaitable[Any]:
        raise NotImplementedError

    def _reader(self, draft: Draft) -> Any:
        raise NotImplementedError

    def stream(self, request: ModelRequest, *, signal: AbortSignal | None = None) -> AssistantMessageEventStream:
        if self.record_requests:
            self.requests.append(copy.deepcopy(request))
        def events(draft: Draft, race: AbortRace) -> AsyncIterator[ModelEvent]:
            opening = open_with_retries(lambda: self._open(request), race, self.max_retries, self.time_budget)
            return read_sdk_stream(opening, self._reader(draft), race)

        return provider_stream(events, signal, self.time_budget)

    async def aclose(self) -> None:
        """Close the HTTP client's connections."""
        await self.client.close()


ProviderEvents = Callable[[Draft, AbortRace], AsyncIterator[ModelEvent]]


def provider_stream(events: ProviderEvents, signal: AbortSignal | None,
                    time_budget: float | None = None) -> AssistantMessageEventStream:
    """The stream `model.stream()` returns: pulls `events` as the consumer asks and never raises.

    With a `time_budget` (seconds), the whole request, from the first attempt to the end of the stream,
    must fit in it; the budget starts when the consumer first asks for an event.
    """

    async def run() -> AsyncIterator[ModelEvent]:
        draft = Draft()
        deadline = None if time_budget is None else asyncio.get_running_loop().time() + time_budget
        race = AbortRace(signal, deadline)
        end: ModelEvent | None = None
        try:
            async for event in events(draft, race):
                if event["type"] in ("done", "error"):
                    end = event  # held back until the generator has finished and closed its HTTP stream
                else:
                    yield event
        except Aborted:
            end = draft.failed("aborted", ABORTED)
        except OverBudget:
            end = draft.failed("error", f"The request took longer than its time budget of {time_budget:g} s")
        except GaveUp as exc:
            end = draft.failed("error", str(exc))
        except Exception as exc:  # HTTP errors, timeouts, broken SSE: all end the stream, never the run
            end = draft.failed("error", describe_error(exc))
        finally:
            race.close()
        yield end if end is not None else draft.failed("error", "Provider stream ended without a stop reason")

    return AssistantMessageEventStream(run())
