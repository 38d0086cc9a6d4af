"""The smallest plan of a generated section that still diverges from the reference: what Hypothesis's
shrinking found, kept as it goes.

Plain pytest judges a section in its own process (`differential.compare_section`), where Hypothesis shrinks
the first failing plan choice by choice. `Failures` keeps that first plan and the latest failing one (each
failing run while Hypothesis shrinks is of a smaller plan than the one before), and stops the shrinking
after SHRINK_SECONDS: the smallest plan found by then is shown. When $TINY_PI_SHRUNK names a directory, it
writes them there as they come (`<section>.json`).

`course check` judges records in a process that never runs student code, where nothing shrinks. After a
generated section fails there, `smallest_plans` runs the failing sections again as plain pytest in a child
(with $TINY_PI_SHRUNK set, its plans drawn from the same seed, so its first failing plan is the judge's),
bounded in time, and `print_smallest` shows what it shrank to. `course grade` never does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

SHRUNK_ENV = "TINY_PI_SHRUNK"
"""A directory: plain pytest writes each failing section's first and smallest plans there."""
PLANS_SEED_ENV = "TINY_PI_PLANS_SEED"
"""The seed of a `course check --seed N`: plain pytest draws the section's plans from it, as the judge did."""
SHRINK_SECONDS = 20.0
"""Seconds Hypothesis may shrink one section's failing plan; the smallest found by then is shown."""
START_SECONDS = 30.0
"""Seconds `course check`'s shrinking child may take besides: starting pytest, drawing the plans, running them
up to the first failure."""


class ShrinkingStopped(BaseException):
    """The section has shrunk for SHRINK_SECONDS: the smallest plan so far is shown (a BaseException, so that
    Hypothesis does not take it for a failure to shrink)."""


@dataclass
class Failures:
    """A section's failing plans as Hypothesis finds and shrinks them."""

    module: str
    section: str
    count: int
    """How many plans the section runs (pinned and drawn)."""
    calls: int = 0
    first: dict | None = None
    """{"index", "plan"}: the first plan that failed (`index` counts from 1, in the order the plans run)."""
    last: dict | None = None
    """{"plan", "problem"}: the latest that failed, the smallest so far."""
    deadline: float | None = None

    def called(self) -> None:
        """A plan is about to run: past the deadline, shrinking stops here."""
        self.calls += 1
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise ShrinkingStopped()

    def failed(self, plan: dict, problem: str) -> None:
        if self.first is None:
            self.first = {"index": self.calls, "plan": plan}
            self.deadline = time.monotonic() + SHRINK_SECONDS
        self.last = {"plan": plan, "problem": problem}
        self._write()

    def shrunk_from(self) -> str | None:
        """Where the plan shown came from, in words; None when it is the first failing plan itself."""
        from course.judge.differential import describe

        if self.first is None or self.last is None or self.first["plan"] == self.last["plan"]:
            return None
        return (f"Hypothesis shrank plan {self.first['index']} of {self.count}, the first that failed, to the plan "
                f"above, the smallest it found that still diverges; the first was:\n  "
                + describe(self.module, self.first["plan"]))

    def _write(self) -> None:
        directory = os.environ.get(SHRUNK_ENV)
        if not directory:
            return
        path = Path(directory) / f"{self.section}.json"
        partial = path.with_suffix(".tmp")
        partial.write_text(json.dumps({"count": self.count, "first": self.first, "smallest": self.last}),
                           encoding="ascii")
        os.replace(partial, path)


def section_of(scenario: str) -> str | None:
    """The section of a generated scenario's name (`test_generated[<section>]`), else None."""
    prefix = "test_generated["
    return scenario[len(prefix):-1] if scenario.startswith(prefix) and scenario.endswith("]") else None


def smallest_plans(test_file: str, implementation: str | None, chain: bool, seed: int | None,
                   sections: list[str], hardening: bool) -> dict[str, dict]:
    """Each section's first and smallest failing plans ({"count", "first", "smallest"}), from plain pytest run
    on those sections in a child; what it found by the time bound, if it is reached."""
    from course.judge import processes
    from course.judge.differential import PLAN_TIMEOUT
    from course.judge.testrun import child_environment, course_root

    with processes.scratch_directory("course-shrink-") as scratch:
        command = [sys.executable, "-m", "pytest", *[f"{test_file}::test_generated[{s}]" for s in sections],
                   f"--impl={implementation}" if implementation else "--reference", "-p", "no:cacheprovider",
                   "-p", "no:warnings", "-q", "--tb=no", "--no-header", *(["--impl-chain"] if chain else []),
                   *(["--hardening"] if hardening else [])]
        env = {**child_environment(), SHRUNK_ENV: str(scratch), "TINY_PI_HYPOTHESIS_PROFILE": "default"}
        env.pop(PLANS_SEED_ENV, None)
        if seed is not None:
            env[PLANS_SEED_ENV] = str(seed)
        bound = START_SECONDS + len(sections) * (SHRINK_SECONDS + 2 * PLAN_TIMEOUT)
        with processes.starting():
            child = subprocess.Popen(command, cwd=course_root(), env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            processes.adopt(child.pid)
        try:
            child.wait(timeout=bound)
        except subprocess.TimeoutExpired:
            pass
        finally:
            processes.end_tree(child)
        return {section: found for section in sections if (found := _read(scratch / f"{section}.json"))}


def _read(path: Path) -> dict | None:
    try:
        found = json.loads(path.read_text(encoding="ascii"))
    except (OSError, ValueError):
        return None
    ok = isinstance(found, dict) and all(isinstance(found.get(key), dict) for key in ("first", "smallest"))
    return found if ok and isinstance(found["smallest"].get("problem"), str) else None


def print_smallest(scenario: str, found: dict) -> None:
    """The smallest plan Hypothesis found beside the first failing one (shown above, with the scenario)."""
    from course.judge.terminal import printable

    pad = " " * 8
    first, smallest = found["first"], found["smallest"]
    if first.get("plan") == smallest.get("plan"):
        print(f"{scenario}: plan {first.get('index')} of {found.get('count')}, the first drawn plan that failed, is "
              "the smallest Hypothesis found (it could not shrink it)")
        return
    print(f"{scenario}: the smallest plan that still diverges, shrunk by Hypothesis from plan "
          f"{first.get('index')} of {found.get('count')} (the first drawn plan that failed):")
    for line in smallest["problem"].splitlines():
        if line.startswith("plan (JSON): "):
            continue
        print(pad + printable(line))
    print(f"{pad}as JSON:  {printable(json.dumps(smallest.get('plan'), ensure_ascii=False))}")
