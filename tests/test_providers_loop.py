"""Providers: what both do alike over real HTTP — the chapter 07 loop end to end, broken
connections, timeouts and aborts. Each case runs once per provider against the loopback server."""

import asyncio

import pytest
import pytest_asyncio
from loopback import (  # noqa: F401 — provider and server are fixtures
    ALL_TEXT, aborted_at_first_text, Reply, collect, make_model, provider, readme_request, recorded, server, skip_without,
)

from course.judge import cli
from course.runtime import readme_example as readme
from course.runtime.abort import AbortController
from course.recorder.harness import load_prerequisite, run_loop
from course.runtime.messages import text, user_message
from course.runtime.providers.streaming import parse_arguments
from course.runtime.tools import Registry

# How many events of each provider's recorded README stream leave its tool call started but unfinished.
CALL_UNFINISHED = {"openai": 5, "anthropic": 9}
LENGTH_STREAM = {"openai": "openai_length_in_arguments.sse", "anthropic": "anthropic_max_tokens_in_arguments.sse"}


@pytest_asyncio.fixture
async def model(provider, server):
    model = make_model(provider, server)
    yield model
    await model.aclose()


async def client_closed(server):
    """Whether the client closed the connection the server held (bounded wait, in a thread)."""
    return await asyncio.to_thread(server.client_closed.wait, 2.0)


@pytest.mark.asyncio
class TestChapter07Loop:
    async def test_readme_round_trip(self, provider, model, server, snapshot):
        server.replies.extend([Reply(recorded(f"{provider}_readme_first.sse")),
                               Reply(recorded(f"{provider}_readme_final.sse"))])
        run = await run_loop(load_prerequisite("ch07_agent_loop"), model=model, context=readme.context(),
                             tools=Registry([readme.memory_read_tool()]))
        assert run == snapshot
        assert (run.reason, run.steps, run.executions, run.problems) == ("stop", 2, ["read"], [])
        assert run.messages[-1]["content"] == [text("项目名是 tiny-pi。")]
        assert len(server.requests) == 2

    async def test_a_truncated_call_is_skipped_and_the_next_run_is_accepted(self, provider, model, server):
        ch07 = load_prerequisite("ch07_agent_loop")
        tools = Registry([readme.memory_read_tool()])
        server.replies.extend([Reply(recorded(LENGTH_STREAM[provider])),
                               Reply(recorded(f"{provider}_readme_final.sse"))])
        first = await run_loop(ch07, model=model, context=readme.context(), tools=tools)
        assert (first.reason, first.executions, first.problems) == ("length", [], [])
        skipped = first.messages[-1]
        assert skipped["role"] == "toolResult" and skipped["isError"] and skipped["details"]["skipped"]

        context = {"systemPrompt": readme.SYSTEM_PROMPT, "messages": [*first.messages, user_message("继续")]}
        model.requests.clear()  # the harness checks one run's requests
        second = await run_loop(ch07, model=model, context=context, tools=tools)
        assert (second.reason, second.problems) == ("stop", [])
        sent = server.requests[1]["body"]["messages"]
        if provider == "openai":
            assert sent[-2] == {"role": "tool", "tool_call_id": skipped["toolCallId"],
                                "content": skipped["content"][0]["text"]}
        else:
            assert sent[-1]["content"][0] == {"type": "tool_result", "tool_use_id": skipped["toolCallId"],
                                              "is_error": True, "content": skipped["content"]}


@pytest.mark.asyncio
class TestBrokenConnections:
    async def test_a_dropped_connection_keeps_what_was_complete(self, provider, model, server):
        server.replies.append(Reply(recorded(f"{provider}_readme_first.sse"), events=CALL_UNFINISHED[provider],
                                    then="drop"))
        events, message = await collect(model.stream(readme_request()))
        assert events[-1] == {"type": "error", "reason": "error", "error": message}
        # the tool call was still streaming: it is left out, as its toolcall_end never came
        assert message["content"] == [text("我先读取项目说明。")]
        assert "toolcall_end" not in [e["type"] for e in events]
        assert "peer closed connection" in message["errorMessage"]

    async def test_a_silent_server_times_out_and_the_stream_is_closed(self, provider, server):
        model = make_model(provider, server, timeout=0.3)
        server.replies.append(Reply(recorded(f"{provider}_readme_first.sse"), events=ALL_TEXT[provider], then="hold"))
        events, message = await collect(model.stream(readme_request()))
        await model.aclose()
        assert (message["stopReason"], message["content"]) == ("error", [text("我先读取项目说明。")])
        assert "timed out" in message["errorMessage"].lower()
        assert await client_closed(server)


