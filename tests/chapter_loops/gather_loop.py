"""A chapter 07 loop written from the chapter text alone, the batch awaited with asyncio.gather.

A student's `ch07_agent_loop.py`: it does what the chapter's fragments do, in their order, and
nothing the chapter does not teach (no guarded model, no checked executor, no transcript kept on
an exception, no check of its options). The skipped results' texts are the starter's table.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from checkpoints.ch06_tool_execution import execute_tool_call as execute_core_tool_call
from course.runtime.tools import ToolExecutionContext, error_result

NOT_EXECUTED = {
    "length": ("Tool call was not executed because the model response was truncated.", "length"),
    "error": ("Tool call was not executed because the model response ended with an error.", "error"),
    "aborted": ("Tool call was not executed because the run was aborted.", "aborted"),
    "stop": ("Tool call was not executed because the model response ended without requesting tool use.", "error"),
}


@dataclass
class AgentLoopOptions:
    model: Any
    context: dict
    tools: Any
    signal: Any = None
    max_steps: int = 32
    execute_tool_call: Callable[..., Awaitable[dict]] | None = None
    on_event: Callable[[dict], None] | None = None


@dataclass
class AgentLoopResult:
    reason: str
    messages: list
    steps: int


def emit(options: AgentLoopOptions, event: dict) -> None:
    if options.on_event is not None:
        options.on_event(event)


async def run_agent_loop(options: AgentLoopOptions) -> AgentLoopResult:
    messages = copy.deepcopy(options.context["messages"])
    execute_tool_call = options.execute_tool_call or (
        lambda call, context: execute_core_tool_call(call, options.tools, context))

    def finish(reason: str, steps: int) -> AgentLoopResult:
        emit(options, {"type": "turn_end", "reason": reason, "steps": steps})
        return AgentLoopResult(reason, messages, steps)

    async def execute_one(call: dict) -> dict:
        def report_progress(content: list) -> None:
            emit(options, {"type": "tool_progress", "callId": call["id"], "content": content})

        try:
            result = await execute_tool_call(call, ToolExecutionContext(signal=options.signal,
                                                                        report_progress=report_progress))
        except Exception as error:
            result = error_result(call, str(error))
        emit(options, {"type": "tool_end", "result": result})
        return result

    for steps in range(1, options.max_steps + 1):
        if options.signal is not None and options.signal.aborted:
            return finish("aborted", steps - 1)

        stream = options.model.stream(
            {"systemPrompt": options.context["systemPrompt"], "messages": messages,
             "tools": options.tools.definitions()},
            signal=options.signal,
        )
        async for event in stream:
            emit(options, {"type": "model_event", "event": event})
        assistant = await stream.result()
        messages.append(assistant)
        emit(options, {"type": "assistant_message", "message": assistant})

        calls = [block for block in assistant["content"] if block["type"] == "toolCall"]
        if assistant["stopReason"] == "stop" and not calls:
            return finish("stop", steps)
        if assistant["stopReason"] == "toolUse" and not calls:
            return finish("error", steps)
        if assistant["stopReason"] != "toolUse":
            why, reason = NOT_EXECUTED[assistant["stopReason"]]
            for call in calls:
                skipped = error_result(call, why, details={"skipped": True, "reason": assistant["stopReason"]})
                messages.append(skipped)
                emit(options, {"type": "tool_skipped", "result": skipped})
            return finish(reason, steps)

        for call in calls:
            emit(options, {"type": "tool_start", "call": call})
        results = await asyncio.gather(*(execute_one(call) for call in calls))
        messages.extend(results)
        if options.signal is not None and options.signal.aborted:
            return finish("aborted", steps)

    return finish("maxSteps", options.max_steps)
