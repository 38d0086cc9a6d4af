"""A chapter 07 loop written from the chapter text, with one mistake: a third abort check, between the
answer and its batch, skips the batch's calls when the run was aborted while the model streamed — the
chapter's loop has two checks only (lines 265-282): an abort once a toolUse answer is complete still lets
its batch run, and the check after the batch ends the run. Known-wrong: the mutation gate's, not a
reference. (Its batch is collected with asyncio.as_completed, into each call's slot.)"""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass
from typing import Any

from checkpoints.ch06_tool_execution import execute_tool_call as execute_core_tool_call
from course.runtime.tools import ToolExecutionContext, error_result

REASONS = {"length": "the model response was truncated", "error": "the model response ended with an error",
           "aborted": "the run was aborted", "stop": "the model response ended without requesting tool use"}
FINISH = {"length": "length", "error": "error", "aborted": "aborted", "stop": "error"}


@dataclass
class AgentLoopOptions:
    model: Any
    context: dict
    tools: Any
    signal: Any = None
    max_steps: int = 32
    execute_tool_call: Any = None
    on_event: Any = None


@dataclass
class AgentLoopResult:
    reason: str
    messages: list
    steps: int


def _emit(options, event):
    if options.on_event is not None:
        options.on_event(event)


def _skip(options, messages, calls, stop_reason):
    for call in calls:
        skipped = error_result(call, f"Tool call was not executed because {REASONS[stop_reason]}.",
                               details={"skipped": True, "reason": stop_reason})
        messages.append(skipped)
        _emit(options, {"type": "tool_skipped", "result": skipped})


async def _batch(options, calls):
    execute = options.execute_tool_call or (lambda call, context: execute_core_tool_call(call, options.tools, context))
    for call in calls:
        _emit(options, {"type": "tool_start", "call": call})

    async def one(index, call):
        context = ToolExecutionContext(signal=options.signal, report_progress=lambda content: _emit(
            options, {"type": "tool_progress", "callId": call["id"], "content": content}))
        try:
            result = await execute(call, context)
        except Exception as error:
            result = error_result(call, str(error))
        _emit(options, {"type": "tool_end", "result": result})
        return index, result

    slots = [None] * len(calls)
    for finished in asyncio.as_completed([one(i, call) for i, call in enumerate(calls)]):
        index, result = await finished
        slots[index] = result
    return slots


async def run_agent_loop(options: AgentLoopOptions) -> AgentLoopResult:
    messages = copy.deepcopy(options.context["messages"])

    def finish(reason, steps):
        _emit(options, {"type": "turn_end", "reason": reason, "steps": steps})
        return AgentLoopResult(reason, messages, steps)

    for steps in range(1, options.max_steps + 1):
        if options.signal is not None and options.signal.aborted:
            return finish("aborted", steps - 1)
        stream = options.model.stream({"systemPrompt": options.context["systemPrompt"], "messages": messages,
                                       "tools": options.tools.definitions()}, signal=options.signal)
        async for event in stream:
            _emit(options, {"type": "model_event", "event": event})
        assistant = await stream.result()
        messages.append(assistant)
        _emit(options, {"type": "assistant_message", "message": assistant})
        calls = [block for block in assistant["content"] if block["type"] == "toolCall"]
        stop_reason = assistant["stopReason"]
        if stop_reason == "toolUse" and calls and options.signal is not None and options.signal.aborted:
            stop_reason = "aborted"
        if stop_reason == "stop" and not calls:
            return finish("stop", steps)
        if stop_reason == "toolUse" and not calls:
            return finish("error", steps)
        if stop_reason != "toolUse":
            _skip(options, messages, calls, stop_reason)
            return finish(FINISH[stop_reason], steps)
        messages.extend(await _batch(options, calls))
        if options.signal is not None and options.signal.aborted:
            return finish("aborted", steps)
    return finish("maxSteps", options.max_steps)
