"""Feedback time: how long a student waits for `pytest -k ch07` or `course check 07`, from process
start to exit."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.workloads import Elapsed, median
from course.recorder import impl

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class PytestRun:
    """One pytest command, run as a subprocess in the repository."""

    args: list[str]
    """What follows `python -m pytest`."""
    elapsed: Elapsed
    """Median over the repetitions: wall time from start to exit, and the child process's CPU time."""
    exit_code: int
    """pytest's exit code (0: every selected test passed)."""
    summary: str
    """pytest's last line, e.g. "20 passed, 16 deselected in 0.44s"."""

    @property
    def command(self) -> str:
        if self.args[:1] == ["__course_check__"]:
            return f"course check {self.args[1]}"
        return " ".join(["python -m pytest", *self.args])


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# What would make the timed runs something other than the course's own suite on the reference:
# no bytecode caches, a student's implementation, or the long (or a seeded) property profile.
# (The property profile's names live in tests/generated_runs.py, which imports Hypothesis.)
NOT_PASSED_ON = ("PYTHONDONTWRITEBYTECODE", impl.IMPL_ENV, impl.CHAIN_ENV,
                 "TINY_PI_HYPOTHESIS_PROFILE", "TINY_PI_HYPOTHESIS_SEED")


def feedback_environment(environ: dict[str, str]) -> dict[str, str]:
    """The timed pytest runs' environment: the caller's, without NOT_PASSED_ON."""
    return {name: value for name, value in environ.items() if name not in NOT_PASSED_ON}


def time_pytest(args: list[str], repeat: int) -> PytestRun:
    """Median time of `python -m pytest ARGS`, after one untimed run that writes the bytecode caches.

    The caches are written even where PYTHONDONTWRITEBYTECODE is set, as on a student's usual machine;
    without them every run recompiles pytest and rewrites the test modules' assertions.
    """
    runs = timed_runs([sys.executable, "-m", "pytest", *args], repeat)
    last = runs[-1][1]
    lines = (last.stdout.strip() or last.stderr.strip()).splitlines()
    return PytestRun(args, median([elapsed for elapsed, _ in runs]), last.returncode,
                     lines[-1].strip("= ") if lines else "")


def timed_runs(command: list[str], repeat: int) -> list[tuple[Elapsed, subprocess.CompletedProcess]]:
    """`command` in the repository, once untimed (it writes the bytecode caches), then `repeat` times timed."""
    env = feedback_environment(os.environ)

    def once() -> tuple[Elapsed, subprocess.CompletedProcess]:
        wall, cpu = time.perf_counter(), children_cpu()
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        return Elapsed(time.perf_counter() - wall, children_cpu() - cpu), done

    once()
    return [once() for _ in range(repeat)]


def time_check(chapter: str, repeat: int) -> PytestRun:
    """Median time of `course check NN` on a student's copy of the reference (judged apart from it)."""
    import shutil
    import tempfile

    from course.manifest import find_chapter

    module = find_chapter(chapter).module
    with tempfile.TemporaryDirectory(prefix="bench-check-") as student:
        shutil.copy(ROOT / find_chapter(chapter).reference_file, Path(student) / f"{module}.py")
        runs = timed_runs([sys.executable, "-m", "course", "check", chapter, "--impl", student], repeat)
    last = runs[-1][1]
    lines = last.stdout.strip().splitlines()
    return PytestRun(["__course_check__", chapter], median([elapsed for elapsed, _ in runs]), last.returncode,
                     lines[-1] if lines else "")
