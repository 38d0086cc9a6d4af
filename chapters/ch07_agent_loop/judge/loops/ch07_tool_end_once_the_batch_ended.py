"""A chapter 07 loop written from the chapter text, with one mistake: it emits the batch's tool_end events
once the whole batch has ended, in call order — the chapter's tool_end reflects the order the tools
actually finished in (line 247), only the results go into the transcript in call order (line 251).
Known-wrong: the mutation gate's, not a reference."""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field
from typing import Any, Callable

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
    context: dict[str, Any]
    tools: Any
    signal: Any = None
    max_steps: int = 32
    execute_tool_call: Callable | None = None
    on_event: Callable | None = None


@dataclass
class AgentLoopResult:
    reason: str
    messages: list = field(default_factory=list)
    steps: int = 0


class Run:
    """One run of the loop: its options, its own messages, and how it tells the observer."""

    def __init__(self, options: AgentLoopOptions) -> None:
        self.options = options
        self.messages = copy.deepcopy(options.context["messages"])

    def emit(self, event: dict) -> None:
        if self.options.on_event is not None:
            self.options.on_event(event)

    def finish(self, reason: str, steps: int) -> AgentLoopResult:
        self.emit({"type": "turn_end", "reason": reason, "steps": steps})
        return AgentLoopResult(reason, self.messages, steps)

    def aborted(self) -> bool:
        return self.options.signal is not None and self.options.signal.aborted

    async def ask(self) -> dict:
        stream = self.options.model.stream({"systemPrompt": self.options.context["systemPrompt"],
                                            "messages": self.messages, "tools": self.options.tools.definitions()},
                                           signal=self.options.signal)
        async for event in stream:
            self.emit({"type": "model_event", "event": event})
        return await stream.result()

    async def execute(self, call: dict) -> dict:
        executor = self.options.execute_tool_call or (
            lambda call, context: execute_core_tool_call(call, self.options.tools, context))
        context = ToolExecutionContext(signal=self.options.signal, report_progress=lambda content: self.emit(
            {"type": "tool_progress", "callId": call["id"], "content": content}))
        try:
            return await executor(call, context)
        except Exception as error:
            return error_result(call, str(error))

    async def batch(self, calls: list[dict]) -> list[dict]:
        for call in calls:
            self.emit({"type": "tool_start", "call": call})
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(self.execute(call)) for call in calls]
        results = [task.result() for task in tasks]
        for result in results:
            self.emit({"type": "tool_end", "result": result})
        return results

    def skip(self, assistant: dict, calls: list[dict]) -> str:
        why, reason = NOT_EXECUTED[assistant["stopReason"]]
        for call in calls:
            skipped = error_result(call, why, details={"skipped": True, "reason": assistant["stopReason"]})
            self.messages.append(skipped)
            self.emit({"type": "tool_skipped", "result": skipped})
        return reason


async def run_agent_loop(options: AgentLoopOptions) -> AgentLoopResult:
    run = Run(options)
    for steps in range(1, options.max_steps + 1):
        if run.aborted():
            return run.finish("aborted", steps - 1)
        assistant = await run.ask()
        run.messages.append(assistant)
        run.emit({"type": "assistant_message", "message": assistant})
        calls = [block for block in assistant["content"] if block["type"] == "toolCall"]
        if assistant["stopReason"] == "stop" and not calls:
            return run.finish("stop", steps)
        if assistant["stopReason"] == "toolUse" and not calls:
            return run.finish("error", steps)
        if assistant["stopReason"] != "toolUse":
            return run.finish(run.skip(assistant, calls), steps)
        run.messages.extend(await run.batch(calls))
        if run.aborted():
            return run.finish("aborted", steps)
    return run.finish("maxSteps", options.max_steps)
