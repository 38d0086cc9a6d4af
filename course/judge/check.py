"""`course check`, `course status`: a student's view of their chapter modules (`course watch` is watch.py)."""

from __future__ import annotations

import argparse
import json
import unicodedata
from pathlib import Path

from course.judge import mutants
from course.manifest import CHAPTERS, Chapter, find_chapter
from course.judge.testrun import PytestRun, Scenario, default_implementation, rerun_command, run_tests, shown


def diagnosis(chapter: Chapter, failed: set[str]) -> list[tuple[str, str]]:
    """Known-wrong variants the failures match, as (variant, hint): the mutation gate's signatures."""
    return mutants.diagnose(chapter.number, failed)


STATUS_LABEL = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "skipped": "SKIP"}


def describe_implementation(implementation: str | None) -> str:
    return shown(implementation) if implementation else "the reference checkpoints"


def scenario_json(scenario: Scenario, implementation: str | None, chain: bool) -> dict:
    return {
        "scenario": scenario.scenario,
        "section": scenario.section,
        "status": scenario.status,
        "firstDivergence": scenario.divergence,
        "problem": scenario.problem,
        "where": scenario.where,
        "hint": scenario.hint,
        "rerun": None if scenario.passed else rerun_command(scenario, implementation, chain),
    }


def print_failure(scenario: Scenario, implementation: str | None, chain: bool) -> None:
    if scenario.divergence:
        d = scenario.divergence
        print(f"        first divergence in {d['section']}, line {d['index']}:")
        print(f"          expected: {'(nothing)' if d['expected'] is None else d['expected']}")
        print(f"          got:      {'(nothing)' if d['got'] is None else d['got']}")
    if scenario.problem:
        print(f"        problem:  {scenario.problem}")
    if scenario.where:
        print(f"        at:       {shown(scenario.where.rsplit(':', 1)[0])}:{scenario.where.rsplit(':', 1)[1]}")
    if scenario.hint:
        print(f"        hint:     {scenario.hint}")
    print(f"        rerun:    {rerun_command(scenario, implementation, chain)}")


def report_check(chapter: Chapter, run: PytestRun, implementation: str | None, chain: bool) -> list[tuple[str, str]]:
    """Print the check of one chapter; return the diagnosis of its failures."""
    print(f"Chapter {chapter.number} — {chapter.title}")
    print(f"implementation: {describe_implementation(implementation)}\n")
    for scenario in run.scenarios:
        print(f"  {STATUS_LABEL.get(scenario.status, scenario.status.upper()):<5} {scenario.scenario}")
        if not scenario.passed:
            print_failure(scenario, implementation, chain)
    failed = {s.scenario for s in run.scenarios if not s.passed}
    found = diagnosis(chapter, failed) if failed else []
    if found:
        print("\nlikely causes (known wrong variants these failures match):")
        for variant, hint in found:
            print(f"  {variant}: {hint}")
    passed = sum(s.passed for s in run.scenarios)
    print(f"\n{passed} of {len(run.scenarios)} scenarios pass — chapter {chapter.number} "
          f"{'passes' if run.passed else 'fails'} ({run.describe_exit()})")
    if not run.passed and not failed:
        print("pytest said:\n" + run.tail())  # nothing failed by name: pytest's own last lines say why
    return found


def check(args: argparse.Namespace) -> int:
    """Run one chapter's scenarios against the student's modules and report each."""
    chapter = find_chapter(args.chapter)
    implementation = default_implementation(args.impl)
    # `course watch` gives a time limit, so a hung run is killed and reported, and the watching goes on.
    run = run_tests([chapter], implementation, chain=args.chain, timeout=getattr(args, "timeout", None))
    found = report_check(chapter, run, implementation, args.chain)
    if args.json:
        Path(args.json).write_text(json.dumps({
            "chapter": chapter.number,
            "implementation": describe_implementation(implementation),
            "status": "pass" if run.passed else "fail",
            "exitCode": run.exit_code,
            "scenarios": [scenario_json(s, implementation, args.chain) for s in run.scenarios],
            "diagnosis": [{"variant": v, "hint": h} for v, h in found],
        }, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return 0 if run.passed else 1


def _width(s: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in s)


def _pad(s: str, width: int) -> str:
    return s + " " * (width - _width(s))


def status(args: argparse.Namespace) -> int:
    """The progress table: every chapter, section by section, for the selected implementation."""
    implementation = default_implementation(args.impl)
    run = run_tests(CHAPTERS, implementation, chain=args.chain)
    print(f"implementation: {describe_implementation(implementation)}\n")
    rows = []
    for chapter in CHAPTERS:
        scenarios = [s for s in run.scenarios if s.file == chapter.test_file]
        written = implementation is not None and (Path(implementation) / f"{chapter.module}.py").is_file()
        code = "yours" if written else "reference"
        for section in dict.fromkeys(s.section or "(no section)" for s in scenarios):
            in_section = [s for s in scenarios if (s.section or "(no section)") == section]
            failing = [s.scenario.split("::")[-1] for s in in_section if not s.passed]
            done = sum(s.passed for s in in_section)
            marks = "".join("●" if s.passed else "○" for s in in_section)
            more = f" and {len(failing) - 3} more" if len(failing) > 3 else ""
            rows.append((chapter.number, code, section, f"{done}/{len(in_section)}", marks,
                         ", ".join(failing[:3]) + more))
    headers = ("chapter", "code", "section", "passed", "scenarios", "failing")
    widths = [max(_width(r[i]) for r in [headers, *rows]) for i in range(5)]
    for row in [headers, *rows]:
        print("  ".join(_pad(cell, widths[i]) for i, cell in enumerate(row[:5])) + "  " + row[5])
    unfinished = [c for c in CHAPTERS if not all(s.passed for s in run.scenarios if s.file == c.test_file)]
    total = sum(s.passed for s in run.scenarios)
    print(f"\n{total} of {len(run.scenarios)} scenarios pass")
    if unfinished:
        print(f"next: course check {unfinished[0].number}" + (f" --impl={args.impl}" if args.impl else ""))
    if not run.passed and not run.scenarios:
        print(run.tail())
    return 0 if run.passed else 1


def register(commands) -> None:
    def implementation_options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--impl", metavar="DIR", default=None,
                            help="your chapter modules (default: $TINY_PI_IMPL, else ./student if it exists, "
                                 "else the reference)")
        parser.add_argument("--chain", action="store_true",
                            help="earlier chapters your modules import are yours too (not the reference)")

    check_parser = commands.add_parser("check", help="run one chapter's scenarios against your modules")
    check_parser.add_argument("chapter", metavar="NN", help="the chapter number, e.g. 07")
    implementation_options(check_parser)
    check_parser.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE")
    check_parser.set_defaults(handler=check)

    status_parser = commands.add_parser("status", help="progress table: chapters × scenarios")
    implementation_options(status_parser)
    status_parser.set_defaults(handler=status)

