"""A chapter 07 loop written from the chapter text alone, the batch run in an asyncio.TaskGroup.

Another student's style: one object per run, a method per step of the chapter. Nothing the chapter
does not teach (no guarded model, no checked executor, no transcript kept on an exception, no check
of its options). The skipped results' texts are the starter's table.
"""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass
from typing import Any

from checkpoints.ch06_tool_execution import execute_tool_call as execute_core_tool_call
from course.runtime.messages import tool_calls
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
    execute_tool_call: Any = None
    on_event: Any = None


@dataclass
class AgentLoopResult:
    reason: str
    messages: list
    steps: int


class _Run:
    def __init__(self, options: AgentLoopOptions) -> None:
        self.options = options
        self.messages = copy.deepcopy(options.context["messages"])

    def emit(self, event: dict) -> None:
        if self.options.on_event:
            self.options.on_event(event)

    def aborted(self) -> bool:
        return bool(self.options.signal and self.options.signal.aborted)

    def finish(self, reason: str, steps: int) -> AgentLoopResult:
        self.emit({"type": "turn_end", "reason": reason, "steps": steps})
        return AgentLoopResult(reason=reason, messages=self.messages, steps=steps)

    async def ask_model(self) -> dict:
        request = {"systemPrompt": self.options.context["systemPrompt"], "messages": self.messages,
                   "tools": self.options.tools.definitions()}
        stream = self.options.model.stream(request, signal=self.options.signal)
        async for event in stream:
            self.emit({"type": "model_event", "event": event})
        assistant = await stream.result()
        self.messages.append(assistant)
        self.emit({"type": "assistant_message", "message": assistant})
        return assistant

    async def execute(self, call: dict) -> dict:
        executor = self.options.execute_tool_call
        if executor is None:
            def executor(call, context):
                return execute_core_tool_call(call, self.options.tools, context)
        context = ToolExecutionContext(
            signal=self.options.signal,
            report_progress=lambda content: self.emit({"type": "tool_progress", "callId": call["id"],
                                                       "content": content}),
        )
        try:
            result = await executor(call, context)
        except Exception as error:  # the chapter: a rejection becomes this call's error result
            result = error_result(call, str(error))
        self.emit({"type": "tool_end", "result": result})
        return result

    async def run_batch(self, calls: list) -> None:
        for call in calls:
            self.emit({"type": "tool_start", "call": call})
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(self.execute(call)) for call in calls]
        self.messages.extend(task.result() for task in tasks)

    def skip(self, calls: list, stop_reason: str) -> str:
        why, reason = NOT_EXECUTED[stop_reason]
        for call in calls:
            result = error_result(call, why, details={"skipped": True, "reason": stop_reason})
            self.messages.append(result)
            self.emit({"type": "tool_skipped", "result": result})
        return reason


async def run_agent_loop(options: AgentLoopOptions) -> AgentLoopResult:
    run = _Run(options)
    steps = 1
    while steps <= options.max_steps:
        if run.aborted():
            return run.finish("aborted", steps - 1)
        assistant = await run.ask_model()
        calls = tool_calls(assistant)
        stop_reason = assistant["stopReason"]
        if stop_reason == "toolUse":
            if not calls:
                return run.finish("error", steps)
            await run.run_batch(calls)
            if run.aborted():
                return run.finish("aborted", steps)
            steps += 1
        elif stop_reason == "stop" and not calls:
            return run.finish("stop", steps)
        else:
            return run.finish(run.skip(calls, stop_reason), steps)
    return run.finish("maxSteps", options.max_steps)
