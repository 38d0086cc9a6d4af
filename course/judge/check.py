"""`course check`, `course status`: a student's view of their chapter modules (`course watch` is watch.py).

Each chapter is judged by `course.judge.session`: the student's code runs in a child process that
only records; this process renders and compares, and prints each scenario as it is decided.
"""

from __future__ import annotations

import argparse
import json
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from course.judge import contracts, mutants, shrunk
from course.judge.report import STARTER, Report, enforces
from course.judge.session import (SCENARIO_TIMEOUT, ChapterRun, Verdict, by_section, judge_chapter, reference_oracle,
                                  rerun_command)
from course.judge.terminal import PROBLEM_LENGTH, printable
from course.judge.testrun import course_root, default_implementation, shown
from course.manifest import CHAPTERS, HARDENING, Chapter, find_chapter


def implementation_directory(given: str) -> str:
    """--impl's value: a directory of chapter modules. A file or a missing path is refused now, saying so,
    rather than judged as a directory with none of the chapter's modules (the reference standing in)."""
    path = Path(given)
    if path.is_file():
        folder = str(path.parent) or "."
        raise argparse.ArgumentTypeError(f"{given} is a file: --impl takes the directory that holds your chapter "
                                         f"modules (chNN_name.py), e.g. --impl {folder}")
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{given} is not a directory: --impl takes the directory that holds your "
                                         "chapter modules (chNN_name.py)")
    return given


def implementation_options(parser: argparse.ArgumentParser) -> None:
    """--impl and --chain, as every command that judges a student's code takes them."""
    parser.add_argument("--impl", metavar="DIR", default=None, type=implementation_directory,
                        help="your chapter modules (default: $TINY_PI_IMPL, else ./student if it exists, "
                             "else the reference)")
    parser.add_argument("--chain", action="store_true",
                        help="earlier chapters your modules import are yours too (not the reference)")


def yours(chapter: Chapter, implementation: str | None) -> bool:
    """Whether the chapter's module is the student's (else the reference stands in for it)."""
    return implementation is not None and (Path(implementation) / f"{chapter.module}.py").is_file()


def judged_code(chapter: Chapter, implementation: str | None) -> str:
    """Which code a chapter's verdict is about, in words."""
    if implementation is None:
        return "the reference (no student code)"
    if yours(chapter, implementation):
        return f"yours, {shown(Path(implementation) / f'{chapter.module}.py')}"
    return f"the reference: {shown(implementation)} has no {chapter.module}.py (run `course start {chapter.number}`)"


def diagnosis(chapter: Chapter, run: ChapterRun, implementation: str | None, chain: bool) -> mutants.Diagnosis:
    """Known mistakes the evidence identifies: only when the failures and their first divergences are
    exactly a known variant's (or exactly several variants' together), and the code is the student's.
    Only the scenarios judged count: a mistake whose signature lies in a track not run is not named."""
    if not yours(chapter, implementation) or chain or run.import_errors or run.flags:
        return mutants.Diagnosis()
    return mutants.diagnosis_of(chapter.number, mutants.evidence_of(run.verdicts),
                                judged={v.scenario for v in run.verdicts})


def unusable(run: ChapterRun) -> str:
    """Why the student's module could not be judged, in a few words."""
    if all(error.get("missing") for error in run.import_errors):
        return "your module lacks what the chapter's tests use"
    return "your module does not import"


def print_import_errors(run: ChapterRun) -> None:
    print(f"{unusable(run)}, so no scenario could be judged:")
    for error in run.import_errors:
        where = shown(error["file"]) if error.get("file") else error.get("module")
        line = f", line {error['line']}" if error.get("line") else ""
        print(printable(f"  {where}{line}: {error.get('problem')}", PROBLEM_LENGTH))
        if error.get("text"):
            print(f"      {printable(error['text'].strip(), PROBLEM_LENGTH)}")


def verdict_json(verdict: Verdict, implementation: str | None, chain: bool, root: Path, chapter: Chapter) -> dict:
    return {
        "name": verdict.scenario,
        "scenario": verdict.scenario,
        "section": verdict.section,
        "track": verdict.track,
        "beyondTheChapter": verdict.track == HARDENING,
        "status": verdict.status,
        "cites": list(verdict.cites),
        "enforces": enforces(chapter, verdict),
        "firstDivergence": verdict.divergence,
        "brokenPromises": verdict.broken,
        "plan": verdict.plan,
        "plans": list(verdict.plans) if verdict.plans else None,
        "problem": verdict.problem,
        "where": verdict.where,
        "output": "\n".join(verdict.output) or None,
        "outputLines": verdict.output_lines,
        "hint": verdict.hint,
        "rerun": None if verdict.passed else rerun_command(verdict, implementation, chain, root),
    }


