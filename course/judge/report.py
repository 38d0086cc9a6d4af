"""What `course check` prints, scenario by scenario as the verdicts arrive, then a summary: short and true.

- A passing scenario is one line.
- The first failing scenario of each section is shown in full, starting with what it enforces (the
  sentence of the chapter it cites, or the hardening promise by name), then the first divergence, the
  promises the run broke, what it raised, its output, a hint and how to rerun it. One whose problem a
  scenario shown before already had says so in a line, with what it enforces.
- A section's later failures are not shown one by one: the summary lists them under their section, with
  how many scenarios broke the same promise. (`course hint`, `--json` and the rerun command show each.)
- An untouched starter (NotImplementedError) is told what to do first.

The hardening track's scenarios (加固) are labelled as beyond the chapter wherever they appear, and
never decide whether the chapter passes.
"""

from __future__ import annotations

import collections
from pathlib import Path

from course.judge import contracts
from course.judge.hint_texts import KINDS, classify
from course.judge.session import ChapterRun, Verdict, by_section, rerun_command
from course.judge.terminal import PROBLEM_LENGTH, printable
from course.judge.testrun import shown
from course.judge.timeline import where as divergence_where
from course.manifest import HARDENING, Chapter

STATUS_LABEL = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "timeout": "TIMEOUT", "not run": "SKIP"}
OUTPUT_SHOWN = 20
"""Lines of a failing scenario's own output shown under it (the record keeps more)."""
PAD = " " * 8
BRIEF_CITES = 2
"""Citations shown with a failure whose problem was shown before (all of them with a failure shown in full)."""
STARTER = "NotImplementedError"


def enforces(chapter: Chapter, verdict: Verdict) -> list[str]:
    """What the scenario holds the student to, as a student reads it."""
    if verdict.cites:
        return contracts.for_chapter(chapter.module).lines(verdict.cites)
    if verdict.track == HARDENING and verdict.scenario.startswith("test_generated["):
        return [f"{contracts.BEYOND}: this plan stays inside the chapter's contract (the chapter track checks it too)"]
    return []


def label(verdict: Verdict) -> str:
    """A scenario's line: its status and name, and the hardening track's label."""
    extra = f"  [{contracts.BEYOND}]" if verdict.track == HARDENING else ""
    plans = f"  ({verdict.plans[0]}/{verdict.plans[1]} plans)" if verdict.plans and verdict.passed else ""
    return f"  {STATUS_LABEL.get(verdict.status, verdict.status.upper()):<7} {verdict.scenario}{plans}{extra}"


def problem_key(verdict: Verdict) -> tuple:
    """What makes two failures the same problem: the exception raised, or the kinds of promise broken, or
    the first divergent line."""
    if verdict.problem and not verdict.broken:
        return ("raised", verdict.problem)
    if verdict.broken:
        return ("broken", tuple(sorted({(kind.name if (kind := classify(line)) else line) for line in verdict.broken})))
    if verdict.divergence:
        d = verdict.divergence
        return ("diverged", d.get("section"), d.get("expected"), d.get("got"))
    return (verdict.status,)


def print_enforced(lines: list[str]) -> None:
    for n, line in enumerate(lines):
        print(f"{PAD}{'enforces:' if n == 0 else '':<10}{line}")


def print_failure(verdict: Verdict, implementation: str | None, chain: bool, chapter: Chapter, root: Path) -> None:
    print_enforced(enforces(chapter, verdict))
    if verdict.plan:
        first, *rest = verdict.plan.splitlines()
        print(f"{PAD}plan:     {first}")
        for line in rest:
            print(f"{PAD}          {line}")
    if verdict.divergence:
        _print_divergence(verdict.divergence)
    if verdict.broken:
        print(f"{PAD}broken promises of the chapter:")
        for n, line in enumerate(verdict.broken, 1):
            print(f"{PAD}  broken {n}: {line}")
    if verdict.problem:
        print(f"{PAD}problem:  {printable(verdict.problem, PROBLEM_LENGTH)}")
    if verdict.where:
        path, _, line = verdict.where.rpartition(":")
        print(f"{PAD}at:       {printable(shown(path))}:{printable(line)}")
    _print_output(verdict)
    if verdict.hint:
        print(f"{PAD}hint:     {verdict.hint}")
    print(f"{PAD}more:     course hint {chapter.number} '{verdict.scenario}'")
    print(f"{PAD}rerun:    {rerun_command(verdict, implementation, chain, root)}")


