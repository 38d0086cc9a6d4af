"""Providers: the fault matrix. Each fault a model's server can show, for both APIs, with its defined outcome.

Broken tool-call arguments (not JSON, not an object, cut short), 429 with a short and a very long
`retry-after`, a connection dropped before the answer, a stall, a slow stream aborted, and a request
that outlives its time budget. README "Real models" lists the same table. Waits before retries go
through `streaming.retry_sleep`, which the tests replace: they see every wait and sleep none.
"""

import asyncio
import json

import pytest
import pytest_asyncio
from loopback import (  # noqa: F401 — provider and server are fixtures
    ALL_TEXT, aborted_at_first_text, Reply, anthropic_stream, calls_stream, collect, make_model, openai_stream, provider,
    readme_request, recorded, server, tool_call_stream,
)

from course.judge import cli
from course.recorder.harness import load_prerequisite, run_loop
from course.runtime import readme_example as readme
from course.runtime.abort import AbortController
from course.runtime.messages import text, tool_call
from course.runtime.providers import streaming
from course.runtime.tools import Registry



@pytest_asyncio.fixture
async def model(provider, server):
    model = make_model(provider, server, max_retries=2)
    yield model
    await model.aclose()


@pytest.fixture
def waits(monkeypatch):
    """The waits before retries, recorded instead of slept."""
    asked: list[float] = []

    async def no_sleep(seconds):
        asked.append(seconds)

    monkeypatch.setattr(streaming, "retry_sleep", no_sleep)
    return asked


def rate_limited(**headers) -> Reply:
    body = b'{"type":"error","error":{"type":"rate_limit_error","message":"Too many requests"}}'
    return Reply(body, status=429, headers=headers)


# --- arguments the model got wrong ----------------------------------------------------------

BROKEN_ARGUMENTS = [
    ('{"path": READ', "Expecting value at character 10"),
    ('["README.md"]', "a JSON array, not an object"),
    ('{"path":"README.md","limit":1', "cut short before its JSON ended"),
    ('{"path":"README.md"', "cut short before its JSON ended"),  # fits the schema as far as it goes
    ('{"path": "\\ud800"}', "it holds \\ud800, a lone surrogate, which is not UTF-8 text"),
    ('{"a":' * 300 + "1" + "}" * 300, "it is nested deeper than 100 levels"),
]


@pytest.mark.asyncio
class TestBrokenArguments:
    @pytest.mark.parametrize("written, why", BROKEN_ARGUMENTS,
                             ids=["not_json", "not_an_object", "cut_short", "cut_short_fitting_the_schema",
                                  "lone_surrogate", "too_deep"])
    async def test_the_tool_never_runs_and_the_model_reads_why(self, provider, model, server, written, why):
        server.replies.extend([Reply(tool_call_stream(provider, written)),
                               Reply(recorded(f"{provider}_readme_final.sse"))])
        run = await run_loop(load_prerequisite("ch07_agent_loop"), model=model, context=readme.context(),
                             tools=Registry([readme.memory_read_tool()]))
        assert (run.reason, run.executions, run.problems) == ("stop", [], [])
        call, result = run.messages[1]["content"][0], run.messages[2]
        # the transcript keeps what the model wrote; the arguments never become a half-read object
        assert (call["arguments"], call["argumentsText"], call["argumentsError"]) == ({}, written, why)
        assert result["isError"] and result["content"] == [
            text(f"Invalid arguments for tool read: the arguments are not valid JSON ({why})")]
        # the next request sends the text back as it was written, in the API's own form
        sent = server.requests[1]["body"]["messages"]
        if provider == "openai":
            assert sent[2]["tool_calls"][0]["function"]["arguments"] == written
            assert sent[3] == {"role": "tool", "tool_call_id": "call_bad1", "content": result["content"][0]["text"]}
        else:
            assert sent[1]["content"][0] == {"type": "tool_use", "id": "call_bad1", "name": "read",
                                             "input": {"invalid_json": written}}
            assert sent[2]["content"][0]["is_error"] is True

    async def test_empty_arguments_are_an_empty_object(self, provider, model, server):
        server.replies.append(Reply(tool_call_stream(provider, "")))
        _, message = await collect(model.stream(readme_request()))
        assert message["content"][0] == {"type": "toolCall", "id": "call_bad1", "name": "read", "arguments": {}}


# --- tool calls the model got wrong -------------------------------------------------------------

