"""Chapter 07's generated scenarios, run: one plan is one run of the loop with every collaborator scripted.

A plan is a `Plan` (below): JSON, drawn by `chapters.ch07_agent_loop.judge.ch07_plans`.

What a call's tool does (`does`): succeed, raise / raise_empty (an exception with a message, or with an
empty one: which exception, chained or not, follows from the call's id), report_error, abort (aborts the
run's signal), not_json (in its content or in its details), garbage (an injected executor's answer that is
not a dict; a registry tool's output that is not one), wrong_call / wrong_tool (an injected executor
answering another call's id or another tool's name), wrong_role / no_content / error_not_bool (an injected
executor's answer for the right call that is not a tool result: another role, no content, an isError that
is not a bool), bad_arguments / unknown_tool (refused by the chapter 06 executor: the tool never runs),
hold (runs until the task is cancelled), ignore_cancel (the same, but answers anyway when cancelled),
watch (runs until the run's signal is aborted). Progress: `before` reports come as the tool starts,
`during` ones once its turn to finish has come (the second of them in two blocks), `late` ones through the
kept callback after the tool has returned (when a later call of the run finishes, and after the run):
those must not appear. A holding tool that is never stopped says so in its answer and in the record
(`holdersNotStopped`).

After a run, the caller changes what the run returned (every list and object of the messages the run
added): a loop that hands out the same object twice, or one it keeps for later runs, shows it.

Batches finish in the planned order through asyncio.Event gates that open once every call of the batch has
started; every wait is bounded by turns of the event loop (never time), so a loop that runs its tools one
after another, never cancels them or never awaits them cannot make a plan wait for ever.
"""

from __future__ import annotations

import asyncio
import copy
import json
from dataclasses import dataclass
from typing import Literal, NotRequired, TypedDict

from course.manifest import HARDENING
from course.recorder.limits import PlanTimedOut
from course.recorder.record import jsonable
from course.runtime.abort import AbortController
from course.runtime.messages import assistant_message, text, tool_call, tool_result, user_message
from course.runtime.scripted import ScriptedModel
from course.runtime.tools import Registry, Tool

SECTIONS = {
    "pure_stop": "纯文本 stop",
    "round_trip": "单工具往返",
    "terminals": "非执行终态",
    "concurrent": "并发工具",
    "abort": "取消与上限",
    # The hardening track: plans beyond the chapter's contract (a raising model, malformed executor answers,
    # raising observers, the caller's cancellation, ...), each leaning towards one of the sections above.
    **{f"hardening_{key}": HARDENING for key in ("pure_stop", "round_trip", "terminals", "concurrent", "abort")},
}

Hook = list[str | int]
"""[event type, n]: at the n-th event of that type (JSON has no tuples)."""

Does = Literal["succeed", "raise", "raise_empty", "report_error", "abort", "not_json", "garbage", "wrong_call",
               "wrong_tool", "wrong_role", "no_content", "error_not_bool", "bad_arguments", "unknown_tool", "hold",
               "ignore_cancel", "watch"]
"""What a call's tool does: see the module's docstring."""

StopReason = Literal["toolUse", "stop", "length", "error", "aborted", "model_raises", "stream_fails", "stream_raises",
                     "stream_garbles", "result_garbles"]
"""A scripted answer's stopReason, or how its model breaks the stream contract (`MODEL_FAILURES`)."""


class Call(TypedDict):
    """One tool call of a scripted answer."""

    id: str
    does: Does
    before: int
    """Progress reports as the tool starts: 0 or 1."""
    during: int
    """Progress reports once its turn to finish has come: 0 to 2 (the second in two blocks)."""
    late: bool
    """Whether it reports again, through the kept callback, after it returned (which must not appear)."""


class Step(TypedDict):
    """One scripted answer of the model, and how its batch finishes."""

    stopReason: StopReason
    text: bool | str
    """The answer's text: True "let me see", False none, or the text itself."""
    calls: list[Call]
    finishOrder: list[str]
    """The ids of the calls whose tool runs and does not hold, in the order they finish."""


