"""Hostile or broken collaborators: each has a defined outcome, and nothing that formed is lost.

Models that fail in every way a provider can, executors that answer the wrong call or not at
all, observers that raise, the task running the loop cancelled, and tool input or output no
tool should produce. Every run that returns is also held to the loop's invariants.
"""

import asyncio
import copy
import datetime
import gc

import pytest
import pytest_asyncio

from course.runtime import readme_example as readme
from course.recorder.harness import load_checkpoint, run_loop
from course.runtime.messages import assistant_message, text, tool_call, tool_result
from course.runtime.scripted import ScriptedModel
from course.runtime.stream import AssistantMessageEventStream, guard_stream
from course.runtime.tools import Registry, Tool

pytestmark = pytest.mark.asyncio


@pytest.fixture
def ch07():
    return load_checkpoint("ch07_agent_loop")


@pytest_asyncio.fixture(autouse=True)
async def loop_reports():
    """What the event loop reports ("Task was destroyed but it is pending", ...): must stay empty."""
    reported: list[str] = []
    asyncio.get_running_loop().set_exception_handler(lambda loop, context: reported.append(context["message"]))
    yield reported
    gc.collect(1)  # a task dropped while pending is reported when it is collected (young objects suffice)
    assert reported == []


def other_tasks() -> set[asyncio.Task]:
    return asyncio.all_tasks() - {asyncio.current_task()}


def turn_ends(run) -> list[tuple[str, int]]:
    return [(e["reason"], e["steps"]) for e in run.events if e["type"] == "turn_end"]


# --- models ---------------------------------------------------------------------------------

class SecondAnswerBreaks:
    """Answers the first request with the chapter's read call, then opens `broken_stream()`."""

    def __init__(self, broken_stream):
        self.requests = []
        self._first = ScriptedModel([readme.first_answer()], record_requests=False)
        self._broken_stream = broken_stream

    def stream(self, request, *, signal=None):
        self.requests.append(copy.deepcopy(request))
        if len(self.requests) == 1:
            return self._first.stream(request, signal=signal)
        return self._broken_stream()


class RawStream:
    """A stream written without AssistantMessageEventStream: yields `events` (raising any exception
    among them), then `result()` returns `final` or raises it."""

    def __init__(self, events, final):
        self._events, self._final = events, final

    async def _iterate(self):
        for event in self._events:
            if isinstance(event, Exception):
                raise event
            yield event

    def __aiter__(self):
        return self._iterate()

    async def result(self):
        if isinstance(self._final, Exception):
            raise self._final
        return self._final


def raise_on_open():
    raise ConnectionError("connection refused")


async def _source_yielding(*events):
    for event in events:
        yield event


ANSWER = assistant_message([text("项目名是 tiny-pi。")], "stop", timestamp=0)
STARTED = [{"type": "start"}, {"type": "text_delta", "contentIndex": 0, "delta": "项目"}]

# how the model breaks on the second request -> what its errorMessage must say
BROKEN_MODELS = {
    "stream_raises": (raise_on_open, "Model stream failed: connection refused"),
    "stream_returns_no_stream": (lambda: None, "Model stream failed: 'async for' requires an object with __aiter__"),
    "iteration_raises": (lambda: RawStream([*STARTED, ConnectionError("connection reset")], ANSWER),
                         "Model stream failed: connection reset"),
    "ends_without_done": (lambda: AssistantMessageEventStream(_source_yielding({"type": "start"})),
                          "Model stream ended without a done or error event"),
    "ends_without_done_and_no_result": (lambda: RawStream(STARTED, RuntimeError("no final message")),
                                        "Model stream failed: no final message"),
    "result_raises": (lambda: RawStream([*STARTED, {"type": "done", "reason": "stop", "message": ANSWER}],
                                        RuntimeError("result lost")),
                      "Model stream failed: result lost"),
    "result_is_not_a_message": (lambda: RawStream(STARTED, "项目名是 tiny-pi。"),
                                "Model returned str instead of an assistant message"),
    "event_is_not_a_model_event": (lambda: RawStream([{"type": "start"}, 42], ANSWER),
                                   "Model stream failed: the stream yielded 42, which is not a model event"),
    # The course's own stream class is not wrapped again: it checks what its source yields itself.
    "own_stream_yields_a_non_event": (lambda: AssistantMessageEventStream(_source_yielding({"type": "start"}, 42)),
                                      "Model stream failed: the stream yielded 42, which is not a model event"),
    "own_stream_done_without_a_message": (
        lambda: AssistantMessageEventStream(_source_yielding({"type": "done", "reason": "stop", "message": "hi"})),
        "Model returned str instead of an assistant message"),
    "own_stream_error_with_unknown_stop_reason": (
        lambda: AssistantMessageEventStream(_source_yielding(
            {"type": "error", "reason": "error", "error": {**ANSWER, "stopReason": "oops"}})),
        "Model returned an unknown stopReason 'oops'"),
}


