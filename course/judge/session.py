"""Judging one chapter: a child process records, this process decides.

The child is pytest in record mode (`course.recorder.pytest_plugin`) on the student's modules: it
runs every scenario and writes what happened as JSON lines. This process never imports student
code. It knows which scenarios to expect (`course.judge.index`), draws the generated plans and runs
the reference on them (`course.judge.differential`), renders every record and compares it with the
stored snapshot or with the reference's run, and decides each verdict as the lines arrive, so a
slow scenario shows where it is. A scenario without a record is an error, whatever the child's
exit code; a scenario that does not finish within its time limit is a timeout, and the child is
started again without it, so the others still run. Nothing the child started outlives the run.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shlex
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import jsonschema

from course.judge import cgroups, differential, processes
from course.recorder import limits
from course.judge.index import Expected, expected_scenarios
from course.judge.render import render_record
from course.judge.testrun import child_environment, shown
from course.judge.timeline import first_divergence
from course.manifest import HARDENING, Chapter

SCENARIO_TIMEOUT = 10.0
"""Seconds one scenario may take (a generated section: all its plans) before it is a timeout."""
RESTARTS = 6
"""How many times a run is started again after a scenario that hung."""
RECORD_LIMIT = 16 * 2**20
"""Bytes of records read per run at the most: a submission that writes more is cut off there. (The
reference's runs write 1.7 MiB at the most, a secret seed's plans included.)"""
LINE_LIMIT = 2**20
"""Bytes one record line may take: a longer one is not read, and its scenario is an error. (The largest
line the reference's runs write is 230 KiB; the judge's memory for a line is ~100 times its size.)"""
SCENARIO_LIMIT = 4 * 2**20
"""Bytes of record lines one scenario may take in all: more, and the scenario is an error. (The
reference's runs write 660 KiB for a scenario at the most, a secret seed's plans included.) With
LINE_LIMIT, this bounds the judge's work on a scenario to seconds, whatever the records hold."""
IMPORT_ERRORS = 10
"""Import and collection errors kept per run at the most (a submission may write a million)."""
FLAGS = 10
"""Different flags kept per run at the most (a submission may write a million)."""


@dataclass
class Verdict:
    """One scenario's outcome, as the judge decided it."""

    scenario: str
    file: str
    status: str
    """passed, failed, error, timeout or not run."""
    section: str | None = None
    purpose: str | None = None
    divergence: dict | None = None
    """The first line where the run departs from what was expected: section, index, expected, got."""
    broken: list[str] = field(default_factory=list)
    """Every promise of the chapter the run broke, in words (the invariant checker's report lines)."""
    problem: str | None = None
    where: str | None = None
    output: list[str] = field(default_factory=list)
    """What the scenario printed (stdout, stderr), cut after `OUTPUT_LINES` lines."""
    output_lines: int = 0
    plan: str | None = None
    """A generated scenario's failing plan, in words."""
    plans: tuple[int, int] | None = None
    """A generated scenario's (plans that matched, plans drawn)."""
    renders: list[str] = field(default_factory=list, repr=False)
    """What the scenario recorded, rendered: its snapshots, or its plans' runs."""
    cites: tuple[str, ...] = ()
    """What the scenario enforces (names of the chapter's citations or hardening promises): a fixed scenario's
    own, a generated one's failing plan's."""

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def track(self) -> str:
        """The chapter track, or the hardening track (加固: beyond the chapter, never the chapter's verdict)."""
        return HARDENING if self.section == HARDENING else "chapter"

    @property
    def hint(self) -> str | None:
        if self.section and self.purpose:
            return f"{self.section}: {self.purpose}"
        return self.purpose or self.section


def by_section(verdicts: list[Verdict]) -> dict[str, list[Verdict]]:
    """The verdicts grouped by section, sections in the order they first come ("(no section)" for none)."""
    grouped: dict[str, list[Verdict]] = {}
    for verdict in verdicts:
        grouped.setdefault(verdict.section or "(no section)", []).append(verdict)
    return grouped


@dataclass
class ChapterRun:
    """What judging one chapter found."""

    chapter: Chapter
    verdicts: list[Verdict]
    import_errors: list[dict] = field(default_factory=list)
    collection_errors: list[dict] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    restarts: int = 0
    output_tail: str = ""
    stopped: bool = False
    """The whole run was stopped at its wall-time bound."""
    importing: str | None = None
    """The module the child was importing when its records stopped (it ended the process)."""
    judge_errors: list[str] = field(default_factory=list)
    """Where the judge itself failed on the records (a bug of the judge's): nothing here is a verdict."""
    refused: list[str] = field(default_factory=list)
    """Scenarios whose records were too large to judge, each with what was too large (FLAGS at the most)."""

    @property
    def chapter_verdicts(self) -> list[Verdict]:
        """The chapter track's verdicts: what decides whether the chapter passes."""
        return [v for v in self.verdicts if v.track != HARDENING]

    @property
    def hardening_verdicts(self) -> list[Verdict]:
        """The hardening track's (加固, beyond the chapter), when they were asked for."""
        return [v for v in self.verdicts if v.track == HARDENING]

    @property
    def passed(self) -> bool:
        """Whether the chapter passes: the chapter track alone decides (the hardening track never does)."""
        chapter = self.chapter_verdicts
        return bool(chapter) and all(v.passed for v in chapter) and not (
            self.import_errors or self.collection_errors or self.flags or self.judge_errors)

    def flag(self, what: str) -> None:
        """Record what the submission did that a recorder never does (once each, FLAGS at the most)."""
        if what not in self.flags and len(self.flags) < FLAGS:
            self.flags.append(what)

    @property
    def timed_out(self) -> bool:
        return self.stopped or any(v.status == "timeout" for v in self.verdicts)