class Cancel(TypedDict):
    """The caller cancels the task running the loop during a step's model stream or its tool batch."""

    step: int
    during: Literal["streaming", "batch"]


class Plan(TypedDict):
    """One generated plan: a run of the loop with every collaborator scripted. Its JSON is this very dict
    (what the judge draws, writes to the recorder, caches and pins), so it is the same value either side."""

    input: Literal["one", "history"]
    """The caller's messages: one user message, or an earlier round and a new question."""
    staleTools: bool
    """The context still carries "tools" from an earlier run."""
    registry: bool
    """The probe tool is registered (else the registry is empty)."""
    executor: Literal["chapter06", "injected"]
    contextExtra: NotRequired[bool]
    """The caller's context holds a key of its own (never part of a request)."""
    observer: Literal["absent", "present"]
    raiseAt: Hook | None
    """At this event the observer raises."""
    abortAt: Hook | None
    """At this event the observer aborts the run."""
    mutateAt: Hook | None
    """At this event the caller changes its messages (the list and its dicts, deeply)."""
    mutateAfter: bool
    """The caller changes its messages (deeply) after the run."""
    abortBeforeStart: bool
    maxSteps: int | None
    """None: the loop's default."""
    cancel: Cancel | None
    steps: list[Step]
    kind: NotRequired[str]
    """A chapter-track plan's kind (`chapters.ch07_agent_loop.judge.ch07_plans.KINDS`)."""


REFUSED = ("bad_arguments", "unknown_tool")
HOLDING = ("hold", "ignore_cancel", "watch")
LOOSE = ("wrong_call", "wrong_tool", "wrong_role", "no_content", "error_not_bool", "garbage", "not_json")
"""An injected executor's answers the loop must refuse: the error result's wording is the loop's own."""
NOT_YOURS, NOT_MINE, OK = "not yours", "not mine", "ok"
"""The texts of the answers that are another call's or another tool's, and of output that is not JSON."""


class PlanError(Exception):
    """A tool's own exception class, whose message is its own `__str__`."""

    def __str__(self) -> str:
        return f"plan error: {self.args[0]}" if self.args else ""


def raised(call_id: str, empty: bool) -> BaseException:
    """The exception a `raise` (or `raise_empty`) call's tool raises: its text must be `str(exc)`, or the type's
    name when that is empty, whatever its arguments, cause or notes."""
    kind = sum(map(ord, call_id)) % 4
    if empty:
        return [KeyError(), RuntimeError(""), PlanError(), ValueError("")][kind]
    if kind == 0:
        return RuntimeError(f"{call_id} failed")
    if kind == 1:
        return KeyError(call_id)  # str() quotes it
    if kind == 2:
        return ValueError(call_id, "and a second argument")
    error = PlanError(call_id)
    error.__cause__ = OSError(f"{call_id}: the disk below it")
    error.add_note("a note the text leaves out")
    return error


def done_text(call_id: str) -> str:
    """What a call's tool (or its executor's malformed answer) says when it has done its work."""
    return f"{call_id} done"


def answers_own_texts(call_id: str) -> set[str]:
    """Every text a malformed answer for `call_id` carries: a loop that passes one on has kept the answer."""
    return {done_text(call_id), NOT_YOURS, NOT_MINE, OK}
SYSTEM_PROMPT = "You are tiny-pi."
NOTES = {"kept": "by the caller, for the caller"}
STALE_TOOLS = [{"name": "stale", "description": "left over from an earlier run", "parameters": {"type": "object"}}]
GATE_TURNS = 200
"""Turns of the event loop a call waits for its siblings to start before it goes on alone."""
HOLD_TURNS = 300
"""Turns a holding tool (or the model, while a cancellation is planned) runs before it answers anyway."""
RUN_TURNS = 20_000
"""Turns the driver gives a run before it records it as still running and cancels it."""


def runs(plan: Plan, call: Call) -> bool:
    """Whether the call's tool runs: the chapter 06 executor refuses some calls before any tool runs."""
    if plan["executor"] == "injected":
        return True
    return plan["registry"] and call["does"] not in REFUSED


