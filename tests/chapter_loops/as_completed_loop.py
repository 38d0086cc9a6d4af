"""A chapter 07 loop written from the chapter text alone, the batch collected with asyncio.as_completed.

A third student's style: each finished call is collected as it completes, into the slot of its
place in the answer, so the transcript still gets the results in call order. Nothing the chapter
does not teach (no guarded model, no checked executor, no transcript kept on an exception, no check
of its options). The skipped results' texts are the starter's table.
"""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field
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
    context: dict[str, Any]
    tools: Any
    signal: Any = None
    max_steps: int = 32
    execute_tool_call: Any = None
    on_event: Any = None


@dataclass
class AgentLoopResult:
    reason: str
    messages: list = field(default_factory=list)
    steps: int = 0


def _emit(options, event):
    if options.on_event is not None:
        options.on_event(event)


def _is_aborted(options):
    return options.signal is not None and options.signal.aborted


async def _stream_answer(options, messages):
    stream = options.model.stream({
        "systemPrompt": options.context["systemPrompt"],
        "messages": messages,
        "tools": options.tools.definitions(),
    }, signal=options.signal)
    async for event in stream:
        _emit(options, {"type": "model_event", "event": event})
    return await stream.result()


async def _execute(options, index, call):
    """Run one call; returns (its place in the answer, its result)."""
    def report_progress(content):
        _emit(options, {"type": "tool_progress", "callId": call["id"], "content": content})

    context = ToolExecutionContext(signal=options.signal, report_progress=report_progress)
    try:
        if options.execute_tool_call is not None:
            result = await options.execute_tool_call(call, context)
        else:
            result = await execute_core_tool_call(call, options.tools, context)
    except Exception as error:
        result = error_result(call, str(error))
    _emit(options, {"type": "tool_end", "result": result})
    return index, result


async def _run_batch(options, calls):
    for call in calls:
        _emit(options, {"type": "tool_start", "call": call})
    results = [None] * len(calls)
    for finished in asyncio.as_completed([_execute(options, i, call) for i, call in enumerate(calls)]):
        index, result = await finished
        results[index] = result
    return results


async def run_agent_loop(options):
    messages = copy.deepcopy(options.context["messages"])

    def finish(reason, steps):
        _emit(options, {"type": "turn_end", "reason": reason, "steps": steps})
        return AgentLoopResult(reason=reason, messages=messages, steps=steps)

    for steps in range(1, options.max_steps + 1):
        if _is_aborted(options):
            return finish("aborted", steps - 1)
        assistant = await _stream_answer(options, messages)
        messages.append(assistant)
        _emit(options, {"type": "assistant_message", "message": assistant})

        calls = [block for block in assistant["content"] if block["type"] == "toolCall"]
        stop_reason = assistant["stopReason"]
        if stop_reason == "toolUse" and calls:
            messages.extend(await _run_batch(options, calls))
            if _is_aborted(options):
                return finish("aborted", steps)
            continue
        if stop_reason == "toolUse":
            return finish("error", steps)  # toolUse without calls: no batch to continue with
        if stop_reason == "stop" and not calls:
            return finish("stop", steps)
        text, reason = NOT_EXECUTED[stop_reason]
        for call in calls:
            skipped = error_result(call, text, details={"skipped": True, "reason": stop_reason})
            messages.append(skipped)
            _emit(options, {"type": "tool_skipped", "result": skipped})
        return finish(reason, steps)
    return finish("maxSteps", options.max_steps)