@pytest.mark.parametrize("how", list(BROKEN_MODELS))
async def test_broken_model_ends_the_run_with_an_error_message(ch07, how):
    broken_stream, says = BROKEN_MODELS[how]
    model = SecondAnswerBreaks(broken_stream)
    run = await run_loop(ch07, model=model, context=readme.context(), tools=Registry([readme.memory_read_tool()]))

    assert (run.reason, run.steps, turn_ends(run)) == ("error", 2, [("error", 2)])
    *earlier, last = run.messages
    assert [m["role"] for m in earlier] == ["user", "assistant", "toolResult"]
    assert earlier[2]["content"] == [text(readme.README)]  # the first round is kept
    assert (last["role"], last["stopReason"]) == ("assistant", "error")
    assert last["errorMessage"].startswith(says)
    assert run.problems == []


async def test_each_models_stream_is_finished_when_it_ends(ch07):
    # A provider's stream sits at its last yield after `done`; the loop's stream finishes it then,
    # so its cleanup (a connection, say) runs during the run, not when the garbage collector gets to it.
    finished = []

    class CleanModel:
        requests = None

        def stream(self, request, *, signal=None):
            answer = readme.first_answer() if len(request["messages"]) == 1 else readme.final_answer()

            async def events():
                try:
                    yield {"type": "start"}
                    yield {"type": "done", "reason": answer["stopReason"], "message": answer}
                finally:
                    finished.append(len(request["messages"]))
            return AssistantMessageEventStream(events())

    run = await run_loop(ch07, model=CleanModel(), context=readme.context(), tools=Registry([readme.memory_read_tool()]))
    assert (run.reason, finished, other_tasks(), run.problems) == ("stop", [1, 3], set(), [])


FOREIGN_ENDINGS = {  # how a stream of another class ends -> the run's reason
    "done": ([{"type": "start"}, "DONE", {"type": "start"}], "stop"),  # events after `done` are never read
    "end_without_done": ([{"type": "start"}], "stop"),  # result() is the answer
    "non_event": ([{"type": "start"}, 42, {"type": "start"}], "error"),
    "raises": ([{"type": "start"}, ConnectionError("reset")], "error"),
}


@pytest.mark.parametrize("ending", list(FOREIGN_ENDINGS))
async def test_a_foreign_streams_iterator_is_closed_by_the_run_not_the_garbage_collector(ch07, ending):
    # A stream of another class than the course's is read through its own async generator; the loop
    # closes that generator as soon as the answer is complete, in the run's own task. One left
    # suspended would be closed later by asyncio's finaliser hook, in a clean-up task of its own.
    events, reason = FOREIGN_ENDINGS[ending]
    closed_in = []

    class ForeignStream(RawStream):
        async def _iterate(self):
            try:
                for event in self._events:
                    if isinstance(event, Exception):
                        raise event
                    yield {"type": "done", "reason": "stop", "message": self._final} if event == "DONE" else event
            finally:
                closed_in.append(asyncio.current_task())

    class ForeignModel:
        def stream(self, request, *, signal=None):
            return ForeignStream(events, ANSWER)

    run = await run_loop(ch07, model=ForeignModel(), context=readme.context())
    assert (run.reason, run.problems) == (reason, [])
    assert closed_in == [asyncio.current_task()]


# --- executors ------------------------------------------------------------------------------

def answering(make_result):
    async def execute(call, context):
        return make_result(call)
    return execute


WRONG_ANSWERS = {
    "result_for_another_call": (
        lambda call: tool_result(tool_call("call-9", "read", {}), [text("other")]),
        "Executor returned a result for 'read' call 'call-9' instead of 'read' call 'call-1'"),
    "result_for_another_tool": (
        lambda call: tool_result(tool_call("call-1", "write", {}), [text("other")]),
        "Executor returned a result for 'write' call 'call-1' instead of 'read' call 'call-1'"),
    "a_string": (lambda call: "# tiny-pi", "Executor returned str instead of a tool result for call call-1"),
    "nothing": (lambda call: None, "Executor returned NoneType instead of a tool result for call call-1"),
    "a_tool_output_not_a_message": (lambda call: {"content": [text("# tiny-pi")]},
                                    "Executor returned dict instead of a tool result for call call-1"),
    "content_not_a_list": (lambda call: {**tool_result(call, []), "content": "# tiny-pi"},
                           "Executor returned a malformed tool result for call call-1"),
    "not_json": (lambda call: tool_result(call, [text("ok")], details={"at": datetime.date(2026, 1, 1)}),
                 "Executor returned a result for call call-1 that is not JSON: "
                 "Object of type date is not JSON serializable"),
}