def input_messages(kind: str) -> list[dict]:
    if kind == "one":
        return [user_message("go", timestamp=0)]
    return [
        {"role": "user", "content": [text("read it")], "timestamp": 0},
        {**assistant_message([text("reading"), tool_call("h1", "probe", {"key": "h1", "deep": {"n": [1]}})],
                             "toolUse"), "timestamp": 0},
        {**tool_result(tool_call("h1", "probe", {}), [text("h1 done")]), "timestamp": 0},
        {**assistant_message([text("done")], "stop"), "timestamp": 0},
        {"role": "user", "content": [text("again")], "timestamp": 0},
    ]


def change_deeply(messages: list) -> None:
    """What a caller may do to its own messages: change a message, a block, a call's arguments; add one."""
    first = messages[0]
    if isinstance(first.get("content"), list):
        first["content"][0]["text"] = "changed by the caller"
    else:
        first["content"] = "changed by the caller"
    for message in messages:
        for block in message.get("content") if isinstance(message.get("content"), list) else []:
            if block.get("type") == "toolCall":
                block["arguments"]["deep"]["n"].append(2)
    messages.append(user_message("added by the caller", timestamp=0))


class Batch:
    """Opens the gates of one step's calls one at a time, in the planned finish order, once all of
    them are running; a call that starts alone (the tools run one after another) is let through."""

    def __init__(self, order: list[str]) -> None:
        self.order = order
        self.gates = {call_id: asyncio.Event() for call_id in order}
        self.started = 0

    async def wait_for_turn(self, call_id: str) -> None:
        self.started += 1
        if self.started == len(self.order):
            self.gates[self.order[0]].set()
        for _ in range(GATE_TURNS):  # turns of the event loop, not time: enough for every sibling to start
            if self.gates[call_id].is_set():
                return
            await asyncio.sleep(0)
        # Nothing else ran: the loop awaits its tools one by one. Let this one finish.

    def finished(self, call_id: str) -> None:
        position = self.order.index(call_id)
        if position + 1 < len(self.order):
            self.gates[self.order[position + 1]].set()


async def _no_plan(arguments, context):
    raise AssertionError("the probe tool runs only inside run_plan")


# Made once: checking a tool's schema costs more than a whole scripted run.
PROBE = Tool(name="probe", description="does what the plan says", execute=_no_plan, parameters={
    "type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"], "additionalProperties": False})


def _answer(step: Step) -> dict:
    said = step["text"] if isinstance(step["text"], str) else "let me see"  # (True: the usual text)
    content = [text(said)] if step["text"] else []
    for call in step["calls"]:
        name = "nope" if call["does"] == "unknown_tool" else "probe"
        content.append(tool_call(call["id"], name, {"key": 7 if call["does"] == "bad_arguments" else call["id"]}))
    reason = step["stopReason"] if step["stopReason"] not in MODEL_FAILURES else "stop"
    error = "upstream failed" if reason in ("error", "aborted") else None
    return assistant_message(content, reason, error_message=error)


MODEL_FAILURES = {"model_raises": "model connection reset", "stream_fails": "stream cut",
                  "stream_raises": "socket closed mid-stream", "stream_garbles": "garbled event",
                  "result_garbles": "garbled answer"}
"""The steps whose model breaks the stream contract (the scripted answer is then a `stop` one), each with
the text of what it raises or hands over instead of an event or a message (the errorMessage names it)."""
STREAM_FAILURES = ("stream_raises", "stream_garbles", "result_garbles")
"""The model failures of a stream of another class than the course's (`PieceStream`)."""


async def _stream_cut(request):
    raise ConnectionError(MODEL_FAILURES["stream_fails"])


