"""A control group for each judged run: its own share of the CPUs, memory and process count.

The Linux scheduler divides the CPUs between control groups before it divides a group's share
between its threads, so a submission that starts 64 busy threads slows only itself, not the
submission beside it. The group also bounds the run's memory and number of processes in all
(resource limits bound them per process only, and not for root), lists every thread of the run
for its own-time clock (`course.recorder.limits`), and lets the judge end every process in it,
whatever session it moved to.

Made under the judge's own group, with cgroup v2 where the machine mounts it with the cpu controller,
else with v1's cpu, cpuacct, memory and pids hierarchies. Where none can be made (not root, no
controllers), `create` returns None with the reason, and the run is not isolated from its neighbours'
load: `isolation_gap()` says so.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
CPU_SHARES = 1024
"""v1's cpu.shares (v2's cpu.weight 100): every run the same, so each gets an equal part of the CPUs."""
MEMORY = 4 * 2**30
"""Bytes of memory a run may use in all, its processes together (a tmpfs it writes to included)."""
PROCESSES = 256
"""Processes and threads a run may have at once, in all."""
V1_CONTROLLERS = ("cpu", "cpuacct", "memory", "pids")


@dataclass
class Group:
    """One run's control group: a directory in each hierarchy (one under v2)."""

    paths: list[Path]
    v2: bool

    @property
    def _main(self) -> Path:
        return self.paths[0]

    def enter(self) -> None:
        """Move the calling process into the group (run in the child before it executes: all it starts follows)."""
        pid = str(os.getpid()).encode()
        for path in self.paths:
            fd = os.open(path / "cgroup.procs", os.O_WRONLY)
            try:
                os.write(fd, pid)
            finally:
                os.close(fd)

    def threads(self) -> list[str]:
        """The /proc directories of every thread in the group."""
        listing = self._main / ("cgroup.threads" if self.v2 else "tasks")
        with contextlib.suppress(OSError):
            return [f"/proc/{tid}" for tid in listing.read_text().split()]
        return []

    def processes(self) -> list[int]:
        with contextlib.suppress(OSError, ValueError):
            return [int(pid) for pid in (self._main / "cgroup.procs").read_text().split()]
        return []

    def end_all(self) -> None:
        """Kill every process in the group, again while any is left (one may fork as its siblings go)."""
        if self.v2 and (self._main / "cgroup.kill").exists():
            with contextlib.suppress(OSError):
                (self._main / "cgroup.kill").write_text("1")
        for _ in range(200):
            left = self.processes()
            if not left:
                return
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)

    def remove(self) -> None:
        """End what is left in the group and remove it."""
        self.end_all()
        for path in self.paths:
            for _ in range(100):  # a killed process leaves its group when the kernel has reaped it
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)


def _own(hierarchy: str) -> Path | None:
    """The judge's own group in `hierarchy` ("" for v2), from /proc/self/cgroup."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controllers.split(",") == ([hierarchy] if hierarchy else [""]) or (hierarchy and hierarchy in
                                                                                   controllers.split(",")):
                return Path(path.lstrip("/"))
    return None


def _write(path: Path, value: str) -> None:
    path.write_text(value)


def _make_v2(name: str) -> Group:
    parent = ROOT / (_own("") or "")
    controllers = (parent / "cgroup.controllers").read_text().split()
    if "cpu" not in controllers:
        raise OSError("cgroup v2 without the cpu controller")
    wanted = [c for c in ("cpu", "memory", "pids") if c in controllers]
    _write(parent / "cgroup.subtree_control", " ".join(f"+{c}" for c in wanted))
    path = parent / name
    path.mkdir()
    group = Group([path], v2=True)
    with contextlib.suppress(OSError):
        _write(path / "memory.max", str(MEMORY))
    with contextlib.suppress(OSError):
        _write(path / "pids.max", str(PROCESSES))
    _write(path / "cpu.weight", "100")
    return group


def _make_v1(name: str) -> Group:
    paths = []
    try:
        for controller in V1_CONTROLLERS:
            parent = ROOT / controller / (_own(controller) or "")
            if not (parent / "cgroup.procs").exists():
                raise OSError(f"no cgroup v1 {controller} hierarchy")
            (parent / name).mkdir()
            paths.append(parent / name)
        _write(paths[0] / "cpu.shares", str(CPU_SHARES))
        _write(paths[2] / "memory.limit_in_bytes", str(MEMORY))
        _write(paths[3] / "pids.max", str(PROCESSES))
    except OSError:
        Group(paths, v2=False).remove()
        raise
    # cpuacct first: its `tasks` lists the group's threads (any hierarchy would do).
    return Group([paths[1], paths[0], paths[2], paths[3]], v2=False)


_why_not: str | None = None


def create(purpose: str) -> Group | None:
    """A new group for one run (None where none can be made: `isolation_gap()` says why)."""
    global _why_not
    name = f"tiny-pi-{purpose}-{os.getpid()}-{secrets.token_hex(4)}"
    unified = (ROOT / "cgroup.controllers").exists()
    try:
        return _make_v2(name) if unified else _make_v1(name)
    except OSError as error:
        _why_not = f"{error.strerror or error}" + (f" ({error.filename})" if getattr(error, "filename", None) else "")
        return None


def isolation_gap() -> str | None:
    """What the runs so far lacked, in words, or None if every one had its group."""
    if _why_not is None:
        return None
    return ("no control group could be made for the runs (" + _why_not + "): a submission's own time is "
            "still what its limits count, but a busy neighbour can slow it, and its memory and processes "
            "are bounded per process only")
