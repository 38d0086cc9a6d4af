"""Chapter 06's generated scenarios, run: one call executed against a registry of generated tools.

Two kinds of plan (JSON, drawn by `chapters.ch06_tool_execution.judge.ch06_plans`; their shapes are the types below):

- an execution (`ExecutionPlan`; sections `arguments`, `outputs`, `failures`, `context` and
  `hardening_outputs`): a registry of tools (each with its JSON Schema), the call to execute (its
  arguments may break the schema, or not be JSON: `argumentsError`), whether the caller's signal is
  aborted already, and what the called tool does (`Does`): the progress it reports, how it changes what
  it received (during its run, or after the executor returned: it kept a reference), and its outcome —
  a value it returns, an exception it raises (`ExceptionSpec`), or a cancellation. A returned value may
  hold values JSON cannot: {"$set": [...]}, {"$bytes": str}, {"$float": "nan" | "inf" | "-inf"},
  {"$tuple": [...]}, {"$object": str}, {"$cycle": null} (a list holding itself), {"$deep": n} (lists
  nested n deep); a plain string may be a lone surrogate. {"$repeat": [str, n]} is the string n times
  over (a long text, kept short in the plan), in returned values and exception args. Every tool of the
  registry records whether it ran; only the called one does what `does` says.
- a chapter 07 loop plan (`LoopRunPlan`; sections `in_the_loop` and `hardening_in_the_loop`):
  {"loopPlan": plan}, run by chapter 07's recorder on the REFERENCE loop whose chapter 06 executor is the
  implementation's `execute_tool_call`.

Nothing waits on time: the executor runs in a task driven for a bounded number of event-loop turns,
and a tool that waits for cancellation waits on a gate this module opens before it returns. Work an
executor hands to the event loop's default executor (`asyncio.to_thread`, `run_in_executor(None, ...)`)
runs in a thread as usual, but the event loop waits for it there and then (`WaitingExecutor`, at most
THREAD_WAIT seconds), so it takes the same turns in every run; other real time (a timer, I/O, a thread
pool of the executor's own) is not waited for, and a run still waiting on it after its turns is
recorded as not having finished within them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import hashlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, Required, TypedDict

from jsonschema import validators

from course.recorder.record import jsonable
from course.runtime.abort import AbortController
from course.manifest import HARDENING
from course.runtime.tools import Registry, Tool, ToolExecutionContext

SECTIONS = {
    "arguments": "工具执行",    # schemas and the arguments that fit or break them; unknown names
    "outputs": "工具执行",      # what the tool returns: a ToolOutput, whatever its fields hold
    "failures": "工具执行",     # the tool raises, raises CancelledError, or is cancelled while it waits
    "context": "工具执行",      # progress, the caller's signal, a tool that changes its arguments
    "in_the_loop": "工具执行",  # chapter 07's chapter-track plans, run by the reference loop with this chapter 06
    # The hardening track: plans beyond the chapter's contract.
    "hardening_outputs": HARDENING,      # the tool returns no ToolOutput: malformed, or not JSON
    "hardening_in_the_loop": HARDENING,  # chapter 07's plans with every freedom of the loop's collaborators
}


class ToolSpec(TypedDict):
    name: str
    parameters: dict[str, Any]
    """The tool's JSON Schema."""


class CallSpec(TypedDict, total=False):
    id: Required[str]
    name: Required[str]
    arguments: Required[Any]
    argumentsError: str
    """The arguments text was not a JSON object (the provider left `arguments` {})."""
    argumentsText: str


class ExceptionSpec(TypedDict, total=False):
    type: Required[str]
    """A name of EXCEPTIONS."""
    args: Required[list[Any]]
    cause: ExceptionSpec
    """Raised `from` it."""
    context: ExceptionSpec
    """Raised while it was being handled."""
    notes: list[str]
    """Added with add_note."""
    group: list[ExceptionSpec]
    """An ExceptionGroup of these, its message args[0]."""


