"""Chapter 08's generated scenarios, run: a plan is a workspace to build and the reads to make in it.

A plan (JSON, drawn by `chapters.ch08_workspace_read.judge.plans`):
  {"rootLink": bool,          the root handed to the tool is a symbolic link to the workspace directory
   "rootSpelling": "str" | "path" | "slash" | "relative",   the root as a str, a pathlib.Path, a str ending
                              in "/", or "ws" relative to {tmp}, the current directory while the tool is
                              made; the reads are then made from {tmp}/outside, which holds a decoy `ws/`
   "caps": {"max_lines": int, "max_bytes": int} (either may be left out: the tool's default),
   "entries": [{"path": "docs/a.txt", "type": "file", "hex": "..."} | {"path", "type": "dir"}
               | {"path", "type": "link", "target": "..."} | {"path", "type": "fifo" | "socket" | "device"}
               | {"path", "type": "big", "lines": int, "width": int}
               | {"path", "type": "pieces", "pieces": [[hex, times], ...]}],   each hex's bytes `times` times
              a file entry may also have "size": the file is then cut or extended (sparsely, with NULs) to it
   "reads": [{"arguments": {...}, "signal": "none" | "fresh" | "before" | "during" | "cancel",
              "follow": int, "vanish": bool}],
   "loop": bool}              the reads are one batch of calls a scripted model makes through the reference loop
Strings in targets and arguments may hold `{tmp}` (the run's temporary directory), `{root}` (the root
as handed to the tool) and `{real}` (the workspace directory itself). `follow: n` reads on from each
notice's `nextOffset`, at most n more reads. `signal`: no signal, one never aborted, one aborted before
the read, one aborted when the read first yields to the event loop, or no signal and the read's task
cancelled when it first yields. `vanish`: the workspace directory is renamed away for that read (and
back after it).

Each run builds the workspace in a fresh temporary directory (the same content for the student's
run and the reference's), beside a secret, an outside directory, FIFO and `ws-evil` sibling, makes
the reads through the reference chapter 06 executor (or the reference chapter 07 loop), counts the
descriptors open in /proc/self/fd before and after each read, notes every path the read opened
outside the workspace, counts the read calls (os.read, os.pread, os.readv, os.preadv) on files inside the
workspace made once the read's signal was aborted and, for a read aborted or cancelled at its first yield,
those made before that yield, and removes the directory. The record holds `{tmp}` wherever the run's
temporary path appeared. Nothing waits unboundedly: a read that has not finished after a time bound
(a CPU-bound loop, a blocking open, an await that never ends) is interrupted and recorded as such, and
the record says `interrupted` (plain pytest then does not shrink the plan: each smaller one could
spin as long again).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import copy
import io
import os
import pathlib
import shutil
import signal
import socket
import stat
import sys
import tempfile
import threading

from course.recorder.harness import run_loop
from course.recorder.impl import load_reference
from course.recorder.record import jsonable
from course.runtime.abort import AbortController
from course.runtime.messages import assistant_message, text, tool_call, user_message
from course.runtime.scripted import ScriptedModel
from course.runtime.tools import Registry, ToolExecutionContext

SECTIONS = {
    "roundtrip": "真实往返",
    "escape": "越界",
    "refuse": "拒绝",
    "truncate": "截断",
    "abort": "中止",
}

SECRET = "TOP SECRET: the launch codes"
TIME_BOUND = 5.0
"""Seconds a read may take before it is interrupted (the reference needs milliseconds)."""
TIME_BOUND_AFTER_A_TIMEOUT = 1.0
"""Once an implementation has run out of time, its later reads get this much: it fails either way,
and a failing plan is rerun many times while it is shrunk."""
_timed_out: set[str] = set()
FAST_TEMP = "/dev/shm"
"""Where the workspaces are built when it is writable: a RAM file system, forty times faster at making
and removing links and directories than a disk here (the default temporary directory otherwise)."""


class TimedOut(BaseException):
    """Raised inside a read that ran past its time bound (a BaseException: `except Exception` in the
    code under test does not swallow it)."""


# ---------------------------------------------------------------- the workspace


def expand(value, places: dict[str, str]):
    """A plan's string (or the strings inside a dict or list) with {tmp}, {root} and {real} filled in."""
    if isinstance(value, str):
        for name, path in places.items():
            value = value.replace("{" + name + "}", path)
        return value
    if isinstance(value, dict):
        return {expand(k, places): expand(v, places) for k, v in value.items()}
    if isinstance(value, list):
        return [expand(v, places) for v in value]
    return value


