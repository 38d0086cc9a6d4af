"""Providers: OpenAI-compatible Chat Completions, mapped both ways.

The stream cases run the `openai` SDK for real against the loopback server replaying recorded
streams; they skip without the providers extra. The request mapping needs no SDK.
"""

import copy
import json

import pytest
import pytest_asyncio
from loopback import (LoopbackServer, Reply, answer, make_model, readme_request, readme_tools, recorded, request_with,
                      skip_without, transcript_of_every_kind)

from checkpoints.ch07_agent_loop import NOT_EXECUTED
from course.runtime import readme_example as readme
from course.runtime.messages import text, tool_call
from course.runtime.providers.openai_chat import ChunkReader, chat_request
from course.runtime.providers.streaming import Draft

SYSTEM = readme.SYSTEM_PROMPT  # what request_with sends
TRUNCATED, _ = NOT_EXECUTED["length"]


class TestRequestMapping:
    def test_every_kind_of_message(self):
        request = request_with(transcript_of_every_kind())
        before = copy.deepcopy(request)
        body = chat_request("m", request)
        assert body["messages"] == [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "请读取 README.md"},
            {"role": "assistant", "content": "我先读取", "tool_calls": [
                {"id": "call-1", "type": "function",
                 "function": {"name": "read", "arguments": '{"path": "README.md"}'}}]},
            {"role": "tool", "tool_call_id": "call-1", "content": "# tiny-pi"},
            {"role": "user", "content": [{"type": "text", "text": "再读 a.txt 和 b.txt"}]},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call-2", "type": "function", "function": {"name": "read", "arguments": '{"path": "a.txt"}'}},
                {"id": "call-3", "type": "function", "function": {"name": "read", "arguments": '{"path": "b.txt"}'}}]},
            # the loop's skipped results answer their calls, so the request stays one the API accepts
            {"role": "tool", "tool_call_id": "call-2", "content": TRUNCATED},
            {"role": "tool", "tool_call_id": "call-3", "content": TRUNCATED},
            {"role": "user", "content": "继续"},
            # the empty error answer is left out: an assistant message needs content or tool calls
            {"role": "user", "content": "还在吗？"},
        ]
        assert request == before

    def test_tools_come_from_the_request(self):
        body = chat_request("m", request_with([], readme_tools()), max_tokens=256)
        assert body["tools"] == [{"type": "function", "function": {
            "name": "read", "description": "Read a text file from the workspace.",
            "parameters": readme.READ_PARAMETERS}}]
        assert (body["model"], body["stream"], body["max_tokens"]) == ("m", True, 256)

    def test_no_tools_no_system_prompt_sends_neither(self):
        body = chat_request("m", {"systemPrompt": "", "messages": [], "tools": []})
        assert body == {"model": "m", "messages": [], "stream": True}

    def test_unicode_arguments_are_sent_as_they_are(self):
        message = {"role": "assistant", "content": [tool_call("c", "read", {"path": "说明.md"})],
                   "stopReason": "toolUse", "timestamp": 2}  # 1 is the user message's
        sent = chat_request("m", request_with([message]))["messages"][1]["tool_calls"][0]["function"]["arguments"]
        assert sent == '{"path": "说明.md"}' and json.loads(sent) == {"path": "说明.md"}