@dataclass(frozen=True)
class Masking:
    """A grade with a secret: the fixed scenarios run masked (course.recorder.mask) and are judged against the
    reference's runs of the same masked scenarios."""

    key: bytes
    """The chapter's mask key, HMAC of the secret (`secret.derive(secret, "mask", module)`): what the child gets."""
    wanted: dict[str, list[str]] = field(default_factory=dict)
    """The reference's renderings of each masked scenario: what the submission's must equal. A scenario not
    here is judged against its published snapshots (empty while the reference's own masked run is recorded)."""
    published: tuple[str, ...] = ()
    """Fixed scenarios that run in their published form (no masked rendering of the reference's was found)."""
    replayable: frozenset[str] = frozenset()
    """Fixed scenarios a replay of the published answers passes all the same (those in their published form, and
    those whose answer depends on nothing a mask changes): their points are vouched for by the rest (grade.py)."""

    def plans_entry(self) -> dict:
        """What the child reads of it, in its plans file: the key and the scenarios left published."""
        return {"key": self.key.hex(), "published": list(self.published)}


def judge_snapshots(expected: Expected, records: list, end: dict | None, wanted: list[str] | None = None) -> Verdict:
    """A fixed scenario: each snapshot it asserted, rendered, against the stored one (or against `wanted`,
    the reference's renderings of the masked scenario, in a grade with a secret)."""
    verdict = Verdict(expected.scenario, "", "passed", expected.section, expected.purpose, cites=expected.cites)
    if end and end.get("outcome") == "failed" and end.get("problem"):
        verdict.problem, verdict.where = end.get("problem"), end.get("where")
    if not records:
        verdict.status = "error"
        verdict.problem = verdict.problem or "the scenario ended before it reached its snapshot"
        return verdict
    verdict.renders = [render_record(record) for record in records]
    for index, stored in enumerate(expected.snapshots):
        if index >= len(records):
            verdict.status = "failed"
            verdict.problem = verdict.problem or f"the scenario stopped after snapshot {index} of {len(expected.snapshots)}"
            return verdict
        want = stored.read_text(encoding="utf-8") if wanted is None else wanted[index]
        got = verdict.renders[index]
        if got != want:
            verdict.status = "failed"
            divergence = first_divergence(want, got)
            if divergence is not None:
                verdict.divergence = divergence.as_dict()
            verdict.broken = differential.broken_lines(got)
            verdict.problem = None if divergence else (verdict.problem or "the run differs from its snapshot")
            return verdict
    if len(records) > len(expected.snapshots):
        verdict.status = "failed"
        verdict.problem = f"the scenario asserted {len(records)} snapshots; it has {len(expected.snapshots)}"
        return verdict
    verdict.problem = verdict.where = None  # what it asserted besides is not the judge's evidence
    return verdict


def judge_plans(module: str, expected: Expected, plans: list[dict], wanted: list[str], records: dict[int, object],
                started: set[int], end: dict | None) -> Verdict:
    """A generated scenario: every plan's run, rendered, against the reference's run of it."""
    verdict = Verdict(expected.scenario, "", "passed", expected.section, expected.purpose)
    matched = 0
    for index, plan in enumerate(plans):
        verdict.cites = differential.plan_cites(module, plan)  # (what the last plan judged, the failing one, enforces)
        if index not in records:
            verdict.status = "error"
            verdict.plan = differential.describe(module, plan)
            verdict.problem = (f"plan {index + 1} of {len(plans)} never finished" if index in started
                               else f"plan {index + 1} of {len(plans)} never ran") + \
                (f" ({end.get('problem')})" if end and end.get("problem") else "")
            break
        got = render_record(records[index])
        verdict.renders.append(got)
        record = records[index] if isinstance(records[index], dict) else {}
        if record.get("kind") in ("timed out", "crashed"):  # the run itself did not finish
            verdict.status = "timeout" if record["kind"] == "timed out" else "error"
            verdict.plan = f"plan {index + 1} of {len(plans)}: " + differential.describe(module, plan)
            verdict.problem = str(record.get("message")) if record["kind"] == "timed out" else \
                f"{record.get('raised')}: {record.get('message')}"
            verdict.where = record.get("where") if isinstance(record.get("where"), str) else None
            break
        if got != wanted[index]:
            verdict.status = "failed"
            verdict.plan = f"plan {index + 1} of {len(plans)}: " + differential.describe(module, plan)
            divergence = first_divergence(wanted[index], got)
            if divergence is not None:
                verdict.divergence = divergence.as_dict()
                verdict.cites = differential.plan_cites(module, plan, divergence.section)  # what broke there
            else:
                verdict.problem = "the run differs from the reference's run"
            verdict.broken = differential.broken_lines(got)
            break
        matched += 1
    verdict.plans = (matched, len(plans))
    return verdict


@dataclass
class Child:
    """How to start the recording child: the command and where (a sandbox wraps both)."""

    command: list[str]
    cwd: Path
    env: dict[str, str]
    preexec: Callable[[], None] | None = None
    record: Path | None = None
    pass_fds: tuple[int, ...] = ()
    """Descriptors of the judge's the child inherits (the sandbox's seccomp filter, read by bubblewrap)."""


@dataclass(frozen=True)
class Oversized:
    """A record line longer than LINE_LIMIT: never parsed (its bytes are skipped to its end)."""

    size: int

    @property
    def problem(self) -> str:
        return f"a record line of {mib(self.size)}: more than any scenario writes ({mib(LINE_LIMIT)} at the most)"