def hide(value, tmp: str):
    """Record data with the run's temporary directory written as {tmp}."""
    if isinstance(value, str):
        return value.replace(tmp, "{tmp}")
    if isinstance(value, dict):
        return {hide(k, tmp): hide(v, tmp) for k, v in value.items()}
    if isinstance(value, list):
        return [hide(v, tmp) for v in value]
    return value


def build(tmp: str, plan: dict) -> dict[str, str]:
    """The workspace of `plan` under `tmp`, beside the things a read must never reach."""
    with open(os.path.join(tmp, "secret.txt"), "w") as f:
        f.write(SECRET)
    for sibling in ("outside", "ws-evil", "ws-real-evil"):
        os.mkdir(os.path.join(tmp, sibling))
        with open(os.path.join(tmp, sibling, "secret.txt"), "w") as f:
            f.write(SECRET)
    os.mkfifo(os.path.join(tmp, "fifo"))
    os.makedirs(os.path.join(tmp, "outside", "ws", "docs"))  # what a relative root names from {tmp}/outside
    for decoy in ("README.md", "docs/guide.md"):
        with open(os.path.join(tmp, "outside", "ws", decoy), "w") as f:
            f.write(SECRET)
    root = os.path.join(tmp, "ws")
    real = os.path.join(tmp, "ws-real") if plan.get("rootLink") else root
    os.mkdir(real)
    if real != root:
        os.symlink("ws-real", root)
    places = {"tmp": tmp, "root": root, "real": real}
    order = {"dir": 0, "file": 1, "big": 1, "pieces": 1, "fifo": 2, "socket": 2, "device": 2, "link": 3}
    for entry in sorted(plan.get("entries", []), key=lambda e: order.get(e["type"], 4)):
        path = os.path.join(real, entry["path"])
        kind = entry["type"]
        if kind == "dir":
            os.makedirs(path, exist_ok=True)
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if kind == "file":
            with open(path, "wb") as f:
                f.write(bytes.fromhex(entry["hex"]))
        elif kind == "big":
            line = ("w" * (entry["width"] - 1) + "\n").encode()
            with open(path, "wb") as f:
                f.write(line * entry["lines"])
        elif kind == "pieces":
            with open(path, "wb") as f:
                f.write(b"".join(bytes.fromhex(piece) * times for piece, times in entry["pieces"]))
        elif kind == "link":
            os.symlink(expand(entry["target"], places), path)
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "socket":
            server = socket.socket(socket.AF_UNIX)
            try:
                server.bind(path)
            finally:
                server.close()
        elif kind == "device":
            try:
                os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # like /dev/null
            except PermissionError:
                os.mkfifo(path)  # without CAP_MKNOD: another special file, refused the same way
        if "size" in entry:
            os.truncate(path, entry["size"])
    return places


def root_as_given(places: dict[str, str], spelling: str):
    root = places["root"]
    return {"path": pathlib.Path(root), "slash": root + "/", "relative": "ws"}.get(spelling, root)


@contextlib.contextmanager
def working_directory(plan: dict, places: dict[str, str]):
    """For a relative root: {tmp} is the current directory while the tool is made (the block's first part,
    until `moved()`), {tmp}/outside while the reads are made; the process's own one again afterwards."""
    if plan.get("rootSpelling") != "relative":
        yield lambda: None
        return
    previous = os.getcwd()
    os.chdir(places["tmp"])
    try:
        yield lambda: os.chdir(os.path.join(places["tmp"], "outside"))
    finally:
        os.chdir(previous)


@contextlib.contextmanager
def vanished(places: dict[str, str], gone: bool):
    """The workspace directory renamed away inside the block (and back after it), when `gone`."""
    if not gone:
        yield
        return
    os.rename(places["real"], places["real"] + "-gone")
    try:
        yield
    finally:
        os.rename(places["real"] + "-gone", places["real"])


def remove(tmp: str) -> None:
    def writable(function, path, _):  # a read-only directory a test made
        os.chmod(os.path.dirname(path), 0o700)
        function(path)
    shutil.rmtree(tmp, onerror=writable)


# ---------------------------------------------------------------- what a read does besides answering


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@contextlib.contextmanager
def opened_paths():
    """Every path opened (os.open, open, io.open) inside the block, as the kernel names it."""
    paths: list[str] = []
    real_os_open, real_open, real_io_open = os.open, builtins.open, io.open

    def note(fd):
        try:
            paths.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass

    def spy_os_open(*args, **kwargs):
        fd = real_os_open(*args, **kwargs)
        note(fd)
        return fd

    def spy_open(*args, **kwargs):
        file = real_open(*args, **kwargs)
        with contextlib.suppress(Exception):
            note(file.fileno())
        return file

    os.open, builtins.open, io.open = spy_os_open, spy_open, spy_open
    try:
        yield paths
    finally:
        os.open, builtins.open, io.open = real_os_open, real_open, real_io_open