@pytest.mark.parametrize("answer", list(WRONG_ANSWERS))
async def test_wrong_executor_answer_becomes_an_error_result_for_the_right_call(ch07, answer):
    make_result, says = WRONG_ANSWERS[answer]
    model = ScriptedModel([readme.first_answer(), readme.final_answer()])
    run = await run_loop(ch07, model=model, context=readme.context(), execute_tool_call=answering(make_result))

    result = run.messages[2]
    assert (result["toolCallId"], result["toolName"], result["isError"]) == ("call-1", "read", True)
    assert result["content"] == [text(says)]
    assert model.requests[1]["messages"][2] == result  # the model is told, and the run goes on
    assert (run.reason, run.problems) == ("stop", [])


# --- observers ------------------------------------------------------------------------------

def two_reads():
    return ScriptedModel([
        assistant_message([readme.read_call("call-1"), readme.read_call("call-2", "NOTES.md")], "toolUse"),
        readme.final_answer(),
    ])


class Tools:
    """call-1 finishes once both have started (reporting progress on the way); call-2 waits until
    `observe` has seen call-1's tool_end, so it is still running if the run stops before that."""

    def __init__(self):
        self.both_started = asyncio.Event()
        self.call_2_may_finish = asyncio.Event()
        self.started: list[str] = []
        self.cancelled: list[str] = []

    def observe(self, event):
        if event["type"] == "tool_end" and event["result"]["toolCallId"] == "call-1":
            self.call_2_may_finish.set()

    async def execute(self, call, context):
        self.started.append(call["id"])
        if len(self.started) == 2:
            self.both_started.set()
        if call["id"] == "call-1":
            await self.both_started.wait()
            context.report_progress([text("half way")])
            return tool_result(call, [text("readme")])
        try:
            await self.call_2_may_finish.wait()
        except asyncio.CancelledError:
            self.cancelled.append(call["id"])
            raise
        return tool_result(call, [text("notes")])


def raise_at(kind, inner=None, then=lambda event: None):
    """An observer that raises at the first event of `kind` (and inner model event type), else calls `then`."""
    def observe(event):
        if event["type"] == kind and (inner is None or event["event"]["type"] == inner):
            raise RuntimeError(f"observer broke at {kind}")
        then(event)
    return observe


# where the observer raises -> the transcript formed by then
BEFORE_THE_BATCH = {
    "while_streaming": (("model_event", "toolcall_end"), ["user"]),  # the answer had not formed yet
    "at_the_assistant_message": (("assistant_message",), ["user", "assistant"]),
    "at_tool_start": (("tool_start",), ["user", "assistant"]),  # so no tool starts
}


@pytest.mark.parametrize("when", list(BEFORE_THE_BATCH))
async def test_observer_raising_before_the_batch_runs(ch07, when):
    raising_at, roles = BEFORE_THE_BATCH[when]
    tools = Tools()
    with pytest.raises(RuntimeError, match=f"observer broke at {raising_at[0]}") as raised:
        await run_loop(ch07, model=two_reads(), context=readme.context(), execute_tool_call=tools.execute,
                       on_event=raise_at(*raising_at, then=tools.observe))
    assert [m["role"] for m in raised.value.transcript] == roles
    assert (tools.started, other_tasks()) == ([], set())


@pytest.mark.parametrize("kind", ["tool_progress", "tool_end"])
async def test_observer_raising_during_a_tool_batch(ch07, kind):
    # The observer fails on call-1's progress or end while call-2 still runs: call-2 is cancelled and
    # awaited, the exception reaches the caller, and call-1's result (formed at tool_end) is kept.
    tools = Tools()
    with pytest.raises(RuntimeError, match=f"observer broke at {kind}") as raised:
        await run_loop(ch07, model=two_reads(), context=readme.context(), execute_tool_call=tools.execute,
                       on_event=raise_at(kind, then=tools.observe))
    assert (tools.started, tools.cancelled, other_tasks()) == (["call-1", "call-2"], ["call-2"], set())
    transcript = raised.value.transcript
    if kind == "tool_end":
        assert [m["role"] for m in transcript] == ["user", "assistant", "toolResult"]
        assert (transcript[2]["toolCallId"], transcript[2]["content"]) == ("call-1", [text("readme")])
    else:
        assert [m["role"] for m in transcript] == ["user", "assistant"]  # call-1 never finished


