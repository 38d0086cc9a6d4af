"""Chapter 07's generated scenarios, run: a plan is a script of model answers plus what each call's
tool does, in which order a batch finishes, and where the run is aborted.

A plan (JSON, drawn by `course.judge.scenarios.ch07_agent_loop`):
  {"registry": bool,            tools run through the chapter 06 executor (else an injected executor)
   "steps": [{"stopReason": ..., "text": bool,
              "calls": [{"id", "does", "progress"}], "finishOrder": [call ids whose tool runs]}],
   "maxSteps": int, "abortBeforeStart": bool, "abortAtEvent": int | None}
Batches finish in the planned order through asyncio.Event gates that open once every call of the
batch has started, so a loop that runs its tools one after another cannot wait for ever: the
first gate opens when the first call starts if that is all that ever starts.
"""

from __future__ import annotations

import asyncio
import copy

from course.recorder.harness import run_loop
from course.runtime.abort import AbortController
from course.runtime.messages import assistant_message, text, tool_call, tool_result
from course.runtime.scripted import ScriptedModel
from course.runtime.tools import Registry, Tool

SECTIONS = {
    "loop": "单工具往返",
}


class Batch:
    """Opens the gates of one step's calls one at a time, in the planned finish order, once all of
    them are running; a call that starts alone (the tools run one after another) is let through."""

    def __init__(self, order: list[str]) -> None:
        self.order = order
        self.gates = {call_id: asyncio.Event() for call_id in order}
        self.started = 0
        self.running = 0

    async def wait_for_turn(self, call_id: str) -> None:
        self.started += 1
        self.running += 1
        if self.started == len(self.order):
            self.gates[self.order[0]].set()
        for _ in range(200):  # turns of the event loop, not time: enough for every sibling to start
            if self.gates[call_id].is_set():
                return
            await asyncio.sleep(0)
        # Nothing else is running: the loop awaits its tools one by one. Let this one finish.

    def finished(self, call_id: str) -> None:
        self.running -= 1
        position = self.order.index(call_id)
        if position + 1 < len(self.order):
            self.gates[self.order[position + 1]].set()


async def _no_plan(arguments, context):
    raise AssertionError("the probe tool runs only inside run_plan")


PROBE = Tool(name="probe", description="does what the plan says", execute=_no_plan, parameters={
    "type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"], "additionalProperties": False})


def _answer(step: dict):
    if step["stopReason"] == "model_raises":
        def raising(request):
            raise ConnectionError("model connection reset")
        return raising
    content = [text("let me see")] if step["text"] else []
    for call in step["calls"]:
        name = "nope" if call["does"] == "unknown_tool" else "probe"
        content.append(tool_call(call["id"], name, {"key": 7 if call["does"] == "bad_arguments" else call["id"]}))
    error = "upstream failed" if step["stopReason"] in ("error", "aborted") else None
    return assistant_message(content, step["stopReason"], error_message=error)


async def run_plan(plan: dict, load) -> dict:
    loop = load("ch07_agent_loop")
    controller = AbortController()
    calls = {call["id"]: call for step in plan["steps"] for call in step["calls"]}
    batches: dict[str, Batch] = {}
    for step in plan["steps"]:
        batch = Batch(step["finishOrder"])
        batches.update((call_id, batch) for call_id in step["finishOrder"])

    async def behave(call_id: str, context, make_result):
        batch = batches[call_id]
        await batch.wait_for_turn(call_id)
        try:
            for n in range(calls[call_id]["progress"]):
                context.report_progress([text(f"{call_id} progress {n + 1}")])
            does = calls[call_id]["does"]
            if does == "raise":
                raise RuntimeError(f"{call_id} failed")
            if does == "raise_empty":
                raise KeyError()
            if does == "abort":
                controller.abort()
            if does == "not_json":
                return make_result([text("ok"), {"type": "text", "text": {1, 2}}], False)
            if does == "garbage":
                return f"{call_id} done"
            if does == "wrong_call":
                return tool_result(tool_call("someone-else", "probe", {}), [text("not yours")])
            return make_result([text(f"{call_id} done")], does == "report_error")
        finally:
            batch.finished(call_id)

    async def injected(call, context):
        return await behave(call["id"], context, lambda content, is_error: tool_result(call, content, is_error=is_error))

    async def probe(arguments, context):
        return await behave(arguments["key"], context, lambda content, is_error: {"content": content, "isError": is_error})

    events_seen = 0

    def observe(event):
        nonlocal events_seen
        events_seen += 1
        if events_seen == plan["abortAtEvent"]:
            controller.abort()

    if plan["abortBeforeStart"]:
        controller.abort()
    tool = copy.copy(PROBE)
    tool.execute = probe
    run = await run_loop(
        loop,
        model=ScriptedModel([_answer(step) for step in plan["steps"]]),
        context={"systemPrompt": "You are tiny-pi.", "messages": [{"role": "user", "content": "go", "timestamp": 0}]},
        tools=Registry([tool] if plan["registry"] else []),
        execute_tool_call=None if plan["registry"] else injected,
        signal=controller.signal,
        max_steps=plan["maxSteps"],
        on_event=observe,
    )
    return run.record()