def outside(paths: list[str], real_root: str) -> list[str]:
    return [p for p in paths if p != real_root and not p.startswith(real_root + os.sep)]


READ_CALLS = ("read", "pread", "readv", "preadv")
"""The os functions that read from a descriptor, counted by `counted_reads` (a file object's own reads,
io.FileIO's, are not seen: a read counted as none is never held against it)."""


@contextlib.contextmanager
def counted_reads(real_root: str, aborted):
    """{"calls": read calls on files inside the workspace, "afterAbort": those of them started once
    `aborted()` was true}, counted inside the block."""
    counts = {"calls": 0, "afterAbort": 0}
    real = {name: getattr(os, name) for name in READ_CALLS if hasattr(os, name)}

    def counting(function):
        def read(fd, *args, **kwargs):
            late = aborted()
            result = function(fd, *args, **kwargs)
            try:
                path = os.readlink(f"/proc/self/fd/{fd}")
            except (OSError, TypeError):
                return result
            if path.startswith(real_root + os.sep):
                counts["calls"] += 1
                counts["afterAbort"] += late
            return result
        return read

    for name, function in real.items():
        setattr(os, name, counting(function))
    try:
        yield counts
    finally:
        for name, function in real.items():
            setattr(os, name, function)


@contextlib.contextmanager
def watchdog(seconds: float, target: asyncio.Task, ours: set):
    """Interrupts `target` once it has run `seconds`: while the event loop waits (an await that never
    ends) by cancelling it; inside its own code (a CPU-bound loop) by raising TimedOut at its next line,
    from a trace function; still there a quarter second later (a blocking system call) by raising
    TimedOut from the signal handler itself. Main thread only (signals are delivered there).

    Raising from a signal handler at an arbitrary point of a CPU-bound loop can leave CPython 3.11's
    recursion counter off (a later `ast.parse` fails with SystemError), so that is the last resort."""
    if threading.current_thread() is not threading.main_thread():
        yield []
        return
    fired: list[bool] = []
    loop = asyncio.get_running_loop()
    tracing = sys.gettrace()

    def stop_here(frame, event, arg):
        sys.settrace(tracing)
        while frame is not None:
            frame.f_trace = None
            frame = frame.f_back
        raise TimedOut()

    def interrupt(signum, frame):
        fired.append(True)
        running = asyncio.current_task(loop) if loop.is_running() else None
        if running is None or running in ours:
            loop.call_soon_threadsafe(target.cancel)
            return
        if len(fired) > 1 or frame is None:
            raise TimedOut()
        while frame is not None:
            frame.f_trace = stop_here
            frame = frame.f_back
        sys.settrace(stop_here)

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.25)
    try:
        yield fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        sys.settrace(tracing)


# ---------------------------------------------------------------- running a plan


def _result_of(task: asyncio.Task, fired: list) -> dict:
    error = None if task.cancelled() else task.exception()  # retrieved, so asyncio does not log it
    if fired:
        return {"timedOut": True}
    if task.cancelled():
        return {"raised": "CancelledError"}
    if error is not None:
        return {"raised": f"{type(error).__name__}: {error}"}
    return {"result": task.result()}


async def bounded(make, key: str, ours: set, then=None) -> dict:
    """Await `make()` in a task of its own under the watchdog; {"result": ...}, {"timedOut": True} or
    {"raised": ...}. `then(task)`, if given, is started right after: it first runs once the task first
    yields (or has finished, if it never does)."""
    task = asyncio.ensure_future(make())
    companion = None
    if then is not None:
        companion = asyncio.ensure_future(then(task))
        ours.add(companion)
    seconds = TIME_BOUND_AFTER_A_TIMEOUT if key in _timed_out else TIME_BOUND
    with watchdog(seconds, task, ours) as fired:
        while not task.done():
            await asyncio.wait({task})
        if companion is not None:
            await companion
    outcome = _result_of(task, fired)
    if outcome.get("timedOut"):
        _timed_out.add(key)
    return outcome