def mib(size: int) -> str:
    """A size in words: `3.2 MiB`."""
    return f"{size / 2**20:.1f} MiB" if size >= 2**20 / 10 else f"{size} bytes"


class _Records:
    """Reads the record file as the child appends to it, line by line, within RECORD_LIMIT bytes, each
    line within LINE_LIMIT (a longer one is an `Oversized`, never held whole nor parsed).

    The judge creates the file itself, under a name the child cannot guess, before the child starts
    (never following a link, never over a file that exists), and reads it only through that
    descriptor: whatever the child later puts at the path (a link, a FIFO, another file) is never
    opened by the judge. Finding something else at the path is evidence of tampering: `tampered`
    says what (a flag of the run)."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.rest, self.read = path, 0, b"", 0
        self.skipped: int | None = None  # the bytes so far of a line too long to read, while skipping it
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        status = os.fstat(self.fd)
        self.identity = (status.st_dev, status.st_ino)
        self.tampered: str | None = None

    def new_lines(self) -> list[bytes | Oversized]:
        """The lines complete since the last call, as their text (`parsed` reads one), or an `Oversized`
        for a line too long to read. (Not parsed here: a line parsed takes ~25 times its size, and the
        judge holds one at a time.)"""
        self._look_at_the_path()
        found: list[bytes | Oversized] = []
        while self.read < RECORD_LIMIT:
            chunk = os.pread(self.fd, min(2**20, RECORD_LIMIT - self.read), self.offset)
            if not chunk:
                break
            self.offset += len(chunk)
            self.read += len(chunk)
            pieces = chunk.split(b"\n")
            for n, piece in enumerate(pieces):
                ended = n < len(pieces) - 1  # (the last piece is the start of a line not ended yet)
                if self.skipped is None and len(self.rest) + len(piece) > LINE_LIMIT:
                    self.skipped, self.rest = len(self.rest), b""
                if self.skipped is not None:
                    self.skipped += len(piece) + ended
                    if ended:
                        found.append(Oversized(self.skipped))
                        self.skipped = None
                elif not ended:
                    self.rest += piece
                else:
                    found.append(self.rest + piece)
                    self.rest = b""
        return found

    def _look_at_the_path(self) -> None:
        """Whether the record file is still at its path (without opening whatever is there now)."""
        if self.tampered is not None:
            return
        try:
            status = os.lstat(self.path)
        except FileNotFoundError:
            self.tampered = f"removed its record file ({self.path.name})"
            return
        except OSError:
            return
        if (status.st_dev, status.st_ino) != self.identity:
            self.tampered = f"replaced its record file ({self.path.name}) with {_what_is(status, self.path)}"

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def parsed(raw: bytes) -> dict | None:
    """A record line's JSON object; None for a line that is none (not JSON, or not an object)."""
    try:
        line = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: JSON nested past what the parser follows
        return None  # not a record: the judge counts what is missing, it does not guess
    return line if isinstance(line, dict) else None


def _what_is(status: os.stat_result, path: Path) -> str:
    """What kind of file `status` describes, in words (a link's target included)."""
    if stat.S_ISLNK(status.st_mode):
        try:
            return f"a symbolic link to {os.readlink(path)[:200]!r}"
        except OSError:
            return "a symbolic link"
    kinds = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISREG, "another file"))
    return next((words for test, words in kinds if test(status.st_mode)), "something that is not a file")


def recorder_command(chapter: Chapter, implementation: str | None, *, chain: bool, record: Path, plans: Path,
                     forbid: list[str] = (), deselect: list[str] = (), timeout: float = SCENARIO_TIMEOUT,
                     extra: list[str] = (), python: str = sys.executable) -> list[str]:
    command = [python, "-m", "pytest", chapter.test_file, f"--course-record={record}", f"--course-plans={plans}",
               # No warnings plugin: the suite's filterwarnings=error is the project's rule, not the chapter's.
               "-p", "no:cacheprovider", "-p", "no:syrupy", "-p", "no:warnings", "-q", "--tb=no", "--no-header",
               f"--course-time-limit={timeout:g}", f"--timeout={last_resort(timeout):g}", "--timeout-method=signal"]
    command.append(f"--impl={implementation}" if implementation else "--reference")
    if chain:
        command.append("--impl-chain")
    if forbid:
        command.append(f"--course-forbid={','.join(forbid)}")
    command += [f"--deselect={chapter.test_file}::{name}" for name in deselect]
    return command + list(extra)


GRACE = 5.0
"""Seconds of its own time a scenario may run past its limit before the judge ends its process: the
child's own clock stops it at the limit, unless it spends them where that clock does not look (in a
process of its own) or keeps that clock from stopping it."""
NUDGE = 0.5
"""Seconds of its own time past its limit after which a scenario that made no progress is told to stop
(its CPU timer stops a busy one at the limit; one that waits, only the judge can see)."""
BACKSTOP = 4.0
"""The wall-clock backstop, as a multiple of a limit of own time, read on a clock that counts each wall
second at the share of a CPU a runnable thread gets (limits.FairShareClock): it stretches with the load."""


def last_resort(seconds: float) -> float:
    """The child's own wall-clock limit (pytest-timeout) for a limit of `seconds` of own time: later than
    any backstop the judge's fair-share clock can reach, so it fires only if the judge is gone."""
    return (seconds + GRACE) * BACKSTOP / limits.FEWEST_SHARE + GRACE


