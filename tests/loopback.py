"""The provider tests' kit: a real HTTP server on 127.0.0.1 replaying recorded provider streams,
the transcript both providers' request mappings are tested on, and a stream collector.

Each request gets the next scripted `Reply`: a server-sent-event stream sent as HTTP/1.1 chunked
body (one chunk per event unless told otherwise), or a plain JSON error. After the body the
server ends it cleanly, drops the connection, or holds it open until the client closes it, so a
test can tell that a timeout or an abort really closed the HTTP stream. Every wait is bounded.
"""

from __future__ import annotations

import functools
import importlib
import json
import socket
import struct
import sys
import threading
import time
from importlib.util import find_spec
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest

from checkpoints.ch07_agent_loop import NOT_EXECUTED
from course.runtime import readme_example as readme
from course.runtime.abort import AbortController
from course.runtime.messages import assistant_message, text, tool_call, tool_result, user_message
from course.runtime.tools import Registry, error_result

WIRE = Path(__file__).parent / "wire"
HOLD_LIMIT = 5.0  # seconds a held connection waits for the client before the server gives up on it


def skip_without(sdk: str) -> pytest.MarkDecorator:
    """Skip a test that talks to the loopback server through `sdk` when the providers extra is missing.

    Checked without importing the SDK: collecting it would cost seconds on every `pytest -k ch07`.
    """
    return pytest.mark.skipif(find_spec(sdk) is None, reason=f"{sdk} is not installed; the provider "
                              f"tests need the providers extra: pip install -e '.[test,providers]'")


@functools.cache
def tls_context():
    # Each SDK client would otherwise load the CA store afresh (~0.1 s), though the loopback has no TLS.
    import ssl
    return ssl.create_default_context()


PROVIDERS = [pytest.param("openai", marks=skip_without("openai")),
             pytest.param("anthropic", marks=skip_without("anthropic"))]
ALL_TEXT = {"openai": 3, "anthropic": 5}
"""How many events of each provider's recorded README stream carry all of its text ("我先读取项目说明。")."""


@pytest.fixture(params=PROVIDERS)
def provider(request):
    """Each test that takes it runs once per provider (skipped without that provider's SDK)."""
    return request.param


@pytest.fixture
def server():
    with LoopbackServer() as server:
        yield server


def make_model(provider: str, server: LoopbackServer, **options):
    """A provider model talking to `server`, with no retries, a short timeout and requests recorded."""
    if provider == "openai":
        from course.runtime.providers import OpenAIChatModel as model_class
        base_url = f"{server.url}/v1"
    else:
        from course.runtime.providers import AnthropicModel as model_class
        base_url = server.url
    # trust_env=False: a proxy set in the environment must not carry loopback traffic off the machine.
    http_client = importlib.import_module(provider).DefaultAsyncHttpxClient(verify=tls_context(), trust_env=False)
    settings = {"api_key": "test-key", "timeout": 2.0, "max_retries": 0, "record_requests": True, **options}
    return model_class(MODELS[provider], base_url=base_url, http_client=http_client, **settings)


MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-sonnet-4-5"}


async def collect(stream) -> tuple[list[dict], dict]:
    """Every event of a model stream, and its final message."""
    events = [event async for event in stream]
    return events, await stream.result()


async def aborted_at_first_text(model) -> tuple[list[dict], dict]:
    """The README request streamed until its first text delta, where the caller aborts: every event
    the stream still gave, and its final message."""
    controller = AbortController()
    stream = model.stream(readme_request(), signal=controller.signal)
    events = []
    async for event in stream:
        events.append(event)
        if event["type"] == "text_delta":
            controller.abort()
    return events, await stream.result()


def readme_tools() -> list[dict]:
    return Registry([readme.memory_read_tool()]).definitions()


def request_with(messages: list[dict], tools: list[dict] = ()) -> dict:
    """A model request with the README example's system prompt."""
    return {"systemPrompt": readme.SYSTEM_PROMPT, "messages": messages, "tools": list(tools)}


def readme_request() -> dict:
    """The first request of the README round trip."""
    return request_with(readme.context()["messages"], readme_tools())