def summary_json(verdicts: list[Verdict]) -> dict:
    return {"passed": sum(v.passed for v in verdicts), "total": len(verdicts),
            "failed": sum(v.status == "failed" for v in verdicts),
            "errors": sum(v.status == "error" for v in verdicts),
            "timeouts": sum(v.status == "timeout" for v in verdicts)}


def results_json(chapter: Chapter, run: ChapterRun, implementation: str | None, chain: bool, root: Path,
                 found: mutants.Diagnosis | list[tuple[str, str]]) -> dict:
    """The chapter's results, one entry per scenario (after Exercism's results.json, version 3). `status` and
    `summary` are the chapter track's; the hardening track (加固, beyond the chapter), when judged, is counted
    under `hardening` and never changes them."""
    status = "pass" if run.passed else ("error" if run.import_errors else "fail")
    hardening = run.hardening_verdicts
    found = found if isinstance(found, mutants.Diagnosis) else mutants.Diagnosis(list(found))
    return {
        "version": 3,
        "status": status,
        "message": import_message(run) if run.import_errors else None,
        "chapter": chapter.number,
        "judged": judged_code(chapter, implementation),
        "implementation": shown(implementation) if implementation else None,
        "summary": summary_json(run.chapter_verdicts),
        "hardening": {**summary_json(hardening), "label": contracts.BEYOND,
                      "note": "beyond the chapter: never part of its status"} if hardening else None,
        "importErrors": run.import_errors,
        "flags": run.flags,
        "tests": [verdict_json(v, implementation, chain, root, chapter) for v in run.verdicts],
        "diagnosis": [{"variant": v, "hint": h} for v, h in found.found],
        "diagnosisNote": found.note,
    }


def import_message(run: ChapterRun, inside: str | None = None) -> str:
    """The import errors in one line; paths inside `inside` (a graded copy) relative to it."""
    def where(error: dict) -> str:
        file = error.get("file") or error.get("module") or "?"
        if inside and str(file).startswith(inside.rstrip("/") + "/"):
            file = str(file)[len(inside.rstrip("/")) + 1:]
        return str(file)[:300] + (f", line {error['line']}" if error.get("line") else "")

    # (Each part cut: the texts are the submission's own, as long as it likes, in every import error it writes.)
    return "; ".join(f"{where(e)}: {str(e.get('problem'))[:300]}" for e in run.import_errors)


def nothing_to_judge(chapter: Chapter) -> str:
    """Why a chapter has no scenario to judge: the judge knows a scenario by its stored snapshots."""
    return (f"chapter {chapter.number} has no scenario to judge: no stored snapshot in {chapter.snapshot_dir}/ and "
            f"no generated section (an instructor writes the snapshots with `course snapshots update {chapter.number}`)")


def run_check(chapter: Chapter, implementation: str | None, chain: bool, *, quiet: bool = False,
              timeout: float | None = None, hardening: bool = False, seed: int | None = None,
              oracle: tuple[dict, dict] = (None, None), shrink: bool = False) -> tuple[ChapterRun, mutants.Diagnosis]:
    """Judge one chapter and print it (unless `quiet`); return the run and its diagnosis. `oracle`: the
    generated plans and the reference's renderings of them (session.reference_oracle), if computed already.
    `shrink`: after a generated section failed, show the smallest plan that still diverges (`shrunk`)."""
    root = course_root()
    if not quiet:
        print(f"Chapter {chapter.number} — {chapter.title}")
        print(f"judging: {judged_code(chapter, implementation)}")
        print(f"tracks:  the chapter's{f', and {contracts.BEYOND}: never part of the verdict' if hardening else ''}"
              + ("" if hardening else f" ({contracts.BEYOND} runs with --hardening)")
              + (f"; the generated plans of seed {seed}" if seed is not None else "") + "\n", flush=True)
    report = Report(chapter, implementation, chain, root)
    reported_imports = False
    run_state = ChapterRun(chapter, [])  # filled in as the records arrive

    def show(verdict: Verdict) -> None:
        nonlocal reported_imports
        if quiet:
            return
        if run_state.import_errors:
            if not reported_imports:
                reported_imports = True
                print_import_errors(run_state)
            return
        report.show(verdict)

    run = judge_chapter(chapter, str(Path(implementation).resolve()) if implementation else None, root=root,
                        chain=chain, on_verdict=show, progress=run_state, timeout=timeout or SCENARIO_TIMEOUT,
                        hardening=hardening, seed=seed, plans=oracle[0], wanted=oracle[1])
    if not quiet and run.import_errors and not reported_imports:
        print_import_errors(run)
    if not quiet and not run.verdicts and not run.import_errors:
        print(nothing_to_judge(chapter))
    elif not quiet and not run.import_errors and all(v.status in ("error", "not run") and v.problem
                                                     and v.problem.startswith("no record") for v in run.verdicts):
        print("the test process stopped before any scenario ran; its last words:")
        print("\n".join("  " + printable(line) for line in run.output_tail.rstrip().splitlines()[-15:]))
    found = diagnosis(chapter, run, implementation, chain)
    if shrink and not quiet and not run.import_errors and yours(chapter, implementation):
        show_smallest_plans(chapter, run, implementation, chain, seed)
    if not quiet:
        report.summarize(run)
        summarize(chapter, run, implementation, found)
    return run, found


