"""Chapter 07: the agent loop. One class per chapter section; `pytest -k <section>` selects it.

Each test names what it holds the student to: the chapter's sentences (`cites`, names of
`chapters/ch07_agent_loop/judge/contract.py`'s CITES), or, in the section 加固 (the hardening track,
beyond the chapter), the project's own promise (`hardening`, a name of its PROMISES)."""

import asyncio

import pytest

from course.runtime import readme_example as readme
from course.runtime.abort import AbortController
from course.recorder.generated import generated_scenarios
from course.recorder.harness import load_checkpoint, raised, run_loop
from course.runtime.messages import assistant_message, text, tool_call, tool_result, user_message
from course.runtime.scripted import ScriptedModel
from course.runtime.tools import Registry, Tool



@pytest.fixture
def ch07():
    return load_checkpoint("ch07_agent_loop")


def probe(replies, *, gates=None, before=None):
    """An injected executor: answers each call id from `replies` (an exception is raised),
    after waiting on that id's gate, if any, and calling `before(call, context)`, if given."""
    gates = gates or {}

    async def execute(call, context):
        if before is not None:
            before(call, context)
        if call["id"] in gates:
            await gates[call["id"]].wait()
        reply = replies[call["id"]]
        if isinstance(reply, Exception):
            raise reply
        return tool_result(call, [text(reply)])

    return execute


class SiblingGate:
    """An asyncio.Event that a call waits on until something its sibling in the same batch does.

    A wrong loop may never do it (it awaits its tools one after another, or emits tool_end only once
    the whole batch ended), so rather than hang for ever, the wait gives up once the event loop has
    turned many times, and the call fails saying what did not happen (the run's snapshot shows it)."""

    def __init__(self, missing: str) -> None:
        self.missing = missing  # what did not happen, in words: the failing run's snapshot shows it
        self.event = asyncio.Event()

    def set(self) -> None:
        self.event.set()

    async def wait(self) -> None:
        for _ in range(1000):
            if self.event.is_set():
                return
            await asyncio.sleep(0)  # one turn of the event loop, not a delay
        raise RuntimeError(self.missing)


@pytest.mark.section("纯文本 stop")
class TestPureStop:
    @pytest.mark.cites("pure-stop", "turn-end")
    async def test_pure_stop(self, ch07, snapshot):
        """a stop answer without tool calls ends the run after one request."""
        model = ScriptedModel([assistant_message([text("你好，我是 tiny-pi。")], "stop")])
        run = await run_loop(ch07, model=model, context={"systemPrompt": readme.SYSTEM_PROMPT,
                                                        "messages": [user_message("你好")]})
        assert run == snapshot
        assert (run.reason, run.steps, len(model.requests)) == ("stop", 1, 1)


@pytest.mark.section("单工具往返")
class TestSingleToolRoundTrip:
    @pytest.mark.cites("round-trip", "second-request", "stale-tools", "caller-keeps-its-messages")
    async def test_readme_round_trip(self, ch07, snapshot):
        """call-1's result goes into the second model request; the context's stale tools are not forwarded."""
        context = readme.context()
        context["tools"] = [{"name": "stale", "description": "left over from an earlier run", "parameters": {}}]
        caller_messages = context["messages"]
        model = ScriptedModel([readme.first_answer(), readme.final_answer()])

        run = await run_loop(ch07, model=model, context=context, tools=Registry([readme.memory_read_tool()]))
        assert run == snapshot

        assert (run.reason, run.steps, len(model.requests), run.executions) == ("stop", 2, 2, ["read"])
        assert [m["role"] for m in model.requests[1]["messages"]] == ["user", "assistant", "toolResult"]
        assert all(r["tools"] == Registry([readme.memory_read_tool()]).definitions() for r in model.requests)
        assert context["messages"] is caller_messages and len(caller_messages) == 1

    @pytest.mark.cites("progress-call-id")
    async def test_progress_reports_carry_the_call_id(self, ch07, snapshot):
        """tool_progress events carry the call id of the tool reporting them."""
        def report(call, context):
            context.report_progress([text("reading 1 of 2 lines")])
            context.report_progress([text("reading 2 of 2 lines")])

        model = ScriptedModel([readme.first_answer(), readme.final_answer()])
        run = await run_loop(ch07, model=model, context=readme.context(),
                             execute_tool_call=probe({"call-1": readme.README}, before=report))
        assert run == snapshot
        progress = [e for e in run.events if e["type"] == "tool_progress"]
        assert [e["callId"] for e in progress] == ["call-1", "call-1"]

    @pytest.mark.cites("second-request")
    async def test_unknown_tool_becomes_an_error_result_the_model_sees(self, ch07, snapshot):
        """an unknown tool becomes an error result the model sees in its next request."""
        model = ScriptedModel([
            assistant_message([tool_call("call-1", "write", {"path": "README.md"})], "toolUse"),
            assistant_message([text("没有 write 工具。")], "stop"),
        ])
        run = await run_loop(ch07, model=model, context=readme.context(), tools=Registry([readme.memory_read_tool()]))
        assert run == snapshot
        assert model.requests[1]["messages"][-1]["isError"] is True