README_PATH = '{"path": "README.md"}'


async def loop_over(provider, model, server, first: bytes):
    """The chapter 07 loop on the README task: `first` answers the first request, the recorded final
    answer the second."""
    server.replies.extend([Reply(first), Reply(recorded(f"{provider}_readme_final.sse"))])
    return await run_loop(load_prerequisite("ch07_agent_loop"), model=model, context=readme.context(),
                          tools=Registry([readme.memory_read_tool()]))


def ids_sent_back(provider, server) -> tuple[list[str], list[str]]:
    """The tool-call ids of the second request's assistant message, and those its tool results answer."""
    sent = server.requests[1]["body"]["messages"]
    if provider == "openai":
        calls = [call["id"] for m in sent if m["role"] == "assistant" for call in m.get("tool_calls", [])]
        return calls, [m["tool_call_id"] for m in sent if m["role"] == "tool"]
    blocks = [b for m in sent for b in m["content"] if isinstance(m["content"], list)]
    return ([b["id"] for b in blocks if b["type"] == "tool_use"],
            [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"])


@pytest.mark.asyncio
class TestToolCallShapes:
    async def test_a_repeated_id_gets_a_fresh_one_so_each_result_answers_one_call(self, provider, model, server):
        run = await loop_over(provider, model, server,
                              calls_stream(provider, [("dup", "read", README_PATH), ("dup", "read", README_PATH)]))
        assert (run.reason, run.problems, run.executions) == ("stop", [], ["read", "read"])
        first, second = run.messages[1]["content"]
        assert first["id"] == "dup" and second["id"] not in ("dup", "")
        assert [m["toolCallId"] for m in run.messages[2:4]] == [first["id"], second["id"]]
        assert ids_sent_back(provider, server) == ([first["id"], second["id"]], [first["id"], second["id"]])


    @pytest.mark.parametrize("name", [None, ""], ids=["missing", "empty"])
    async def test_a_call_without_a_name_is_answered_and_sent_back_under_a_name_that_says_so(self, provider, model,
                                                                                             server, name):
        run = await loop_over(provider, model, server, calls_stream(provider, [("c1", name, README_PATH)]))
        assert (run.reason, run.problems, run.executions) == ("stop", [], [])
        call, result = run.messages[1]["content"][0], run.messages[2]
        assert call["name"] == "call_sent_without_a_name"
        assert result["isError"] and result["content"] == [text("Tool call_sent_without_a_name not found")]
        # both APIs refuse an empty name in the transcript they are sent back
        sent = server.requests[1]["body"]["messages"]
        names = ([c["function"]["name"] for m in sent if m["role"] == "assistant" for c in m.get("tool_calls", [])]
                 if provider == "openai" else
                 [b["name"] for m in sent for b in m["content"] if isinstance(b, dict) and b["type"] == "tool_use"])
        assert names == ["call_sent_without_a_name"]


def test_a_surrogate_pair_cut_between_two_pieces_is_one_character():
    """A server may cut a character outside the BMP between its UTF-16 halves (each piece's JSON then holds one
    `\\ud83d`-style escape): the high half waits for the next piece; one left at the block's end is its escape."""
    draft = streaming.Draft()
    events = draft.text("smile:\ud83d") + draft.text("\ude00!") + draft.text(" cut:\ud83d")
    events += draft.tool_call(0, id="c", name="read", arguments='{"path": "\ud83d')
    events += draft.tool_call(0, arguments='\ude00"}')
    events += draft.done("toolUse")
    message = events[-1]["message"]
    assert message["content"] == [text("smile:😀! cut:\\ud83d"), tool_call("c", "read", {"path": "😀"})]
    assert [e["delta"] for e in events if e["type"] == "text_delta"] == ["smile:", "😀!", " cut:", "\\ud83d"]
    assert [e["delta"] for e in events if e["type"] == "toolcall_delta"] == ['{"path": "', '😀"}']


@pytest.mark.asyncio
async def test_a_surrogate_pair_cut_between_two_text_events_arrives_whole(provider, server):
    model = make_model(provider, server)
    pieces = ["smile:\ud83d", "\ude00!"]
    if provider == "openai":
        stream = openai_stream([{"role": "assistant", "content": ""}, *[{"content": piece} for piece in pieces]])
    else:
        stream = anthropic_stream([
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            *[{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}
              for piece in pieces],
            {"type": "content_block_stop", "index": 0}])
    server.replies.append(Reply(stream))
    _, message = await collect(model.stream(readme_request()))
    await model.aclose()
    assert message["content"] == [text("smile:😀!")]


@pytest.mark.asyncio
async def test_a_tool_use_stop_without_a_call_is_an_error_saying_so(provider, server):
    """The loop cannot go on from such an answer: without an errorMessage it ended `error` unexplained."""
    model = make_model(provider, server)
    server.replies.append(Reply(calls_stream(provider, [], text="ok")))
    events, message = await collect(model.stream(readme_request()))
    await model.aclose()
    raw = "finish_reason 'tool_calls'" if provider == "openai" else "stop_reason 'tool_use'"
    assert events[-1] == {"type": "error", "reason": "error", "error": message}
    assert (message["content"], message["errorMessage"]) == (
        [text("ok")], f"The model asked to use tools ({raw}) but sent no tool call")


def test_a_transcript_call_without_a_name_is_sent_under_the_placeholder():
    """A transcript made elsewhere may hold one: the request must still be one the API accepts."""
    from course.runtime.messages import assistant_message
    from course.runtime.providers.anthropic_messages import anthropic_request
    from course.runtime.providers.openai_chat import chat_request
    request = {"systemPrompt": "", "tools": [], "messages": [assistant_message([tool_call("c", "", {})], "toolUse")]}
    assert chat_request("m", request)["messages"][0]["tool_calls"][0]["function"]["name"] == streaming.NAMELESS
    assert anthropic_request("m", request, 8)["messages"][0]["content"][0]["name"] == streaming.NAMELESS


def openai_call(index: int | None = None, id: str | None = None, name: str | None = None,
                arguments: str | None = None) -> dict:
    """A delta carrying one piece of a Chat Completions tool call, with only the fields given."""
    piece: dict = {"function": {}}
    if index is not None:
        piece["index"] = index
    if id is not None:
        piece.update(id=id, type="function")
    if name is not None:
        piece["function"]["name"] = name
    if arguments is not None:
        piece["function"]["arguments"] = arguments
    return {"tool_calls": [piece]}


READ_README = {"path": "README.md"}
OPENAI_CALL_PIECES = {
    # Two calls whose pieces alternate: each piece of index 0 or 1 continues its own call.
    "interleaved": [openai_call(0, "c1", "read", '{"pa'), openai_call(1, "c2", "read", '{"pa'),
                    openai_call(0, arguments='th": "README.md"}'), openai_call(1, arguments='th": "README.md"}')],
    # One index for two calls: the new id starts the second.
    "index_reused_with_a_new_id": [openai_call(0, "c1", "read", README_PATH),
                                   openai_call(0, "c2", "read", README_PATH)],
    # No index at all: the arguments that follow belong to the call they follow.
    "no_index": [openai_call(id="c1", name="read", arguments=""), openai_call(arguments=README_PATH),
                 openai_call(id="c2", name="read", arguments='{"path": '), openai_call(arguments='"README.md"}')],
}


@pytest.mark.asyncio
@pytest.mark.parametrize("shape", OPENAI_CALL_PIECES)
async def test_openai_pieces_join_the_call_their_index_and_id_name(server, shape):
    pytest.importorskip("openai")
    model = make_model("openai", server)
    server.replies.append(Reply(openai_stream(OPENAI_CALL_PIECES[shape], "tool_calls")))
    events, message = await collect(model.stream(readme_request()))
    await model.aclose()
    assert message["stopReason"] == "toolUse"
    assert message["content"] == [tool_call("c1", "read", READ_README), tool_call("c2", "read", READ_README)]
    # every piece streamed as a delta of the call it belongs to
    deltas = {0: "", 1: ""}
    for event in events:
        if event["type"] == "toolcall_delta":
            deltas[event["contentIndex"]] += event["delta"]
    assert deltas == {0: README_PATH, 1: README_PATH}


@pytest.mark.asyncio
async def test_anthropic_input_given_whole_in_the_block_start_is_the_arguments(server):
    pytest.importorskip("anthropic")
    model = make_model("anthropic", server)
    start = {"type": "content_block_start", "index": 0,
             "content_block": {"type": "tool_use", "id": "t1", "name": "read", "input": READ_README}}
    server.replies.append(Reply(anthropic_stream([start, {"type": "content_block_stop", "index": 0}], "tool_use")))
    events, message = await collect(model.stream(readme_request()))
    await model.aclose()
    assert message["stopReason"] == "toolUse" and message["content"] == [tool_call("t1", "read", READ_README)]
    assert [e["delta"] for e in events if e["type"] == "toolcall_delta"] == ['{"path": "README.md"}']


# --- retries and the time budget -------------------------------------------------------------

@pytest.mark.asyncio
class TestRetries:
    @pytest.mark.parametrize("header, value, wait", [("retry-after", "2", 2.0), ("retry-after-ms", "20", 0.02)])
    async def test_429_with_a_short_retry_after_is_retried_after_it(self, model, server, waits, header, value, wait,
                                                                     provider):
        server.replies.extend([rate_limited(**{header: value}), Reply(recorded(f"{provider}_readme_final.sse"))])
        events, message = await collect(model.stream(readme_request()))
        assert (message["stopReason"], message["content"]) == ("stop", [text("项目名是 tiny-pi。")])
        assert waits == [wait] and len(server.requests) == 2

    async def test_429_with_a_retry_after_beyond_the_time_budget_ends_at_once(self, model, server, waits):
        server.replies.append(rate_limited(**{"retry-after": "3600"}))
        events, message = await collect(model.stream(readme_request()))
        assert events == [{"type": "error", "reason": "error", "error": message}]
        assert message["errorMessage"].startswith("Rate limited (HTTP 429): Error code: 429")
        assert "the server asked to retry after 3600 s, more than the" in message["errorMessage"]
        assert "of the request's time budget of 600 s" in message["errorMessage"]
        assert waits == [] and len(server.requests) == 1

    async def test_429_every_time_gives_up_after_max_retries(self, model, server, waits):
        server.replies.extend([rate_limited(**{"retry-after": "0"}) for _ in range(3)])
        _, message = await collect(model.stream(readme_request()))
        assert message["stopReason"] == "error"
        assert message["errorMessage"].startswith("Rate limited (HTTP 429)")
        assert message["errorMessage"].endswith("(gave up after 3 attempts)")
        assert waits == [0.0, 0.0] and len(server.requests) == 3

    async def test_a_server_saying_do_not_retry_is_not_retried(self, model, server, waits):
        server.replies.append(Reply(b'{"error": "busy"}', status=503, headers={"x-should-retry": "false"}))
        _, message = await collect(model.stream(readme_request()))
        assert message["errorMessage"].startswith("Error code: 503") and waits == [] and len(server.requests) == 1

    async def test_a_client_error_is_not_retried(self, model, server, waits):
        server.replies.append(Reply(b'{"error": "bad request"}', status=400))
        _, message = await collect(model.stream(readme_request()))
        assert message["errorMessage"].startswith("Error code: 400") and waits == [] and len(server.requests) == 1

    async def test_a_connection_dropped_before_the_answer_is_retried_with_backoff(self, provider, model, server,
                                                                                 waits):
        server.replies.extend([Reply(close_at_once=True), Reply(close_at_once=True),
                               Reply(recorded(f"{provider}_readme_final.sse"))])
        _, message = await collect(model.stream(readme_request()))
        assert message["stopReason"] == "stop" and waits == [0.5, 1.0] and len(server.requests) == 3

    async def test_abort_interrupts_the_wait_before_a_retry(self, model, server, monkeypatch):
        sleeping = asyncio.Event()

        async def sleep_until_aborted(seconds):  # never ends by itself: only the abort can end the wait
            sleeping.set()
            await asyncio.Event().wait()

        monkeypatch.setattr(streaming, "retry_sleep", sleep_until_aborted)
        server.replies.append(rate_limited(**{"retry-after": "30"}))
        controller = AbortController()
        collecting = asyncio.create_task(collect(model.stream(readme_request(), signal=controller.signal)))
        await sleeping.wait()
        controller.abort()
        async with asyncio.timeout(10):  # bounds a broken implementation's hang; a working one ends at once
            events, message = await collecting
        assert events == [{"type": "error", "reason": "aborted", "error": message}]
        assert message["errorMessage"] == "Request was aborted" and len(server.requests) == 1

    async def test_a_stream_outliving_its_time_budget_ends_with_an_error(self, provider, server):
        # The server holds the stream open; the read timeout (2 s) is longer than the budget (0.3 s).
        model = make_model(provider, server, timeout=2.0, time_budget=0.3)
        server.replies.append(Reply(recorded(f"{provider}_readme_first.sse"), events=ALL_TEXT[provider], then="hold"))
        events, message = await collect(model.stream(readme_request()))
        await model.aclose()
        assert events[-1] == {"type": "error", "reason": "error", "error": message}
        assert message["content"] == [text("我先读取项目说明。")]
        assert message["errorMessage"] == "The request took longer than its time budget of 0.3 s"
        assert await asyncio.to_thread(server.client_closed.wait, 2.0)


@pytest.mark.asyncio
class TestSlowStream:
    async def test_abort_of_a_slow_stream_closes_it(self, provider, model, server):
        server.replies.append(Reply(recorded(f"{provider}_readme_first.sse"), pace=0.05))
        events, message = await aborted_at_first_text(model)
        assert [e["type"] for e in events] == ["start", "text_delta", "error"]
        assert (message["stopReason"], message["content"]) == ("aborted", [text("我先读取")])


# --- what an error says -----------------------------------------------------------------------

HTML_PAGE = (b"<!DOCTYPE html><html><head><title>Just a moment...</title></head><body>"
             + b"<div>cf</div>" * 20_000 + b"</body></html>")


@pytest.mark.asyncio
class TestErrorMessages:
    @pytest.mark.parametrize("body, said", [
        (HTML_PAGE, "Error code: 503 - HTML page: Just a moment..."),
        (b"upstream connect error or disconnect/reset before headers", "Error code: 503 - upstream connect error or "
                                                                       "disconnect/reset before headers"),
        (b'{"error": {"message": "Service Unavailable", "type": "server_error"}}',
         "Error code: 503 - Service Unavailable"),
        (b'{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}',
         "Error code: 503 - Overloaded"),
        (b"", "Error code: 503"),
    ], ids=["html", "plain_text", "openai_json", "anthropic_json", "empty"])
    async def test_an_http_error_says_its_status_and_a_short_excerpt_of_the_body(self, provider, server, body, said):
        model = make_model(provider, server)
        server.replies.append(Reply(body, status=503))
        _, message = await collect(model.stream(readme_request()))
        await model.aclose()
        assert message["errorMessage"] == said

    @pytest.mark.parametrize("body, content_type, said", [
        (b'{"error":{"message":"model not found"}}', "application/json",
         'The server sent no event (Content-Type application/json); its answer began: '
         '{"error":{"message":"model not found"}}'),
        (b"<html><body>" + b"Sign in " * 100 + b"</body></html>", "text/html",
         "The server sent no event (Content-Type text/html); its answer began: "
         + ("<html><body>" + "Sign in " * 100)[:199] + "…"),
        (b"", "text/event-stream", "The server sent no event (Content-Type text/event-stream); its answer was empty"),
    ], ids=["json_error", "html", "empty"])
    async def test_a_200_that_is_not_an_event_stream_quotes_what_the_server_sent(self, provider, server, body,
                                                                               content_type, said):
        model = make_model(provider, server)
        server.replies.append(Reply(body, content_type=content_type))
        events, message = await collect(model.stream(readme_request()))
        await model.aclose()
        assert [e["type"] for e in events] == ["start", "error"]
        assert message["errorMessage"] == said

    async def test_a_redirect_without_a_location_is_an_http_error(self, provider, server):
        model = make_model(provider, server)
        server.replies.append(Reply(b"moved", status=302))
        _, message = await collect(model.stream(readme_request()))
        await model.aclose()
        assert message["errorMessage"] == "Error code: 302 - moved"

    async def test_a_long_body_is_cut_to_an_excerpt(self, provider, server):
        model = make_model(provider, server)
        server.replies.append(Reply(b"x" * 100_000, status=500))
        _, message = await collect(model.stream(readme_request()))
        await model.aclose()
        assert message["errorMessage"] == "Error code: 500 - " + "x" * 199 + "…"


# Events that do not have their API's shape, each after a valid text event ("hi"): the stream ends with an
# error saying what is wrong in words, and keeps the text.
OPENAI_MALFORMED = {
    "data_a_number": ("42", "its data is 42, not a JSON object"),
    "data_null": ("null", "its data is null, not a JSON object"),
    "data_an_array": ("[1, 2]", "its data is [1, 2], not a JSON object"),
    "choices_a_string": ({"choices": "abc"}, 'choices is "abc", not an array'),
    "delta_a_string": ({"choices": [{"index": 0, "delta": "x"}]}, 'delta is "x", not an object'),
    "content_a_number": ({"choices": [{"index": 0, "delta": {"content": 5}}]}, "delta.content is 5, not a string"),
    "refusal_a_number": ({"choices": [{"index": 0, "delta": {"refusal": 5}}]}, "delta.refusal is 5, not a string"),
    "tool_calls_an_object": ({"choices": [{"index": 0, "delta": {"tool_calls": {"index": 0}}}]},
                             'delta.tool_calls is {"index": 0}, not an array'),
    "function_a_string": ({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": "read"}]}}]},
                          'delta.tool_calls[0].function is "read", not an object'),
    "index_a_list": ({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": [0], "id": "c"}]}}]},
                     "delta.tool_calls[0].index is [0], not an integer"),
    "finish_reason_a_list": ({"choices": [{"index": 0, "delta": {}, "finish_reason": ["stop"]}]},
                             'finish_reason is ["stop"], not a string'),
}
ANTHROPIC_MALFORMED = {
    "data_a_number": ("42", "its data is 42, not a JSON object"),
    "delta_a_string": ({"type": "content_block_delta", "index": 0, "delta": "x"}, 'delta is "x", not an object'),
    "text_a_number": ({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": 5}},
                      "delta.text is 5, not a string"),
    "content_block_a_string": ({"type": "content_block_start", "index": 1, "content_block": "tool_use"},
                               'content_block is "tool_use", not an object'),
    "index_a_list": ({"type": "content_block_start", "index": [1], "content_block": {"type": "text", "text": ""}},
                     "index is [1], not an integer"),
    "message_delta_a_string": ({"type": "message_delta", "delta": "end_turn"}, 'delta is "end_turn", not an object'),
    "stop_reason_a_list": ({"type": "message_delta", "delta": {"stop_reason": ["end_turn"]}},
                           'delta.stop_reason is ["end_turn"], not a string'),
}


def with_a_malformed_event(provider: str, data) -> bytes:
    data = data if isinstance(data, str) else json.dumps(data)
    if provider == "openai":
        good = openai_stream([{"role": "assistant", "content": "hi"}], None).removesuffix(b"data: [DONE]\n\n")
        return good + f"data: {data}\n\n".encode() + openai_stream([], "stop")
    text_block = [{"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                  {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}}]
    good = anthropic_stream(text_block)
    head = good[: good.index(b"event: message_delta")]
    return head + f"event: content_block_delta\ndata: {data}\n\n".encode() + good[len(head):]


@pytest.mark.asyncio
class TestMalformedEvents:
    @pytest.mark.parametrize("provider, data, said", [
        *[pytest.param("openai", data, said, id=f"openai-{name}") for name, (data, said) in OPENAI_MALFORMED.items()],
        *[pytest.param("anthropic", data, said, id=f"anthropic-{name}")
          for name, (data, said) in ANTHROPIC_MALFORMED.items()],
    ])
    async def test_a_malformed_event_is_said_in_words_and_the_text_before_it_stays(self, server, provider, data, said):
        pytest.importorskip(provider)
        model = make_model(provider, server)
        server.replies.append(Reply(with_a_malformed_event(provider, data)))
        events, message = await collect(model.stream(readme_request()))
        await model.aclose()
        assert (message["stopReason"], message["content"]) == ("error", [text("hi")])
        assert message["errorMessage"] == f"The server sent a malformed event: {said}"

    async def test_numbers_as_a_calls_id_and_name_are_their_digits(self, provider, server):
        model = make_model(provider, server)
        stream = calls_stream(provider, [("c1", "read", README_PATH)], text="hi").replace(b'"c1"', b"12345")
        server.replies.append(Reply(stream.replace(b'"read"', b"7")))
        _, message = await collect(model.stream(readme_request()))
        await model.aclose()
        assert message["stopReason"] == "toolUse"
        assert message["content"] == [text("hi"), tool_call("12345", "7", READ_README)]

    async def test_arguments_sent_as_an_object_are_its_json(self, server):
        pytest.importorskip("openai")
        model = make_model("openai", server)
        server.replies.append(Reply(openai_stream([openai_call(0, "c1", "read", READ_README)], "tool_calls")))
        _, message = await collect(model.stream(readme_request()))
        await model.aclose()
        assert message["content"] == [tool_call("c1", "read", READ_README)]

    async def test_a_connection_reset_mid_stream_is_said_in_words(self, provider, server):
        model = make_model(provider, server)
        server.replies.append(Reply(recorded(f"{provider}_readme_first.sse"), events=ALL_TEXT[provider], then="reset"))
        _, message = await collect(model.stream(readme_request()))
        await model.aclose()
        assert message["errorMessage"] == \
            "The connection was reset or broken while the answer was being read (ReadError)"


def test_an_exception_group_is_said_as_the_error_inside_it():
    """anyio's task groups wrap a connection's failure in a group: the message says the failure, not the group."""
    class ConnectError(Exception):  # named as httpx's, which is how describe_error knows them
        pass

    class APIConnectionError(Exception):
        pass

    group = ExceptionGroup("unhandled errors in a TaskGroup", [ConnectError("All connection attempts failed")])
    assert streaming.describe_error(group) == \
        "Could not connect to the server (ConnectError: All connection attempts failed)"
    try:
        raise APIConnectionError("Connection error.") from group
    except APIConnectionError as wrapped:
        assert streaming.describe_error(wrapped) == streaming.describe_error(group)


# --- local servers need no key -----------------------------------------------------------------

def test_demo_on_a_local_anthropic_server_needs_no_key(server, capsys, monkeypatch):
    pytest.importorskip("anthropic")
    for variable in ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "HTTP_PROXY", "HTTPS_PROXY",
                     "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"]:
        monkeypatch.delenv(variable, raising=False)
    server.replies.extend([Reply(recorded("anthropic_readme_first.sse")),
                           Reply(recorded("anthropic_readme_final.sse"))])
    code = cli.main(["demo", "--provider", "anthropic", "--base-url", server.url, "--model", "x"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "reason           stop" in out and "4  assistant   [stop] 项目名是 tiny-pi。" in out
    headers = server.requests[0]["headers"]
    assert (headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")) == "no-key"


@pytest.mark.parametrize("url, local", [
    ("http://127.0.0.1:8080", True), ("http://localhost:11434/v1", True), ("http://[::1]:1234/v1", True),
    ("http://127.8.9.10", True), ("https://api.anthropic.com", False), ("http://10.0.0.1:8080", False),
    ("http://127.0.0.1.example.com", False), (None, False), ("not a url", False),
])
def test_which_base_urls_are_local(url, local):
    assert streaming.on_loopback(url) is local


def test_a_remote_anthropic_server_without_a_key_is_not_given_one(monkeypatch):
    pytest.importorskip("anthropic")
    from course.runtime.providers import AnthropicModel
    for variable in ["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"]:
        monkeypatch.delenv(variable, raising=False)
    assert AnthropicModel("m", base_url="https://api.anthropic.com").client.api_key is None


BAD_BASE_URLS = [
    ("http://[::1", "it does not parse as a URL (Invalid IPv6 URL)"),
    ("http://127.0.0.1:99999/v1", "its port '99999' is not a number from 0 to 65535"),
    ("http://127.0.0.1:abc", "its port 'abc' is not a number from 0 to 65535"),
    ("127.0.0.1:8080/v1", "it does not start with http:// or https:// (did you mean http://127.0.0.1:8080/v1?)"),
    ("localhost:8080", "it does not start with http:// or https:// (did you mean http://localhost:8080?)"),
    ("not a url", "it does not start with http:// or https://"),
    ("ftp://127.0.0.1/v1", "its scheme is ftp://; the providers speak http:// and https://"),
    ("http:///v1", "it names no host"),
    ("http://exa mple.com", "it holds ' ' at character 11"),
    ("http://h\x00/v1", "it holds '\\x00' at character 9"),
    ("", "it is empty"),
]


@pytest.mark.parametrize("url, why", BAD_BASE_URLS, ids=[url or "empty" for url, _ in BAD_BASE_URLS])
def test_a_base_url_that_is_not_usable_is_refused_saying_why(provider, url, why):
    """A configuration error, refused when the model is made: not a traceback from inside the SDK, not a
    request retried three times, and not (Anthropic, no scheme) a complaint about the API key."""
    from course.runtime.providers import AnthropicModel, OpenAIChatModel
    model_class = OpenAIChatModel if provider == "openai" else AnthropicModel
    with pytest.raises(ValueError) as raised:
        model_class("m", base_url=url, api_key="k")
    assert str(raised.value) == f"The base URL {url!r} is not usable: {why}"


def test_a_base_url_from_the_environment_says_so(provider, monkeypatch):
    from course.runtime.providers import AnthropicModel, OpenAIChatModel
    model_class, variable = ((OpenAIChatModel, "OPENAI_BASE_URL") if provider == "openai"
                             else (AnthropicModel, "ANTHROPIC_BASE_URL"))
    monkeypatch.setenv(variable, "localhost:8080")
    with pytest.raises(ValueError, match=rf"^The base URL 'localhost:8080' \(from \${variable}\) is not usable: "):
        model_class("m", api_key="k")


def test_the_demo_says_what_is_wrong_with_the_base_url(provider, capsys):
    code = cli.main(["demo", "--provider", provider, "--base-url", "http://[::1", "--model", "m"])
    captured = capsys.readouterr()
    assert (code, captured.out) == (2, "")
    assert captured.err == "course demo: The base URL 'http://[::1' is not usable: it does not parse as a URL " \
                           "(Invalid IPv6 URL)\n"


def test_a_url_the_http_client_cannot_use_is_not_retried():
    """Should one get past the model's check (the SDKs' http client is stricter): retrying cannot help."""
    class UnsupportedProtocol(Exception):  # named as httpx's, which is how retry_wait knows them
        pass

    class APIConnectionError(Exception):
        pass

    try:
        raise APIConnectionError("Connection error.") from UnsupportedProtocol("Request URL is missing a protocol")
    except APIConnectionError as error:
        assert streaming.retry_wait(error, 0) is None
    try:
        raise APIConnectionError("Connection error.") from ConnectionResetError()
    except APIConnectionError as error:
        assert streaming.retry_wait(error, 0) == 0.5


def test_ctrl_c_ends_the_demo_quietly(server):
    """Ctrl-C while the demo waits on a model: exit 130, nothing on stderr (no KeyboardInterrupt traceback)."""
    import os
    import signal
    import subprocess
    import sys
    import threading

    pytest.importorskip("openai")
    env = {name: value for name, value in os.environ.items()
           if name.upper() not in ("OPENAI_API_KEY", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")}
    children = []
    known = threading.Event()  # the child is in `children` (the server thread reads it)

    def interrupt():
        known.wait(10)
        children[0].send_signal(signal.SIGINT)

    # The server sends the first event, holds the stream open, and only then is the signal sent.
    server.replies.append(Reply(recorded("openai_readme_first.sse"), events=1, then="hold", on_hold=interrupt))
    child = subprocess.Popen([sys.executable, "-m", "course", "demo", "--provider", "openai", "--base-url",
                              f"{server.url}/v1", "--model", "m"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=env)
    children.append(child)
    known.set()
    _, stderr = child.communicate(timeout=60)
    assert (child.returncode, stderr.decode()) == (130, "")


@pytest.mark.asyncio
async def test_429_without_retries_says_rate_limited(server, waits):
    pytest.importorskip("openai")
    model = make_model("openai", server, max_retries=0)
    server.replies.append(rate_limited(**{"retry-after": "1"}))
    _, message = await collect(model.stream(readme_request()))
    await model.aclose()
    assert message["errorMessage"].startswith("Rate limited (HTTP 429): Error code: 429")
    assert waits == [] and len(server.requests) == 1


@pytest.mark.parametrize("headers, wait", [({"retry-after": "nan"}, None), ({"retry-after-ms": "NaN"}, None),
                                           ({"retry-after": "-3"}, 0.0), ({"retry-after-ms": "1500"}, 1.5)])
def test_a_retry_after_of_nan_is_no_wait_at_all(headers, wait):
    """NaN compares as neither over the time budget nor under it: it must fall back to the backoff, not be slept."""
    assert streaming._retry_after(headers) == wait


def test_a_text_streamed_in_many_pieces_is_one_block_of_all_of_them():
    """Pieces are joined when the block ends (appending each to the block's text is quadratic in its length)."""
    draft = streaming.Draft()
    pieces = [f"{n:05d}" for n in range(20_000)]
    events = [event for piece in pieces for event in draft.text(piece)]
    events += draft.tool_call(0, id="c1", name="read", arguments='{"path": "a"}') + draft.text("after")
    final = draft.done("toolUse")[-1]["message"]
    assert [block.get("text") for block in final["content"]] == ["".join(pieces), None, "after"]
    assert [e["delta"] for e in events if e["type"] == "text_delta"] == [*pieces, "after"]
    assert final["content"][1]["arguments"] == {"path": "a"}
