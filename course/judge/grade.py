"""`course grade NN SUBMISSIONS_DIR`: every submission's scenarios, one table.

Each submission is a folder holding the chapter's module. Each runs in its own pytest process,
in parallel over the machine's cores, with a time limit: a submission that hangs is killed and
reported as a timeout, and one that cannot even be imported gets a row saying why. Neither stops
the others.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from course.manifest import Chapter, find_chapter
from course.judge.testrun import PytestRun, run_tests


@dataclass
class Grade:
    """One submission's row."""

    submission: str
    """The submission folder's name."""
    status: str
    """pass, fail, broken (no scenario could run its code), timeout, or missing (no chapter module)."""
    passed: int = 0
    total: int = 0
    problem: str = ""
    """Why the submission is broken, timed out or missing, in one line."""
    scenarios: dict[str, str] = field(default_factory=dict)
    """Scenario name -> passed, failed, error, skipped, timeout (it hung) or not run (after a hang)."""


def grade_one(chapter: Chapter, folder: Path, timeout: float) -> Grade:
    if not (folder / f"{chapter.module}.py").is_file():
        # Without the module, carry-forward would quietly grade the reference.
        return Grade(folder.name, "missing", problem=f"no {chapter.module}.py in the folder")
    run = run_tests([chapter], str(folder), timeout=timeout)
    return grade_of(folder.name, run, timeout)


def grade_of(name: str, run: PytestRun, timeout: float) -> Grade:
    scenarios = {s.scenario: s.status for s in run.scenarios}
    passed = sum(status == "passed" for status in scenarios.values())
    if run.timed_out:
        hung = [n for n, status in scenarios.items() if status == "timeout"]
        where = f" in {hung[0]}" if hung else ""
        return Grade(name, "timeout", passed, len(scenarios), f"killed after {timeout:g} s{where}", scenarios)
    if run.passed:
        return Grade(name, "pass", passed, len(scenarios), "", scenarios)
    errors = Counter(s.problem for s in run.scenarios if s.status == "error")
    if not run.scenarios or (passed == 0 and sum(errors.values()) == len(run.scenarios)):
        problem = errors.most_common(1)[0][0] if errors else run.tail(1)
        return Grade(name, "broken", passed, len(scenarios), problem or run.describe_exit(), scenarios)
    return Grade(name, "fail", passed, len(scenarios), "", scenarios)


def grade(args: argparse.Namespace) -> int:
    """Grade every submission folder in parallel and write the table."""
    from tqdm import tqdm  # part of the test extra, like pytest itself

    chapter = find_chapter(args.chapter)
    root = Path(args.submissions)
    if not root.is_dir():
        print(f"course grade: {root} is not a directory of submissions")
        return 2
    folders = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "__")))
    if not folders:
        print(f"course grade: {root} holds no submission folders")
        return 1
    grades: list[Grade] = []
    with ThreadPoolExecutor(max_workers=args.jobs or os.cpu_count() or 1) as pool:
        pending = [pool.submit(grade_one, chapter, folder, args.timeout) for folder in folders]
        try:
            for done in tqdm(as_completed(pending), total=len(pending), desc=f"grading chapter {chapter.number}",
                             unit="submission"):
                grades.append(done.result())
        except KeyboardInterrupt:
            pool.shutdown(cancel_futures=True)  # the submissions already running end at their time limit
            raise
    grades.sort(key=lambda g: g.submission)
    names = list(dict.fromkeys(name for g in grades for name in g.scenarios))
    for g in grades:
        if g.status == "timeout":  # the scenarios after the one that hung never ran
            g.scenarios = {name: g.scenarios.get(name, "not run") for name in names}
            g.total = len(names)
    outputs = [out for out in (args.out, args.json) if out]
    for out in outputs:
        write_table(grades, names, out, as_json=out == args.json or out.endswith(".json"))
    for g in grades:
        print(f"{g.submission:<24} {g.status:<8} {g.passed:>3}/{g.total:<3} {g.problem}")
    if outputs:
        print(f"\nwrote {', '.join(outputs)}")
    return 0


def write_table(grades: list[Grade], names: list[str], out: str, *, as_json: bool) -> None:
    path = Path(out)
    if as_json:
        rows = [{"submission": g.submission, "status": g.status, "passed": g.passed, "total": g.total,
                 "problem": g.problem, "scenarios": g.scenarios} for g in grades]
        path.write_text(json.dumps(rows, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        return
    with path.open("w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(["submission", "status", "passed", "total", "problem", *names])
        for g in grades:
            writer.writerow([g.submission, g.status, g.passed, g.total, g.problem,
                             *(g.scenarios.get(name, "") for name in names)])


def register(commands) -> None:
    parser = commands.add_parser("grade", help="instructors: grade a folder of submissions into one table")
    parser.add_argument("chapter", metavar="NN", help="the chapter number, e.g. 07")
    parser.add_argument("submissions", metavar="SUBMISSIONS_DIR", help="one folder per submission")
    parser.add_argument("--out", metavar="FILE", help="write the table to FILE (CSV; JSON if FILE ends in .json)")
    parser.add_argument("--json", metavar="FILE", help="write the table as JSON to FILE")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per submission (default 60)")
    parser.add_argument("--jobs", type=int, default=None, help="submissions at a time (default: the cores)")
    parser.set_defaults(handler=grade)
