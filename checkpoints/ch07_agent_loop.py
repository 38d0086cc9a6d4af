"""Chapter 07: the agent loop — one README round trip calls the model twice.

The loop below follows the chapter section by section:
  1. deep-copy the caller's messages                     (第一次 model.stream() 追加 assistant 消息)
  2. request the model, emit its events, append result   (request_assistant)
  3. stop without tool calls ends the run                (没有工具的 stop 直接结束)
  4. non-executing terminals pair every call, then end   (length：工具不启动，调用仍然闭合)
  5. run the tool batch concurrently, append in order    (call-1 的结果进入第二次模型请求 / 多个工具同时运行)
  6. abort checks and the max_steps bound                (取消与 maxSteps 阻止新的模型请求)
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from checkpoints.ch06_tool_execution import execute_tool_call as execute_core_tool_call
from course.runtime.abort import AbortSignal
from course.runtime.loop_inputs import check_loop_options, keep_transcript
from course.runtime.messages import (
    AssistantMessage, Message, TextContent, ToolCall, ToolResultMessage, check_json, tool_calls,
)
from course.runtime.stream import Model, ModelEvent, guard_stream
from course.runtime.tools import Registry, ToolExecutionContext, error_result

FinishReason = Literal["stop", "length", "error", "aborted", "maxSteps"]
ToolExecutor = Callable[[ToolCall, ToolExecutionContext], Awaitable[ToolResultMessage]]


class ModelEventLoopEvent(TypedDict):
    type: Literal["model_event"]
    event: ModelEvent


class AssistantMessageLoopEvent(TypedDict):
    type: Literal["assistant_message"]
    message: AssistantMessage


class ToolStartLoopEvent(TypedDict):
    type: Literal["tool_start"]
    call: ToolCall


class ToolProgressLoopEvent(TypedDict):
    type: Literal["tool_progress"]
    callId: str
    content: list[TextContent]


class ToolEndLoopEvent(TypedDict):
    type: Literal["tool_end", "tool_skipped"]
    result: ToolResultMessage


class TurnEndLoopEvent(TypedDict):
    type: Literal["turn_end"]
    reason: FinishReason
    steps: int


LoopEvent = (
    ModelEventLoopEvent | AssistantMessageLoopEvent | ToolStartLoopEvent
    | ToolProgressLoopEvent | ToolEndLoopEvent | TurnEndLoopEvent
)


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
    """How many model requests the run may make: a positive int (anything else is a ValueError at the start)."""
    execute_tool_call: ToolExecutor | None = None
    """Replaces the chapter 06 executor (tests inject probes here)."""
    on_event: Callable[[LoopEvent], None] | None = None
    """Receives every LoopEvent, in order."""


@dataclass
class AgentLoopResult:
    """How the run ended, the transcript it formed, and how many model requests completed."""

    reason: FinishReason
    messages: list[Message] = field(repr=False)  # asyncio.run() formats its result's repr: not a whole transcript
    steps: int


# stopReason -> (the skipped result's text, how the run finishes). The table of 非执行终态.
NOT_EXECUTED: dict[str, tuple[str, FinishReason]] = {
    "length": ("Tool call was not executed because the model response was truncated.", "length"),
    "error": ("Tool call was not executed because the model response ended with an error.", "error"),
    "aborted": ("Tool call was not executed because the run was aborted.", "aborted"),
    "stop": ("Tool call was not executed because the model response ended without requesting tool use.", "error"),
}


async def run_agent_loop(options: AgentLoopOptions) -> AgentLoopResult:
    """Run the model and its tools until the run finishes; every LoopEvent goes to `options.on_event`.

    Besides what the chapter shows, the course holds a loop to these promises (its generated scenarios
    check them): a model that raises or breaks the stream contract becomes an `error` answer
    (`guard_stream`); an injected executor's answer that is not a result for its call becomes an error
    result (`checked`); a tool's exception without a message is named by its type; progress a tool
    reports after its call ended is not emitted; an exception leaving the loop (an observer's, or the
    caller's cancellation) carries what formed so far as `exc.transcript`; every event has exactly the
    fields its type declares.
    """
    check_loop_options(options)  # context, messages, model, tools, ...: one clear TypeError / ValueError
    if isinstance(options.max_steps, bool) or not isinstance(options.max_steps, int) or options.max_steps < 1:
        raise ValueError(f"max_steps must be a positive integer, got {options.max_steps!r}")

    # The caller's messages stay as they were: everything this run adds goes into a deep copy.
    messages: list[Message] = copy.deepcopy(options.context["messages"])
    # The chapter 06 executor answers every call with a well-formed JSON result (its own tests hold
    # it to that); what an injected executor returns is checked before the transcript keeps it.
    execute: ToolExecutor = checked(options.execute_tool_call) if options.execute_tool_call is not None else (
        lambda call, context: execute_core_tool_call(call, options.tools, context)
    )

    def emit(event: LoopEvent) -> None:
        if options.on_event is not None:
            options.on_event(event)

    def finish(reason: FinishReason, steps: int) -> AgentLoopResult:
        emit({"type": "turn_end", "reason": reason, "steps": steps})
        return AgentLoopResult(reason=reason, messages=messages, steps=steps)

    try:
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
    except BaseException as exc:
        # An observer that raised, or the caller cancelling the task: what formed so far stays reachable.
        keep_transcript(exc, messages)  # exc.transcript = messages + finished_results; never raises itself
        raise


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
    # guard_stream turns a provider that raises or misbehaves into an error message, as the contract says.
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
    ended: list[ToolResultMessage] = []

    def emit_keeping_results(event: LoopEvent) -> None:
        if event["type"] == "tool_end":
            ended.append(event["result"])
        emit(event)

    try:
        if len(calls) == 1:  # nothing runs beside it: a task and a group would cost more than the rest of the step
            return [await _execute_in_this_task(calls[0], execute, signal, emit_keeping_results)]
        # A TaskGroup, unlike a bare gather, cancels and awaits the siblings if anything escapes.
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(execute_one(call, execute, signal, emit_keeping_results)) for call in calls]
    except BaseException as error:  # an observer raised, or the task running the loop was cancelled
        if isinstance(error, BaseExceptionGroup):
            error = error.exceptions[0]
        # The results that formed before the batch was cut short stay reachable, in call order.
        ids = [call["id"] for call in calls]
        error.finished_results = sorted(ended, key=lambda result: ids.index(result["toolCallId"]))
        raise error from None
    return [task.result() for task in tasks]


async def _execute_in_this_task(
    call: ToolCall, execute: ToolExecutor, signal: AbortSignal | None, emit: Callable[[LoopEvent], None]
) -> ToolResultMessage:
    """execute_one without a task of its own; a cancellation the tool swallowed still ends the run."""
    task = asyncio.current_task()
    cancelling = task.cancelling()
    result = await execute_one(call, execute, signal, emit)
    if task.cancelling() > cancelling:
        raise asyncio.CancelledError
    return result


async def execute_one(
    call: ToolCall, execute: ToolExecutor, signal: AbortSignal | None, emit: Callable[[LoopEvent], None]
) -> ToolResultMessage:
    """Run one call; whatever the executor does, the call gets exactly one result of its own."""
    running = True
    observer_errors: list[BaseException] = []

    def report_progress(content: list[TextContent]) -> None:
        if running:  # progress reported after the call ended belongs to no tool item
            try:
                emit({"type": "tool_progress", "callId": call["id"], "content": content})
            except BaseException as exc:
                observer_errors.append(exc)  # the observer failed, not the tool: it must reach the caller
                raise

    try:
        result = await execute(call, ToolExecutionContext(signal=signal, report_progress=report_progress))
    except Exception as exc:  # one failing executor must not lose its siblings' results
        result = error_result(call, str(exc) or type(exc).__name__)
    finally:
        running = False  # also when the call was cancelled: nothing it reports later is emitted
    if observer_errors:
        raise observer_errors[0]
    emit({"type": "tool_end", "result": result})
    return result


def checked(execute: ToolExecutor) -> ToolExecutor:
    """`execute`, with whatever it answers that cannot stand in the transcript replaced by an error result."""
    async def execute_checked(call: ToolCall, context: ToolExecutionContext) -> ToolResultMessage:
        result = await execute(call, context)
        problem = result_problem(call, result)
        return result if problem is None else error_result(call, problem)

    return execute_checked


def result_problem(call: ToolCall, result: object) -> str | None:
    """Why `result` cannot stand in the transcript as the answer to `call`, or None."""
    if not isinstance(result, dict) or result.get("role") != "toolResult":
        return f"Executor returned {type(result).__name__} instead of a tool result for call {call['id']}"
    if result.get("toolCallId") != call["id"] or result.get("toolName") != call["name"]:
        return (f"Executor returned a result for {result.get('toolName')!r} call {result.get('toolCallId')!r} "
                f"instead of {call['name']!r} call {call['id']!r}")
    if not isinstance(result.get("content"), list) or not isinstance(result.get("isError"), bool):
        return f"Executor returned a malformed tool result for call {call['id']}"
    try:
        check_json(result)  # a transcript is JSON
    except (TypeError, ValueError) as error:
        return f"Executor returned a result for call {call['id']} that is not JSON: {error}"
    return None
