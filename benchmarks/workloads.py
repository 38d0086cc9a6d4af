"""The tiny-pi side of the benchmarks: the chapter 07 loop on an offline scripted model.

Every workload checks that the run did what it was meant to (a benchmark of a wrong run
measures nothing) and raises WorkloadError otherwise.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
import tracemalloc
from dataclasses import dataclass, field

from checkpoints.ch07_agent_loop import AgentLoopOptions, run_agent_loop
from course.runtime.messages import AssistantMessage, Message, assistant_message, text, tool_call, user_message
from course.runtime.scripted import ScriptedModel
from course.runtime.tools import Registry, Tool, ToolExecutionContext

SYSTEM_PROMPT = "You are a benchmark."
NO_ARGUMENTS = {"type": "object", "properties": {}, "additionalProperties": False}


class WorkloadError(AssertionError):
    """A benchmark run that did not do the workload it was timed for."""


@dataclass
class Elapsed:
    """Both clocks: wall time, and this process's CPU time (what a loaded machine inflates less)."""

    wall: float
    """Seconds of `time.perf_counter()`."""
    cpu: float
    """Seconds of `time.process_time()`: user and system time of every thread of this process."""


def start_clocks() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def elapsed_since(start: tuple[float, float]) -> Elapsed:
    return Elapsed(time.perf_counter() - start[0], time.process_time() - start[1])


def median(runs: list[Elapsed]) -> Elapsed:
    """The median of each clock separately."""
    return Elapsed(statistics.median(r.wall for r in runs), statistics.median(r.cpu for r in runs))


@dataclass
class LoopRun:
    """One timed run of the loop: S tool steps, then a final stop."""

    elapsed: Elapsed
    """Time of `run_agent_loop`, from call to return."""
    tool_steps: int
    """S: how many steps called the no-op tool before the final stop."""
    executions: int
    """How many times the no-op tool ran."""
    events: int
    """How many LoopEvents the observer received."""
    transcript: list[Message] = field(repr=False)  # asyncio.run() formats its result's repr
    """The run's messages: the prompt, then an assistant message and a tool result per tool step, then the stop."""


def noop_tool(executions: list[int]) -> Tool:
    async def execute(arguments, context):
        executions[0] += 1
        return {"content": [text("ok")]}

    return Tool("noop", "Does nothing and says ok.", NO_ARGUMENTS, execute)


def step_script(tool_steps: int) -> ScriptedModel:
    """S answers that each call the no-op tool once, then a stop; each answer is built when asked (O(1) per step)."""
    answered = 0

    def answer(request):
        nonlocal answered
        answered += 1
        if answered <= tool_steps:
            return assistant_message([tool_call(f"call-{answered}", "noop", {})], "toolUse")
        return assistant_message([text("done")], "stop")

    return ScriptedModel([answer] * (tool_steps + 1), record_requests=False)


class PlainStream:
    """A provider's own stream, not the course's class: a plain async generator of the answer's events,
    and `result()`, the final message (what `guard_stream` reads through one layer of its own)."""

    def __init__(self, message: AssistantMessage) -> None:
        self._message = message

    async def __aiter__(self):
        message = self._message
        yield {"type": "start"}
        for index, block in enumerate(message["content"]):
            if block["type"] == "toolCall":
                yield {"type": "toolcall_delta", "contentIndex": index, "delta": "{}"}
                yield {"type": "toolcall_end", "contentIndex": index, "toolCall": block}
            else:
                yield {"type": "text_delta", "contentIndex": index, "delta": block["text"]}
        yield {"type": "done", "reason": message["stopReason"], "message": message}

    async def result(self) -> AssistantMessage:
        return self._message


class PlainStreamModel:
    """The scripted workload's answers, each streamed as a PlainStream: any provider that does not use
    the course's stream class."""

    def __init__(self, tool_steps: int) -> None:
        self._tool_steps = tool_steps
        self._answered = 0

    def stream(self, request, *, signal=None) -> PlainStream:
        self._answered += 1
        if self._answered <= self._tool_steps:
            return PlainStream(assistant_message([tool_call(f"call-{self._answered}", "noop", {})], "toolUse"))
        return PlainStream(assistant_message([text("done")], "stop"))


MODELS = {"scripted": step_script, "plain-stream": PlainStreamModel}
"""The workload's two models: the course's ScriptedModel, and a stream of another class."""


async def run_steps(tool_steps: int, model: str = "scripted") -> LoopRun:
    """Run the loop for S no-op tool steps and a final stop, with an observer counting events."""
    executions = [0]
    events = 0

    def count(event) -> None:
        nonlocal events
        events += 1

    options = AgentLoopOptions(
        model=MODELS[model](tool_steps),
        context={"systemPrompt": SYSTEM_PROMPT, "messages": [user_message("go")]},
        tools=Registry([noop_tool(executions)]),
        max_steps=tool_steps + 1,
        on_event=count,
    )
    started = start_clocks()
    result = await run_agent_loop(options)
    elapsed = elapsed_since(started)
    if (result.reason, result.steps, executions[0]) != ("stop", tool_steps + 1, tool_steps):
        raise WorkloadError(f"expected stop after {tool_steps + 1} steps with {tool_steps} executions, got "
                            f"{result.reason} after {result.steps} steps with {executions[0]} executions")
    return LoopRun(elapsed, tool_steps, executions[0], events, result.messages)


