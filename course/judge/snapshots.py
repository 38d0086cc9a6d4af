"""`course snapshots update` and `course snapshots verify`: the instructor's side of the snapshots.

Snapshots belong to the reference: `update` regenerates them from the reference checkpoints only
and says, per chapter, which files it added, changed or removed. `verify` runs every chapter's
tests on the reference (or on `--impl DIR`, never on a student/ it finds) several times, each under
another task start order (`--schedule-seed`), and fails if any run fails or any rendered run differs
from the first.
"""

from __future__ import annotations

import argparse
import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from course.manifest import CHAPTERS, Chapter, find_chapter
from course.judge.session import judge_chapter, reference_oracle
from course.judge.testrun import course_root, run_pytest
from course.judge.timeline import first_divergence, where


def _chapters(number: str | None) -> list[Chapter]:
    return [find_chapter(number)] if number else list(CHAPTERS)


def _digests(directory: Path) -> dict[str, str]:
    if not directory.is_dir():
        return {}
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir()) if p.is_file()}


def update(args: argparse.Namespace) -> int:
    """Regenerate the chapters' snapshots from the reference and report what changed."""
    if args.impl:
        print("course snapshots update: refused with --impl — snapshots belong to the reference checkpoints, "
              "so a student implementation can never rewrite what judges it")
        return 2
    chapters = _chapters(args.chapter)
    root = course_root()
    before = {c.number: _digests(root / c.snapshot_dir) for c in chapters}
    run = run_pytest(chapters, extra=["--snapshot-update"])
    for chapter in chapters:
        old, new = before[chapter.number], _digests(root / chapter.snapshot_dir)
        changes = {
            "added": sorted(set(new) - set(old)),
            "changed": sorted(name for name in set(old) & set(new) if old[name] != new[name]),
            "removed": sorted(set(old) - set(new)),
        }
        counts = ", ".join(f"{len(names)} {what}" for what, names in changes.items())
        print(f"chapter {chapter.number} ({chapter.snapshot_dir}/): {counts}, {len(new)} snapshots in all")
        for what, names in changes.items():
            for name in names:
                print(f"  {what:<8} {name}")
    if not run.passed:
        print(f"\nthe reference's tests did not pass ({run.describe_exit()}):\n{run.tail()}")
    return 0 if run.passed else 1


def verify(args: argparse.Namespace) -> int:
    """Judge the chapters `--runs` times under different task start orders; every run must pass and
    render every scenario exactly as the first run did."""
    if args.runs < 2:
        print("course snapshots verify: --runs must be at least 2 (runs are compared with the first)")
        return 2
    chapters = _chapters(args.chapter)
    # The reference's snapshots are what is verified: a student/ beside them (or $TINY_PI_IMPL) is not
    # taken for it; only --impl judges other code.
    location = str(Path(args.impl).resolve()) if args.impl else None
    root = course_root()

    # The reference is held to both tracks; other modules to the chapter's, unless --hardening asks for 加固.
    hardening = location is None or args.hardening
    oracles = {c.number: reference_oracle(c, root, hardening=hardening) for c in chapters}  # (before the threads)

    def judged(seed: int) -> list:
        return [(chapter, judge_chapter(chapter, location, root=root, extra=[f"--schedule-seed={seed}"],
                                        plans=oracles[chapter.number][0], wanted=oracles[chapter.number][1],
                                        hardening=hardening))
                for chapter in chapters]

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        runs = list(pool.map(judged, range(args.runs)))
    first = {(c.number, v.scenario): v for c, run in runs[0] for v in run.verdicts}
    differences = failed_runs = 0
    for seed, chapter_runs in enumerate(runs):
        order = "asyncio's own start order" if seed == 0 else f"start order seed {seed}"
        failing = [(c, v) for c, run in chapter_runs for v in run.verdicts if not v.passed]
        if failing:
            failed_runs += 1
            print(f"run {seed + 1} ({order}): {len(failing)} scenario(s) failed")
        for chapter, verdict in failing:
            print(f"  failed: {chapter.test_file}::{verdict.scenario}")
        for chapter, run in chapter_runs:
            for verdict in run.verdicts:
                baseline = first.get((chapter.number, verdict.scenario))
                if seed == 0 or baseline is None or baseline.renders == verdict.renders:
                    continue
                differences += 1
                print(f"run {seed + 1} ({order}) renders {chapter.test_file}::{verdict.scenario} differently from run 1:")
                for was, now in zip(baseline.renders, verdict.renders):
                    divergence = first_divergence(was, now)
                    if divergence is not None:
                        print(f"  first divergence {where(divergence.section, divergence.index)}:")
                        print(f"    run 1:    {divergence.expected or '(nothing)'}")
                        print(f"    run {seed + 1}:    {divergence.actual or '(nothing)'}")
                        break
    total = len(first)
    if differences or failed_runs:
        print(f"\nnot deterministic: {differences} rendered runs differ, {failed_runs} of {len(runs)} runs failed")
        return 1
    print(f"deterministic: {total} scenarios rendered identically in {len(runs)} runs under different task start orders")
    return 0


def register(commands) -> None:
    parser = commands.add_parser("snapshots", help="instructors: regenerate or verify the reference snapshots")
    actions = parser.add_subparsers(title="actions", metavar="ACTION", required=True)
    update_parser = actions.add_parser("update", help="regenerate snapshots from the reference; report changes")
    update_parser.add_argument("chapter", metavar="NN", nargs="?", help="one chapter (default: all)")
    update_parser.add_argument("--impl", help="refused: snapshots come from the reference only")
    update_parser.set_defaults(handler=update)
    verify_parser = actions.add_parser("verify", help="fail if any scenario renders differently between runs")
    verify_parser.add_argument("chapter", metavar="NN", nargs="?", help="one chapter (default: all)")
    verify_parser.add_argument("--runs", type=int, default=3, help="runs, each with another start order (default 3)")
    verify_parser.add_argument("--impl", metavar="DIR", help="verify these modules instead of the reference "
                               "(without it, the reference: never student/ or $TINY_PI_IMPL)")
    verify_parser.add_argument("--hardening", action="store_true",
                               help="other modules on the hardening track (加固, beyond the chapter) too "
                                    "(the reference always is)")
    verify_parser.set_defaults(handler=verify)
