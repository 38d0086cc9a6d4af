"""Chapter 06's generated scenarios, run: one call executed against a registry of generated tools.

Two kinds of plan (JSON, drawn by `course.judge.scenarios.ch06_tool_execution`):

- an execution (sections `arguments`, `outputs`, `failures`, `context`: each draws mostly what it names):
  {"tools": [{"name", "parameters"}],     the registry: each tool's JSON Schema
   "call": {"id", "name", "arguments"},   the call to execute (arguments may break the schema; with
                                          "argumentsError" and "argumentsText" they were not a JSON object)
   "argumentsEncoded": bool,              the call's arguments hold markers, as a returned value may
   "signalAborted": bool,                 the caller's signal is aborted before the call
   "does": {"progress": [content, ...],   what the called tool reports, in order, before its outcome
            "meddle": [{"at": [keys], "op": "set" | "delete" | "append" | "clear", "key"?}],
            "meddleWhen": "during" | "after",  the tool changes what it received, during its run or
                                               after the executor returned (it kept a reference)
            "outcome": {"returns": value} | {"raises": exception} | {"cancelled": "raised" | "from outside"}}}
  An exception: {"type", "args", "cause"?: exception (raise ... from it), "context"?: exception (raised
  while it was being handled), "notes"?: [str] (add_note), "group"?: [exception] (an ExceptionGroup of
  them, its message args[0])}.
  A returned value may hold values JSON cannot: {"$set": [...]}, {"$bytes": str}, {"$float": "nan" |
  "inf" | "-inf"}, {"$tuple": [...]}, {"$object": str}, {"$cycle": null} (a list holding itself),
  {"$deep": n} (lists nested n deep); a plain string may be a lone surrogate. {"$repeat": [str, n]} is
  the string n times over (a long text, kept short in the plan), in returned values and exception args.
  Every tool of the registry records whether it ran; only the called one does what `does` says.

- a chapter 07 loop plan (section `in_the_loop`): {"loopPlan": plan}, run by chapter 07's recorder on
  the REFERENCE loop whose chapter 06 executor is the implementation's `execute_tool_call`.

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
from typing import Any

from jsonschema import validators

from course.recorder.record import jsonable
from course.runtime.abort import AbortController
from course.runtime.tools import Registry, Tool, ToolExecutionContext

SECTIONS = {
    "arguments": "工具执行",    # schemas and the arguments that fit or break them; unknown names
    "outputs": "工具执行",      # what the tool returns: well-formed, malformed, not JSON
    "failures": "工具执行",     # the tool raises, raises CancelledError, or is cancelled while it waits
    "context": "工具执行",      # progress, the caller's signal, a tool that changes its arguments
    "in_the_loop": "工具执行",  # chapter 07's plans, run by the reference loop with this chapter 06
}

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


async def execute_plan(plan: dict, execute_tool_call) -> dict:
    does = plan.get("does") or {}
    outcome = does.get("outcome") or {"returns": {"content": []}}
    runs: list[dict] = []
    progress: list[Any] = []
    kept: list[Any] = []
    started = asyncio.Event()
    release = asyncio.Event()
    controller = AbortController()
    state = {"tool": None}

    def make_tool(spec: dict) -> Tool:
        async def execute(arguments, context):
            run = {"tool": spec["name"], "received": jsonable(arguments),
                   "callersSignal": getattr(context, "signal", None) is controller.signal}
            runs.append(run)
            if spec["name"] != plan["call"]["name"]:
                return {"content": []}
            kept.append(arguments)
            for content in does.get("progress", []):
                context.report_progress(copy.deepcopy(content))
            if does.get("meddleWhen", "during") == "during":
                meddle(arguments, does.get("meddle", []))
            if "raises" in outcome:
                _raise(outcome["raises"])
            if outcome.get("cancelled") == "raised":
                raise asyncio.CancelledError()
            if outcome.get("cancelled") == "from outside":
                state["tool"] = "waiting"
                started.set()
                try:
                    await release.wait()
                except asyncio.CancelledError:
                    state["tool"] = "cancelled"
                    raise
                state["tool"] = "released"
                return {"content": []}
            return decode(outcome["returns"])

        tool = copy.copy(TEMPLATE)  # not Tool(...): checking a schema against the metaschema takes 20 ms, and
        tool.name = spec["name"]     # the judge's generated schemas are valid by construction
        tool.description = f"the {spec['name']} tool"
        tool.parameters = spec["parameters"]
        tool.validator = validators.validator_for(spec["parameters"])(spec["parameters"])
        tool.execute = execute
        return tool

    call = {"type": "toolCall", **copy.deepcopy(plan["call"])}
    if plan.get("argumentsEncoded"):
        call["arguments"] = decode(call["arguments"])  # values JSON cannot hold, inside the arguments
    before = copy.deepcopy(call)
    registry = Registry(make_tool(spec) for spec in plan["tools"])
    if plan.get("signalAborted"):
        controller.abort()
    context = ToolExecutionContext(signal=controller.signal, report_progress=lambda content: progress.append(content))

    record: dict[str, Any] = {"kind": "tool-execution"}
    try:
        task = asyncio.ensure_future(execute_tool_call(call, registry, context))
    except Exception as error:  # not even a coroutine
        record["raised"] = {"type": type(error).__name__, "message": str(error)}
        task = None
    if task is not None:
        if outcome.get("cancelled") == "from outside":
            await _drive(task, until=started.is_set)
            if not task.done():
                task.cancel()
        await _drive(task)
        if outcome.get("cancelled") == "from outside":
            record["toolWhenTheExecutorEnded"] = state["tool"] if task.done() else "still running"
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
        release.set()  # a tool the executor left waiting (shielded, detached) finishes now
        for _ in range(3):
            await asyncio.sleep(0)

    if does.get("meddleWhen") == "after":
        for arguments in kept:
            meddle(arguments, does.get("meddle", []))
    try:
        unchanged = call == before
    except Exception:  # something the executor put into the call cannot even be compared
        unchanged = False
    record.update(runs=runs, progress=progress, callUnchanged=unchanged, callAfter=call)
    return jsonable(record)


_loops: dict[int, tuple[Any, ModuleType]] = {}


def loop_with(execute_tool_call) -> ModuleType:
    """The reference chapter 07 loop, a private copy of it per executor, whose chapter 06 is `execute_tool_call`."""
    found = _loops.get(id(execute_tool_call))
    if found is not None and found[0] is execute_tool_call:
        return found[1]
    name = f"_tiny_pi_reference_loop_{len(_loops)}"
    path = Path(importlib.util.find_spec("checkpoints").origin).parent / "ch07_agent_loop.py"
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
    from course.recorder.scenarios import ch07_agent_loop

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
