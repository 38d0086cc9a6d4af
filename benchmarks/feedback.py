"""Feedback time: how long a student waits for `pytest -k ch07`, from process start to exit."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.workloads import Elapsed, median

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
        return " ".join(["python -m pytest", *self.args])


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_pytest(args: list[str], repeat: int) -> PytestRun:
    """Median time of `python -m pytest ARGS`, after one untimed run that writes the bytecode caches.

    The caches are written even where PYTHONDONTWRITEBYTECODE is set, as on a student's usual machine;
    without them every run recompiles pytest and rewrites the test modules' assertions.
    """
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    command = [sys.executable, "-m", "pytest", *args]

    def once() -> tuple[Elapsed, subprocess.CompletedProcess]:
        wall, cpu = time.perf_counter(), children_cpu()
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        return Elapsed(time.perf_counter() - wall, children_cpu() - cpu), done

    once()
    runs = [once() for _ in range(repeat)]
    last = runs[-1][1]
    lines = (last.stdout.strip() or last.stderr.strip()).splitlines()
    return PytestRun(args, median([elapsed for elapsed, _ in runs]), last.returncode,
                     lines[-1].strip("= ") if lines else "")