async def test_observer_raising_at_tool_skipped_keeps_the_skipped_result(ch07):
    model = ScriptedModel([assistant_message([readme.read_call()], "length")])
    with pytest.raises(RuntimeError, match="observer broke at tool_skipped") as raised:
        await run_loop(ch07, model=model, context=readme.context(), on_event=raise_at("tool_skipped"))
    assert [m["role"] for m in raised.value.transcript] == ["user", "assistant", "toolResult"]


async def test_observer_raising_at_turn_end_keeps_the_whole_transcript(ch07):
    model = ScriptedModel([readme.first_answer(), readme.final_answer()])
    with pytest.raises(RuntimeError, match="observer broke at turn_end") as raised:
        await run_loop(ch07, model=model, context=readme.context(), tools=Registry([readme.memory_read_tool()]),
                       on_event=raise_at("turn_end"))
    assert [m["role"] for m in raised.value.transcript] == ["user", "assistant", "toolResult", "assistant"]


# --- cancellation ---------------------------------------------------------------------------

async def test_cancelled_while_streaming(ch07):
    model_waiting = asyncio.Event()

    async def never_answers(request):
        model_waiting.set()
        await asyncio.Event().wait()

    events = []
    run = asyncio.create_task(run_loop(ch07, model=ScriptedModel([never_answers]), context=readme.context(),
                                       on_event=events.append))
    await model_waiting.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError) as raised:
        await run
    assert [m["role"] for m in raised.value.transcript] == ["user"]
    assert (events, other_tasks()) == ([], set())  # no turn_end: the run did not finish, it was cancelled


async def test_cancelled_during_a_tool_batch(ch07):
    tools = Tools()
    call_1_ended = asyncio.Event()

    def observe(event):  # unlike tools.observe, leaves call-2 waiting
        if event["type"] == "tool_end":
            call_1_ended.set()

    run = asyncio.create_task(run_loop(ch07, model=two_reads(), context=readme.context(),
                                       execute_tool_call=tools.execute, on_event=observe))
    await call_1_ended.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError) as raised:
        await run
    assert (tools.cancelled, other_tasks()) == (["call-2"], set())  # cancelled, and awaited before the loop ended
    transcript = raised.value.transcript
    assert [(m["role"], m.get("toolCallId")) for m in transcript] == [
        ("user", None), ("assistant", None), ("toolResult", "call-1")]


@pytest.mark.parametrize("batch", ["one_call", "two_calls"])
async def test_cancellation_is_not_swallowed_by_a_tool_that_ignores_it(ch07, batch):
    # One call runs in the loop's own task, two in a task group: either way the cancellation ends the run.
    model = ScriptedModel([readme.first_answer(), readme.final_answer()]) if batch == "one_call" else two_reads()
    tool_waiting = asyncio.Event()

    async def stubborn(call, context):
        tool_waiting.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            return tool_result(call, [text("I refuse to be cancelled")])

    run = asyncio.create_task(run_loop(ch07, model=model, context=readme.context(), execute_tool_call=stubborn))
    await tool_waiting.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert (model.request_count, other_tasks()) == (1, set())  # the refusal did not reach a second request


# --- tool input and output ------------------------------------------------------------------

def tool(name, execute, parameters=None):
    return Tool(name=name, description=f"the {name} tool", execute=execute,
                parameters=parameters or {"type": "object", "properties": {}})


def one_call_then_stop(call):
    return ScriptedModel([assistant_message([call], "toolUse"), assistant_message([text("好的。")], "stop")])


async def test_arguments_failing_the_schema_are_an_error_result_and_the_tool_never_runs(ch07):
    model = one_call_then_stop(tool_call("call-1", "read", {"path": 7, "mode": "rw"}))
    run = await run_loop(ch07, model=model, context=readme.context(), tools=Registry([readme.memory_read_tool()]))
    result = run.messages[2]
    assert (result["isError"], run.executions, run.reason, run.problems) == (True, [], "stop", [])
    assert result["content"][0]["text"].startswith("Invalid arguments for tool read at ")