class PieceStream:
    """A provider's stream of another class than the course's (the loop must guard it): the scripted answer's
    events with each text in two pieces; for `stream_raises`, cut by an exception after its first event; for
    `stream_garbles`, a string where its second event should be; for `result_garbles`, a `result()` that is
    a string, not a message."""

    def __init__(self, inner, failure: str | None) -> None:
        self.inner, self.failure = inner, failure

    async def __aiter__(self):
        async for event in self.inner:
            if self.failure == "stream_raises":
                yield event
                raise ConnectionResetError(MODEL_FAILURES["stream_raises"])
            if self.failure == "stream_garbles":
                yield event
                yield MODEL_FAILURES["stream_garbles"]
            if event.get("type") == "text_delta" and len(event["delta"]) > 1:
                half = len(event["delta"]) // 2
                yield {**event, "delta": event["delta"][:half]}
                event = {**event, "delta": event["delta"][half:]}
            yield event

    async def result(self):
        answer = await self.inner.result()
        return MODEL_FAILURES["result_garbles"] if self.failure == "result_garbles" else answer


class PlanModel:
    """Answers request n with step n of the plan; keeps a deep copy of every request it receives."""

    def __init__(self, plan: Plan, cancellation: Cancellation) -> None:
        self.plan, self.cancellation = plan, cancellation
        self.requests: list = []
        self.streams: list = []
        self.signals: list = []  # what each request's stream() was handed as its signal
        cancel = plan.get("cancel") or {}
        answers = []
        for n, step in enumerate(plan["steps"], 1):
            answer = _answer(step)
            if step["stopReason"] == "stream_fails":
                answers.append(_stream_cut)
            elif cancel.get("during") == "streaming" and cancel.get("step") == n:
                answers.append(self._holding(n, answer))
            else:
                answers.append(answer)
        self.scripted = ScriptedModel(answers, record_requests=False)

    def _holding(self, n: int, answer: dict):
        async def hold(request):
            if self.cancellation.cancelled:
                self.cancellation.answer_read_after_cancel = True
            self.cancellation.model_holding = n
            for _ in range(HOLD_TURNS):
                await asyncio.sleep(0)
            self.cancellation.model_holding = None
            return copy.deepcopy(answer)
        return hold

    def stream(self, request, *, signal=None):
        index = len(self.requests)
        self.signals.append(signal)
        try:  # the request as it is now (JSON round trip: a deep copy, in C)
            self.requests.append(json.loads(json.dumps(request, ensure_ascii=False, allow_nan=False)))
        except Exception:  # a loop may hand the model anything
            self.requests.append(jsonable(request))
        steps = self.plan["steps"]
        if index < len(steps) and steps[index]["stopReason"] == "model_raises":
            raise ConnectionError(MODEL_FAILURES["model_raises"])
        self.scripted.request_count = index
        stream = self.scripted.stream(request, signal=signal)
        self.streams.append(stream)
        failure = steps[index]["stopReason"] if index < len(steps) else None
        failure = failure if failure in STREAM_FAILURES else None
        # Every second answer comes through a stream of another class, its text in pieces.
        return PieceStream(stream, failure) if failure or index % 2 == 1 else stream

    async def close(self) -> None:
        """Finish the answers a run left unread (an observer raised mid-stream, the task was cancelled):
        here, not when the garbage collector gets to them and the event loop starts a task to close them."""
        for stream in self.streams:
            try:
                await stream._close_source()
            except BaseException:  # noqa: BLE001 — a clean-up, whatever the loop left behind
                pass


@dataclass
class Cancellation:
    """Where the caller's cancellation of the run stands, shared by the driver and the model."""

    model_holding: int | None = None
    """The step whose model answer is holding now (a cancellation during its stream waits for it)."""
    cancelled: bool = False
    answer_read_after_cancel: bool = False
    """The loop went on reading a cancelled run's answer."""