@pytest.mark.asyncio
class TestAbort:
    async def test_abort_mid_stream_closes_the_http_stream(self, provider, model, server):
        server.replies.append(Reply(recorded(f"{provider}_readme_first.sse"), events=ALL_TEXT[provider], then="hold"))
        events, message = await aborted_at_first_text(model)
        assert [e["type"] for e in events] == ["start", "text_delta", "error"]
        assert events[-1]["reason"] == "aborted"
        assert (message["stopReason"], message["content"], message["errorMessage"]) == \
            ("aborted", [text("我先读取")], "Request was aborted")
        assert await client_closed(server)

    async def test_abort_while_waiting_for_the_server(self, provider, model, server):
        controller = AbortController()
        loop = asyncio.get_running_loop()
        # The server holds the stream open after its first event and aborts from its own thread.
        server.replies.append(Reply(recorded(f"{provider}_readme_first.sse"), events=1, then="hold",
                                    on_hold=lambda: loop.call_soon_threadsafe(controller.abort)))
        events, message = await collect(model.stream(readme_request(), signal=controller.signal))
        assert events[-1] == {"type": "error", "reason": "aborted", "error": message}
        assert (message["stopReason"], message["content"]) == ("aborted", [])
        assert await client_closed(server)

    async def test_an_aborted_signal_sends_no_request(self, model, server):
        controller = AbortController()
        controller.abort()
        events, message = await collect(model.stream(readme_request(), signal=controller.signal))
        assert events == [{"type": "error", "reason": "aborted", "error": message}]
        assert message["errorMessage"] == "Request was aborted" and server.requests == []


@skip_without("jiter")
class TestPartialArguments:
    @pytest.mark.parametrize("raw, arguments", [
        ('{"path": "README.md"}', {"path": "README.md"}),
        ('{"path": "README.md", "limit": 2', {"path": "README.md", "limit": 2}),
        ('{"path": "README.md", "limit": "tw', {"path": "README.md"}),  # a string cut short is left out
        ('{"path": "READ', {}),
        ('{"pa', {}),
        ("", {}),
        ("[1, 2]", {}),  # not an object
        ("path=README.md", {}),  # not JSON at all
    ])
    def test_arguments_parse_as_far_as_they_go(self, raw, arguments):
        assert parse_arguments(raw) == arguments


class TestCommand:
    """`course demo --provider ...` runs the same round trip on a real model (here, the replay server)."""

    @skip_without("openai")
    def test_demo_on_a_local_openai_compatible_server_needs_no_key(self, server, capsys, monkeypatch):
        for variable in ["OPENAI_API_KEY", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                         "all_proxy"]:  # the command's own HTTP client reads them; the test stays on 127.0.0.1
            monkeypatch.delenv(variable, raising=False)
        server.replies.extend([Reply(recorded("openai_readme_first.sse")), Reply(recorded("openai_readme_final.sse"))])
        code = cli.main(["demo", "--provider", "openai", "--base-url", f"{server.url}/v1", "--model", "qwen2.5:7b"])
        out = capsys.readouterr().out
        assert code == 0
        assert out.startswith("Chapter 07 — README round trip on openai model qwen2.5:7b\n")
        assert "reason           stop" in out and "4  assistant   [stop] 项目名是 tiny-pi。" in out
        assert [r["body"]["model"] for r in server.requests] == ["qwen2.5:7b", "qwen2.5:7b"]
        assert server.requests[0]["headers"]["authorization"] == "Bearer no-key"

    def test_a_provider_needs_a_model_name(self, capsys):
        assert cli.main(["demo", "--provider", "anthropic"]) == 2
        assert "--provider needs --model NAME" in capsys.readouterr().err
