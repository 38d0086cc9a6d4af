"""A chapter 07 loop written from the chapter text, with one mistake: each call's progress callback is a
lambda made in a `for` loop, which reads the loop variable when it is called, not when it was made — so
every call of a batch reports progress under the id of the batch's last call (line 155: the loop adds
the reporting call's own callId). Known-wrong: the mutation gate's, not a reference."""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass
from typing import Any

from checkpoints.ch06_tool_execution import execute_tool_call as execute_core_tool_call
from course.runtime.messages import text, tool_result
from course.runtime.tools import ToolExecutionContext

SKIPPED = {
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
    execute_tool_call: Any = None
    on_event: Any = None


@dataclass
class AgentLoopResult:
    reason: str
    messages: list
    steps: int


async def run_agent_loop(options: AgentLoopOptions) -> AgentLoopResult:
    messages = copy.deepcopy(options.context["messages"])
    execute = options.execute_tool_call or (lambda call, context: execute_core_tool_call(call, options.tools, context))

    def emit(event):
        if options.on_event is not None:
            options.on_event(event)

    def finish(reason, steps):
        emit({"type": "turn_end", "reason": reason, "steps": steps})
        return AgentLoopResult(reason, messages, steps)

    async def run_one(call, context):
        try:
            result = await execute(call, context)
        except Exception as error:
            result = tool_result(call, [text(str(error))], is_error=True)
        emit({"type": "tool_end", "result": result})
        return result

    for steps in range(1, options.max_steps + 1):
        if options.signal is not None and options.signal.aborted:
            return finish("aborted", steps - 1)
        stream = options.model.stream({"systemPrompt": options.context["systemPrompt"], "messages": messages,
                                       "tools": options.tools.definitions()}, signal=options.signal)
        async for event in stream:
            emit({"type": "model_event", "event": event})
        assistant = await stream.result()
        messages.append(assistant)
        emit({"type": "assistant_message", "message": assistant})
        calls = [block for block in assistant["content"] if block["type"] == "toolCall"]
        if assistant["stopReason"] == "stop" and not calls:
            return finish("stop", steps)
        if assistant["stopReason"] == "toolUse" and not calls:
            return finish("error", steps)
        if assistant["stopReason"] != "toolUse":
            why, reason = SKIPPED[assistant["stopReason"]]
            for call in calls:
                skipped = tool_result(call, [text(why)], is_error=True,
                                      details={"skipped": True, "reason": assistant["stopReason"]})
                messages.append(skipped)
                emit({"type": "tool_skipped", "result": skipped})
            return finish(reason, steps)
        pending = []
        for call in calls:
            emit({"type": "tool_start", "call": call})
            context = ToolExecutionContext(signal=options.signal, report_progress=lambda content: emit(
                {"type": "tool_progress", "callId": call["id"], "content": content}))
            pending.append(run_one(call, context))
        messages.extend(await asyncio.gather(*pending))
        if options.signal is not None and options.signal.aborted:
            return finish("aborted", steps)
    return finish("maxSteps", options.max_steps)