class RunClock:
    """The child's own time (course.recorder.limits: CPU time, and time blocked, not time spent waiting
    for a busy CPU), over the whole run and since its last record line; and the wall-clock backstops."""

    TICK = 0.25

    def __init__(self, timeout: float, wall: float | None) -> None:
        self.timeout, self.wall = timeout, wall
        self.started = time.monotonic()
        self.clock = limits.OwnClock(list)
        self.fair = limits.FairShareClock()
        self.run_stop = f"the whole run was stopped at {wall:g} s" if wall is not None else ""
        self.scenario_stop = ""
        """Why the scenario running was stopped: "" (its own time), or the wall-clock backstop's words."""
        self.nudged_own = float("-inf")
        self._ticked = 0.0
        self.heard()

    def follow(self, group: cgroups.Group | None, pid: int) -> None:
        """Count the threads of this attempt's child: its group's, or every process below it."""
        self.processes = group.processes if group is not None else lambda: [pid, *processes.descendants(pid)]
        self.clock.threads = group.threads if group is not None else lambda: limits.threads_of(self.processes())
        self.clock.tick()
        self.heard()

    def nudge(self) -> None:
        """Tell the recorder its scenario has waited its limit out (SIGPROF: course.recorder.limits); it
        stops the scenario where it waits and goes on with the next. Only the recorder's own process is
        told: the sandbox's processes would end on it."""
        executable = os.path.basename(sys.executable).encode()
        for pid in self.processes():
            try:
                words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if os.path.basename(words[0]) == executable and any(w.startswith(b"--course-record=") for w in words):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGPROF)

    def heard(self) -> None:
        """A record line arrived: the scenario running made progress."""
        self.line_own, self.line_fair, self.line_wall = self.clock.seconds, self.fair.seconds, time.monotonic()

    def over(self) -> bool | None:
        """None while within every limit; True when the whole run is over its limit; False when the
        scenario running is (no record line for its limit and grace). Says why in run_stop / scenario_stop."""
        now = time.monotonic()
        if now - self._ticked < self.TICK:
            return None
        self._ticked = now
        own, fair = self.clock.tick(), self.fair.tick()
        if self.wall is not None and (own > self.wall or fair > BACKSTOP * self.wall):
            if own <= self.wall:
                self.run_stop += f" (by the wall-clock backstop, at {now - self.started:.0f} s: the machine is loaded)"
            return True
        if own - self.line_own > self.timeout + NUDGE and own - self.nudged_own >= 1.0:
            self.nudged_own = own  # again each second of its own time while it makes no progress
            self.nudge()
        limit = self.timeout + GRACE
        if own - self.line_own > limit or fair - self.line_fair > BACKSTOP * limit:
            self.scenario_stop = "" if own - self.line_own > limit else \
                f" (by the wall-clock backstop, at {now - self.line_wall:.0f} s: the machine is loaded)"
            return False
        return None


def _stopped_by(problem: str, timeout: float) -> str | None:
    """What a scenario's end says of a time limit that stopped it, in words; None if none did."""
    if problem.startswith("ScenarioTimedOut:"):
        return f"did not finish within {timeout:g} s"
    if problem.startswith("Failed: Timeout (>"):  # pytest-timeout: the wall-clock backstop
        return f"did not finish within {timeout:g} s (by the wall-clock backstop: the machine is loaded)"
    return None


def _entering(group: cgroups.Group | None, preexec: Callable[[], None] | None) -> Callable[[], None] | None:
    """What the child runs before it executes: join its group, then its own preparation."""
    if group is None:
        return preexec

    def enter() -> None:
        group.enter()
        if preexec is not None:
            preexec()
    return enter


def reference_oracle(chapter: Chapter, root: Path, seed: int | None = None,
                     hardening: bool = False) -> tuple[dict[str, list[dict]], dict[str, list[str]]]:
    """The chapter's generated plans per section and the reference's renderings of them: what
    `judge_chapter` takes as `plans` and `wanted`.

    A command judging several runs in threads (`course status`, `course snapshots verify`) computes
    these first, in one thread: a reference's run of a plan watches what the whole process opens
    (chapter 08 counts the paths opened outside its workspace), so another thread's files, read
    meanwhile, would be taken for the reference's, and its renderings kept wrong in the disk cache.
    The chapter track's sections, and the hardening track's when `hardening` asks for them."""
    expected = [e for e in expected_scenarios(chapter, root) if e.generated and (hardening or e.track != HARDENING)]
    plans = {e.generated: differential.draw_plans(chapter.module, e.generated, seed=seed) for e in expected}
    wanted = {key: differential.expected_renders(chapter.module, key, section_plans)
              for key, section_plans in plans.items()}
    return plans, wanted


def judge_chapter(
    chapter: Chapter,
    implementation: str | None,
    *,
    root: Path,
    chain: bool = False,
    seed: int | None = None,
    timeout: float = SCENARIO_TIMEOUT,
    wall: float | None = None,
    prepare: Callable[[list[str], Path], Child] | None = None,
    forbid: list[str] = (),
    on_verdict: Callable[[Verdict], None] | None = None,
    progress: ChapterRun | None = None,
    plans: dict[str, list[dict]] | None = None,
    wanted: dict[str, list[str]] | None = None,
    extra: list[str] = (),
    hardening: bool = False,
    masking: Masking | None = None,
) -> ChapterRun:
    """Record the chapter's scenarios on `implementation` in a child process and judge them here.

    The chapter track's scenarios only, unless `hardening` asks for the hardening track's (加固) too.

    `prepare(command, scratch)` turns the recorder's command into a Child (a sandbox's); by default
    the child runs in `root` as it is. `wall` bounds the whole run in seconds. `progress`, if given,
    is the ChapterRun filled in as records arrive (what `on_verdict` may read). `plans` and `wanted`
    (the generated plans per section and the reference's renderings of them), when given, are used
    as they are: a grade draws and runs them once for every submission. `masking` (a grade with a secret)
    runs the fixed scenarios masked and judges them against its renderings."""
    expected = expected_scenarios(chapter, root)
    left_out = [] if hardening else [e.scenario for e in expected if e.track == HARDENING]
    expected = [e for e in expected if e.scenario not in left_out]
    if hardening:
        extra = ["--hardening", *extra]  # (a student's run skips the hardening track unless asked)
    if plans is None:
        plans = {e.generated: differential.draw_plans(chapter.module, e.generated, seed=seed)
                 for e in expected if e.generated}
    judging = ChapterJudging(chapter, implementation, root=root, chain=chain, timeout=timeout, wall=wall,
                             prepare=prepare, forbid=forbid, extra=list(extra), on_verdict=on_verdict,
                             expected=expected, left_out=left_out, plans=plans, wanted=dict(wanted or {}),
                             run=progress if progress is not None else ChapterRun(chapter, []), masking=masking)
    return judging.judge()


