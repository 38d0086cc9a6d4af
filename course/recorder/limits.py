"""Time limits that count a program's own time, not the machine's.

A limited block's clock advances by the CPU time its threads use, plus the wall time during which
all of them are blocked: neither running nor waiting for a CPU (an `await` that never returns).
Time a thread spends runnable while other programs hold the CPUs is not counted, so a loaded
machine does not turn a correct program into a timeout, while a loop that spins and a loop that
waits for ever are both stopped. Linux's per-thread scheduler statistics (`/proc/.../schedstat`:
nanoseconds on a CPU, nanoseconds runnable but waiting) tell the two apart; where they cannot be
read, the clock is the wall clock.

Inside the process under test, `time_limit` counts CPU time with the kernel's profiling timer
(no thread, no file: a chapter's scenario may count the descriptors and threads the code under test
leaves behind); the judge, outside, keeps the whole own-time clock (`OwnClock`) and sends SIGPROF
when a block has waited its limit out. SIGPROF leaves pytest-timeout's SIGALRM, the wall-clock
backstop, its own. The block then raises the limit's error, a BaseException, so that neither
`except Exception` in student code nor Hypothesis's search mistakes it for a failure to shrink.
Code that swallows even that is interrupted again every second; after a few, the process ends,
saying why: a block that cannot be stopped must not hold the run for ever.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

SWALLOWED_BEFORE_EXIT = 5
_SIGNAL = signal.SIGPROF
# The functions as they are now: a scenario may wrap os.open and friends to see what the code under test
# opens (chapter 08's), and a clock's own reads are none of its business.
_open, _read, _close, _listdir = os.open, os.read, os.close, os.listdir


class PlanTimedOut(BaseException):
    """A plan ran past its time limit."""


class ScenarioTimedOut(BaseException):
    """A scenario ran past its time limit."""


def _read_small(path: str) -> bytes | None:
    try:
        fd = _open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            return _read(fd, 1024)
        finally:
            _close(fd)
    except OSError:
        return None


def _thread_state(task: str) -> tuple[int, int, bool] | None:
    """(nanoseconds on a CPU, nanoseconds runnable but waiting, runnable now) of the thread whose /proc
    directory is `task`, or None if it is gone. (The kernel adds a wait to the second number only when
    the wait ends: a thread waiting now is seen by its state, R.)"""
    schedstat, stat = _read_small(task + "/schedstat"), _read_small(task + "/stat")
    try:
        ran, waited, *_ = schedstat.split()
        state = stat[stat.rindex(b")") + 2:][:1]  # (the command name may hold spaces and parentheses)
        return int(ran), int(waited), state == b"R"
    except (AttributeError, ValueError):
        return None


def threads_of(pids: Iterable[int]) -> list[str]:
    """The /proc directories of every thread of `pids`."""
    found = []
    for pid in pids:
        try:
            found += [f"/proc/{pid}/task/{tid}" for tid in _listdir(f"/proc/{pid}/task")]
        except OSError:
            continue
    return found


class OwnClock:
    """Seconds of a program's own time since the clock was made: see the module's docstring.

    `threads()` lists the /proc directories of the program's threads (they may change between ticks)."""

    def __init__(self, threads: Callable[[], Iterable[str]]) -> None:
        self.threads = threads
        self.seconds = 0.0
        self.ticked_at = time.monotonic()
        self._last = self._sample()

    def _sample(self) -> dict[str, tuple[int, int, bool]]:
        return {task: state for task in self.threads() if (state := _thread_state(task)) is not None}

    def tick(self) -> float:
        """Advance the clock to now; its reading in seconds."""
        now = time.monotonic()
        elapsed, self.ticked_at = now - self.ticked_at, now
        sample = self._sample()
        if not sample and not self._last:
            self.seconds += elapsed  # nothing readable: the wall clock is all there is
            return self.seconds
        ran, busiest = 0, 0
        for task, (on_cpu, waiting, _) in sample.items():
            before_cpu, before_waiting, _ = self._last.get(task, (0, 0, False))
            used = max(0, on_cpu - before_cpu)
            ran += used
            busiest = max(busiest, used + max(0, waiting - before_waiting))
        runnable = any(state[2] for state in (*sample.values(), *self._last.values()))
        self._last = sample
        # CPU time wherever it was used, and the stretch during which no thread ran or was runnable.
        blocked = 0.0 if runnable else max(0.0, elapsed - busiest / 1e9)
        self.seconds += ran / 1e9 + blocked
        return self.seconds


FEWEST_SHARE = 1 / 16
"""The least share of a CPU `FairShareClock` counts a second at: a backstop must still stop something."""


def _runnable_now() -> int | None:
    """How many threads the machine has runnable at this moment (the fourth field of /proc/loadavg)."""
    raw = _read_small("/proc/loadavg")
    try:
        return int(raw.split()[3].split(b"/")[0]) if raw else None
    except (IndexError, ValueError):
        return None


class FairShareClock:
    """Wall seconds, each counted at the share of a CPU that one runnable thread gets at that moment:
    the whole second while the machine has no more runnable threads than CPUs, CPUs / runnable when it
    has more (never below FEWEST_SHARE). A wall-clock backstop that reads this clock stretches with the
    load as it comes and goes, where the load average lags it by a minute."""

    def __init__(self) -> None:
        self.cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        self.seconds = 0.0
        self.ticked_at = time.monotonic()

    def tick(self) -> float:
        """Advance the clock to now; its reading in seconds."""
        now = time.monotonic()
        elapsed, self.ticked_at = now - self.ticked_at, now
        runnable = _runnable_now()
        share = 1.0 if runnable is None else max(FEWEST_SHARE, min(1.0, self.cpus / max(1, runnable)))
        self.seconds += elapsed * share
        return self.seconds