class PlanTools:
    """The plan's tools, for the probe tool of the registry and an injected executor alike: each call does
    what the plan says (`Call.does`), and what they did is kept for the record."""

    def __init__(self, plan: Plan, controller: AbortController) -> None:
        self.plan, self.controller = plan, controller
        self.calls = {call["id"]: call for step in plan["steps"] for call in step["calls"]}
        self.step_of = {call["id"]: n for n, step in enumerate(plan["steps"], 1) for call in step["calls"]}
        self.batches: dict[str, Batch] = {}
        for step in plan["steps"]:
            batch = Batch(step["finishOrder"])
            self.batches.update((call_id, batch) for call_id in step["finishOrder"])
        self.executed: list[str] = []
        self.unsignalled: list[str] = []  # the calls whose tool cannot see the run's abort
        self.holding: set[str] = set()
        self.not_stopped: list[str] = []  # the holding calls that ran out their turns: nothing cancelled them
        self.returned: set[str] = set()
        self.late: list[tuple[str, object]] = []  # (call id, its progress callback) of the calls that report late

    def report_late(self) -> None:
        for call_id, report in list(self.late):
            if call_id in self.returned:
                try:
                    report([text(f"{call_id} late progress")])
                except BaseException:  # whatever a broken loop does with it is in the events
                    pass

    async def injected(self, call, context):
        """The injected executor (`execute_tool_call`)."""
        return await self.behave(call["id"], context, lambda content, is_error: tool_result(
            call, content, is_error=is_error, details={"answeredBy": "the injected executor"}))

    async def probe(self, arguments, context):
        """The probe tool's `execute`."""
        return await self.behave(arguments["key"], context,
                                 lambda content, is_error: {"content": content, "isError": is_error})

    async def behave(self, call_id: str, context, make_result):
        self.executed.append(call_id)
        if getattr(context, "signal", None) is not self.controller.signal:
            self.unsignalled.append(call_id)
        call = self.calls[call_id]
        for _ in range(call["before"]):
            context.report_progress([text(f"{call_id} starting")])
        if call["late"]:
            self.late.append((call_id, context.report_progress))
        try:
            if call["does"] in HOLDING:
                return make_result([text(await self.hold(call_id, call["does"], context))], False)
            batch = self.batches[call_id]
            await batch.wait_for_turn(call_id)
            try:
                for n in range(call["during"]):
                    context.report_progress([text(f"{call_id} progress {n + 1}")] + [text("in two blocks")] * n)
                return self.answer(call_id, call["does"], make_result)
            finally:
                batch.finished(call_id)
        finally:
            self.report_late()  # the calls that returned before this one: their callbacks are stale by now
            self.returned.add(call_id)

    async def hold(self, call_id: str, does: str, context) -> str:
        """A holding call's tool: it runs until it is cancelled (`watch`: until the run is aborted)."""
        self.holding.add(call_id)
        try:
            for _ in range(HOLD_TURNS):
                if does == "watch":
                    signal = getattr(context, "signal", None)
                    if getattr(signal, "aborted", False):
                        return f"{call_id} stopped: {signal.reason}"
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            if does == "ignore_cancel":
                return f"{call_id} refused to be cancelled"
            raise
        finally:
            self.holding.discard(call_id)
        self.not_stopped.append(call_id)
        return f"{call_id} was not stopped"

    def answer(self, call_id: str, does: str, make_result):
        """What a call's tool (or the injected executor) answers once its turn to finish has come."""
        if does in ("raise", "raise_empty"):
            raise raised(call_id, does == "raise_empty")
        if does == "abort":
            self.controller.abort(f"{call_id} stopped the run")
        if does == "not_json" and sum(map(ord, call_id)) % 2:
            return {**make_result([text(OK)], False), "details": {"ratio": float("nan")}}
        if does == "not_json":
            return make_result([text(OK), {"type": "text", "text": {1, 2}}], False)
        if does == "garbage":
            return done_text(call_id)
        if does == "wrong_call":
            siblings = [c["id"] for c in self.plan["steps"][self.step_of[call_id] - 1]["calls"] if c["id"] != call_id]
            return tool_result(tool_call((siblings or ["someone-else"])[0], "probe", {}), [text(NOT_YOURS)])
        if does == "wrong_tool":
            return tool_result(tool_call(call_id, "other", {}), [text(NOT_MINE)])
        if does == "wrong_role":
            return {**make_result([text(done_text(call_id))], False), "role": "assistant"}
        if does == "no_content":
            return {k: v for k, v in make_result([text(done_text(call_id))], False).items() if k != "content"}
        if does == "error_not_bool":
            return {**make_result([text(done_text(call_id))], False), "isError": "no"}
        return make_result([text(done_text(call_id))], does == "report_error")