class Change(TypedDict, total=False):
    at: Required[list[str | int]]
    """Keys and indexes from the arguments to the container changed."""
    op: Required[Literal["set", "delete", "append", "clear"]]
    key: str


class Returns(TypedDict):
    returns: Any


class Raises(TypedDict):
    raises: ExceptionSpec


class Cancelled(TypedDict):
    cancelled: Literal["raised", "from outside"]
    """The tool raises CancelledError, or waits until the task running the executor is cancelled."""


Outcome = Returns | Raises | Cancelled


class Does(TypedDict):
    """What the called tool does, in order: its progress, its changes (during its run), its outcome."""

    progress: list[list[dict[str, Any]]]
    meddle: list[Change]
    meddleWhen: Literal["during", "after"]
    outcome: Outcome


class ExecutionPlan(TypedDict, total=False):
    kind: str
    """Its kind (`chapters.ch06_tool_execution.judge.ch06_plans.KINDS`): what it holds the executor to."""
    tools: Required[list[ToolSpec]]
    call: Required[CallSpec]
    argumentsEncoded: bool
    """The call's arguments hold markers (values JSON cannot hold), decoded before the call."""
    signalAborted: bool
    does: Required[Does]
    brokenBy: str
    """How the arguments break the schema, in words."""
    notJson: str
    """How the arguments are not JSON, in words."""


class LoopRunPlan(TypedDict, total=False):
    kind: str
    loopPlan: Required[dict[str, Any]]
    """A plan of `chapters.ch07_agent_loop.scenarios`."""

TURNS = 500
"""Event-loop turns an execution may take: a tool here never waits on anything but the plan's gate."""
THREAD_WAIT = 2.0
"""Seconds the event loop waits for one piece of work handed to its default executor (a thread)."""


class WaitingExecutor(concurrent.futures.ThreadPoolExecutor):
    """The event loop's default executor during a plan: the work runs in a thread, and `submit` waits for
    it (at most THREAD_WAIT seconds), so `await asyncio.to_thread(f)` resumes after the same turns of the
    event loop in every run, however long the thread took. Work that takes longer is left running and
    the run goes on as it would with any thread pool."""

    def submit(self, fn, /, *args, **kwargs):
        future = super().submit(fn, *args, **kwargs)
        concurrent.futures.wait([future], timeout=THREAD_WAIT)
        return future


def _never_ended(turns: int) -> str:
    return (f"did not finish within {turns} turns of the event loop (an execution that waits on real time — "
            "a timer, I/O, a thread of its own — cannot be judged here; one that waits on nothing never ends)")


class ToolFailure(Exception):
    """An exception type of the tool's own (not a builtin)."""


class ToolRefusal(Exception):
    """An exception type of the tool's own whose text is its own `__str__`, not its arguments."""

    def __str__(self) -> str:
        return f"refused by the tool ({len(self.args)} reasons given)"


EXCEPTIONS: dict[str, type[BaseException]] = {
    "OSError": OSError, "FileNotFoundError": FileNotFoundError, "PermissionError": PermissionError,
    "ValueError": ValueError, "KeyError": KeyError, "RuntimeError": RuntimeError, "TypeError": TypeError,
    "TimeoutError": TimeoutError, "ZeroDivisionError": ZeroDivisionError, "Exception": Exception,
    "ToolFailure": ToolFailure, "ToolRefusal": ToolRefusal, "ExceptionGroup": ExceptionGroup,
}


