"""Providers: Anthropic Messages, mapped both ways.

The stream cases run the `anthropic` SDK for real against the loopback server replaying recorded
streams; they skip without the providers extra. The request mapping needs no SDK.
"""

import copy

import pytest
import pytest_asyncio
from loopback import (LoopbackServer, Reply, answer, make_model, readme_request, readme_tools, recorded, request_with,
                      skip_without, transcript_of_every_kind)

from checkpoints.ch07_agent_loop import NOT_EXECUTED
from course.runtime import readme_example as readme
from course.runtime.messages import text, tool_call
from course.runtime.providers.anthropic_messages import EventReader, anthropic_request
from course.runtime.providers.streaming import Draft

SYSTEM = readme.SYSTEM_PROMPT  # what request_with sends
TRUNCATED, _ = NOT_EXECUTED["length"]


def skipped(call_id):
    return {"type": "tool_result", "tool_use_id": call_id, "is_error": True, "content": [text(TRUNCATED)]}


class TestRequestMapping:
    def test_every_kind_of_message(self):
        request = request_with(transcript_of_every_kind())
        before = copy.deepcopy(request)
        body = anthropic_request("m", request, max_tokens=1024)
        assert body["system"] == SYSTEM
        assert body["messages"] == [
            {"role": "user", "content": [text("请读取 README.md")]},
            {"role": "assistant", "content": [
                text("我先读取"),
                {"type": "tool_use", "id": "call-1", "name": "read", "input": {"path": "README.md"}}]},
            # results and the user's next words share one user turn, results first
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call-1", "is_error": False, "content": [text("# tiny-pi")]},
                text("再读 a.txt 和 b.txt")]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "call-2", "name": "read", "input": {"path": "a.txt"}},
                {"type": "tool_use", "id": "call-3", "name": "read", "input": {"path": "b.txt"}}]},
            # the loop's skipped results are error results of their calls; the empty error answer is left out
            {"role": "user", "content": [skipped("call-2"), skipped("call-3"), text("继续"), text("还在吗？")]},
        ]
        assert request == before

    def test_tools_and_limits(self):
        body = anthropic_request("m", request_with([], readme_tools()), max_tokens=256)
        assert body["tools"] == [{"name": "read", "description": "Read a text file from the workspace.",
                                  "input_schema": readme.READ_PARAMETERS}]
        assert (body["model"], body["max_tokens"], body["stream"]) == ("m", 256, True)

    def test_empty_text_is_dropped_and_an_empty_result_has_no_content(self):
        call = tool_call("c", "read", {})
        messages = [
            {"role": "user", "content": "", "timestamp": 1},
            {"role": "assistant", "content": [text(""), call], "stopReason": "toolUse", "timestamp": 2},
            {"role": "toolResult", "toolCallId": "c", "toolName": "read", "content": [text("")], "isError": False,
             "timestamp": 3},
        ]
        body = anthropic_request("m", {"systemPrompt": "", "messages": messages, "tools": []}, max_tokens=8)
        assert "system" not in body and "tools" not in body
        assert body["messages"] == [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": "read", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c", "is_error": False}]},
        ]


class TestStopReasons:
    @pytest.mark.parametrize("stop, stop_reason", [
        ("end_turn", "stop"), ("stop_sequence", "stop"), ("pause_turn", "stop"), ("tool_use", "toolUse"),
        ("max_tokens", "length"), ("model_context_window_exceeded", "length"),
    ])
    def test_a_stop_reason_maps(self, stop, stop_reason):
        # a tool_use stop comes with a call (without one it is an error: test_providers_faults.py)
        [end] = read_to_the_end(stop, with_a_call=stop == "tool_use")
        assert (end["type"], end["reason"], end["message"]["content"][0]) == ("done", stop_reason, text("好"))

    @pytest.mark.parametrize("stop", ["refusal", "something_new", None])
    def test_a_refusal_or_unknown_stop_is_an_error(self, stop):
        [end] = read_to_the_end(stop)
        assert (end["type"], end["reason"], end["error"]["content"]) == ("error", "error", [text("好")])
        assert end["error"]["errorMessage"] == f"The response ended with stop_reason {stop!r}"