@dataclass
class _Received:
    """What the child's records said so far, per scenario."""

    snapshots: dict[str, list[bytes]] = field(default_factory=dict)
    plan_records: dict[str, dict[int, bytes]] = field(default_factory=dict)
    """The record lines of the scenarios not decided yet, as their text: what a line holds parsed takes ~25
    times its size, the text only its size (`_record` parses it again when the scenario is decided)."""
    plan_starts: dict[str, set[int]] = field(default_factory=dict)
    ends: dict[str, dict] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    """Bytes of record lines each scenario took so far."""
    order: list[str] = field(default_factory=list)
    """The scenarios in the order they started."""

    def forget(self, name: str) -> None:
        """A decided scenario's records are not kept: the judge holds only the undecided ones'."""
        self.snapshots.pop(name, None)
        self.plan_records.pop(name, None)


@dataclass
class ChapterJudging:
    """One judging of one chapter (`judge_chapter`): what it expects, what the child's records said so far,
    and the verdicts decided. The child is started again (RESTARTS at the most) without the scenarios
    decided, each time a scenario hangs."""

    chapter: Chapter
    implementation: str | None
    root: Path
    chain: bool
    timeout: float
    wall: float | None
    prepare: Callable[[list[str], Path], Child] | None
    forbid: list[str]
    extra: list[str]
    on_verdict: Callable[[Verdict], None] | None
    expected: list[Expected]
    left_out: list[str]
    """The scenarios not judged (the hardening track's, unless asked for): the child skips them."""
    plans: dict[str, list[dict]]
    wanted: dict[str, list[str]]
    """The reference's renderings of each section's plans, run when first needed."""
    run: ChapterRun
    masking: Masking | None = None
    """A grade with a secret: the fixed scenarios run masked, judged against the reference's masked runs."""
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    received: _Received = field(default_factory=_Received)
    current: str | None = None
    """The scenario running now, as the records say (None between scenarios)."""
    clock: RunClock = field(init=False)
    """The child's own time and the backstops, from the first attempt's start (`judge`)."""

    def __post_init__(self) -> None:
        self.by_name = {e.scenario: e for e in self.expected}

    def judge(self) -> ChapterRun:
        """Start the child, judge its records as they come, start it again after a scenario that hung."""
        with processes.scratch_directory("course-judge-") as scratch:
            plans_file = scratch / "plans.json"
            # ASCII: a plan may hold text that is not UTF-8 (chapter 08's invalid bytes), escaped in JSON.
            mask = {"mask": self.masking.plans_entry()} if self.masking is not None else {}
            plans_file.write_text(json.dumps({"module": self.chapter.module, "sections": self.plans, **mask}),
                                  encoding="ascii")
            self.clock = RunClock(self.timeout, self.wall)
            skip: list[str] = list(self.left_out)
            for attempt in range(RESTARTS + 1):
                if not self._attempt(scratch, attempt, plans_file, skip) or not self._start_again():
                    break
                skip = self.left_out + [name for name in self.by_name if name in self.verdicts]
                if len(skip) == len(self.left_out) + len(self.by_name):
                    break
        self._import_that_ended_the_process()
        self._verdicts_of_the_undecided()
        # In the order the test module runs them (the order their records began), then any never started.
        order = {name: n for n, name in enumerate(self.received.order)}
        self.run.verdicts = sorted((self.verdicts[e.scenario] for e in self.expected),
                                   key=lambda v: order.get(v.scenario, len(order)))
        return self.run

    def reference_runs(self, section: str) -> list[str]:
        if section not in self.wanted:
            self.wanted[section] = differential.expected_renders(self.chapter.module, section, self.plans[section])
        return self.wanted[section]

    # The child's runs.

    def _attempt(self, scratch: Path, attempt: int, plans_file: Path, skip: list[str]) -> bool:
        """Run the child once, skipping `skip`: whether a limit stopped it (it hung) before it ended."""
        # A name the child cannot know before this attempt starts: nothing it planted can be there.
        record = scratch / f"record-{attempt}-{secrets.token_hex(8)}.jsonl"
        command = recorder_command(self.chapter, self.implementation, chain=self.chain, record=record,
                                   plans=plans_file, forbid=self.forbid, deselect=skip, timeout=self.timeout,
                                   extra=self.extra)
        child = self.prepare(command, scratch) if self.prepare else Child(command, self.root, child_environment())
        try:
            reader = _Records(child.record or record)
        except OSError as error:
            self.run.flag(f"left something where its next record file was to be made ({error.strerror})")
            return False
        output = os.open(scratch / f"output-{attempt}.txt",
                         os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            hung = self._run_child(child, reader, output)
            if reader.tampered:
                self.run.flag(reader.tampered)
            size = os.fstat(output).st_size  # read where the judge wrote it: the path may lead elsewhere now
            self.run.output_tail = os.pread(output, 4000, max(0, size - 4000)).decode("utf-8", "replace")
        finally:
            os.close(output)
            reader.close()
        return hung

    def _run_child(self, child: Child, reader: _Records, output: int) -> bool:
        """Start the child, follow its records until it ends or a limit stops it, and end all it started."""
        group = cgroups.create("run")
        with processes.starting():
            # A session of its own (so a group of its own, ended by its pid), and no terminal it could write to.
            process = subprocess.Popen(child.command, cwd=child.cwd, env=child.env, stdin=subprocess.DEVNULL,
                                       stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
                                       preexec_fn=_entering(group, child.preexec), pass_fds=child.pass_fds)
            processes.adopt(process.pid)
        try:
            for section in self.plans:  # the reference's runs, while the child works
                self.reference_runs(section)
            self.clock.follow(group, process.pid)
            return self._follow(process, reader)
        finally:
            processes.end_tree(process)
            if group is not None:
                group.remove()

    def _follow(self, process: subprocess.Popen, reader: _Records) -> bool:
        """Read the child's records as they come until it ends or a limit stops it: whether it was stopped."""
        clock, run = self.clock, self.run
        while True:
            finished = process.poll() is not None
            lines = reader.new_lines()
            if lines:
                clock.heard()
            for line in lines:
                self.take(line)
                # Judging is bounded per line and per scenario, not per run: the run's limit holds between lines.
                if clock.wall is not None and clock.over() is True:
                    run.stopped = True
                    return True
            if finished:
                return False
            over = clock.over()
            if over is not None:
                run.stopped = run.stopped or over
                return True
            time.sleep(0.02)

    def _start_again(self) -> bool:
        """After a run a limit stopped: decide what it stopped, and whether the child starts again."""
        run, current = self.run, self.current
        if run.importing:  # the module itself never finishes importing: no scenario can run, now or later
            run.import_errors.append(self._import_error("importing it did not finish: " + (
                self.clock.run_stop if run.stopped
                else f"no progress for {self.timeout + GRACE:g} s{self.clock.scenario_stop}")))
            run.importing = None
            return False
        if current is not None and current in self.by_name and current not in self.verdicts:
            expected = self.by_name[current]
            self._decided(current, _timed_out(expected, self.received.plan_starts.get(current, set()),
                                              self.plans.get(expected.generated or "", []), self.chapter,
                                              self.clock, whole_run=run.stopped))
        if run.stopped:
            return False
        run.restarts += 1
        self.current = None
        return True

    def _import_error(self, problem: str) -> dict:
        return {"module": self.run.importing, "file": _module_file(self.implementation, self.run.importing),
                "line": None, "problem": problem}

    def _import_that_ended_the_process(self) -> None:
        if self.run.importing and not self.run.import_errors:
            self.run.import_errors.append(self._import_error(
                "the test process ended while importing it (exit, os._exit or a crash at import time)"))

    def _verdicts_of_the_undecided(self) -> None:
        """Every scenario without a verdict by now: not run, or an error."""
        for exp in self.expected:
            if exp.scenario in self.verdicts:
                continue
            if self.run.import_errors:
                status, problem = "not run", "not run: the module does not import"
            elif self.run.stopped:
                status, problem = "not run", f"not run: {self.clock.run_stop}"
            else:
                status, problem = "error", "no record: the test process ended before this scenario ran to its end"
            self.verdicts[exp.scenario] = Verdict(exp.scenario, self.chapter.test_file, status, exp.section,
                                                  exp.purpose, problem=problem, cites=exp.cites)

    # The records, line by line.

    def take(self, item: bytes | Oversized) -> None:
        """File one record line the reader returned (or one too long to read)."""
        if isinstance(item, Oversized):
            self._oversized(item)
            return
        line = parsed(item)
        if line is None:
            return
        try:
            self._file(line, item)
        except Exception as error:  # a bug of the judge's: the line's scenario (or the run) is not judged
            problem = f"the judge failed on its records: {said(error)}"
            if problem not in self.run.judge_errors:
                self.run.judge_errors.append(problem)
            name = line.get("scenario")
            if isinstance(name, str) and name in self.by_name and name not in self.verdicts:
                self._refuse(name, problem)

    def _oversized(self, item: Oversized) -> None:
        """A line too long to read: the scenario running's (the recorder writes none outside one)."""
        if self.current in self.by_name and self.current not in self.verdicts:
            self._refuse(self.current, item.problem, too_large=True)
            self.current = None
        elif self.current is None:
            self.run.flag(f"wrote a record line the recorder never writes: {item.problem}")

    def _file(self, line: dict, raw: bytes) -> None:
        """File one record line (`raw`, parsed: `line`); decide a scenario when its end arrives.

        A line of a shape the recorder never writes is not evidence: in a scenario's lines it makes the
        scenario an error, saying so; outside any scenario it flags the run (the recorder did not
        write it, so the submission wrote into its own record). So is a line the scenario does not
        expect (a snapshot past its count), and records larger in all than any scenario writes."""
        problem = malformed(line)
        name = line.get("scenario")
        if "scenario" in line and isinstance(name, str):
            self._file_scenario_line(name, line, raw, problem)
        else:
            self._file_run_line(line, problem)

    def _file_scenario_line(self, name: str, line: dict, raw: bytes, problem: str | None) -> None:
        if name not in self.by_name or name in self.verdicts:
            return  # not one of the judged scenarios, or already decided
        self.received.sizes[name] = self.received.sizes.get(name, 0) + len(raw) + 1
        if self.received.sizes[name] > SCENARIO_LIMIT:
            self._refuse(name, f"its record lines take more than {mib(SCENARIO_LIMIT)}: more than any scenario "
                               "writes", too_large=True)
        else:
            problem = problem if problem is not None else self._unexpected(name, line)
            if problem is None:
                self._keep(name, line, raw)
                return
            self._refuse(name, f"malformed record line: {problem}")
        if self.current == name:
            self.current = None

    def _unexpected(self, name: str, line: dict) -> str | None:
        """Why a well-formed line is not one its scenario can have, in words; None if it can."""
        expected = self.by_name[name]
        if "plan" in line and not expected.generated:
            return "a plan line in a scenario without plans"
        if "snapshot" in line and expected.generated:
            return "a snapshot line in a scenario of generated plans"
        if "plan" in line and line["plan"] >= len(self.plans[expected.generated]):
            return f"plan {line['plan']} is not one of the section's {len(self.plans[expected.generated])} plans"
        if "snapshot" in line and len(self.received.snapshots.get(name, [])) >= len(expected.snapshots):
            return f"a snapshot line past the scenario's {len(expected.snapshots)} snapshot(s)"
        return None

    def _keep(self, name: str, line: dict, raw: bytes) -> None:
        received = self.received
        if "snapshot" in line:
            received.snapshots.setdefault(name, []).append(raw)
        elif "plan" in line:
            if line.get("event") == "start":
                received.plan_starts.setdefault(name, set()).add(line["plan"])
            else:
                received.plan_records.setdefault(name, {})[line["plan"]] = raw
        elif line["event"] == "start":
            if name not in received.order:
                received.order.append(name)
            self.current = name
        else:  # its end
            received.ends[name] = line
            self._decide(name)
            self.current = None

    def _file_run_line(self, line: dict, problem: str | None) -> None:
        """A line outside any scenario: an import or collection error, a flag, or what is being imported."""
        run = self.run
        if problem is not None:
            run.flag(f"wrote a record line the recorder never writes: {problem}")
        elif "importError" in line:
            if len(run.import_errors) < IMPORT_ERRORS:
                run.import_errors.append(line["importError"])
        elif "collectionError" in line:
            if len(run.collection_errors) < IMPORT_ERRORS:
                run.collection_errors.append(line["collectionError"])
        elif "flag" in line:
            run.flag(line["flag"][:300])
        elif line["event"] == "importing":
            run.importing = line["module"]
        elif line["event"] == "imported":
            run.importing = None

    # Verdicts.

    def _decide(self, name: str) -> None:
        """A scenario's end arrived: judge its records."""
        exp = self.by_name[name]
        end = self.received.ends.get(name)
        if exp.generated:
            records = {plan: _record(raw) for plan, raw in self.received.plan_records.get(name, {}).items()}
            verdict = judge_plans(self.chapter.module, exp, self.plans[exp.generated],
                                  self.reference_runs(exp.generated), records,
                                  self.received.plan_starts.get(name, set()), end)
        else:
            wanted = self.masking.wanted.get(name) if self.masking is not None else None
            verdict = judge_snapshots(exp, [_record(raw) for raw in self.received.snapshots.get(name, [])], end, wanted)
        verdict.file = self.chapter.test_file
        end = end or {}
        stopped = _stopped_by(str(end.get("problem") or ""), self.timeout)
        if stopped and not verdict.passed:
            verdict.status = "timeout"  # the scenario ran past its limit, and its own clock or the backstop stopped it
            verdict.problem = stopped + (f" (stopped at {shown_where(end['where'])})" if end.get("where") else "")
        verdict.output, verdict.output_lines = end.get("output") or [], end.get("outputLines") or 0
        self._decided(name, verdict)

    def _refuse(self, name: str, problem: str, too_large: bool = False) -> None:
        """The scenario is an error: its records cannot be judged (`problem` says why)."""
        exp = self.by_name[name]
        if too_large and len(self.run.refused) < FLAGS:
            self.run.refused.append(f"{name}: {problem}")
        self._decided(name, Verdict(name, self.chapter.test_file, "error", exp.section, exp.purpose,
                                    problem=problem, cites=exp.cites))

    def _decided(self, name: str, verdict: Verdict) -> None:
        self.verdicts[name] = verdict
        self.received.forget(name)
        if self.on_verdict is not None:
            self.on_verdict(verdict)


def _record(raw: bytes) -> object:
    """The record a snapshot or plan line holds (a line `take` parsed and kept as text)."""
    return json.loads(raw)["record"]


def said(error: BaseException) -> str:
    """An exception of the judge's own in one line: its type and the start of its message."""
    return f"{type(error).__name__}: {str(error)[:300]}"


def _brief(value: object) -> str:
    """A JSON value in a few words, for a message (never the whole of it: it may be huge or deep)."""
    if isinstance(value, str):
        return repr(value[:40] + ("…" if len(value) > 40 else ""))
    if value is None or isinstance(value, (bool, int, float)):
        return json.dumps(value)
    return "a list" if isinstance(value, list) else "an object"


# The shape of each kind of record line the recorder writes (course.recorder.pytest_plugin), as JSON
# Schema. A `description` is what a value must be, in the words a problem uses ("…'s 'plan' is -1, not
# a count"). Shapes only: whether a line's evidence is true is for the judge to decide.
_COUNT = {"type": "integer", "minimum": 0, "description": "a count"}
_TEXT = {"type": "string", "description": "a text"}
_NAME = {"type": "string", "description": "a name"}
_MAYBE_TEXT = {"type": ["string", "null"], "description": "a text"}
_TEXTS = {"type": "array", "items": {"type": "string", "description": "only texts"}, "description": "a list of texts"}
_MODULE = {"type": "string", "description": "a module name"}
_MODULE_LINE = {"required": ["module"], "properties": {"module": _MODULE}}
RECORD_LINES: dict[str, tuple[str, dict]] = {  # kind: (how a problem names it, its schema)
    "start": ("a start line", {"properties": {"scenario": _NAME}}),
    "snapshot": ("a snapshot line", {"required": ["record"], "properties": {"scenario": _NAME, "snapshot": _COUNT}}),
    "plan": ("a plan line", {
        "properties": {"scenario": _NAME, "plan": _COUNT, "event": {"const": "start", "description": "'start'"}},
        "if": {"required": ["event"]}, "then": {}, "else": {"required": ["record"]}}),
    "end": ("an end line", {
        "required": ["outcome"],
        "properties": {"scenario": _NAME,
                       "outcome": {"enum": ["passed", "failed", "skipped"], "description": "passed, failed or skipped"},
                       "phase": {"type": "string", "description": "a phase"}, "problem": _MAYBE_TEXT,
                       "where": {"type": ["string", "null"], "description": "a path and line"},
                       "output": _TEXTS, "outputLines": _COUNT}}),
    "importError": ("importError", {
        "type": "object", "description": "an object", "required": ["module", "problem"],
        "properties": {"module": _MODULE,
                       "file": {"type": ["string", "null"], "description": "a path"},
                       "line": {"type": ["integer", "null"], "description": "a line number"},
                       "problem": _TEXT, "text": _MAYBE_TEXT, "missing": _TEXTS}}),
    "collectionError": ("collectionError", {
        "type": "object", "description": "an object", "required": ["where", "problem"],
        "properties": {"where": {"type": "string", "description": "a test id"}, "problem": _TEXT}}),
    "flag": ("a flag line", {"properties": {"flag": _TEXT}}),
    "importing": ("an importing line", _MODULE_LINE),
    "imported": ("an imported line", _MODULE_LINE),
    "finished": ("a finished line", {}),
}
# JSON's integers only: 1.0 or true is no count (jsonschema's own "integer" takes 1.0).
_Validator = jsonschema.validators.extend(jsonschema.Draft202012Validator,
                                          type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
                                              "integer", lambda _, value: type(value) is int))