async def answer(model, server: "LoopbackServer", reply: "Reply") -> tuple[list[dict], dict]:
    """`reply` replayed to the README round trip's first request: the events and the final message."""
    server.replies.append(reply)
    return await collect(model.stream(readme_request()))


def transcript_of_every_kind() -> list[dict]:
    """What a transcript can hold after a few runs of the loop: user text as a string and as blocks,
    assistant text and tool calls, tool results, the loop's skipped results, an empty error answer."""
    first = tool_call("call-1", "read", {"path": "README.md"})
    truncated = [tool_call("call-2", "read", {"path": "a.txt"}), tool_call("call-3", "read", {"path": "b.txt"})]
    why, _ = NOT_EXECUTED["length"]
    return [
        user_message("请读取 README.md"),
        assistant_message([text("我先读取"), first], "toolUse"),
        tool_result(first, [text("# tiny-pi")]),
        user_message([text("再读 a.txt 和 b.txt")]),
        assistant_message(truncated, "length"),
        *[error_result(call, why, details={"skipped": True, "reason": "length"}) for call in truncated],
        user_message("继续"),
        assistant_message([], "error", error_message="connection reset"),
        user_message("还在吗？"),
    ]


def recorded(name: str) -> bytes:
    """A recorded stream from tests/wire/."""
    return (WIRE / name).read_bytes()


def sse_events(stream: bytes) -> list[bytes]:
    """The stream cut after each event's blank line, as the APIs flush them."""
    pieces = stream.split(b"\n\n")
    return [piece + b"\n\n" for piece in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])


def tool_call_stream(provider: str, arguments: str, *, call_id: str = "call_bad1") -> bytes:
    """A stream in `provider`'s wire format: one `read` call whose arguments are `arguments`, as written,
    ending as a tool-calling answer (finish_reason tool_calls / stop_reason tool_use)."""
    return calls_stream(provider, [(call_id, "read", arguments)])


