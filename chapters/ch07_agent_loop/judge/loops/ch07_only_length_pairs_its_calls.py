"""A chapter 07 loop written from the chapter text, with one mistake: it reads 「length：工具不启动，调用仍然
闭合」 as being about length alone — a length answer's calls get skipped results and tool_skipped events, but an
error or aborted answer, or a stop that carries calls, ends the run leaving its calls without results (line
229: they reuse the same skipped structure, each with a tool_skipped event). Known-wrong: the mutation
gate's, not a reference."""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass
from typing import Any

from checkpoints.ch06_tool_execution import execute_tool_call as execute_core_tool_call
from course.runtime.tools import ToolExecutionContext, error_result

TRUNCATED = "Tool call was not executed because the model response was truncated."


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
    emit = options.on_event or (lambda event: None)

    def finish(reason, steps):
        emit({"type": "turn_end", "reason": reason, "steps": steps})
        return AgentLoopResult(reason, messages, steps)

    async def execute_one(call):
        def report(content):
            emit({"type": "tool_progress", "callId": call["id"], "content": content})
        try:
            result = await execute(call, ToolExecutionContext(signal=options.signal, report_progress=report))
        except Exception as error:
            result = error_result(call, str(error))
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
        if assistant["stopReason"] == "length":
            for call in calls:
                skipped = error_result(call, TRUNCATED, details={"skipped": True, "reason": "length"})
                messages.append(skipped)
                emit({"type": "tool_skipped", "result": skipped})
            return finish("length", steps)
        if assistant["stopReason"] != "toolUse":
            return finish("error" if calls or assistant["stopReason"] == "error" else assistant["stopReason"], steps)
        if not calls:
            return finish("error", steps)
        for call in calls:
            emit({"type": "tool_start", "call": call})
        messages.extend(await asyncio.gather(*(execute_one(call) for call in calls)))
        if options.signal is not None and options.signal.aborted:
            return finish("aborted", steps)
    return finish("maxSteps", options.max_steps)
