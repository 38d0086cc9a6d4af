"""Nothing a student's code starts may outlive the run that judged it.

The judge makes itself a child subreaper (Linux): a process that a submission forks and abandons,
in its own session or not, is re-parented to the judge instead of to init, so that after each
child run the judge can find every process descended from it and end them all.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from pathlib import Path

_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Adopt orphaned descendants (Linux only); whether that worked."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


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


def descendants(of: int | None = None) -> list[int]:
    """Every process below `of` (default: this one), children first."""
    root = os.getpid() if of is None else of
    parents = _parents()
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