class PlanCaller:
    """The caller's side of a run: its messages and context, and its observer (which may raise, abort the run
    or change the caller's messages at the plan's events)."""

    def __init__(self, plan: Plan, controller: AbortController) -> None:
        self.plan, self.controller = plan, controller
        self.messages = input_messages(plan["input"])
        self.expects = copy.deepcopy(self.messages)  # what the caller's list must hold: only its own changes
        self.context = {"systemPrompt": SYSTEM_PROMPT, "messages": self.messages}
        if plan["staleTools"]:
            self.context["tools"] = copy.deepcopy(STALE_TOOLS)
        if plan.get("contextExtra"):
            self.context["notes"] = copy.deepcopy(NOTES)
        self.context_keys = sorted(self.context)
        self.events: list = []
        self.seen: dict = {}
        self.raised_after: list[int] = []  # how many events the observer had seen when it raised

    def observe(self, event) -> None:
        self.events.append(event)
        kind = event.get("type") if isinstance(event, dict) else None
        self.seen[kind] = self.seen.get(kind, 0) + 1
        here = [kind, self.seen[kind]]
        if here == self.plan["mutateAt"]:
            self.change_messages()
        if here == self.plan["abortAt"]:
            self.controller.abort(f"observer stopped the run at {kind} {self.seen[kind]}")
        if here == self.plan["raiseAt"]:
            self.raised_after.append(len(self.events))
            raise RuntimeError(f"observer broke at {kind} {self.seen[kind]}")

    def change_messages(self) -> None:
        change_deeply(self.messages)
        change_deeply(self.expects)

    def messages_after(self):
        """The caller's messages after the run: as it left them, or what they hold instead."""
        if jsonable(self.messages) == jsonable(self.expects):
            return "as the caller left them"
        return jsonable(self.messages)

    def context_after(self):
        """The caller's context after the run: as it left it, or its keys but the messages."""
        context = self.context
        if (sorted(context) == self.context_keys and context.get("systemPrompt") == SYSTEM_PROMPT
                and context.get("messages") is self.messages and context.get("tools", STALE_TOOLS) == STALE_TOOLS
                and context.get("notes", NOTES) == NOTES):
            return "as the caller left it"
        return jsonable({key: value for key, value in context.items() if key != "messages"})


async def run_plan(plan: Plan, load) -> dict:
    """Run one plan on the loop `load("ch07_agent_loop")` returns: the record of what it did."""
    return await PlanRun(plan, load("ch07_agent_loop")).run()