# The chapter 07 issue's table: stopReason, calls in the message, how the run finishes.
NON_EXECUTING = {
    "length": (assistant_message([text("我先读取"), readme.read_call()], "length"), "length"),
    "error": (assistant_message([readme.read_call()], "error", error_message="upstream 500"), "error"),
    "aborted": (assistant_message([readme.read_call()], "aborted", error_message="Request was aborted"), "aborted"),
    "stop_with_calls": (assistant_message([text("完成"), readme.read_call()], "stop"), "error"),
    "tool_use_without_calls": (assistant_message([text("我要用工具")], "toolUse"), "error"),
}


@pytest.mark.section("非执行终态")
class TestNonExecutingTerminals:
    @pytest.mark.parametrize("row", list(NON_EXECUTING))
    @pytest.mark.cites("pairing", length=("length-not-run", "length-events"), error=("other-terminals",),
                       aborted=("other-terminals",), stop_with_calls=("other-terminals", "incomplete-batch"),
                       tool_use_without_calls=("incomplete-batch",))
    async def test_terminal_row(self, ch07, snapshot, row):
        """{row} must not start tools: every call gets a skipped result and the run ends."""
        answer, finish = NON_EXECUTING[row]
        model = ScriptedModel([answer, readme.final_answer()])
        run = await run_loop(ch07, model=model, context=readme.context(), tools=Registry([readme.memory_read_tool()]))
        assert run == snapshot
        assert (run.reason, run.steps, len(model.requests), run.executions) == (finish, 1, 1, [])
        assert not any(e["type"] in ("tool_start", "tool_end") for e in run.events)

    @pytest.mark.cites("length-check")
    async def test_length_with_two_calls_starts_neither(self, ch07, snapshot):
        """length with two calls starts neither tool and skips both."""
        # The chapter's closing exercise: correct is executionCount = 0 and two tool_skipped.
        answer = assistant_message([readme.read_call("call-1"), readme.read_call("call-2", "NOTES.md")], "length")
        run = await run_loop(ch07, model=ScriptedModel([answer]), context=readme.context(),
                             execute_tool_call=probe({"call-1": "a", "call-2": "b"}))
        assert run == snapshot
        assert run.executions == []
        assert [e["type"] for e in run.events].count("tool_skipped") == 2


