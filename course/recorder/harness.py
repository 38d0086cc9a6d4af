"""Running one scenario of a chapter and recording everything a snapshot shows about it.

A `Run` is data: what the loop did (events, messages, requests, executions) and what it was given
(the caller's messages before and after, the system prompt, the registry's definitions,
`max_steps`). The judge renders it and checks the loop's promises on it (`course.judge.render`);
`record()` is the same as JSON, which is all a graded submission's process hands over.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from course.recorder import mask as masks
from course.recorder.impl import load_checkpoint, load_prerequisite  # noqa: F401  (tests and the CLI import them from here)
from course.recorder.record import jsonable
from course.runtime.scripted import ScriptedModel
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
    input_messages: list[dict] = field(default_factory=list, repr=False)
    """The caller's messages as they were handed in (a deep copy)."""
    caller_messages_after: Any = field(default=None, repr=False)
    """The caller's `context["messages"]` after the run (it must not have changed)."""
    system_prompt: Any = field(default=None, repr=False)
    definitions: list[dict] = field(default_factory=list, repr=False)
    """The registry's tool definitions: what every request must offer."""
    max_steps: Any = field(default=None, repr=False)
    requests_without_signal: list[int] = field(default_factory=list, repr=False)
    """The model requests whose `stream()` was not handed the run's signal (when the run had one)."""
    messages_json: bool = field(default=True, repr=False)
    """Whether the rendered run ends with the messages as JSON (a long run's snapshot leaves it out)."""
    masked_record: dict | None = field(default=None, repr=False, compare=False)
    """In a masked scenario (course.recorder.mask), the run as the code under test made it, masked: what
    `record()` gives (the judge's evidence), while the fields above are the test's unmasked view of it."""

    def without_messages_json(self) -> Run:
        return dataclasses.replace(self, messages_json=False)

    def record(self) -> dict:
        """The run as JSON data: what the judge renders and checks."""
        if self.masked_record is not None:
            return {**self.masked_record, "messagesJson": self.messages_json}
        return jsonable({
            "kind": "loop-run", "reason": self.reason, "steps": self.steps, "messages": self.messages,
            "events": self.events, "requests": self.requests, "executions": self.executions,
            "inputMessages": self.input_messages, "callerMessagesAfter": self.caller_messages_after,
            "systemPrompt": self.system_prompt, "definitions": self.definitions, "maxSteps": self.max_steps,
            "requestsWithoutTheRunsSignal": self.requests_without_signal, "messagesJson": self.messages_json,
        })

    @property
    def problems(self) -> list[str]:
        """The loop's promises this run broke, in words (the judge's invariant checker)."""
        from course.judge.render import loop_run_problems  # the judge's, imported only where it may run

        return loop_run_problems(self.record())

    def render(self) -> str:
        """The run in the chapter's notation, as its snapshot holds it."""
        from course.judge.render import render_record

        return render_record(self.record())


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
    with no `execute_tool_call`, the loop still uses its own chapter 06 executor. In a masked
    scenario (a grade with a secret: course.recorder.mask), the loop runs on the masked inputs.
    """
    registry = tools if tools is not None else Registry()
    mask = masks.current()
    if mask is None:
        return await _run_once(loop, model=model, context=context, registry=registry,
                               execute_tool_call=execute_tool_call, signal=signal, max_steps=max_steps, on_event=on_event)
    return await _run_masked(loop, mask, model=model, context=context, registry=registry,
                             execute_tool_call=execute_tool_call, signal=signal, max_steps=max_steps, on_event=on_event)


async def _run_masked(loop: ModuleType, mask: masks.Mask, *, model: Any, context: dict, registry: Registry,
                      execute_tool_call: Any, signal: Any, max_steps: int | None, on_event: Any) -> Run:
    """The run of the masked scenario; returned as the test's unmasked view, recording the masked run."""
    if not isinstance(model, ScriptedModel):
        raise TypeError("a masked scenario needs a ScriptedModel (its answers are masked before the loop sees them)")

    def count() -> None:
        model.request_count += 1

    masked_model = ScriptedModel([mask.response(response, model.requests, count) for response in model.responses])
    masked_context = mask.context(context)
    run = await _run_once(loop, model=masked_model, context=masked_context, registry=mask.registry(registry),
                          execute_tool_call=None if execute_tool_call is None else mask.executor(execute_tool_call),
                          signal=signal, max_steps=max_steps, on_event=mask.observer(on_event))
    return dataclasses.replace(
        run, masked_record=run.record(),
        messages=[mask.message(m, forward=False) for m in run.messages] if isinstance(run.messages, list) else run.messages,
        events=[mask.event(e, forward=False) for e in run.events],
        requests=[mask.request(r, forward=False) for r in run.requests or []],
        executions=[mask.untext(name) for name in run.executions],
        input_messages=copy.deepcopy(context["messages"]), caller_messages_after=context["messages"],
        system_prompt=context["systemPrompt"], definitions=registry.definitions())


async def _run_once(loop: ModuleType, *, model: Any, context: dict, registry: Registry, execute_tool_call: Any,
                    signal: Any, max_steps: int | None, on_event: Any) -> Run:
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

    handed: list[Any] = []  # the signal each model request was handed

    class WatchedModel:
        """`model`, noting the signal each `stream()` call is handed (its streams are the model's own)."""

        def stream(self, request, *, signal=None):
            handed.append(signal)
            return model.stream(request, signal=signal)

        def __getattr__(self, name):
            return getattr(model, name)

    options = loop.AgentLoopOptions(
        model=WatchedModel(),
        context=context,
        tools=_counted_registry(registry, executions),
        signal=signal,
        execute_tool_call=executor,
        on_event=observe,
        **({} if max_steps is None else {"max_steps": max_steps}),
    )
    result = await loop.run_agent_loop(options)
    return Run(reason=result.reason, steps=result.steps, messages=result.messages, events=events,
               requests=getattr(model, "requests", None), executions=executions, input_messages=input_messages,
               caller_messages_after=context["messages"], system_prompt=context["systemPrompt"],
               definitions=registry.definitions(),
               max_steps=getattr(options, "max_steps", max_steps),  # a student's options may lack the field
               requests_without_signal=[n for n, given in enumerate(handed, 1) if signal is not None and given is not signal])


async def raised(awaitable, *, about: str) -> dict:
    """What awaiting `awaitable` raised, as a record (`about`: the word its message should name);
    a scenario that expects an exception snapshots this."""
    try:
        await awaitable
    except Exception as error:
        return jsonable({"kind": "raised", "raised": type(error).__name__, "message": str(error), "about": about})
    return {"kind": "raised", "raised": None, "message": "nothing was raised", "about": about}