class PlanRun:
    """One run of the loop on a plan: the collaborators it is given, the task running it, and its record."""

    def __init__(self, plan: Plan, loop) -> None:
        self.plan, self.loop = plan, loop
        self.controller = AbortController()
        self.cancellation = Cancellation()
        self.tools = PlanTools(plan, self.controller)
        self.caller = PlanCaller(plan, self.controller)
        self.model = PlanModel(plan, self.cancellation)

    def options(self) -> dict:
        """The loop's options, as the caller makes them."""
        plan = self.plan
        tool = copy.copy(PROBE)
        tool.execute = self.tools.probe
        options = {"model": self.model, "context": self.caller.context,
                   "tools": Registry([tool] if plan["registry"] else []), "signal": self.controller.signal}
        if plan["executor"] == "injected":
            options["execute_tool_call"] = self.tools.injected
        if plan["observer"] == "present":
            options["on_event"] = self.caller.observe
        if plan["maxSteps"] is not None:
            options["max_steps"] = plan["maxSteps"]
        return options

    async def run(self) -> dict:
        plan = self.plan
        if plan["abortBeforeStart"]:
            self.controller.abort("stopped before the start")
        options = self.options()
        record: dict = {"kind": "ch07-plan-run", "inputMessages": copy.deepcopy(self.caller.messages),
                        "systemPrompt": SYSTEM_PROMPT,
                        "definitions": Registry([PROBE] if plan["registry"] else []).definitions(),
                        "maxSteps": plan["maxSteps"] if plan["maxSteps"] is not None else 32,
                        "loose": {c["id"]: "probe" for c in self.tools.calls.values()
                                  if plan["executor"] == "injected" and c["does"] in LOOSE}}
        loop_options = self.loop.AgentLoopOptions(**options)

        async def run():
            return await self.loop.run_agent_loop(loop_options)

        me = asyncio.current_task()
        already = asyncio.all_tasks()  # whoever runs this plan (another chapter's recorder): not the run's to clean up
        task = asyncio.create_task(run())
        await self.drive(task)
        # Not the event loop closing a dropped generator (async_generator_athrow): the run's own tasks left.
        left = [t for t in asyncio.all_tasks() if t is not me and t is not task and t not in already and not t.done()
                and type(t.get_coro()).__name__ != "async_generator_athrow"]
        if not task.done():
            record.update(outcome="still running", transcript=None)
            left.append(task)
        else:
            record.update(outcome_of(task))
        record["tasksLeft"] = len(left)
        await clean_up(left)
        await self.model.close()
        self.tools.report_late()  # the tools' kept callbacks, after the run: nothing may reach the observer now
        if plan["mutateAfter"]:
            self.caller.change_messages()
        return self.finish(record, loop_options, options)

    async def drive(self, task: asyncio.Task) -> None:
        """Let the run go on for RUN_TURNS turns of the event loop at the most (never time), cancelling its task
        when the plan's cancellation is due."""
        cancel = self.plan.get("cancel")
        for _ in range(RUN_TURNS):
            if task.done():
                break
            if cancel is not None and not self.cancellation.cancelled and self.cancel_due(cancel):
                task.cancel()
                self.cancellation.cancelled = True
            await asyncio.sleep(0)

    def cancel_due(self, cancel: Cancel) -> bool:
        if cancel["during"] == "streaming":
            return self.cancellation.model_holding == cancel["step"]
        mine = [c for c in self.plan["steps"][cancel["step"] - 1]["calls"] if runs(self.plan, c)]
        # A watching call ends by itself once the run is aborted: the cancellation waits for its answer
        # (else whether it saw the abort first would be the event loop's choice).
        holders = [c["id"] for c in mine if c["does"] in HOLDING
                   and not (c["does"] == "watch" and self.controller.signal.aborted)]
        return bool(holders) and all(h in self.tools.holding for h in holders) and all(
            c["id"] in self.tools.returned for c in mine if c["id"] not in holders)

    def finish(self, record: dict, loop_options, options: dict) -> dict:
        """The record's evidence, once the run is over; then the caller scribbles on what the run returned."""
        tools, caller = self.tools, self.caller
        result_messages = record.pop("transcript")
        transcript = jsonable(result_messages)
        requests = requests_seen(self.model.requests, transcript)
        events, executed, unsignalled = caller.events, tools.executed, tools.unsignalled
        if caller.raised_after and record["outcome"] == "raised" and isinstance(transcript, list):
            events = events[:caller.raised_after[0]]
            transcript, answered = _up_to_the_raise(events, transcript, len(record["inputMessages"]))
            # Which of the batch's other tools had started by then is the same kind of schedule: the tools
            # counted are those whose call was answered before the raise.
            executed = [call_id for call_id in executed if call_id in answered]
            unsignalled = [call_id for call_id in unsignalled if call_id in answered]
        record.update(
            transcript=transcript,
            events=jsonable(events) if self.plan["observer"] == "present" else None,
            requests=requests,
            executions=sorted(executed),
            withoutTheRunsSignal=sorted(unsignalled),
            answerReadAfterCancel=self.cancellation.answer_read_after_cancel,
            requestsWithoutTheRunsSignal=[n for n, given in enumerate(self.model.signals, 1)
                                          if given is not self.controller.signal],
            callerMessagesAfter=caller.messages_after(),
            contextAfter=caller.context_after(),
            inputMessages=jsonable(record["inputMessages"]),
            optionsAfter=_options_changed(loop_options, options),
            sharedObjects=shared_objects(result_messages),
            holdersNotStopped=sorted(tools.not_stopped),
        )
        scribble(result_messages, len(record["inputMessages"]))
        return record