_VALIDATORS = {kind: _Validator(schema) for kind, (_, schema) in RECORD_LINES.items()}


def _kind(line: dict) -> str:
    """Which kind of record line `line` claims to be (a key of RECORD_LINES), or why it is none."""
    if "scenario" in line:
        if "snapshot" in line or "plan" in line:
            return "snapshot" if "snapshot" in line else "plan"
        if line.get("event") in ("start", "end"):
            return line["event"]
        return "a scenario line that is no start, snapshot, plan or end"
    for key in ("importError", "collectionError", "flag"):
        if key in line:
            return key
    if line.get("event") in ("importing", "imported", "finished"):
        return line["event"]
    if not line:
        return "an empty object, no kind of line"
    return f"an object with {', '.join(repr(key[:20]) for key in list(line)[:5])}, no kind of line"


def malformed(line: dict) -> str | None:
    """Why a record line is not of a shape the recorder writes (RECORD_LINES), in words; None if it is one."""
    kind = _kind(line)
    if kind not in RECORD_LINES:
        return kind
    where, _ = RECORD_LINES[kind]
    value = line[kind] if kind in ("importError", "collectionError") else line
    error = next(_VALIDATORS[kind].iter_errors(value), None)
    if error is None:
        return None
    path = list(error.path)
    if error.validator == "required":
        return f"{where} has no {next(key for key in error.validator_value if key not in error.instance)!r}"
    wanted = error.schema.get("description", "of the recorder's shape")
    if not path:
        return f"{where} is {_brief(error.instance)}, not {wanted}"
    verb = "holds" if len(path) > 1 else "is"
    return f"{where}'s {path[0]!r} {verb} {_brief(error.instance)}, not {wanted}"


