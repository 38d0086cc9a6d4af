"""Nothing a student's code starts may outlive the run that judged it.

The judge makes itself a child subreaper (Linux): a process that a submission forks and abandons,
in its own session or not, is re-parented to the judge instead of to init. When a child run ends,
the judge ends every process below the child (`end_tree`, whatever its session or environment),
and then every child of its own it did not start itself (`end_orphans`): those are processes whose
parents ended, re-parented to the judge — a daemon that left its session and wiped its
environment, a sandbox's init left a zombie, a process that keeps forking into new sessions and
ending — and reaps them, until none is left.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

_PR_SET_CHILD_SUBREAPER = 36
_started: set[int] = set()
"""The children this process started and still waits for (see `starting`)."""
_starting = threading.Lock()


_reaping = False
"""Whether this process is a subreaper that starts its children through `starting` (`course grade`):
then every child it did not start is an orphan to end."""


def become_subreaper() -> bool:
    """Adopt orphaned descendants (Linux only); whether that worked. Call it only in a process that
    starts every child of its own through `starting` (`course grade`): the others get ended."""
    global _reaping
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        _reaping = libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        _reaping = False
    return _reaping


@contextlib.contextmanager
def starting() -> Iterator[None]:
    """Hold while starting a child and `adopt`ing it: no `end_orphans` in another thread can see the
    new child before it is known as this process's own."""
    with _starting:
        yield


def adopt(pid: int) -> None:
    """`pid` is a child this process started (under `starting`) and will wait for itself."""
    _started.add(pid)