def _print_divergence(d: dict) -> None:
    print(f"{PAD}first divergence {divergence_where(d['section'], d['index'])}:")
    print(f"{PAD}  expected: {'(nothing)' if d['expected'] is None else d['expected']}")
    print(f"{PAD}  got:      {'(nothing)' if d['got'] is None else d['got']}")
    if all('"timestamp"' in str(d[side]) for side in ("expected", "got")):
        print(f"{PAD}note:     timestamps come from the course's clock, read once per message as it is made (the "
              f"runtime's helpers read it); a read anywhere else shifts every later stamp")


def _print_output(verdict: Verdict) -> None:
    if not verdict.output:
        return
    shown_lines = verdict.output[:OUTPUT_SHOWN]
    total = max(verdict.output_lines, len(verdict.output))
    cut = f", the first {len(shown_lines)} shown" if total > len(shown_lines) else ""
    print(f"{PAD}your output ({total} line{'s' if total != 1 else ''}{cut}):")
    for line in shown_lines:
        print(f"{PAD}  | {printable(line)}")


class Report:
    """Prints each verdict as it arrives (`show`), then the summary (`summarize`)."""

    def __init__(self, chapter: Chapter, implementation: str | None, chain: bool, root: Path) -> None:
        self.chapter, self.implementation, self.chain, self.root = chapter, implementation, chain, root
        self.first_failure: dict[str, str] = {}
        """Section -> the failing scenario shown in full for it."""
        self.shown_problems: dict[tuple, str] = {}
        """problem_key -> the scenario it was first shown with."""

    def show(self, verdict: Verdict) -> None:
        if verdict.passed:
            print(label(verdict), flush=True)
            return
        section = verdict.section or "(no section)"
        if section in self.first_failure:
            return  # counted in the summary, under its section
        if not self.first_failure:
            self._what_to_do_first(verdict)
        self.first_failure[section] = verdict.scenario
        print(label(verdict))
        same = self.shown_problems.setdefault(problem_key(verdict), verdict.scenario)
        if same == verdict.scenario:
            print_failure(verdict, self.implementation, self.chain, self.chapter, self.root)
        else:
            print(f"{PAD}the same problem as {same} (shown above)")
            print_enforced(enforces(self.chapter, verdict)[:BRIEF_CITES])
        print(end="", flush=True)

    def _what_to_do_first(self, verdict: Verdict) -> None:
        if STARTER not in str(verdict.problem or ""):
            return
        function = str(verdict.problem).split(f"{STARTER}: ", 1)[-1].split(":", 1)[0].strip() or "your code"
        print(f"first: {printable(function, 80)} still raises {STARTER}, the starter's body: write it section by "
              "section, starting with the first one below; each section's first failing scenario says what of "
              "the chapter it enforces.\n")

    def summarize(self, run: ChapterRun) -> None:
        """Each section with failures: how many pass, which fail; the promises broken in several scenarios."""
        failing = [v for v in run.verdicts if not v.passed]
        if not failing or run.import_errors:
            return
        print()
        for section, in_section in by_section(run.verdicts).items():
            names = [v.scenario for v in in_section if not v.passed]
            if not names:
                continue
            more = f" (+{len(names) - 3} more)" if len(names) > 3 else ""
            shown_one = self.first_failure.get(section)
            listed = ", ".join(n.split("::")[-1] + (" (shown)" if n == shown_one else "") for n in names[:3])
            extra = f"  [{contracts.BEYOND}]" if section == HARDENING else ""
            print(f"{section}: {sum(v.passed for v in in_section)} of {len(in_section)} pass; failing: {listed}{more}"
                  f"{extra}")
        self._repeated(failing)

    def _repeated(self, failing: list[Verdict]) -> None:
        """A problem (or a kind of broken promise) several failing scenarios share, said once with the count."""
        kinds = {kind.name: kind for kind in KINDS}
        counts = collections.Counter(problem_key(v) for v in failing)
        for key, count in counts.most_common(3):
            if count < 2:
                break
            if key[0] == "raised":
                print(f"the same problem in {count} scenarios: {printable(key[1], PROBLEM_LENGTH)}")
            elif key[0] == "broken":
                shown_with = self.shown_problems.get(key)
                if len(key[1]) == 1 and key[1][0] in kinds:
                    said = kinds[key[1][0]].asks
                elif shown_with is not None:
                    said = f"those shown under {shown_with.split('::')[-1]}"
                else:
                    said = "; ".join(key[1])
                plural = f"{len(key[1])} broken promises" if len(key[1]) > 1 else "broken promise"
                print(f"the same {plural} in {count} scenarios: {said}")