@pytest.mark.section("并发工具")
class TestConcurrentTools:
    @pytest.mark.cites("completion-order", "call-order")
    async def test_fast_finishes_first_results_stay_in_call_order(self, ch07, snapshot):
        """tools run together: tool_end in finishing order, results appended in call order."""
        slow_may_finish = SiblingGate("fast-call's tool_end was not emitted while slow-call waited for it: the tools "
                                      "ran one after another, or tool_end waited for the whole batch")

        def release_slow_after_fast(event):
            if event["type"] == "tool_end" and event["result"]["toolCallId"] == "fast-call":
                slow_may_finish.set()

        model = ScriptedModel([
            assistant_message([tool_call("slow-call", "slow", {}), tool_call("fast-call", "fast", {})], "toolUse"),
            assistant_message([text("两个都完成了。")], "stop"),
        ])
        run = await run_loop(ch07, model=model, context=readme.context(), on_event=release_slow_after_fast,
                             execute_tool_call=probe({"slow-call": "slow done", "fast-call": "fast done"},
                                                     gates={"slow-call": slow_may_finish}))
        assert run == snapshot
        ends = [e["result"]["toolCallId"] for e in run.events if e["type"] == "tool_end"]
        appended = [m["toolCallId"] for m in run.messages if m["role"] == "toolResult"]
        assert (ends, appended) == (["fast-call", "slow-call"], ["slow-call", "fast-call"])

    @pytest.mark.cites("batch-together")
    async def test_tools_overlap_even_when_they_finish_in_call_order(self, ch07, snapshot):
        """the batch's tools run at the same time, not one after another, even when they finish in call order."""
        # call-1 waits until call-2 has started, call-2 until call-1 has ended: only a concurrent batch passes,
        # whatever order it appends results in.
        second_started = SiblingGate("call-2 did not start while call-1 waited for it: the tools ran one after another")
        first_ended = SiblingGate("call-1's tool_end was not emitted while call-2 waited for it: the tools ran one "
                                  "after another, or tool_end waited for the whole batch")

        def note_start(call, context):
            if call["id"] == "call-2":
                second_started.set()

        def release_second(event):
            if event["type"] == "tool_end" and event["result"]["toolCallId"] == "call-1":
                first_ended.set()

        model = ScriptedModel([
            assistant_message([readme.read_call("call-1"), readme.read_call("call-2", "NOTES.md")], "toolUse"),
            assistant_message([text("两个都读完了。")], "stop"),
        ])
        run = await run_loop(ch07, model=model, context=readme.context(), on_event=release_second,
                             execute_tool_call=probe({"call-1": readme.README, "call-2": "notes"}, before=note_start,
                                                     gates={"call-1": second_started, "call-2": first_ended}))
        assert run == snapshot
        ends = [e["result"]["toolCallId"] for e in run.events if e["type"] == "tool_end"]
        assert ends == ["call-1", "call-2"] and not any(m.get("isError") for m in run.messages)

    @pytest.mark.cites("rejection", "error-message")
    async def test_rejecting_executor_does_not_lose_its_sibling(self, ch07, snapshot):
        """an executor that raises becomes that call's error result; its sibling's result is kept."""
        model = ScriptedModel([
            assistant_message([readme.read_call("call-1"), readme.read_call("call-2", "NOTES.md")], "toolUse"),
            assistant_message([text("一个失败，一个成功。")], "stop"),
        ])
        # call-2 ends after call-1, whichever task the event loop starts first (`course snapshots verify`).
        call_1_ended = SiblingGate("call-1's tool_end was not emitted while call-2 waited for it: "
                                   "a call's tool_end is emitted as it ends, not when the batch does")

        def release_call_2(event):
            if event["type"] == "tool_end" and event["result"]["toolCallId"] == "call-1":
                call_1_ended.set()

        run = await run_loop(ch07, model=model, context=readme.context(), on_event=release_call_2,
                             execute_tool_call=probe({"call-1": RuntimeError("disk on fire"), "call-2": "notes"},
                                                     gates={"call-2": call_1_ended}))
        assert run == snapshot
        failed = run.messages[2]
        assert (failed["toolCallId"], failed["toolName"], failed["isError"]) == ("call-1", "read", True)
        assert failed["content"] == [text("disk on fire")] and "Traceback" not in str(run.messages)
        assert run.messages[3]["content"] == [text("notes")]

    @pytest.mark.cites("progress-call-id")
    async def test_two_runs_at_once_keep_their_own_progress(self, ch07, snapshot):
        """two runs at once, each with a call-1: each run emits its own tool's progress."""
        b_started = SiblingGate("run B's call-1 did not start while run A's call-1 waited for it: the two runs "
                                "did not run at once")
        a_ended = SiblingGate("run A's tool_end was not emitted while run B's call-1 waited for it")

        async def execute_a(call, context):
            await b_started.wait()
            context.report_progress([text("A reading")])
            return tool_result(call, [text("A done")])

        async def execute_b(call, context):
            b_started.set()
            await a_ended.wait()
            context.report_progress([text("B reading")])
            return tool_result(call, [text("B done")])

        def note_a_ended(event):
            if event["type"] == "tool_end":
                a_ended.set()

        def answers():
            return ScriptedModel([readme.first_answer(), readme.final_answer()])

        run_a, run_b = await asyncio.gather(
            run_loop(ch07, model=answers(), context=readme.context(), execute_tool_call=execute_a,
                     on_event=note_a_ended),
            run_loop(ch07, model=answers(), context=readme.context(), execute_tool_call=execute_b))
        # Without the messages' JSON: the two runs share the clock, so their timestamps follow how the event
        # loop interleaves them, which the chapter leaves free.
        assert run_b.without_messages_json() == snapshot
        progress = [[e["content"] for e in run.events if e["type"] == "tool_progress"] for run in (run_a, run_b)]
        assert progress == [[[text("A reading")]], [[text("B reading")]]]
        assert [[(m["role"], m["content"]) for m in run.messages[2:3]] for run in (run_a, run_b)] == [
            [("toolResult", [text("A done")])], [("toolResult", [text("B done")])]]
        assert [(run.reason, run.steps) for run in (run_a, run_b)] == [("stop", 2), ("stop", 2)]


