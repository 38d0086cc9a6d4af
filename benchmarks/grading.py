"""Grading throughput: how many submissions a minute `course grade` sustains on this machine, with
the sandbox (bubblewrap) and without it, and what the sandbox costs per submission."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.feedback import feedback_environment
from course.judge.sandbox import bubblewrap

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = "07"
MODULE = "ch07_agent_loop.py"


@dataclass
class GradingRun:
    sandbox: bool
    submissions: int
    wall: float
    """Seconds the whole `course grade` command took."""
    passed: int
    """Submissions graded `pass` (each is a copy of the reference: all of them should)."""

    @property
    def per_minute(self) -> float:
        return self.submissions * 60 / self.wall

    @property
    def per_submission(self) -> float:
        return self.wall / self.submissions


def time_grading(submissions: int, *, sandbox: bool, jobs: int = 2) -> GradingRun:
    """`course grade 07` on `submissions` copies of the reference, with or without bubblewrap."""
    with tempfile.TemporaryDirectory(prefix="bench-grade-") as work:
        folder = Path(work) / "submissions"
        for n in range(submissions):
            (folder / f"s{n:03d}").mkdir(parents=True)
            shutil.copy(ROOT / "chapters" / MODULE.removesuffix(".py") / MODULE, folder / f"s{n:03d}" / MODULE)
        table = Path(work) / "grades.json"
        command = [sys.executable, "-m", "course", "grade", CHAPTER, str(folder), "--json", str(table),
                   "--jobs", str(jobs), *([] if sandbox else ["--no-sandbox", "--trusted"])]
        started = time.perf_counter()
        subprocess.run(command, cwd=ROOT, env=feedback_environment(__import__("os").environ), capture_output=True,
                       stdin=subprocess.DEVNULL, check=False)
        wall = time.perf_counter() - started
        grades = json.loads(table.read_text(encoding="utf-8"))["grades"] if table.exists() else []
    return GradingRun(sandbox, submissions, wall, sum(g["status"] == "pass" for g in grades))


def measure_grading(submissions: int) -> list[GradingRun]:
    """Without the sandbox, then with it (when bubblewrap is installed)."""
    runs = [time_grading(submissions, sandbox=False)]
    if bubblewrap() is not None:
        runs.append(time_grading(submissions, sandbox=True))
    return runs
