"""The clocks the time limits read (course.recorder.limits): the fair-share clock behind every wall-clock
backstop stretches with the load as it is now, not as the one-minute load average remembers it."""

from __future__ import annotations

import pytest

from course.judge import session
from course.recorder import limits


class FakeMachine:
    """A monotonic clock the test moves, and the number of threads runnable at each moment."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now, self.runnable = 1000.0, 1
        monkeypatch.setattr(limits.time, "monotonic", lambda: self.now)
        monkeypatch.setattr(limits, "_runnable_now", lambda: self.runnable)

    def passes(self, seconds: float, runnable: int | None) -> None:
        self.now += seconds
        self.runnable = runnable


@pytest.fixture
def machine(monkeypatch):
    return FakeMachine(monkeypatch)


def two_cpus() -> limits.FairShareClock:
    clock = limits.FairShareClock()
    clock.cpus = 2
    return clock


def test_a_quiet_machine_counts_every_wall_second(machine):
    clock = two_cpus()
    machine.passes(3.0, runnable=2)
    assert clock.tick() == pytest.approx(3.0)


def test_a_loaded_machine_counts_a_second_at_a_runnable_threads_share_of_the_cpus(machine):
    clock = two_cpus()
    machine.passes(10.0, runnable=5)  # five runnable threads on two CPUs: each gets two fifths
    assert clock.tick() == pytest.approx(4.0)
    machine.passes(2.0, runnable=1)  # the load is gone as soon as it is gone
    assert clock.tick() == pytest.approx(6.0)


def test_no_load_stretches_a_second_below_the_fewest_share(machine):
    clock = two_cpus()
    machine.passes(32.0, runnable=10_000)
    assert clock.tick() == pytest.approx(32.0 * limits.FEWEST_SHARE)


def test_where_the_load_cannot_be_read_the_clock_is_the_wall_clock(machine):
    clock = two_cpus()
    machine.passes(5.0, runnable=None)
    assert clock.tick() == pytest.approx(5.0)


def test_the_runnable_count_is_read_from_this_machine():
    runnable = limits._runnable_now()
    assert runnable is None or runnable >= 1  # the reader itself is running


def test_the_childs_last_resort_comes_after_any_backstop_the_judge_can_reach():
    for seconds in (0.5, 8.0, 60.0):
        # the judge stops a scenario at BACKSTOP * (limit + GRACE) fair seconds, at worst FEWEST_SHARE of wall
        judge_latest = session.BACKSTOP * (seconds + session.GRACE) / limits.FEWEST_SHARE
        assert judge_latest < session.last_resort(seconds) <= judge_latest + session.GRACE