class Opaque:
    """A value JSON cannot hold: what `{"$object": name}` in a plan stands for."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Opaque({self.name!r})"


def decode(value: Any) -> Any:
    """A plan's JSON value as the Python value the tool returns (markers become non-JSON values)."""
    if isinstance(value, list):
        return [decode(item) for item in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        (key, inner), = value.items()
        if key == "$set":
            return set(inner)
        if key == "$bytes":
            return inner.encode()
        if key == "$float":
            return float(inner)
        if key == "$tuple":
            return tuple(decode(item) for item in inner)
        if key == "$repeat":
            return inner[0] * inner[1]
        if key == "$object":
            return Opaque(inner)
        if key == "$deep":
            deep: list = []
            for _ in range(inner - 1):
                deep = [deep]
            return deep
        if key == "$cycle":
            cycle: list = ["again"]
            cycle.append(cycle)
            return cycle
    return {key: decode(item) for key, item in value.items()}


def meddle(arguments: Any, changes: list[dict]) -> None:
    """Change what the tool received as the plan says; a change that does not fit is left out."""
    for change in changes:
        try:
            target = arguments
            for key in change["at"]:
                target = target[key]
            op = change["op"]
            if op == "set":
                target[change["key"]] = "/etc/passwd"
            elif op == "delete":
                del target[change["key"]]
            elif op == "append":
                target.append("added")
            elif op == "clear":
                target.clear()
        except Exception:  # the tool got something else than the call's arguments: nothing to change there
            continue


def result_record(result: Any) -> dict:
    """A fixed scenario's record: the result the executor returned, and nothing else."""
    return jsonable({"kind": "tool-execution", "result": result})


def _exception(spec: dict) -> BaseException:
    """The exception a plan describes, with its group and notes (its cause and context are `_raise`'s doing)."""
    kind = EXCEPTIONS.get(spec["type"], Exception)
    args = [decode(arg) for arg in spec["args"]]
    if "group" in spec:
        error = ExceptionGroup(args[0] if args else "", [_exception(inner) for inner in spec["group"]])
    else:
        error = kind(*args)
    for note in spec.get("notes", []):
        error.add_note(note)
    return error


def _raise(spec: dict):
    """Raise the exception `spec` describes: `from` its cause, or while its context is being handled."""
    error = _exception(spec)
    if "context" in spec:
        try:
            _raise(spec["context"])
        except Exception:
            raise error  # noqa: B904 — an implicit __context__ is the point
    if "cause" in spec:
        try:
            _raise(spec["cause"])
        except Exception as cause:
            raise error from cause
    raise error


async def _drive(task: asyncio.Task, until=lambda: False) -> None:
    """Let `task` run until it is done or `until()` holds, for at most TURNS turns of the event loop."""
    for _ in range(TURNS):
        if task.done() or until():
            return
        await asyncio.sleep(0)


async def _no_plan(arguments, context):
    raise AssertionError("the template tool runs only as a copy made by execute_plan")


TEMPLATE = Tool(name="template", description="", parameters={"type": "object"}, execute=_no_plan)


class PlanTools:
    """The registry's tools of one execution plan, and what they saw: every tool records that it ran (with
    what, and whether it had the caller's signal); the called one does what the plan's `does` says."""

    def __init__(self, plan: ExecutionPlan, controller: AbortController) -> None:
        self.plan, self.controller = plan, controller
        self.does: Does = plan.get("does") or {"progress": [], "meddle": [], "meddleWhen": "during",
                                               "outcome": {"returns": {"content": []}}}
        self.runs: list[dict] = []
        self.kept: list[Any] = []
        """What the called tool received, kept to change after the executor returned ("meddleWhen": "after")."""
        self.started, self.release = asyncio.Event(), asyncio.Event()
        self.waiting: str | None = None
        """A tool waiting to be cancelled: "waiting", then "cancelled" or "released"."""

    @property
    def outcome(self) -> Outcome:
        return self.does.get("outcome") or {"returns": {"content": []}}

    def registry(self) -> Registry:
        return Registry(self._tool(spec) for spec in self.plan["tools"])

    def _tool(self, spec: ToolSpec) -> Tool:
        async def execute(arguments, context):
            self.runs.append({"tool": spec["name"], "received": jsonable(arguments),
                              "callersSignal": getattr(context, "signal", None) is self.controller.signal})
            if spec["name"] != self.plan["call"]["name"]:
                return {"content": []}
            return await self._called(arguments, context)

        tool = copy.copy(TEMPLATE)  # not Tool(...): checking a schema against the metaschema takes 20 ms, and
        tool.name = spec["name"]     # the judge's generated schemas are valid by construction
        tool.description = f"the {spec['name']} tool"
        tool.parameters = spec["parameters"]
        tool.validator = validators.validator_for(spec["parameters"])(spec["parameters"])
        tool.execute = execute
        return tool

    async def _called(self, arguments: Any, context: ToolExecutionContext) -> Any:
        """The called tool: its progress, its changes to what it received, then its outcome."""
        self.kept.append(arguments)
        for content in self.does.get("progress", []):
            context.report_progress(copy.deepcopy(content))
        if self.does.get("meddleWhen", "during") == "during":
            meddle(arguments, self.does.get("meddle", []))
        outcome = self.outcome
        if "raises" in outcome:
            _raise(outcome["raises"])
        if outcome.get("cancelled") == "raised":
            raise asyncio.CancelledError()
        if outcome.get("cancelled") == "from outside":
            return await self._wait_for_cancellation()
        return decode(outcome["returns"])

    async def _wait_for_cancellation(self) -> dict:
        self.waiting = "waiting"
        self.started.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.waiting = "cancelled"
            raise
        self.waiting = "released"
        return {"content": []}

    def meddle_after(self) -> None:
        if self.does.get("meddleWhen") == "after":
            for arguments in self.kept:
                meddle(arguments, self.does.get("meddle", []))


def _call_of(plan: ExecutionPlan) -> dict:
    call = {"type": "toolCall", **copy.deepcopy(plan["call"])}
    if plan.get("argumentsEncoded"):
        call["arguments"] = decode(call["arguments"])  # values JSON cannot hold, inside the arguments
    return call


async def _judge_the_task(task: asyncio.Task, tools: PlanTools, record: dict) -> None:
    """Drive the executor's task (cancelling it once its tool waits, if the plan says so) and record how it ended."""
    from_outside = tools.outcome.get("cancelled") == "from outside"
    if from_outside:
        await _drive(task, until=tools.started.is_set)
        if not task.done():
            task.cancel()
    await _drive(task)
    if from_outside:
        record["toolWhenTheExecutorEnded"] = tools.waiting if task.done() else "still running"
    if not task.done():
        record["neverEnded"] = _never_ended(TURNS)
        for _ in range(3):  # a wrong executor may swallow a cancellation: ask again, a bounded number of times
            task.cancel()
            await _drive(task)
            if task.done():
                break
    elif task.cancelled():
        record["raised"] = {"type": "CancelledError", "message": ""}
    elif task.exception() is not None:
        error = task.exception()
        record["raised"] = {"type": type(error).__name__, "message": str(error)}
    else:
        record["result"] = task.result()
    tools.release.set()  # a tool the executor left waiting (shielded, detached) finishes now
    for _ in range(3):
        await asyncio.sleep(0)


async def execute_plan(plan: ExecutionPlan, execute_tool_call) -> dict:
    """One execution plan's record: the result (or what was raised), the tools that ran, the progress the
    caller saw, and whether the call was left as it was."""
    controller = AbortController()
    tools = PlanTools(plan, controller)
    call = _call_of(plan)
    before = copy.deepcopy(call)
    registry = tools.registry()
    if plan.get("signalAborted"):
        controller.abort()
    progress: list[Any] = []
    context = ToolExecutionContext(signal=controller.signal, report_progress=progress.append)

    record: dict[str, Any] = {"kind": "tool-execution"}
    try:
        task = asyncio.ensure_future(execute_tool_call(call, registry, context))
    except Exception as error:  # not even a coroutine
        record["raised"] = {"type": type(error).__name__, "message": str(error)}
    else:
        await _judge_the_task(task, tools, record)
    tools.meddle_after()
    try:
        unchanged = call == before
    except Exception:  # something the executor put into the call cannot even be compared
        unchanged = False
    record.update(runs=tools.runs, progress=progress, callUnchanged=unchanged, callAfter=call)
    return jsonable(record)


_loops: dict[int, tuple[Any, ModuleType]] = {}


def loop_with(execute_tool_call) -> ModuleType:
    """The reference chapter 07 loop, a private copy of it per executor, whose chapter 06 is `execute_tool_call`."""
    found = _loops.get(id(execute_tool_call))
    if found is not None and found[0] is execute_tool_call:
        return found[1]
    name = f"_tiny_pi_reference_loop_{len(_loops)}"
    path = next(p for p in (Path(d) / "ch07_agent_loop.py" for d in importlib.import_module("checkpoints").__path__) if p.is_file())
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    # The loop imports its chapter 06 by name: here that is `execute_tool_call`, and the reference chapter 06
    # is never imported (a graded copy does not even hold it).
    chapter06 = "checkpoints.ch06_tool_execution"
    stand_in, kept = ModuleType(chapter06), sys.modules.get(chapter06)
    stand_in.execute_tool_call = execute_tool_call
    sys.modules[chapter06] = stand_in
    try:
        spec.loader.exec_module(module)
    finally:
        if kept is None:
            del sys.modules[chapter06]
        else:
            sys.modules[chapter06] = kept
    _loops[id(execute_tool_call)] = (execute_tool_call, module)
    return module


async def run_plan(plan: dict, load) -> dict:
    executor = load("ch06_tool_execution").execute_tool_call
    loop = asyncio.get_running_loop()
    kept = getattr(loop, "_default_executor", None)  # (asyncio keeps it there, and offers no getter)
    waiting = WaitingExecutor(max_workers=4, thread_name_prefix="tiny-pi-plan")
    loop.set_default_executor(waiting)
    try:
        if "loopPlan" in plan:
            return kept_short(await run_in_the_loop(plan["loopPlan"], executor, load))
        return kept_short(await execute_plan(plan, executor))
    finally:
        loop._default_executor = kept  # the next run's work goes where it went before this plan
        waiting.shutdown(wait=False, cancel_futures=True)


KEPT_WHOLE = 10_000
"""Longer texts are recorded by their ends, length and digest: still exact (a cut shows in the length),
and a megabyte of output does not make a record line the judge refuses as too large."""


def long_text(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{text[:40]}…{text[-20:]} ({len(text):,} characters, sha256 {digest})"


def kept_short(value):
    """`value` with every text longer than KEPT_WHOLE in short (`long_text`); nothing else changes."""
    if isinstance(value, str):
        return long_text(value) if len(value) > KEPT_WHOLE else value
    if isinstance(value, list):
        return [kept_short(item) for item in value]
    if isinstance(value, dict):
        return {key: kept_short(item) for key, item in value.items()}
    return value


LOOP_TURNS = 50_000
"""Event-loop turns a chapter 07 run may take: the longest plan takes a few thousand."""


async def run_in_the_loop(loop_plan: dict, executor, load) -> dict:
    """Chapter 07's recorder running `loop_plan` on the reference loop with `executor` as its chapter 06;
    an executor that never answers ends the run after LOOP_TURNS turns of the event loop, not never."""
    from chapters.ch07_agent_loop import scenarios as ch07_agent_loop

    loop = loop_with(executor)
    task = asyncio.ensure_future(ch07_agent_loop.run_plan(
        loop_plan, lambda module: loop if module == "ch07_agent_loop" else load(module)))
    for _ in range(LOOP_TURNS):
        if task.done():
            break
        await asyncio.sleep(0)
    if task.done():
        # The judge shows this run as chapter 07's, less what the executor's own schedule decides (in_the_loop).
        return {**task.result(), "kind": "ch06-loop-run"}
    for _ in range(3):  # a wrong executor may swallow a cancellation: ask again, a bounded number of times
        task.cancel()
        await _drive(task)
        if task.done():
            break
    return {"kind": "tool-execution", "neverEnded": "the chapter 07 run " + _never_ended(LOOP_TURNS)}
