"""`course hint NN [SCENARIO]`: help for a failing scenario, one step at a time (like rustlings' hint).

  step 1  what the scenario's section promises, and what this scenario checks;
  step 2  where the chapter text says so: the sentences the scenario cites (heading, line, quote), then the
          section's title and the lines it rests on; a hardening scenario (加固) says it is beyond the
          chapter and names the project's promise instead;
  step 3  the specific broken promise: each line the invariant checker reported, with what that
          kind of promise asks and the lines of the chapter about it; without a broken promise,
          the first divergence from the snapshot (or the exception your code raised).

Hints are written per section and per kind of broken promise, never per test name: a new scenario
in a section, or a new wrong implementation, gets the same help. The invariant checker's report
lines (course/judge/invariants.py) are sorted into kinds by their wording (`KINDS`); a line no
kind matches still shows, word for word, with no guess about what it means.

The hints are data, each chapter's own: `chapters/<module>/judge/hints.toml` holds its sections (what each
promises, the passages of its text, what to look for, or where else it is described), the title of the text
its line numbers refer to (`text_title`, the text's first line) and the kinds of broken promise citing it.
The quotes come from the chapter's contract, stored, so they print where the text is not at hand. A chapter
without hints points at its section.

The API the other commands use: `hint_steps(chapter, section, broken_promises, divergence,
purpose=..., problem=...)` (the steps as text), `broken_promises_in(renders)` (the report lines
in a rendered run), `classify(line)` (the kind of one report line), `hint_command(chapter,
scenario)` (the command a report can offer).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
from pathlib import Path

from course.judge import check, contracts, report
from course.judge.timeline import where
from course.judge.terminal import paint, printable
# (CHAPTER_TEXT, KINDS, Kind and Passage are the hints' data, given here too for those who read them as hints.*)
from course.judge.hint_texts import (BEYOND_THE_CHAPTER, CHAPTER_TEXT, KINDS, SECTIONS, Kind, Passage, Section,
                                     cite, classify)
from course.manifest import HARDENING, find_chapter
from course.judge.session import Verdict as Scenario
from course.judge.testrun import course_root, default_implementation, shown

STEPS = 3


_BROKEN = re.compile(r"^\s+broken (\d+)\s+(.*)$")


def broken_promises_in(renders: list[str]) -> list[str]:
    """The broken promises a rendered run lists in its observations (`  broken 1  ...`), in order,
    from the first render that has any."""
    for text in renders:
        found, in_observations = [], False
        for line in str(text).splitlines():
            if line.startswith("## "):
                in_observations = line == "## observations"
            elif in_observations and (match := _BROKEN.match(line)):
                found.append(match.group(2))
        if found:
            return found
    return []


# Step 3 without a broken promise: what a divergence in each part of the chapter's notation means.
DIVERGENCE_MEANS = {
    "observations": "the counts or the end differ (model requests, tool executions, steps, reason): compare "
                    "how many requests your loop made and how it finished",
    "timeline": "your code emitted a different event here (or in another order); the lines before it agree",
    "transcript": "a different message was appended here (another role, text, call or result)",
    "requests": "the model was asked with a different request here (system prompt, tools or messages)",
    "messages": "the messages agree row by row but differ in a field (a text, details, isError, a timestamp: "
                "read the clock once per message, when the message is created)",
}


def _divergence_lines(divergence: dict) -> list[str]:
    section, index = divergence.get("section"), divergence.get("index")
    expected = divergence.get("expected")
    got = divergence.get("got")
    lines = [f"first divergence {where(section, index)}:",
             f"  expected: {'(nothing)' if expected is None else expected}",
             f"  got:      {'(nothing)' if got is None else got}"]
    means = DIVERGENCE_MEANS.get(str(section))
    if means:
        lines.append(f"this means: {means}.")
    if isinstance(expected, str) and isinstance(got, str):
        if expected.startswith("tool_skipped(") and got.startswith("tool_start("):
            lines.append("a tool started where the chapter skips the call: look at how your loop decides "
                         "whether a message's calls run (its stopReason).")
        elif expected.startswith("tool_start(") and got.startswith("tool_end("):
            lines.append("a tool ended before every call of its batch had started: start them all, then wait.")
    return lines


def hint_steps(
    chapter: str,
    section: str | None,
    broken_promises: list[str],
    divergence: dict | None,
    *,
    purpose: str | None = None,
    problem: str | None = None,
    where: str | None = None,
    enforces: list[str] = (),
) -> list[str]:
    """The three hints for a failing scenario of `chapter` in `section`, each a block of text:
    what the section promises, where the chapter says so (first the sentences the scenario enforces,
    `enforces`), and what exactly broke."""
    about = BEYOND_THE_CHAPTER if section == HARDENING else SECTIONS.get(chapter, {}).get(section or "")
    return [_promise_step(chapter, section, about, purpose), _where_step(chapter, section, about, enforces),
            _what_broke_step(broken_promises, divergence, problem, where)]


def _promise_step(chapter: str, section: str | None, about: Section | None, purpose: str | None) -> str:
    """Step 1: what the section promises."""
    if section == HARDENING:
        step = about.promise
    elif about is not None:
        step = f"Section {section} promises: {about.promise}"
    else:
        step = f"This scenario belongs to section {section or '(none)'} of chapter {chapter}."
    return step + (f"\nThis scenario: {purpose}" if purpose else "")


def _where_step(chapter: str, section: str | None, about: Section | None, enforces: list[str]) -> str:
    """Step 2: where the chapter says so."""
    quoted = "".join(f"\n  {line}" for line in enforces)
    if section == HARDENING:
        step = f"Beyond the chapter: the project's promise, not the chapter text's:{quoted}\nRead {about.elsewhere}."
    elif about is not None and about.passages:
        step = (f"This scenario enforces:{quoted}\n" if enforces else "") + "Read " + cite(about.passages) + "."
    elif about is not None and about.elsewhere:
        step = f"The chapter {chapter} text is not in this repository; read {about.elsewhere}."
    else:
        step = f"Read the section of chapter {chapter} that the scenario's section names ({section or '?'})."
    if about is not None and about.look_for:
        step += f"\nLook for: {about.look_for}."
    return step


def _what_broke_step(broken_promises: list[str], divergence: dict | None, problem: str | None,
                     where: str | None) -> str:
    """Step 3: what exactly broke (the broken promises, the first divergence, what the code raised)."""
    lines = _broken_promise_lines(broken_promises)
    # The observations' `invariants` line only counts the broken promises listed above: no news.
    counts_them = divergence and broken_promises and str(divergence.get("got") or "").startswith("invariants")
    if divergence and not counts_them:
        if broken_promises:
            lines.append("")
        lines += _divergence_lines(divergence)
    if problem:
        lines.append(f"Your code raised: {problem}" + (f" (at {where})" if where else ""))
        if "NotImplementedError" in problem:
            lines.append("That is the starter's body: this function is not written yet.")
    if not lines:
        lines.append("No broken promise or divergence was recorded for this scenario; rerun it with pytest "
                     "to see its full output.")
    return "\n".join(lines)


def _broken_promise_lines(broken_promises: list[str]) -> list[str]:
    """Each broken promise, numbered, with what its kind asks the student (once per kind) and where to read."""
    if not broken_promises:
        return []
    lines = [f"Your run broke {len(broken_promises)} promise{'s' if len(broken_promises) != 1 else ''} "
             f"(numbered as the snapshot's observations number them):"]
    explained: set[str] = set()
    for n, line in enumerate(broken_promises, 1):
        lines.append(f"  broken {n}: {line}")
        kind = classify(line)
        if kind is None:
            lines.append("    (no hint is written for this kind of report: the line above is what broke)")
        elif kind.name not in explained:
            explained.add(kind.name)
            lines.append(f"    {kind.asks}")
            if kind.passages:
                lines.append("    see " + cite(kind.passages))
    return lines


def hint_command(chapter: str, scenario: str) -> str:
    """The command that shows the next hint for `scenario` (what a report can offer)."""
    return shlex.join(["course", "hint", chapter, scenario])


# --- the command ------------------------------------------------------------------------------

STATE_ENV = "TINY_PI_HINT_STATE"


def state_file() -> Path:
    """Where the hints already shown are remembered (so `course hint` again shows the next one)."""
    if os.environ.get(STATE_ENV):
        return Path(os.environ[STATE_ENV])
    return course_root() / ".course" / "hints.json"


def _load_state(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _save_state(path: Path, state: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(state, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    except OSError:  # a read-only clone still gets its hints, only not remembered
        pass


def find_scenario(scenarios: list[Scenario], wanted: str) -> list[Scenario]:
    """The scenarios `wanted` names: the node id (with or without the file), or the end of it
    (`test_terminal_row[length]`), or a part of it (`length`) when that is unique."""
    for match in (lambda s: wanted in (s.scenario, f"{s.file}::{s.scenario}"),
                  lambda s: s.scenario.endswith("::" + wanted) or s.scenario.split("::")[-1] == wanted,
                  lambda s: wanted in s.scenario):
        found = [s for s in scenarios if match(s)]
        if found:
            return found
    return []


def broken_promises_of(scenario: Scenario) -> list[str]:
    given = getattr(scenario, "broken", None)  # a report that records them directly
    if isinstance(given, list):
        return [str(line) for line in given]
    return broken_promises_in(scenario.renders)


def hint(args: argparse.Namespace) -> int:
    chapter = find_chapter(args.chapter)
    implementation = default_implementation(args.impl)
    run, _ = check.run_check(chapter, implementation, args.chain, quiet=True, timeout=args.timeout,
                             hardening=args.hardening)
    judged = shown(implementation) if implementation else "the reference checkpoints"
    failing = [s for s in run.verdicts if not s.passed]
    if args.scenario:
        named = find_scenario(run.verdicts, args.scenario)
        if not named:
            beyond = "" if args.hardening else f" of the chapter track (with --hardening, {contracts.BEYOND} too)"
            print(f"course hint: chapter {chapter.number} has no scenario {args.scenario!r}{beyond}", file=sys.stderr)
            return 2
        if len(named) > 1:
            print(f"course hint: {args.scenario!r} names {len(named)} scenarios; say which:", file=sys.stderr)
            for s in named:
                print(f"  {s.scenario}", file=sys.stderr)
            return 2
        scenario = named[0]
        if scenario.passed:
            print(f"{scenario.scenario} passes with {judged}: nothing to hint.")
            return 0
    elif failing:
        scenario = failing[0]
    elif run.passed:
        print(f"Every scenario of chapter {chapter.number} passes with {judged}: nothing to hint.")
        return 0
    elif not run.verdicts and not run.import_errors:
        print(check.nothing_to_judge(chapter))
        return 1
    else:
        print(f"Chapter {chapter.number} could not be judged; the test process said:")
        print("\n".join(printable(line) for line in run.output_tail.splitlines()))
        return 1

    steps = hint_steps(chapter.number, scenario.section, broken_promises_of(scenario), scenario.divergence,
                       purpose=scenario.purpose, problem=scenario.problem, where=scenario.where,
                       enforces=report.enforces(chapter, scenario))
    path = state_file()
    state = _load_state(path)
    key = f"{chapter.number} {judged} {scenario.file}::{scenario.scenario}"
    seen = state.get(key) if isinstance(state.get(key), int) else 0
    upto = max(1, min(args.step, STEPS)) if args.step is not None else min(seen + 1, STEPS)
    state[key] = max(upto, seen)
    _save_state(path, state)

    beyond = f"  [{contracts.BEYOND}]" if scenario.track == HARDENING else ""
    print(f"Chapter {chapter.number} — {chapter.title}: hints for {scenario.scenario}{beyond}")
    print(f"implementation: {judged}\n")
    titles = ["What the section promises", "Where the chapter says so", "What broke"]
    for n in range(upto):
        print(paint(f"hint {n + 1} of {STEPS} — {titles[n]}", "hint"))
        for line in steps[n].splitlines():  # (its problem and divergence are the submission's text)
            print(f"  {printable(line)}" if line else "")
        print()
    if upto < STEPS:
        print(paint(f"more: {hint_command(chapter.number, scenario.scenario)}  (or --step {upto + 1})", "dim"))
    else:
        print(paint(f"that is every hint; rerun it: course check {chapter.number}", "dim"))
    return 0


def register(commands) -> None:
    parser = commands.add_parser("hint", help="hints, one step at a time, for a failing scenario")
    parser.add_argument("chapter", metavar="NN", help="the chapter number, e.g. 07")
    parser.add_argument("scenario", nargs="?", default=None,
                        help="the scenario (e.g. 'test_terminal_row[length]'); default: the first failing one")
    parser.add_argument("--step", type=int, default=None, metavar="N",
                        help=f"show hints 1 to N (1-{STEPS}); without it, each call shows one more")
    check.implementation_options(parser)
    parser.add_argument("--timeout", type=float, default=None, metavar="S",
                        help="seconds one scenario may take before it is stopped (default 10)")
    check.hardening_option(parser)
    parser.set_defaults(handler=hint)