def _timed_out(expected: Expected, started: set[int], plans: list, chapter: Chapter, clock: RunClock,
               whole_run: bool) -> Verdict:
    problem = f"still running when {clock.run_stop}" if whole_run else \
        f"did not finish within {clock.timeout:g} s{clock.scenario_stop}: stopped, and the other scenarios ran on"
    verdict = Verdict(expected.scenario, chapter.test_file, "timeout", expected.section, expected.purpose,
                      problem=problem, cites=expected.cites)
    if expected.generated and started and max(started) < len(plans):
        index = max(started)
        verdict.plan = f"plan {index + 1} of {len(plans)}: " + differential.describe(chapter.module, plans[index])
        verdict.cites = differential.plan_cites(chapter.module, plans[index])
    return verdict


def _module_file(implementation: str | None, module: str) -> str | None:
    return str(Path(implementation) / f"{module}.py") if implementation else None


def shown_where(where: str) -> str:
    path, _, line = where.rpartition(":")
    return f"{shown(path)}:{line}"


def rerun_command(verdict: Verdict, implementation: str | None, chain: bool, root: Path) -> str:
    """The plain pytest command that reruns one scenario with the whole diff (-vv), judged in process."""
    node = f"{verdict.file}::{verdict.scenario}"
    if root != Path.cwd().resolve():
        node = f"{root / verdict.file}::{verdict.scenario}"
    words = [shown(sys.executable), "-m", "pytest", node, "-vv"]
    if implementation:
        words.append(f"--impl={shown(implementation)}")
    if chain:
        words.append("--impl-chain")
    return shlex.join(words)