def calls_stream(provider: str, calls: list[tuple], *, text: str = "", stop: str | None = None) -> bytes:
    """A stream in `provider`'s wire format: `text` (if any), then each `(id, name, arguments)` as the API
    streams a call (id and name first, the arguments in the next piece; an id or name of None is left out),
    ending with `stop` (default tool_calls / tool_use)."""
    if provider == "openai":
        deltas: list[dict] = [{"role": "assistant", "content": text}]
        for index, (call_id, name, arguments) in enumerate(calls):
            first = {"index": index, "type": "function", "function": {"arguments": ""}}
            if call_id is not None:
                first["id"] = call_id
            if name is not None:
                first["function"]["name"] = name
            rest = {"index": index, "function": {"arguments": arguments}}
            deltas += [{"tool_calls": [first]}, {"tool_calls": [rest]}]
        return openai_stream(deltas, stop or "tool_calls")
    events: list[dict] = []
    if text:
        events += [{"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                   {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
                   {"type": "content_block_stop", "index": 0}]
    for index, (call_id, name, arguments) in enumerate(calls, len(events) // 3):
        block = {"type": "tool_use", "input": {}}
        if call_id is not None:
            block["id"] = call_id
        if name is not None:
            block["name"] = name
        events += [{"type": "content_block_start", "index": index, "content_block": block},
                   {"type": "content_block_delta", "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": arguments}},
                   {"type": "content_block_stop", "index": index}]
    return anthropic_stream(events, stop or "tool_use")


def openai_stream(deltas: list[dict], finish: str | None = "stop") -> bytes:
    """Chat Completions chunks, one per delta, then one with `finish` (left out when None), then [DONE]."""
    def chunk(delta: dict, finish: str | None = None) -> dict:
        return {"id": "chatcmpl-made", "object": "chat.completion.chunk", "created": 1764680000,
                "model": "gpt-4o-mini", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    chunks = [chunk(delta) for delta in deltas] + ([chunk({}, finish)] if finish is not None else [])
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode() + b"data: [DONE]\n\n"


def anthropic_stream(events: list[dict], stop: str = "end_turn") -> bytes:
    """A Messages stream: message_start, `events`, then a message_delta with `stop` and message_stop."""
    events = [
        {"type": "message_start", "message": {
            "id": "msg_made", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 9, "output_tokens": 1}}},
        *events,
        {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


@dataclass
class Reply:
    """What the server answers one request with."""

    body: bytes = b""
    """The response body: a recorded SSE stream, or a JSON error."""
    status: int = 200
    """The HTTP status; anything but 200 is sent as a JSON body with a Content-Length."""
    chunk_size: int | None = None
    """Cut the stream into chunks of this many bytes (through events and UTF-8 characters) instead of per event."""
    events: int | None = None
    """Send only the stream's first this-many events."""
    then: Literal["finish", "drop", "reset", "hold"] = "finish"
    """After the body: end it, drop the connection mid-body, reset it (TCP RST), or hold it open until the
    client closes it."""
    on_hold: Callable[[], None] | None = None
    """Called from the server thread once the body is out and the connection is held."""
    headers: dict[str, str] = field(default_factory=dict)
    """Extra response headers, e.g. {"retry-after": "3600"}."""
    pace: float = 0.0
    """Seconds the server waits before each event after the first: a slow stream."""
    close_at_once: bool = False
    """Drop the connection as soon as the request is read, before any response: a connection error."""
    content_type: str = "text/event-stream; charset=utf-8"
    """The Content-Type of a 200 response."""


class LoopbackServer:
    """`with LoopbackServer() as server:` serves on `server.url`; `server.replies` is the script."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[dict] = []
        self.client_closed = threading.Event()
        # Imported here, as below: every `pytest -k ch07` collects this module, and http.server costs ~0.1 s.
        from http.server import ThreadingHTTPServer

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address) -> None:
                # A client that went away mid-stream is what the abort and timeout cases do on purpose.
                if not isinstance(sys.exc_info()[1], ConnectionError):
                    super().handle_error(request, client_address)

        self._httpd = Server(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.01,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self) -> "LoopbackServer":
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()  # joins the handler threads, each bounded by HOLD_LIMIT
        self._thread.join()


def _handler(server: LoopbackServer) -> type:
    from http.server import BaseHTTPRequestHandler

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            headers = {name.lower(): value for name, value in self.headers.items()}
            server.requests.append({"path": self.path, "headers": headers, "body": json.loads(body)})
            reply = server.replies.popleft() if server.replies else Reply(b'{"error": "no reply scripted"}', 500)
            if reply.close_at_once:
                self.close_connection = True
                return
            self.send_response(reply.status)
            self.send_header("Connection", "close")
            for name, value in reply.headers.items():
                self.send_header(name, value)
            if reply.status != 200:
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)
                return
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for n, piece in enumerate(self._pieces(reply)):
                if reply.pace and n:
                    time.sleep(reply.pace)  # the fault under test is a slow server; the client's test waits on events
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()
            if reply.then == "finish":
                self.wfile.write(b"0\r\n\r\n")
            elif reply.then == "hold":
                self._hold(reply)
            elif reply.then == "reset":  # closed at once with a zero linger time: RST instead of FIN
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.rfile.close()  # the socket's file descriptor closes with its last reference
                self.connection.close()
            self.close_connection = True

        def _pieces(self, reply: Reply) -> list[bytes]:
            events = sse_events(reply.body)
            if reply.events is not None:
                events = events[: reply.events]
            if reply.chunk_size is None:
                return events
            stream = b"".join(events)
            return [stream[i:i + reply.chunk_size] for i in range(0, len(stream), reply.chunk_size)]

        def _hold(self, reply: Reply) -> None:
            self.wfile.flush()
            if reply.on_hold is not None:
                reply.on_hold()
            self.connection.settimeout(HOLD_LIMIT)
            try:
                closed = self.connection.recv(1) == b""  # end of file: the client closed the connection
            except TimeoutError:
                return  # the client never closed it: `client_closed` stays unset and the test says so
            except OSError:
                closed = True  # reset by the client
            if closed:
                server.client_closed.set()

        def log_message(self, format: str, *args: object) -> None:
            pass  # keep test output clean

    return Handler
