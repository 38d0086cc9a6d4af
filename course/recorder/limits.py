"""A time limit for one generated plan, that holds against student code spinning in pure Python.

SIGALRM interrupts the main thread between bytecodes with `PlanTimedOut`, a BaseException (so that
neither `except Exception` in student code nor Hypothesis's search mistakes it for a failure to
shrink). Code that swallows even that is interrupted again every second; after a few, the process
ends, saying why: a plan that cannot be stopped must not hold the run for ever.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

SWALLOWED_BEFORE_EXIT = 5


class PlanTimedOut(BaseException):
    """A plan ran past its time limit."""


class Limit:
    """What a time limit saw: `fired` counts its interruptions (0: the block ended in time)."""

    def __init__(self) -> None:
        self.fired = 0


@contextmanager
def time_limit(seconds: float, what: str) -> Iterator[Limit]:
    """Interrupt the block after `seconds`. Whatever the block caught, `limit.fired` tells afterwards."""
    limit = Limit()
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield limit
        return
    previous_handler = signal.getsignal(signal.SIGALRM)
    previous_left, _ = signal.getitimer(signal.ITIMER_REAL)  # pytest-timeout's own alarm, if set
    started = time.monotonic()

    def on_alarm(signum, frame):
        limit.fired += 1
        if limit.fired > SWALLOWED_BEFORE_EXIT:
            sys.stderr.write(f"\n{what} ran past its limit of {seconds:g} s and swallowed every interruption: "
                             "ending the test process\n")
            sys.stderr.flush()
            os._exit(70)
        raise PlanTimedOut(f"{what} did not finish within {seconds:g} s")

    signal.signal(signal.SIGALRM, on_alarm)
    first = seconds if not previous_left else min(seconds, previous_left)
    signal.setitimer(signal.ITIMER_REAL, first, 1.0)  # then again every second, while it is swallowed
    try:
        yield limit
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_handler)
        if previous_left:
            signal.setitimer(signal.ITIMER_REAL, max(0.001, previous_left - (time.monotonic() - started)))
