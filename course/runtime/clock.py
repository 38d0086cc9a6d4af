"""The one clock every runtime timestamp comes from.

Tests install a StepClock so that snapshots hold exact timestamps instead of masked ones.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Clock = Callable[[], int]


def system_clock() -> int:
    """Milliseconds since the epoch, like JavaScript's Date.now()."""
    return time.time_ns() // 1_000_000


class StepClock:
    """A deterministic clock: start, start + step, start + 2 * step, ..."""

    def __init__(self, start: int = 1, step: int = 1) -> None:
        self._next = start
        self._step = step

    def __call__(self) -> int:
        value = self._next
        self._next += self._step
        return value


_current: Clock = system_clock


def now() -> int:
    """The current time in milliseconds, read from the installed clock."""
    return _current()


@contextmanager
def use_clock(clock: Clock) -> Iterator[Clock]:
    """Install `clock` for the duration of the block, then restore the previous one."""
    global _current
    previous, _current = _current, clock
    try:
        yield clock
    finally:
        _current = previous
