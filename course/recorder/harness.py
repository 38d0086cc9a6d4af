"""Running one scenario of a chapter and recording everything a snapshot shows about it."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from course.recorder.impl import load_checkpoint, load_prerequisite  # noqa: F401  (tests and the CLI import them from here)
from course.judge.invariants import check_run
from course.judge.timeline import render_run
from course.runtime.tools import Registry


@dataclass
class Run:
    """What one run of the loop did, as a test observes it."""

    reason: str
    steps: int
    # Left out of the repr (pytest prints it for a failing assertion): the transcript and its events.
    messages: list[dict] = field(repr=False)
    events: list[dict] = field(repr=False)
    requests: list[dict] | None = field(repr=False)
    executions: list[str]
    problems: list[str] = field(default_factory=list)

    def observations(self) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        if self.requests is not None:
            seen["model requests"] = len(self.requests)
        seen["tool executions"] = len(self.executions)
        seen["steps"] = self.steps
        seen["reason"] = self.reason
        seen["invariants"] = "hold" if not self.problems else f"{len(self.problems)} broken"
        for n, problem in enumerate(self.problems, 1):
            seen[f"  broken {n}"] = problem
        return seen

    def render(self, *, messages_json: bool = True) -> str:
        return render_run(events=self.events, messages=self.messages, requests=self.requests,
                          observations=self.observations(), include_messages_json=messages_json)


def _counted_registry(registry: Registry, executions: list[str]) -> Registry:
    def wrap(tool):
        async def execute(arguments, context):
            executions.append(tool.name)
            return await tool.execute(arguments, context)
        counted = copy.copy(tool)  # not dataclasses.replace: that would check the tool's schema again
        counted.execute = execute
        return counted
    return Registry(wrap(tool) for tool in registry)


async def run_loop(
    loop: ModuleType,
    *,
    model: Any,
    context: dict,
    tools: Registry | None = None,
    execute_tool_call: Any = None,
    signal: Any = None,
    max_steps: int | None = None,
    on_event: Any = None,
) -> Run:
    """Run `loop.run_agent_loop` once, counting tool executions and checking the loop's promises.

    Counting wraps the tools (or the injected executor) without changing the path under test:
    with no `execute_tool_call`, the loop still uses its own chapter 06 executor.
    """
    registry = tools if tools is not None else Registry()
    executions: list[str] = []
    events: list[dict] = []
    input_messages = copy.deepcopy(context["messages"])

    def observe(event: dict) -> None:
        events.append(event)
        if on_event is not None:
            on_event(event)

    executor = None
    if execute_tool_call is not None:
        async def executor(call, tool_context):
            executions.append(call["name"])
            return await execute_tool_call(call, tool_context)

    options = loop.AgentLoopOptions(
        model=model,
        context=context,
        tools=_counted_registry(registry, executions),
        signal=signal,
        execute_tool_call=executor,
        on_event=observe,
        **({} if max_steps is None else {"max_steps": max_steps}),
    )
    result = await loop.run_agent_loop(options)
    requests = getattr(model, "requests", None)
    problems = check_run(
        input_messages=input_messages,
        messages=result.messages,
        events=events,
        requests=requests,
        reason=result.reason,
        steps=result.steps,
        caller_messages_after=context["messages"],
        system_prompt=context["systemPrompt"],
        definitions=registry.definitions(),
        max_steps=getattr(options, "max_steps", max_steps),  # a student's options may lack the field
    )
    return Run(reason=result.reason, steps=result.steps, messages=result.messages, events=events,
               requests=requests, executions=executions, problems=problems)