async def test_unknown_tool_is_an_error_result(ch07):
    model = one_call_then_stop(tool_call("call-1", "rm", {"path": "/"}))
    run = await run_loop(ch07, model=model, context=readme.context(), tools=Registry([readme.memory_read_tool()]))
    assert run.messages[2]["content"] == [text("Tool rm not found")]
    assert (run.messages[2]["isError"], run.executions, run.problems) == (True, [], [])


NOT_JSON = {
    "details": ({"content": [text("ok")], "details": {"seen": {1, 2}}}, "Object of type set is not JSON serializable"),
    "content": ({"content": [text("ok"), b"\x89PNG"]}, "Object of type bytes is not JSON serializable"),
    "nan": ({"content": [text("ok")], "details": {"score": float("nan")}},
            "Out of range float values are not JSON compliant"),
}


@pytest.mark.parametrize("where", list(NOT_JSON))
async def test_output_that_is_not_json_becomes_an_error_result(ch07, where):
    output, why = NOT_JSON[where]

    async def execute(arguments, context):
        return output

    run = await run_loop(ch07, model=one_call_then_stop(tool_call("call-1", "odd", {})), context=readme.context(),
                         tools=Registry([tool("odd", execute)]))
    assert run.messages[2]["content"][0]["text"].startswith(f"Tool odd returned output that is not JSON: {why}")
    assert (run.messages[2]["isError"], run.reason, run.problems) == (True, "stop", [])


async def test_a_megabyte_of_output_arrives_whole(ch07):
    big = "tiny-pi 小型运行时\n" * 50_000  # about 1 MB of UTF-8

    async def execute(arguments, context):
        return {"content": [text(big)]}

    model = one_call_then_stop(tool_call("call-1", "cat", {}))
    run = await run_loop(ch07, model=model, context=readme.context(), tools=Registry([tool("cat", execute)]))
    assert len(big.encode()) > 1_000_000
    assert run.messages[2]["content"] == [text(big)] and model.requests[1]["messages"][2]["content"] == [text(big)]
    assert (run.reason, run.problems) == ("stop", [])


async def test_a_thousand_calls_in_one_batch_run_together_and_answer_in_call_order(ch07):
    calls = [tool_call(f"call-{n}", "echo", {"n": n}) for n in range(1000)]
    all_started = asyncio.Event()
    running = []

    async def execute(arguments, context):
        running.append(arguments["n"])
        if len(running) == len(calls):
            all_started.set()
        await all_started.wait()  # no call can finish before the last has started
        return {"content": [text(str(arguments["n"]))]}

    model = ScriptedModel([assistant_message(calls, "toolUse"), assistant_message([text("好的。")], "stop")])
    run = await run_loop(ch07, model=model, context=readme.context(), tools=Registry([tool("echo", execute)]))
    results = [m for m in run.messages if m["role"] == "toolResult"]
    assert [r["toolCallId"] for r in results] == [c["id"] for c in calls]
    assert [r["content"] for r in results] == [[text(str(n))] for n in range(1000)]
    assert (run.reason, len(run.executions), run.problems) == ("stop", 1000, [])


# result() may be awaited before, during or after iterating: every event is still iterated once, in order.
STREAMED = [{"type": "start"}, {"type": "text_delta", "contentIndex": 0, "delta": "项目"},
            {"type": "done", "reason": "stop", "message": ANSWER}]
STREAMS = {
    "own_stream_with_a_source": lambda: AssistantMessageEventStream(_source_yielding(*copy.deepcopy(STREAMED))),
    "foreign_stream": lambda: RawStream(STREAMED, ANSWER),
    "scripted": lambda: ScriptedModel([ANSWER]).stream({"systemPrompt": "", "messages": [], "tools": []}),
}


@pytest.mark.parametrize("read_after", [0, 1, 2, 3])
@pytest.mark.parametrize("kind", list(STREAMS))
async def test_result_awaited_mid_stream_keeps_every_event_in_order(kind, read_after):
    stream = guard_stream(STREAMS[kind])
    seen = []
    async for event in stream:
        seen.append(event["type"])
        if len(seen) == read_after:
            assert (await stream.result())["content"] == ANSWER["content"]
    if read_after == 0:
        assert seen == ["start", "text_delta", "done"]
        stream = guard_stream(STREAMS[kind])
        final = await stream.result()
        assert [event["type"] async for event in stream] == ["start", "text_delta", "done"]
        assert await stream.result() is final and final["content"] == ANSWER["content"]
    assert seen == ["start", "text_delta", "done"]