async def one_read(ch06, registry, arguments, mode: str, key: str, real_root: str, ours: set) -> dict:
    """One read through the reference executor, and what it left behind."""
    controller = AbortController()
    if mode == "before":
        controller.abort()
    progress: list = []  # how often a read reports progress is the tool's choice: counted, never compared
    context = ToolExecutionContext(signal=None if mode in ("none", "cancel") else controller.signal,
                                   report_progress=progress.append)
    call = tool_call("call-1", "read", arguments)
    first_yield: list[int] = []

    async def at_the_first_yield(task):
        first_yield.append(reads["calls"])
        if mode == "during":
            controller.abort()
        else:
            task.cancel()

    before = open_descriptors()
    with opened_paths() as paths, counted_reads(real_root, lambda: controller.signal.aborted) as reads:
        outcome = await bounded(lambda: ch06.execute_tool_call(call, registry, context), key, ours,
                                then=at_the_first_yield if mode in ("during", "cancel") else None)
    outcome["fdsLeft"] = open_descriptors() - before
    outcome["openedOutside"] = outside(paths, real_root)
    outcome["readsAfterAbort"] = reads["afterAbort"]
    if first_yield:
        outcome["readsBeforeFirstYield"] = first_yield[0]
    return outcome


async def run_plan(plan: dict, load) -> dict:
    student = load("ch08_workspace_read")
    ch06 = load_reference("ch06_tool_execution")
    key = getattr(student, "__name__", "?")
    tmp = os.path.realpath(tempfile.mkdtemp(prefix="ch08-", dir=FAST_TEMP if os.access(FAST_TEMP, os.W_OK) else None))
    ours = {asyncio.current_task()}
    try:
        places = build(tmp, plan)
        record = {"kind": "workspace-reads", "caps": plan.get("caps", {}), "reads": []}
        with working_directory(plan, places) as made:
            try:
                tool = student.create_read_tool(root_as_given(places, plan.get("rootSpelling", "str")),
                                                **plan.get("caps", {}))
                registry = Registry([tool])
            except Exception as error:
                record["createRaised"] = f"{type(error).__name__}: {error}"
                return jsonable(hide(record, tmp))
            made()
            real_root = os.path.realpath(places["root"])
            if plan.get("loop"):
                record["loop"] = await loop_of_reads(plan, registry, places, key, real_root, ours)
                record["interrupted"] = bool(record["loop"].get("timedOut"))
                return jsonable(hide(record, tmp))
            for read in plan["reads"]:
                arguments = expand(read["arguments"], places)
                mode = read.get("signal", "none")
                for page in range(1 + read.get("follow", 0)):
                    with vanished(places, read.get("vanish", False)):
                        outcome = await one_read(ch06, registry, arguments, mode, key, real_root, ours)
                    outcome["arguments"] = arguments
                    outcome["signal"] = mode
                    if read.get("vanish"):
                        outcome["vanish"] = True
                    record["reads"].append(outcome)
                    next_offset = following(outcome, arguments)
                    if next_offset is None:
                        break
                    arguments = {**arguments, "offset": next_offset}
        record["interrupted"] = any(read.get("timedOut") for read in record["reads"])
        return jsonable(hide(record, tmp))
    finally:
        remove(tmp)


def following(outcome: dict, arguments: dict) -> int | None:
    """The offset a model reads on from, if the result says the file goes on past this read."""
    result = outcome.get("result")
    details = result.get("details") if isinstance(result, dict) else None
    if not isinstance(details, dict) or details.get("truncated") is not True:
        return None
    offset = details.get("nextOffset")
    if type(offset) is not int or offset <= arguments.get("offset", 1):
        return None
    return offset


async def loop_of_reads(plan: dict, registry: Registry, places: dict, key: str, real_root: str, ours: set) -> dict:
    """The reads as one batch of calls of a scripted model, through the reference loop."""
    calls = [tool_call(f"call-{n}", "read", expand(read["arguments"], places))
             for n, read in enumerate(plan["reads"], 1)]
    model = ScriptedModel([assistant_message([text("reading"), *calls], "toolUse"),
                           assistant_message([text("done")], "stop")])
    context = {"systemPrompt": "You are tiny-pi.", "messages": [user_message("read them")]}
    loop = load_reference("ch07_agent_loop")  # (imported before the count: its file is no path the tool opened)
    before = open_descriptors()
    with opened_paths() as paths:
        outcome = await bounded(lambda: run_loop(loop, model=model,
                                                 context=copy.deepcopy(context), tools=registry), key, ours)
    if "result" in outcome:
        outcome["run"] = outcome.pop("result").record()
    outcome["fdsLeft"] = open_descriptors() - before
    outcome["openedOutside"] = outside(paths, real_root)
    return outcome