def outcome_of(task: asyncio.Task) -> dict:
    """How the finished run ended, for the record: what it returned, or what it raised."""
    try:
        result = task.result()
    except BaseException as error:  # noqa: BLE001 — the record says what the loop raised, CancelledError too
        if isinstance(error, PlanTimedOut):
            raise  # the plan's time limit, not the loop's doing
        try:
            message = str(error)
        except Exception:  # a student's exception may not even say what it is
            message = "<str() of the exception failed>"
        return {"outcome": "raised", "raised": type(error).__name__, "message": jsonable(message),
                "transcript": getattr(error, "transcript", "<no transcript>")}
    return {"outcome": "returned", "reason": jsonable(getattr(result, "reason", None)),
            "steps": jsonable(getattr(result, "steps", None)), "transcript": getattr(result, "messages", None)}


async def clean_up(left: list[asyncio.Task]) -> None:
    """Cancel what a broken loop left running and let it unwind."""
    for _ in range(3):
        for t in left:
            t.cancel()
        for _ in range(50):
            if all(t.done() for t in left):
                break
            await asyncio.sleep(0)
    for t in left:
        if t.done() and not t.cancelled():
            t.exception()  # retrieved: the event loop does not report it later


def requests_seen(requests: list, transcript: object) -> list:
    """The model's requests, each one that saw a prefix of the transcript recorded as its length."""
    requests = [request if isinstance(request, dict) else jsonable(request) for request in requests]
    if isinstance(transcript, list):
        for request in requests:
            seen = request.get("messages")
            if isinstance(seen, list) and len(seen) <= len(transcript) and seen == transcript[: len(seen)]:
                request["messages"] = {"transcriptPrefix": len(seen)}
    return requests


def _up_to_the_raise(events: list, transcript: list, given: int) -> tuple[list, set]:
    """The transcript as it stood when the observer raised, and the calls answered by then.

    What the batch's other tools did after the observer raised depends on when the loop cancelled them (a
    task group at once, a gather a turn later): nothing the chapter promises. Compared: the events up to the
    raise, and the results whose tool ended (or was skipped) by then. (A loop that went on and returned is
    shown whole: what it did after the raise is its mistake.) The caller's own `given` messages stay as they
    are, tool results included."""
    answered = {e["result"].get("toolCallId") for e in events if isinstance(e, dict)
                and e.get("type") in ("tool_end", "tool_skipped") and isinstance(e.get("result"), dict)}
    return transcript[:given] + [m for m in transcript[given:] if not (
        isinstance(m, dict) and m.get("role") == "toolResult") or m.get("toolCallId") in answered], answered


def _options_changed(loop_options, given: dict) -> str | list[str]:
    """Whether the run left its options as the caller made them, or the fields it changed."""
    changed = [name for name, value in given.items() if getattr(loop_options, name, None) is not value
               and getattr(loop_options, name, None) != value]
    return "as the caller made them" if not changed else sorted(changed)


def _containers(roots: list) -> tuple[list, int]:
    """Every list and object in `roots` and below them, each once (depth first), and how many times one of
    them was met again on the way: each such meeting is one object held in two places."""
    found: list = []
    seen: set[int] = set()
    again = 0
    pending = list(roots)
    while pending:
        value = pending.pop()
        if id(value) in seen:
            again += 1
            continue
        seen.add(id(value))
        found.append(value)
        pending.extend(v for v in (value.values() if isinstance(value, dict) else value) if isinstance(v, (dict, list)))
    return found, again


def shared_objects(messages: object) -> int:
    """How many times a list or object of the transcript is met again inside it: each is one object in two
    places, so a caller changing one message changes another."""
    return _containers([messages])[1] if isinstance(messages, list) else 0


SCRIBBLE = "added by an earlier run's caller"


def scribble(messages: object, given: int) -> None:
    """What a caller may do with the messages a run returned: change every list and object of them. A loop
    that shares an object between two messages, or keeps one for a later run, shows it in what follows."""
    if not isinstance(messages, list):
        return
    for value in _containers([m for m in messages[given:] if isinstance(m, dict)])[0]:
        if isinstance(value, dict):
            value["scribbled"] = SCRIBBLE
        else:
            value.append({"type": "text", "text": SCRIBBLE})