@pytest.mark.section("取消与上限")
class TestAbortAndMaxSteps:
    @pytest.mark.cites("abort-before-start")
    async def test_abort_before_start(self, ch07, snapshot):
        """a signal aborted before the run makes no model request."""
        controller = AbortController()
        controller.abort()
        context = readme.context()
        model = ScriptedModel([readme.first_answer()])
        run = await run_loop(ch07, model=model, context=context, signal=controller.signal)
        assert run == snapshot
        assert (run.reason, run.steps, model.requests, run.messages) == ("aborted", 0, [], context["messages"])

    @pytest.mark.cites("abort-during-batch")
    async def test_abort_during_tool_keeps_its_result(self, ch07, snapshot):
        """an abort during a tool keeps its result and prevents the next model request."""
        controller = AbortController()
        model = ScriptedModel([readme.first_answer(), readme.final_answer()])
        run = await run_loop(ch07, model=model, context=readme.context(), signal=controller.signal,
                             execute_tool_call=probe({"call-1": readme.README},
                                                     before=lambda call, context: controller.abort()))
        assert run == snapshot
        assert (run.reason, run.steps, len(model.requests)) == ("aborted", 1, 1)
        assert run.messages[-1]["toolCallId"] == "call-1" and run.messages[-1]["isError"] is False

    @pytest.mark.cites("signal-handed-over", "other-terminals")
    async def test_abort_while_streaming_pairs_the_streamed_call(self, ch07, snapshot):
        """an abort while streaming pairs the streamed call with a skipped result and starts no tool."""
        controller = AbortController()

        def abort_once_the_call_streamed(event):
            if event["type"] == "model_event" and event["event"]["type"] == "toolcall_end":
                controller.abort()

        model = ScriptedModel([readme.first_answer(), readme.final_answer()])
        run = await run_loop(ch07, model=model, context=readme.context(), signal=controller.signal,
                             on_event=abort_once_the_call_streamed, execute_tool_call=probe({"call-1": readme.README}))
        assert run == snapshot
        assert (run.reason, run.steps, run.executions) == ("aborted", 1, [])

    @pytest.mark.cites("abort-during-batch")
    async def test_abort_during_the_last_step_ends_aborted(self, ch07, snapshot):
        """an abort during the last step's tools still ends the run aborted, not maxSteps."""
        # The check after the batch, not the max_steps bound, ends this run: the abort is what stopped it.
        controller = AbortController()
        model = ScriptedModel([readme.first_answer(), readme.final_answer()])
        run = await run_loop(ch07, model=model, context=readme.context(), signal=controller.signal, max_steps=1,
                             execute_tool_call=probe({"call-1": readme.README},
                                                     before=lambda call, context: controller.abort()))
        assert run == snapshot
        assert (run.reason, run.steps, len(model.requests)) == ("aborted", 1, 1)

    @pytest.mark.cites("signal-handed-over")
    async def test_a_long_tool_stops_on_the_runs_signal(self, ch07, snapshot):
        """every tool gets the run's signal, so a long tool can stop when the run is aborted."""
        controller = AbortController()

        async def watch(arguments, context):
            context.report_progress([text("watching until stopped")])
            reason = await context.signal.wait()
            return {"content": [text(f"stopped: {reason}")], "isError": True}

        def stop_once_watching(event):
            if event["type"] == "tool_progress":
                controller.abort("user pressed stop")

        model = ScriptedModel([assistant_message([tool_call("call-1", "watch", {})], "toolUse")])
        run = await run_loop(ch07, model=model, context=readme.context(), signal=controller.signal,
                             on_event=stop_once_watching,
                             tools=Registry([Tool("watch", "Watch until stopped.", {"type": "object"}, watch)]))
        assert run == snapshot
        assert (run.reason, run.steps, run.executions) == ("aborted", 1, ["watch"])
        assert run.messages[-1]["content"] == [text("stopped: user pressed stop")]

    @pytest.mark.cites("max-steps-one")
    async def test_max_steps_one(self, ch07, snapshot):
        """max_steps=1 makes one request, runs its tools, and ends with maxSteps."""
        model = ScriptedModel([readme.first_answer(), readme.final_answer()])
        run = await run_loop(ch07, model=model, context=readme.context(), max_steps=1,
                             tools=Registry([readme.memory_read_tool()]))
        assert run == snapshot
        assert (run.reason, run.steps, len(model.requests)) == ("maxSteps", 1, 1)
        assert [m["role"] for m in run.messages] == ["user", "assistant", "toolResult"]

    @pytest.mark.cites("max-steps")
    async def test_default_max_steps_is_32(self, ch07, snapshot):
        """without max_steps the loop stops after 32 model requests."""
        def another_read(request):
            n = len(request["messages"]) // 2 + 1
            return assistant_message([readme.read_call(f"call-{n}")], "toolUse")

        model = ScriptedModel([another_read] * 40)
        run = await run_loop(ch07, model=model, context=readme.context(), tools=Registry([readme.memory_read_tool()]))
        assert run.without_messages_json() == snapshot
        assert (run.reason, run.steps, len(model.requests), len(run.executions)) == ("maxSteps", 32, 32, 32)