def read_to_the_end(stop_reason, with_a_call=False):
    reader = EventReader(Draft())
    call = [{"type": "content_block_start", "index": 1,
             "content_block": {"type": "tool_use", "id": "c", "name": "read", "input": {"path": "a"}}},
            {"type": "content_block_stop", "index": 1}]
    for event in [{"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                  {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "好"}},
                  {"type": "content_block_stop", "index": 0},
                  *(call if with_a_call else []),
                  {"type": "message_delta", "delta": {"stop_reason": stop_reason}},
                  {"type": "message_stop"}]:
        reader.read(event)
    return reader.end()


@pytest.fixture
def server():
    with LoopbackServer() as server:
        yield server


@pytest_asyncio.fixture
async def model(server):
    model = make_model("anthropic", server)
    yield model
    await model.aclose()


@skip_without("anthropic")
@pytest.mark.asyncio
class TestStreamMapping:
    @pytest.mark.parametrize("chunk_size", [None, 5], ids=["per_event", "cut_every_5_bytes"])
    async def test_text_then_a_tool_call_in_pieces(self, model, server, chunk_size):
        reply = Reply(recorded("anthropic_readme_first.sse"), chunk_size=chunk_size)
        events, message = await answer(model, server, reply)
        call = tool_call("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "read", {"path": "README.md"})
        assert events == [
            {"type": "start"},
            {"type": "text_delta", "contentIndex": 0, "delta": "我先读取"},
            {"type": "text_delta", "contentIndex": 0, "delta": "项目说明。"},
            {"type": "toolcall_delta", "contentIndex": 1, "delta": '{"pa'},
            {"type": "toolcall_delta", "contentIndex": 1, "delta": 'th": "READ'},
            {"type": "toolcall_delta", "contentIndex": 1, "delta": 'ME.md"}'},
            {"type": "toolcall_end", "contentIndex": 1, "toolCall": call},
            {"type": "done", "reason": "toolUse", "message": message},
        ]
        assert message == {"role": "assistant", "content": [text("我先读取项目说明。"), call],
                           "stopReason": "toolUse", "timestamp": 2}  # 1 is the user message's

    async def test_the_request_on_the_wire(self, model, server):
        await answer(model, server, Reply(recorded("anthropic_readme_final.sse")))
        sent = server.requests[0]
        assert sent["path"] == "/v1/messages"
        key_sent = sent["headers"].get("x-api-key") or sent["headers"].get("authorization", "").removeprefix("Bearer ")
        assert key_sent == "test-key" and "anthropic-version" in sent["headers"]
        assert sent["body"] == anthropic_request("claude-sonnet-4-5", readme_request(), 4096)

    async def test_thinking_is_left_out_and_the_text_is_block_0(self, model, server):
        events, message = await answer(model, server, Reply(recorded("anthropic_thinking_then_text.sse")))
        assert events[1:] == [{"type": "text_delta", "contentIndex": 0, "delta": "tiny-pi"},
                              {"type": "done", "reason": "stop", "message": message}]
        assert message["content"] == [text("tiny-pi")]

    async def test_two_tool_calls(self, model, server):
        events, message = await answer(model, server, Reply(recorded("anthropic_two_tools.sse")))
        ends = [(e["contentIndex"], e["toolCall"]) for e in events if e["type"] == "toolcall_end"]
        assert ends == [(0, tool_call("toolu_01A", "read", {"path": "a.txt"})),
                        (1, tool_call("toolu_01B", "read", {"path": "b.txt"}))]
        assert message["stopReason"] == "toolUse" and message["content"] == [call for _, call in ends]

    async def test_max_tokens_keeps_the_arguments_as_the_model_wrote_them(self, model, server):
        events, message = await answer(model, server, Reply(recorded("anthropic_max_tokens_in_arguments.sse")))
        assert events[-1] == {"type": "done", "reason": "length", "message": message}
        # cut short: nothing partial is kept as arguments, the text is kept as written
        assert message["content"] == [text("读取中"), {
            **tool_call("toolu_01CutShort", "read", {}), "argumentsError": "cut short before its JSON ended",
            "argumentsText": '{"path": "README.md", "limit": "tw'}]

    @pytest.mark.parametrize("wire, content, error", [
        ("anthropic_refusal.sse", [text("I can")], "The response ended with stop_reason 'refusal'"),
        ("anthropic_no_message_stop.sse", [text("说到一半")], "The stream ended before message_stop"),
    ], ids=["refusal", "no_message_stop"])
    async def test_answers_that_end_as_errors(self, model, server, wire, content, error):
        events, message = await answer(model, server, Reply(recorded(wire)))
        assert events[-1] == {"type": "error", "reason": "error", "error": message}
        assert (message["stopReason"], message["content"], message["errorMessage"]) == ("error", content, error)

    async def test_an_error_event_mid_stream(self, model, server):
        events, message = await answer(model, server, Reply(recorded("anthropic_error_event.sse")))
        assert [e["type"] for e in events] == ["start", "text_delta", "error"]
        assert message["content"] == [text("开始")] and "Overloaded" in message["errorMessage"]

    async def test_a_malformed_event_ends_the_stream_with_an_error(self, model, server):
        events, message = await answer(model, server, Reply(recorded("anthropic_malformed_event.sse")))
        assert [e["type"] for e in events] == ["start", "error"]
        assert message["errorMessage"].startswith(
            "The server sent a malformed event: its data is not JSON (Unterminated string")

    async def test_an_http_error_is_an_error_end_without_start(self, model, server):
        body = b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},' \
               b'"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}'
        events, message = await answer(model, server, Reply(body, status=529))
        assert [e["type"] for e in events] == ["error"]
        assert message["errorMessage"].startswith("Error code: 529") and "Overloaded" in message["errorMessage"]
