"""Chapter 07: the agent loop — one README round trip calls the model twice.

Read it beside the chapter, top to bottom: the deep copy and the first model.stream() (第一次
model.stream() 追加 assistant 消息: run_agent_loop, request_assistant), the pure stop (没有工具的 stop),
the non-executing terminals (length：工具不启动), a tool batch with tool_start, progress and tool_end (call-1
的结果 / 多个工具同时运行: run_tool_batch, execute_one), and the abort checks and max_steps (取消与 maxSteps).

Lines marked `加固` opt into the runtime's hardening (course/runtime/hardening.py): promises beyond the
chapter, for models, executors and observers that break their contracts. They change nothing while the
collaborators keep to the chapter.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from checkpoints.ch06_tool_execution import execute_tool_call as execute_core_tool_call
from course.runtime.abort import AbortSignal
from course.runtime.messages import AssistantMessage, Message, TextContent, ToolCall, ToolResultMessage, tool_calls
from course.runtime.stream import Model, ModelEvent
from course.runtime.tools import Registry, ToolExecutionContext, error_result
from course.runtime.hardening import RunGuard, checked, check_loop_options, guard_stream  # 加固

FinishReason = Literal["stop", "length", "error", "aborted", "maxSteps"]
ToolExecutor = Callable[[ToolCall, ToolExecutionContext], Awaitable[ToolResultMessage]]

# The LoopEvent types: what the observer sees, one event at a time (LoopEvent 展示过程).
ModelEventLoopEvent = TypedDict("ModelEventLoopEvent", {"type": Literal["model_event"], "event": ModelEvent})
AssistantMessageLoopEvent = TypedDict("AssistantMessageLoopEvent", {"type": Literal["assistant_message"],
                                                                    "message": AssistantMessage})
ToolStartLoopEvent = TypedDict("ToolStartLoopEvent", {"type": Literal["tool_start"], "call": ToolCall})
ToolProgressLoopEvent = TypedDict("ToolProgressLoopEvent", {"type": Literal["tool_progress"], "callId": str,
                                                            "content": list[TextContent]})
ToolEndLoopEvent = TypedDict("ToolEndLoopEvent", {"type": Literal["tool_end", "tool_skipped"],
                                                  "result": ToolResultMessage})
TurnEndLoopEvent = TypedDict("TurnEndLoopEvent", {"type": Literal["turn_end"], "reason": FinishReason, "steps": int})
LoopEvent = (ModelEventLoopEvent | AssistantMessageLoopEvent | ToolStartLoopEvent | ToolProgressLoopEvent
             | ToolEndLoopEvent | TurnEndLoopEvent)


@dataclass
class AgentLoopOptions:
    """Everything one run of the loop needs."""

    model: Model
    """What `stream()` is called on, once per step."""
    context: dict[str, Any]
    """`{"systemPrompt", "messages", optional "tools"}`; the loop never changes it and never forwards its "tools"."""
    tools: Registry
    """The tools of this run: their definitions go to the model, their executors run the calls."""
    signal: AbortSignal | None = None
    """Aborting it stops new model requests; it is also handed to the model and every tool."""
    max_steps: int = 32
    """How many model requests the run may make."""
    execute_tool_call: ToolExecutor | None = None
    """Replaces the chapter 06 executor (tests inject probes here)."""
    on_event: Callable[[LoopEvent], None] | None = None
    """Receives every LoopEvent, in order."""


@dataclass
class AgentLoopResult:
    """How the run ended, the transcript it formed, and how many model requests completed."""

    reason: FinishReason
    messages: list[Message] = field(repr=False)
    steps: int


# stopReason -> (the skipped result's text, how the run finishes). The table of 非执行终态.
NOT_EXECUTED: dict[str, tuple[str, FinishReason]] = {
    "length": ("Tool call was not executed because the model response was truncated.", "length"),
    "error": ("Tool call was not executed because the model response ended with an error.", "error"),
    "aborted": ("Tool call was not executed because the run was aborted.", "aborted"),
    "stop": ("Tool call was not executed because the model response ended without requesting tool use.", "error"),
}


async def run_agent_loop(options: AgentLoopOptions) -> AgentLoopResult:
    """Run the model and its tools until the run finishes; every LoopEvent goes to `options.on_event`."""
    check_loop_options(options)  # 加固: options the loop cannot run with are one clear TypeError / ValueError
    # The caller's messages stay as they were: everything this run adds goes into a deep copy.
    messages: list[Message] = copy.deepcopy(options.context["messages"])
    guard = RunGuard(messages)  # 加固: used by the executor, by emit and by the `async with` below
    # The chapter's executor adapter: an injected executor, or chapter 06's with this run's tools.
    execute: ToolExecutor = checked(options.execute_tool_call) if options.execute_tool_call is not None else (
        lambda call, context: execute_core_tool_call(call, options.tools, context)
    )  # 加固: checked() makes an injected executor's malformed answer an error result
    execute = guard.watch(execute)  # 加固: no progress after a call ended; an observer failing there is raised

    def emit(event: LoopEvent) -> None:
        guard.note(event)  # 加固: the batch's finished results, for exc.transcript
        if options.on_event is not None:
            options.on_event(event)

    def finish(reason: FinishReason, steps: int) -> AgentLoopResult:
        emit({"type": "turn_end", "reason": reason, "steps": steps})
        return AgentLoopResult(reason=reason, messages=messages, steps=steps)

    # 加固: an exception leaving the run cancels the tools still running and carries exc.transcript.
    async with guard:
        for steps in range(1, options.max_steps + 1):
            # Request number `steps` has not started; steps - 1 requests have completed.
            if is_aborted(options.signal):
                return finish("aborted", steps - 1)

            assistant = await request_assistant(options, messages, emit)
            messages.append(assistant)
            emit({"type": "assistant_message", "message": assistant})

            calls = tool_calls(assistant)
            if assistant["stopReason"] == "stop" and not calls:
                return finish("stop", steps)
            if assistant["stopReason"] == "toolUse" and not calls:
                return finish("error", steps)  # no complete tool batch to continue with
            if assistant["stopReason"] != "toolUse":
                why, reason = NOT_EXECUTED[assistant["stopReason"]]
                for call in calls:
                    skipped = error_result(call, why, details={"skipped": True, "reason": assistant["stopReason"]})
                    messages.append(skipped)
                    emit({"type": "tool_skipped", "result": skipped})
                return finish(reason, steps)

            messages.extend(await run_tool_batch(calls, execute, options.signal, emit))
            # The batch ran to the end and its results are kept; only the next request is prevented.
            if is_aborted(options.signal):
                return finish("aborted", steps)

        return finish("maxSteps", options.max_steps)


def is_aborted(signal: AbortSignal | None) -> bool:
    return signal is not None and signal.aborted


async def request_assistant(
    options: AgentLoopOptions, messages: list[Message], emit: Callable[[LoopEvent], None]
) -> AssistantMessage:
    """One model request: this run's messages, the context's system prompt, the registry's definitions."""
    request = {
        "systemPrompt": options.context["systemPrompt"],
        "messages": messages,
        "tools": options.tools.definitions(),
    }
    # 加固: guard_stream makes a model that raises or breaks the stream contract an error answer.
    stream = guard_stream(lambda: options.model.stream(request, signal=options.signal))
    async for event in stream:
        emit({"type": "model_event", "event": event})
    return await stream.result()


async def run_tool_batch(
    calls: list[ToolCall], execute: ToolExecutor, signal: AbortSignal | None, emit: Callable[[LoopEvent], None]
) -> list[ToolResultMessage]:
    """Start every call, wait for all of them together, and return the results in call order."""
    for call in calls:
        emit({"type": "tool_start", "call": call})
    # gather's list follows the calls' order, whichever tool finished first.
    return await asyncio.gather(*(execute_one(call, execute, signal, emit) for call in calls))


async def execute_one(
    call: ToolCall, execute: ToolExecutor, signal: AbortSignal | None, emit: Callable[[LoopEvent], None]
) -> ToolResultMessage:
    """Run one call: its progress carries its id, and a rejection becomes its own error result."""
    def report_progress(content: list[TextContent]) -> None:
        emit({"type": "tool_progress", "callId": call["id"], "content": content})

    try:
        result = await execute(call, ToolExecutionContext(signal=signal, report_progress=report_progress))
    except Exception as exc:  # one failing executor must not lose its siblings' results
        result = error_result(call, str(exc) or type(exc).__name__)  # the message, never a traceback
    emit({"type": "tool_end", "result": result})
    return result