@pytest.mark.section("加固")
class TestHardening:
    """What the project promises beyond the chapter: never part of the chapter's verdict (`--hardening`)."""

    @pytest.mark.parametrize("max_steps", [0, -1, 1.5])
    @pytest.mark.hardening("max-steps-checked")
    async def test_max_steps_must_be_a_positive_integer(self, ch07, max_steps, snapshot):
        """max_steps={max_steps} is refused with a ValueError before any request."""
        model = ScriptedModel([])
        outcome = await raised(run_loop(ch07, model=model, context=readme.context(), max_steps=max_steps),
                               about="max_steps")
        assert outcome == snapshot
        assert model.requests == []

    @pytest.mark.hardening("late-progress")
    async def test_progress_after_the_call_ended_is_not_emitted(self, ch07, snapshot):
        """progress reported through a kept callback after its call ended is not emitted."""
        kept = []

        async def execute(call, context):
            if kept:  # the second round: the first call's callback is stale by now
                kept[0]([text("call-1 again, after its call ended")])
            kept.append(context.report_progress)
            return tool_result(call, [text(f"{call['id']} done")])

        model = ScriptedModel([readme.first_answer(), assistant_message([readme.read_call("call-2")], "toolUse"),
                               readme.final_answer()])
        run = await run_loop(ch07, model=model, context=readme.context(), execute_tool_call=execute)
        assert run == snapshot
        assert not any(e["type"] == "tool_progress" for e in run.events)


test_generated = generated_scenarios("ch07_agent_loop")