def time_steps(tool_steps: int, model: str = "scripted") -> LoopRun:
    """One run in a fresh event loop, after a full collection so earlier runs' garbage is not charged to it."""
    gc.collect()
    return asyncio.run(run_steps(tool_steps, model))


async def run_floor(tool_steps: int) -> Elapsed:
    """The floor: the least an asyncio loop can do per step of the workload, timed the same way.

    Each step consumes one async stream of four events (an async generator, read to its end, whose
    events are new dicts), awaits one tool coroutine (which returns a new dict), and appends two
    dicts (the final event's message and the tool's result) to a list: no checks, no observer, no
    copies, no ids. What the loop costs above this is its own work.
    """
    async def events():
        yield {"type": "start"}
        yield {"type": "toolcall_delta", "contentIndex": 0, "delta": "{}"}
        yield {"type": "toolcall_end", "contentIndex": 0, "toolCall": None}
        yield {"type": "done", "reason": "toolUse", "message": {"role": "assistant", "stopReason": "toolUse"}}

    async def tool():
        return {"content": [{"type": "text", "text": "ok"}]}

    messages: list[dict] = []
    started = start_clocks()
    for _ in range(tool_steps):
        async for event in events():
            last = event
        messages.append(last["message"])
        messages.append(await tool())
    elapsed = elapsed_since(started)
    if len(messages) != 2 * tool_steps:
        raise WorkloadError(f"the floor appended {len(messages)} messages for {tool_steps} steps")
    return elapsed


def time_floor(tool_steps: int) -> Elapsed:
    gc.collect()
    return asyncio.run(run_floor(tool_steps))


def peak_memory(tool_steps: int) -> int:
    """Peak bytes traced by tracemalloc while the loop runs S tool steps (the transcript included)."""
    gc.collect()
    tracemalloc.start()
    try:
        asyncio.run(run_steps(tool_steps))
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@dataclass
class BatchRun:
    """One concurrent batch: N calls in one assistant message, all waiting on one shared event."""

    loop: Elapsed
    """The loop's batch: from the first tool_start to the first event of the next model request."""
    gather: Elapsed
    """A bare `asyncio.gather` of the same N tool coroutines."""
    calls: int
    """N."""


def gate_tool(calls: int, executions: list[int]) -> Tool:
    """A tool whose calls all wait on one event, which the last of `calls` to start sets."""
    release = asyncio.Event()
    started = 0

    async def execute(arguments, context):
        nonlocal started
        started += 1
        if started == calls:
            release.set()
        await release.wait()
        executions[0] += 1
        return {"content": [text("ok")]}

    return Tool("wait", "Waits until every call of the batch has started.", NO_ARGUMENTS, execute)


async def run_batch(calls: int) -> BatchRun:
    executions = [0]
    model = ScriptedModel([
        assistant_message([tool_call(f"call-{n}", "wait", {}) for n in range(1, calls + 1)], "toolUse"),
        assistant_message([text("done")], "stop"),
    ], record_requests=False)
    marks: dict[str, object] = {}

    def mark(event) -> None:
        if event["type"] == "tool_start" and "start" not in marks:
            marks["start"] = start_clocks()
        elif event["type"] == "model_event" and "start" in marks and "batch" not in marks:
            marks["batch"] = elapsed_since(marks["start"])

    result = await run_agent_loop(AgentLoopOptions(
        model=model,
        context={"systemPrompt": SYSTEM_PROMPT, "messages": [user_message("go")]},
        tools=Registry([gate_tool(calls, executions)]),
        on_event=mark,
    ))
    results = [m["toolCallId"] for m in result.messages if m["role"] == "toolResult"]
    if (result.reason, executions[0], results) != ("stop", calls, [f"call-{n}" for n in range(1, calls + 1)]):
        raise WorkloadError(f"expected {calls} executions with results in call order and a stop, got "
                            f"{executions[0]} executions, {len(results)} results, {result.reason}")

    bare_executions = [0]
    bare = gate_tool(calls, bare_executions)
    started = start_clocks()
    await asyncio.gather(*(bare.execute({}, ToolExecutionContext()) for _ in range(calls)))
    gather = elapsed_since(started)
    if bare_executions[0] != calls:
        raise WorkloadError(f"the bare gather ran {bare_executions[0]} of {calls} coroutines")
    return BatchRun(marks["batch"], gather, calls)


def time_batch(calls: int) -> BatchRun:
    gc.collect()
    return asyncio.run(run_batch(calls))