def show_smallest_plans(chapter: Chapter, run: ChapterRun, implementation: str, chain: bool, seed: int | None) -> None:
    """Each failing generated section's smallest plan that still diverges, from Hypothesis's shrinking in a
    plain pytest child (`course.judge.shrunk`): a minimal counterexample beside the first failing plan."""
    failing = {shrunk.section_of(v.scenario): v for v in run.verdicts if v.status == "failed"}
    failing.pop(None, None)
    if not failing or any(STARTER in str(v.problem or "") for v in run.verdicts):
        return  # (an untouched starter fails every plan alike: writing the functions comes first)
    print(f"\nshrinking the first failing plan of {len(failing)} generated scenario(s) with Hypothesis "
          f"(up to {shrunk.SHRINK_SECONDS:g} s each)...", flush=True)
    found = shrunk.smallest_plans(chapter.test_file, str(Path(implementation).resolve()), chain, seed,
                                  list(failing), hardening=any(v.track == HARDENING for v in failing.values()))
    for section, verdict in failing.items():
        if section in found:
            shrunk.print_smallest(verdict.scenario, found[section])
        else:
            print(f"{verdict.scenario}: no smaller plan found in time (the plan shown above is the first that failed)")


def summarize(chapter: Chapter, run: ChapterRun, implementation: str | None,
              found: mutants.Diagnosis | list[tuple[str, str]]) -> None:
    found = found if isinstance(found, mutants.Diagnosis) else mutants.Diagnosis(list(found))
    failing = [v for v in run.verdicts if not v.passed]
    if run.flags:
        print("\nflagged: " + "; ".join(printable(flag, PROBLEM_LENGTH) for flag in run.flags))
    if run.judge_errors:
        print("\n" + printable("; ".join(run.judge_errors)))
    if failing and not run.import_errors:
        print_diagnosis(found)
    chapter_track = run.chapter_verdicts
    passed = sum(v.passed for v in chapter_track)
    counts = f"\n{passed} of {len(chapter_track)} scenarios pass"
    if not yours(chapter, implementation):
        print(f"{counts} on the reference — none of it is your code; write yours with `course start {chapter.number}`, "
              f"then `course check {chapter.number}`")
    elif run.import_errors:
        print(f"{counts} — chapter {chapter.number} fails: {unusable(run)}")
    else:
        print(f"{counts} — chapter {chapter.number} {'passes' if run.passed else 'fails'}")
    hardening = run.hardening_verdicts
    if hardening:
        print(f"{contracts.BEYOND}: {sum(v.passed for v in hardening)} of {len(hardening)} pass "
              "(not part of the chapter's verdict)")


def print_diagnosis(found: mutants.Diagnosis) -> None:
    if not found.found:
        print("\nno known mistake matches these failures exactly; what broke is shown under each scenario.")
        return
    print("\n" + found.heading())
    for variant, hint in found.found:
        print(f"  {variant}: {hint}")
    if found.note:
        print(found.note)