class Limit:
    """What a time limit saw: `fired` counts its interruptions (0: the block ended in time)."""

    def __init__(self, seconds: float, what: str, error: type[BaseException]) -> None:
        self.seconds, self.what, self.error = seconds, what, error
        self.fired = 0
        self.fired_at = float("-inf")
        self.cpu_at = time.process_time()
        self.wall_at = time.monotonic()

    @property
    def message(self) -> str:
        return f"{self.what} did not finish within {self.seconds:g} s"

    @property
    def cpu_spent(self) -> bool:
        return time.process_time() - self.cpu_at >= self.seconds * 0.99

    @property
    def wall_spent(self) -> bool:
        return time.monotonic() - self.wall_at >= self.seconds * 0.99


_active: list[Limit] = []
"""The limits in force in this process, innermost last."""
_previous_handler = None


def _on_signal(signum, frame) -> None:
    """SIGPROF: the CPU timer of a limit, or a watcher saying the block is blocked (see `time_limit`)."""
    # The CPU timer fires for the limit whose CPU time is spent; a watcher's signal is heeded only by a
    # limit in force for its whole length of wall time (one sent late, as a block ends, finds none).
    fired = next((limit for limit in _active if limit.cpu_spent), None) or \
        next((limit for limit in reversed(_active) if limit.wall_spent), None)
    now = time.monotonic()
    if fired is None or now - fired.fired_at < 1.0:
        return  # (several watchers may tell at once: a block being unwound is not interrupted again at once)
    fired.fired += 1
    fired.fired_at = now
    if fired.fired > SWALLOWED_BEFORE_EXIT:
        sys.stderr.write(f"\n{fired.message} and swallowed every interruption: ending the test process\n")
        sys.stderr.flush()
        os._exit(70)
    raise fired.error(fired.message)


def ignore_stray_signals() -> None:
    """Outside every limit, a late SIGPROF (the judge's) is dropped: its default action ends the process."""
    if threading.current_thread() is threading.main_thread() and not _active:
        signal.signal(_SIGNAL, signal.SIG_IGN)


@contextmanager
def time_limit(seconds: float, what: str, error: type[BaseException] = PlanTimedOut) -> Iterator[Limit]:
    """Interrupt the block with `error` after `seconds` of CPU time (ITIMER_PROF: the process's threads
    together), then again every further second while it swallows the interruption. A block that waits
    instead is stopped by whoever watches the process from outside (the judge: `OwnClock`), which sends
    SIGPROF. Whatever the block caught, `limit.fired` tells afterwards. Off the main thread, or where
    there are no interval timers, the block is not limited."""
    global _previous_handler
    limit = Limit(seconds, what, error)
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield limit
        return
    outer_left, _ = signal.getitimer(signal.ITIMER_PROF)
    if not _active:
        _previous_handler = signal.signal(_SIGNAL, _on_signal)
    _active.append(limit)
    _tell_watcher(f"start {seconds!r}\n")
    signal.setitimer(signal.ITIMER_PROF, min(seconds, outer_left) if outer_left else seconds, 1.0)
    try:
        yield limit
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        _tell_watcher("end\n")
        _active.remove(limit)
        if outer_left:
            used = time.process_time() - limit.cpu_at
            signal.setitimer(signal.ITIMER_PROF, max(0.001, outer_left - used), 1.0)
        else:
            # A SIGPROF already on its way finds the signal ignored, and is dropped: under its default
            # action it would end the process.
            default = _previous_handler in (signal.SIG_DFL, None)
            signal.signal(_SIGNAL, signal.SIG_IGN if default else _previous_handler)


# --- The watcher: a process beside this one that sees when a limited block waits ---------------------
# Only from outside can a process be seen waiting rather than running (its threads' states); a thread
# inside would open files and add a thread that a chapter's scenario may count. Started at the first
# limit, told of each limit's start and end through a pipe, it sends SIGPROF once a block has spent its
# limit of own time; it ends when this process does (the pipe closes). The judge watches the same way.

_watcher: subprocess.Popen | None = None
NUDGE = 0.5
"""Seconds of own time past a block's limit before the watcher tells it (its CPU timer goes first)."""


def _tell_watcher(line: str) -> None:
    global _watcher
    try:
        if _watcher is None:
            python = [sys.executable, *(["-S"] if sys.flags.no_site else [])]
            _watcher = subprocess.Popen([*python, "-c", "from course.recorder.limits import watch_parent; watch_parent()",
                                         str(os.getpid())], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                        text=True, bufsize=1)
        _watcher.stdin.write(line)
    except (OSError, ValueError):
        _watcher = False  # no watcher (none could start, or it is gone): the CPU timer and the backstop remain


def watch_parent() -> None:
    """The watcher's main: `python -c '...; watch_parent()' PID`, told "start SECONDS" / "end" on stdin."""
    import select

    parent = int(sys.argv[1])
    clock = OwnClock(lambda: threads_of([parent]))
    blocks: list[tuple[float, float]] = []  # (limit, own time at its start), innermost last
    pending, told_at = b"", None
    while True:
        if select.select([0], [], [], 0.25)[0]:
            chunk = os.read(0, 4096)  # (not sys.stdin: its buffer would hide lines from select)
            if not chunk:
                return  # the process watched has ended
            pending += chunk
            *lines, pending = pending.split(b"\n")
            clock.tick()
            for line in lines:
                blocks = [*blocks, (float(line.split()[1]), clock.seconds)] if line.startswith(b"start") else blocks[:-1]
            told_at = None
            continue
        own = clock.tick()
        if any(own - began > limit + NUDGE for limit, began in blocks) and (told_at is None or own - told_at >= 1):
            told_at = own
            try:
                os.kill(parent, _SIGNAL)
            except OSError:
                return