def release(pid: int) -> None:
    """This process waited for its child `pid`: it is no longer one of its own."""
    with _starting:
        _started.discard(pid)


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process this user can see."""
    found: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name (field 2) may hold spaces and parentheses: the fields after it start at the last ')'.
        fields = stat[stat.rfind(")") + 2:].split()
        found[int(entry.name)] = int(fields[1])
    return found


def descendants(of: int | None = None, parents: dict[int, int] | None = None) -> list[int]:
    """Every process below `of` (default: this one), children first."""
    root = os.getpid() if of is None else of
    parents = _parents() if parents is None else parents
    below, frontier = [], [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent]
        below += children
        frontier += children
    return below


def end_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for pid in pids:  # reap the ones that were ours, so none is left a zombie
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


def end_strays(keep: set[int] = frozenset()) -> list[int]:
    """End every descendant of this process except `keep` (and theirs); the pids ended."""
    kept = set(keep)
    for pid in list(keep):
        kept.update(descendants(pid))
    strays = [pid for pid in descendants() if pid not in kept]
    end_all(strays)
    return strays


def end_marked(variable: str, value: str) -> list[int]:
    """End every descendant of this process whose environment holds `variable=value`."""
    wanted = f"{variable}={value}".encode()
    marked = []
    for pid in descendants():
        try:
            environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if wanted in environment:
            marked.append(pid)
    end_all(marked)
    return marked


def end_tree(process) -> None:
    """End a child (a subprocess.Popen), its process group and every process below it, and wait for it.

    What is below it is found before it goes (a process in a session of its own, its environment
    wiped, is still below it); what it starts meanwhile is an orphan for `end_orphans`."""
    below = descendants(process.pid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    end_all(below)
    process.wait()
    release(process.pid)
    if _reaping:
        end_orphans()  # what it left behind re-parented to the judge (a sandbox's init, now a zombie)


SWEEP_PATIENCE = 60.0
"""Seconds `end_orphans` follows orphans at the most. A process forking faster than the judge ends its
children could keep it busy for ever; none seen so far took more than a few milliseconds."""


def _own_children() -> list[int]:
    """This process's children (zombies included): read from its own threads' lists, microseconds where
    a scan of /proc takes milliseconds (it falls back to that scan where the kernel keeps no such list)."""
    found: list[int] = []
    try:
        threads = os.listdir(f"/proc/{os.getpid()}/task")
    except OSError:
        threads = []
    for thread in threads:
        try:
            with open(f"/proc/{os.getpid()}/task/{thread}/children", encoding="ascii") as listing:
                found += [int(pid) for pid in listing.read().split()]
        except FileNotFoundError:
            return [pid for pid, parent in _parents().items() if parent == os.getpid()]
        except OSError:
            continue  # a thread that ended meanwhile
    return found


def end_orphans() -> list[int]:
    """End every child of this process that it did not start (`adopt`), and reap it, until none is left.
    Only for a subreaper that starts its children through `starting`: `course grade`.

    Ending an orphan makes its own children this process's: the sweep follows them, level after level,
    and so follows a process that keeps forking into new sessions and leaving its child behind (each
    round takes microseconds; a fork, a hundred or more). A process that is ended while it forks
    never gets its child (the kernel abandons the fork)."""
    ended: dict[int, None] = {}
    dying: set[int] = set()  # ended, not reaped yet
    untouchable: set[int] = set()  # (another user's: no signal of this process reaches it)
    deadline = time.monotonic() + SWEEP_PATIENCE
    with _starting:
        while True:
            orphans = [pid for pid in _own_children() if pid not in _started and pid not in untouchable]
            if not orphans:
                break
            if time.monotonic() > deadline:
                print(f"course: {len(orphans)} process(es) kept forking for {SWEEP_PATIENCE:g} s and may still run: "
                      f"pids {', '.join(map(str, orphans[:10]))}", file=sys.stderr)
                break
            for pid in orphans:
                if pid in dying:
                    _wait_for(pid, deadline)  # (its end takes time: a large memory to free)
                try:
                    os.kill(pid, signal.SIGKILL)
                except PermissionError:
                    untouchable.add(pid)
                    continue
                except ProcessLookupError:
                    pass
                dying.add(pid)
            for pid in orphans:
                with contextlib.suppress(ChildProcessError):
                    if os.waitpid(pid, os.WNOHANG)[0]:
                        dying.discard(pid)
            ended.update(dict.fromkeys(orphans))
    return list(ended)


def _wait_for(pid: int, deadline: float) -> None:
    """Wait until the process `pid` has ended (or the deadline passed), without polling."""
    try:
        handle = os.pidfd_open(pid)
    except (OSError, AttributeError):
        return  # gone already, or no pidfd here: the next round looks again
    try:
        select.select([handle], [], [], max(0.0, deadline - time.monotonic()))
    finally:
        os.close(handle)


@contextlib.contextmanager
def scratch_directory(prefix: str) -> Iterator[Path]:
    """A temporary directory for a child's run, removed afterwards whatever the child left in it."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        remove_tree(path)


def run_own(command: list[str], timeout: float) -> str:
    """Run a helper command of the judge's (not a submission's) to its end, within `timeout` seconds; what
    it printed, or "" if it could not run. Started as the judge's own child: no other thread's sweep for
    orphans ends it."""
    try:
        with starting():
            child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, errors="replace")
            adopt(child.pid)
    except OSError:
        return ""
    try:
        printed, _ = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        printed = ""
    finally:
        child.kill()
        child.wait()
        release(child.pid)
    return printed


def remove_tree(path: Path) -> None:
    """Remove `path` and everything below it; never raises. A child may leave a tree thousands of levels
    deep, which Python's own remover (recursive) cannot take: `rm -rf` walks it without recursion. It may
    leave a directory it took every permission from (mode 000), which a user other than root cannot
    empty: what `rm` could not remove gets its owner's permissions back (`chmod -R`, which follows no
    link), and `rm` goes again."""
    run_own(["rm", "-rf", "--one-file-system", "--", str(path)], timeout=120)
    if os.path.lexists(path) and not os.path.islink(path):
        run_own(["chmod", "-R", "u+rwx", "--", str(path)], timeout=120)
        run_own(["rm", "-rf", "--one-file-system", "--", str(path)], timeout=120)
    if os.path.lexists(path):
        try:
            shutil.rmtree(path, ignore_errors=True)
        except RecursionError:
            pass