def check(args: argparse.Namespace) -> int:
    """Run one chapter's scenarios against the student's modules and report each."""
    chapter = find_chapter(args.chapter)
    implementation = default_implementation(args.impl)
    run, found = run_check(chapter, implementation, args.chain, timeout=getattr(args, "timeout", None),
                           hardening=getattr(args, "hardening", False), seed=getattr(args, "seed", None),
                           shrink=True)
    if args.json:
        report = results_json(chapter, run, implementation, args.chain, course_root(), found)
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)  # as `course grade --results` makes its folder
        Path(args.json).write_text(json.dumps(report, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return 0 if run.passed else 1


def _width(s: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in s)


def _pad(s: str, width: int) -> str:
    return s + " " * (width - _width(s))


def status(args: argparse.Namespace) -> int:
    """The progress table: every chapter, section by section, for the selected implementation."""
    implementation = default_implementation(args.impl)
    print(f"implementation: {shown(implementation) if implementation else 'the reference (no student code)'}\n",
          flush=True)
    oracles = {c.number: reference_oracle(c, course_root(), hardening=getattr(args, "hardening", False))
               for c in CHAPTERS}  # (before the threads: see there)
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(lambda c: run_check(c, implementation, args.chain, quiet=True,
                                                 hardening=getattr(args, "hardening", False),
                                                 oracle=oracles[c.number])[0], CHAPTERS))
    rows = []
    for chapter, run in zip(CHAPTERS, runs):
        code = "yours" if yours(chapter, implementation) else "reference"
        for section, in_section in by_section(run.verdicts).items():
            failing = [v.scenario.split("::")[-1] for v in in_section if not v.passed]
            done = sum(v.passed for v in in_section)
            marks = "".join("●" if v.passed else "○" for v in in_section)
            more = f" and {len(failing) - 3} more" if len(failing) > 3 else ""
            shown_section = contracts.BEYOND if section == HARDENING else section
            rows.append((chapter.number, code, shown_section, f"{done}/{len(in_section)}", marks,
                         ", ".join(failing[:3]) + more))
        if run.import_errors:
            rows.append((chapter.number, code, "(import)", "0/0", "", printable(import_message(run), PROBLEM_LENGTH)))
    headers = ("chapter", "code", "section", "passed", "scenarios", "failing")
    widths = [max(_width(r[i]) for r in [headers, *rows]) for i in range(5)]
    for row in [headers, *rows]:
        print("  ".join(_pad(cell, widths[i]) for i, cell in enumerate(row[:5])) + "  " + row[5])
    total = sum(sum(v.passed for v in run.chapter_verdicts) for run in runs)
    count = sum(len(run.chapter_verdicts) for run in runs)
    print(f"\n{total} of {count} scenarios pass")
    if any(run.hardening_verdicts for run in runs):
        print(f"{contracts.BEYOND}: {sum(sum(v.passed for v in run.hardening_verdicts) for run in runs)} of "
              f"{sum(len(run.hardening_verdicts) for run in runs)} pass (not part of any chapter's verdict)")
    elif not getattr(args, "hardening", False):
        print(f"({contracts.BEYOND} not judged: course status --hardening)")
    unfinished = [c for c, run in zip(CHAPTERS, runs) if not run.passed]
    if implementation is None:
        print(f"none of it is your code: start with `course start {CHAPTERS[0].number}`")
    elif unfinished:
        print(f"next: course check {unfinished[0].number}" + (f" --impl={args.impl}" if args.impl else ""))
    return 0 if not unfinished else 1


def hardening_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--hardening", action="store_true",
                        help=f"also judge the hardening track ({contracts.BEYOND}: what the project adds beyond the "
                             "chapter text; never part of whether the chapter passes)")


def register(commands) -> None:
    check_parser = commands.add_parser("check", help="run one chapter's scenarios against your modules")
    check_parser.add_argument("chapter", metavar="NN", help="the chapter number, e.g. 07")
    implementation_options(check_parser)
    check_parser.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE")
    check_parser.add_argument("--timeout", type=float, default=None, metavar="S",
                              help="seconds of its own time one scenario may take before it is stopped: CPU time, and "
                                   "time blocked, not time waiting for a busy CPU (default 10)")
    hardening_option(check_parser)
    check_parser.add_argument("--seed", type=int, default=None, metavar="N",
                              help="judge the generated plans drawn from seed N instead of the published ones")
    check_parser.set_defaults(handler=check)

    status_parser = commands.add_parser("status", help="progress table: chapters × scenarios")
    implementation_options(status_parser)
    hardening_option(status_parser)
    status_parser.set_defaults(handler=status)