class TestFinishReasons:
    @pytest.mark.parametrize("finish, stop_reason", [
        ("stop", "stop"), ("length", "length"), ("tool_calls", "toolUse"), ("function_call", "toolUse"),
    ])
    def test_a_finish_reason_becomes_a_stop_reason(self, finish, stop_reason):
        reader = ChunkReader(Draft())
        delta = {"content": "好"}
        if stop_reason == "toolUse":  # such an answer without a call is an error (test_providers_faults.py)
            delta["tool_calls"] = [{"index": 0, "id": "c", "function": {"name": "read", "arguments": "{}"}}]
        reader.read({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        *_, end = reader.end()
        assert (end["type"], end["reason"], end["message"]["content"][0]) == ("done", stop_reason, text("好"))

    @pytest.mark.parametrize("finish", ["content_filter", "eos_token"])
    def test_a_filtered_or_unknown_finish_is_an_error(self, finish):
        reader = ChunkReader(Draft())
        reader.read({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        [end] = reader.end()
        assert (end["type"], end["reason"]) == ("error", "error")
        assert end["error"]["errorMessage"] == f"The response ended with finish_reason {finish!r}"


@pytest.fixture
def server():
    with LoopbackServer() as server:
        yield server


@pytest_asyncio.fixture
async def model(server):
    model = make_model("openai", server)
    yield model
    await model.aclose()


@skip_without("openai")
@pytest.mark.asyncio
class TestStreamMapping:
    @pytest.mark.parametrize("chunk_size", [None, 5], ids=["per_event", "cut_every_5_bytes"])
    async def test_text_then_a_tool_call_in_pieces(self, model, server, chunk_size):
        reply = Reply(recorded("openai_readme_first.sse"), chunk_size=chunk_size)
        events, message = await answer(model, server, reply)
        call = tool_call("call_Rk3fJ8aQ2b", "read", {"path": "README.md"})
        assert events == [
            {"type": "start"},
            {"type": "text_delta", "contentIndex": 0, "delta": "我先读取"},
            {"type": "text_delta", "contentIndex": 0, "delta": "项目说明。"},
            {"type": "toolcall_delta", "contentIndex": 1, "delta": '{"pa'},
            {"type": "toolcall_delta", "contentIndex": 1, "delta": 'th":"README'},
            {"type": "toolcall_delta", "contentIndex": 1, "delta": '.md"}'},
            {"type": "toolcall_end", "contentIndex": 1, "toolCall": call},
            {"type": "done", "reason": "toolUse", "message": message},
        ]
        assert message == {"role": "assistant", "content": [text("我先读取项目说明。"), call],
                           "stopReason": "toolUse", "timestamp": 2}  # 1 is the user message's

    async def test_the_request_on_the_wire(self, model, server):
        await answer(model, server, Reply(recorded("openai_readme_final.sse")))
        sent = server.requests[0]
        assert sent["path"] == "/v1/chat/completions"
        assert sent["headers"]["authorization"] == "Bearer test-key"
        assert sent["body"] == chat_request("gpt-4o-mini", readme_request())

    async def test_two_tool_calls(self, model, server):
        events, message = await answer(model, server, Reply(recorded("openai_two_tools.sse")))
        ends = [(e["contentIndex"], e["toolCall"]) for e in events if e["type"] == "toolcall_end"]
        assert ends == [(0, tool_call("call_A1", "read", {"path": "a.txt"})),
                        (1, tool_call("call_B2", "read", {"path": "b.txt"}))]
        assert message["stopReason"] == "toolUse" and message["content"] == [call for _, call in ends]

    async def test_length_keeps_the_arguments_as_the_model_wrote_them(self, model, server):
        events, message = await answer(model, server, Reply(recorded("openai_length_in_arguments.sse")))
        assert events[-1] == {"type": "done", "reason": "length", "message": message}
        # cut short: nothing partial is kept as arguments, the text is kept as written
        assert message["content"] == [text("读取中"), {
            **tool_call("call_Cut9", "read", {}), "argumentsError": "cut short before its JSON ended",
            "argumentsText": '{"path":"README.md","limit":"tw'}]
        assert "errorMessage" not in message

    async def test_stop_with_a_tool_call_from_a_local_server_is_tool_use(self, model, server):
        _, message = await answer(model, server, Reply(recorded("openai_local_stop_with_tool_call.sse")))
        assert message["stopReason"] == "toolUse"
        assert message["content"] == [tool_call("call_x7", "read", {"path": "README.md"})]

    @pytest.mark.parametrize("wire, content, error", [
        ("openai_content_filter.sse", [text("我不能")], "The response ended with finish_reason 'content_filter'"),
        ("openai_refusal.sse", [], "The model refused: I can't help with that."),
        ("openai_no_finish_reason.sse", [text("说到一半")], "The stream ended without a finish_reason"),
        ("openai_error_event.sse", [text("开始")],
         "The server had an error while processing your request. Sorry about that!"),
    ], ids=["content_filter", "refusal", "no_finish_reason", "error_event"])
    async def test_answers_that_end_as_errors(self, model, server, wire, content, error):
        events, message = await answer(model, server, Reply(recorded(wire)))
        assert events[-1] == {"type": "error", "reason": "error", "error": message}
        assert (message["stopReason"], message["content"], message["errorMessage"]) == ("error", content, error)

    async def test_a_malformed_event_ends_the_stream_with_an_error(self, model, server):
        events, message = await answer(model, server, Reply(recorded("openai_malformed_event.sse")))
        assert [e["type"] for e in events] == ["start", "error"]
        assert message["stopReason"] == "error" and message["content"] == []
        assert message["errorMessage"].startswith(
            "The server sent a malformed event: its data is not JSON (Unterminated string")

    async def test_an_http_error_is_an_error_end_without_start(self, model, server):
        body = b'{"error":{"message":"Incorrect API key provided: test-key.","type":"invalid_request_error",' \
               b'"param":null,"code":"invalid_api_key"}}'
        events, message = await answer(model, server, Reply(body, status=401))
        assert [e["type"] for e in events] == ["error"]
        assert message["errorMessage"].startswith("Error code: 401")
        assert "Incorrect API key provided" in message["errorMessage"]
