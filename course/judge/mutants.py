"""Known-wrong implementations: each chapter's tests must fail every one, and a student whose
failures look like one of them gets its hint.

A variant is the reference checkpoint with one realistic mistake patched in (`Mutant`: a text
patch that must apply exactly once, so a change to the reference shows up as a failing test, not
a silently dead variant), or the chapter's starter module (every function `raise
NotImplementedError`). Each variant is written into a temporary student directory and judged by
the chapter's own test module through `--impl=DIR`, like a student's code. The failing tests of
a variant are its signature; each chapter's `judge/signatures.json` keeps them (`course mutants
--write-signatures`), and `diagnose` matches a student's failures against them.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import gc
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import checkpoints
from course.judge import processes, session, starter
from course.recorder import limits
from course.recorder.limits import ScenarioTimedOut
from course.manifest import CHAPTERS, HARDENING, JUDGE, Chapter, chapter_part, find_chapter

CHAPTER_TRACK = "chapter"

REPO = Path(checkpoints.__file__).resolve().parent.parent
SIGNATURES = "signatures.json"
"""Each chapter's failure signatures, in its folder's judge/ (`signatures_file`)."""


def signatures_file(chapter: Chapter) -> Path:
    return REPO / chapter.judge_dir / SIGNATURES


class StalePatch(Exception):
    """A mutant's `find` text no longer occurs exactly once in the reference."""


@dataclass(frozen=True)
class Mutant:
    """One named mistake: the reference with `find` replaced by `replace` (and each of `also`'s pairs)."""

    name: str
    """What the variant gets wrong, in kebab case: `length-executes-tools`."""
    section: str
    """The chapter section to reread, as `pytest -k` selects it (a test module's section mark)."""
    hint: str
    """What the student's code does wrong, said to the student."""
    find: str
    """The reference text the mistake changes; it must occur exactly once."""
    replace: str
    """What the mistake puts there; its later lines get the indentation of the line `find` starts on."""
    also: tuple[tuple[str, str], ...] = ()
    """Further (find, replace) pairs, for a mistake that no single line makes; each must occur exactly once."""
    track: str = CHAPTER_TRACK
    """Which track must fail it: the chapter's (a mistake against the chapter text), or the hardening track's
    (`加固`: a mistake only against what the project adds beyond the chapter, which the chapter track must pass)."""

    @property
    def patches(self) -> tuple[tuple[str, str], ...]:
        return ((self.find, self.replace), *self.also)

    def source(self, reference: str) -> str:
        for find, replace in self.patches:
            reference = self.patch(reference, find, replace)
        return reference

    def patch(self, reference: str, find: str, replace: str) -> str:
        count = reference.count(find)
        if count != 1:
            raise StalePatch(f"mutant {self.name}: the reference has {count} copies of {find!r}, expected 1")
        start = reference.index(find)
        line = reference[reference.rfind("\n", 0, start) + 1:start]
        indent = line[: len(line) - len(line.lstrip())]
        replacement = replace.replace("\n", "\n" + indent)
        return reference[:start] + replacement + reference[start + len(find):]

    @property
    def full_hint(self) -> str:
        return f"{self.hint} — see {self.section}"


@dataclass(frozen=True)
class Loop:
    """A whole wrong module written on its own (not a patch of the reference): a loop written from the chapter
    text with one mistake, in its chapter's `judge/loops/`."""

    name: str
    section: str
    hint: str
    file: str
    """The module's file name in its chapter's `judge/loops/` (named chNN_..., so unique in the course)."""
    track: str = CHAPTER_TRACK

    def source(self, reference: str) -> str:
        (path,) = [path for c in CHAPTERS if (path := REPO / c.judge_dir / "loops" / self.file).is_file()]
        return path.read_text(encoding="utf-8")

    @property
    def full_hint(self) -> str:
        return f"{self.hint} — see {self.section}"


@dataclass(frozen=True)
class Starter:
    """The chapter's fresh starter module, exactly as `course start` writes it: every function body
    `raise NotImplementedError`."""

    chapter: Chapter
    name: str = "starter"
    full_hint: str = "every function still raises NotImplementedError: implement the chapter one section at a time"
    track: str = CHAPTER_TRACK

    def source(self, reference: str) -> str:
        return starter.starter_source(self.chapter, reference)


def reference_source(chapter: Chapter) -> str:
    return (REPO / chapter.reference_file).read_text(encoding="utf-8")


def gallery(chapter: Chapter) -> ModuleType | None:
    """The chapter's gallery of known mistakes (`chapters/<module>/judge/gallery.py`), or None: a gallery
    is optional. A gallery that is there but fails to import raises, as any broken module does."""
    return chapter_part(chapter.module, f"{JUDGE}.gallery")


def variants(chapter: Chapter) -> list[Mutant | Loop | Starter]:
    """The starter first, then the chapter's gallery, if it has one: its MUTANTS, then its LOOPS (whole wrong
    modules)."""
    found = gallery(chapter)
    return [Starter(chapter), *(found.MUTANTS if found is not None else ()), *getattr(found, "LOOPS", ())]


def without_gallery(chapter: Chapter) -> str:
    """The gate's line for a chapter it skips."""
    path = f"{chapter.judge_dir}/gallery.py"
    return (f"Chapter {chapter.number} — {chapter.title}: skipped, no gallery of known mistakes ({path}); "
            "add one to have its tests held to them")


@dataclass
class Outcome:
    """What a chapter's tests did to one variant."""

    chapter: str
    variant: str
    failed: list[str]
    """The failing tests, relative to the test module (`TestX::test_y[param]`)."""
    passed: int
    error: str | None = None
    """Why the variant could not be judged (a stale patch, a pytest usage error, a timeout)."""
    evidence: dict[str, str] = field(default_factory=dict)
    """What each failing test showed (`evidence_key`): the variant's signature."""

    @property
    def killed(self) -> bool:
        return self.error is None and bool(self.failed)


@dataclass(frozen=True)
class Selection:
    """Which tests judge the variants (all of each chapter's test module unless narrowed)."""

    deselect: tuple[str, ...] = ()
    """Tests to leave out, named relative to their module (`TestX::test_y[param]`)."""
    keyword: str | None = None
    """A `pytest -k` expression the tests must match."""

    def pytest_args(self, chapter: Chapter) -> list[str]:
        args = [f"--deselect={chapter.test_file}::{test}" for test in self.deselect]
        return args + ([f"-k={self.keyword}"] if self.keyword else [])


# An absolute path in what a run showed (a traceback's file, a temporary directory) names where it ran, not
# what it did: evidence keeps it as <path>.
_PATH = re.compile(r"(?<![\w.])/(?:[^\s\"'\\,:)]+/)+[^\s\"'\\,:)]*")


OUTSIDE = " (outside the code under test)"
"""The end of the evidence of an exception whose traceback never passed through the code under test: the
test's own (a KeyError of `result["details"]`, like a bare assert), which identifies no mistake."""


def evidence_key(*, generated: bool, status: str, divergence: dict | None, problem: str | None,
                 broken: list[str] = (), where: str | None = None) -> str:
    """What a failing scenario shows, reduced to what identifies a mistake: the first divergent line
    of a snapshot and the promises the run broke, the kind of exception and whether the code under
    test raised it (`where`: its innermost line there, None when the traceback never passed through
    it), or (for a generated section, whose failing plan depends on how it was searched) only that it failed."""
    if generated:
        return "generated"
    if divergence:
        key = f"{divergence['section']} {divergence['index']}: {divergence['expected']} → {divergence['got']}"
        return _PATH.sub("<path>", key + "".join(f" | broken: {line}" for line in broken))
    if status == "timeout":
        return "timeout"
    kind = (problem or "").split(":", 1)[0].strip() or "?"
    outside = not where and kind != "AssertionError"  # (an assertion identifies nothing wherever it failed)
    return f"{'error' if status == 'error' else 'failed'}: {kind}" + (OUTSIDE if outside else "")


def evidence_of(verdicts) -> dict[str, str]:
    """A judged chapter's failures as evidence: scenario -> `evidence_key`."""
    return {v.scenario: evidence_key(generated=v.scenario.startswith("test_generated["), status=v.status,
                                     divergence=v.divergence, problem=v.problem, broken=v.broken, where=v.where)
            for v in verdicts if not v.passed}


class _Failures:
    """A pytest plugin collecting which tests failed (in any phase), with their evidence, and how many passed."""

    def __init__(self) -> None:
        self.failed: list[str] = []
        self.evidence: dict[str, str] = {}
        self.passed = 0

    def pytest_runtest_makereport(self, item, call):
        report = yield
        name = item.nodeid.split("::", 1)[-1]
        if report.failed and name not in self.failed:
            self.failed.append(name)
            self.evidence[name] = _evidence_in_process(item, call)
        elif report.passed and report.when == "call":
            self.passed += 1
        return report

    pytest_runtest_makereport.pytest_impl = {"wrapper": True}  # what @pytest.hookimpl(wrapper=True) sets

    def pytest_collectreport(self, report) -> None:
        if report.failed:
            self.failed.append(f"<collection of {report.nodeid}>")
            self.evidence[f"<collection of {report.nodeid}>"] = "error: collection"


def _evidence_in_process(item, call) -> str:
    """`evidence_key` of a test that failed in this process (syrupy's comparison, or an exception)."""
    from course.judge.differential import broken_lines
    from course.judge.timeline import first_divergence
    from course.recorder import impl
    from course.recorder.pytest_plugin import _where

    name = item.nodeid.split("::", 1)[-1]
    assertion = getattr(item, "funcargs", {}).get("snapshot")
    for result in (getattr(assertion, "executions", None) or {}).values():
        if not result.success and result.recalled_data is not None:
            found = first_divergence(str(result.recalled_data), str(result.asserted_data))
            if found is not None:
                return evidence_key(generated=False, status="failed", divergence=found.as_dict(), problem=None,
                                    broken=broken_lines(str(result.asserted_data)))
    excinfo = call.excinfo
    problem = f"{excinfo.typename}: " if excinfo is not None else ""
    # Its own-time limit (course.recorder.limits) or pytest-timeout's wall-clock backstop stopped it.
    timeout = excinfo is not None and (isinstance(excinfo.value, ScenarioTimedOut)
                                       or str(excinfo.value).startswith("Timeout (>"))
    where = _where(excinfo.value, impl.current()) if excinfo is not None else None
    return evidence_key(generated=name.startswith("test_generated["), status="timeout" if timeout else "error",
                        divergence=None, problem=problem, where=where)


def judge(chapter: Chapter, name: str, directory: Path, selection: Selection = Selection()) -> Outcome:
    """Run the chapter's test module against the variant written in `directory`, in this process."""
    import pytest  # only the workers need it

    failures = _Failures()
    output = io.StringIO()
    # pytest collects garbage several times per run; what earlier runs left alive need not be rescanned.
    gc.freeze()
    with contextlib.redirect_stdout(output):
        # Pass or fail is all a signature needs: no tracebacks, and no assertion rewriting to explain
        # failures (which also spares the warning that the worker imported `course` before pytest).
        # Each variant gets its own basetemp: in the shared /tmp/pytest-of-USER, concurrent workers
        # pruning each other's old directories crash on the warning that raises (filterwarnings=error).
        # --hardening: each variant is judged on both tracks (its signature says which track fails it).
        code = pytest.main([str(REPO / chapter.test_file), f"--impl={directory}", "--hardening", "-p",
                            "no:cacheprovider", "-q", "--tb=no", "--no-header", "--assert=plain",
                            f"--basetemp={directory.with_name(directory.name + '.tmp')}",
                            *selection.pytest_args(chapter)], plugins=[failures])
    # The next variant is loaded fresh: forget this one's modules and its directory.
    for module in [m for m in sys.modules if m.startswith("tiny_pi_student.")]:
        del sys.modules[module]
    while str(directory) in sys.path:
        sys.path.remove(str(directory))
    error = None
    if code not in (0, 1) or (code == 1 and not failures.failed):
        error = f"pytest exited {int(code)}: " + " | ".join(output.getvalue().strip().splitlines()[-3:])
    return Outcome(chapter.number, name, failures.failed, failures.passed, error, failures.evidence)


def _worker() -> None:
    """`python -c '...; _worker()' JOB_JSON OUT_FILE`: judges each [chapter, variant, directory], one JSON line each."""
    job, out_file = json.loads(sys.argv[1]), sys.argv[2]
    selection = Selection(tuple(job["deselect"]), job["keyword"])
    with open(out_file, "a", encoding="utf-8") as out:
        for number, name, directory in job["queue"]:
            outcome = judge(find_chapter(number), name, Path(directory), selection)
            out.write(json.dumps(outcome.__dict__, ensure_ascii=False) + "\n")
            out.flush()


class _Worker:
    """A worker process judging a queue of [chapter, variant, directory]; `poll()` collects what it reported."""

    def __init__(self, queue: list[list[str]], selection: Selection, out_file: Path, timeout: float) -> None:
        self.queue, self.out_file, self.timeout = list(queue), out_file, timeout
        job = json.dumps({"queue": self.queue, "deselect": list(selection.deselect), "keyword": selection.keyword})
        command = [sys.executable, "-c", "from course.judge.mutants import _worker; _worker()", job, str(out_file)]
        self.process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        text=True)
        self.reported = 0
        # Its own time (CPU, and time blocked), not the wall clock's: a loaded machine hangs no variant.
        self.clock = limits.OwnClock(lambda: limits.threads_of([self.process.pid,
                                                               *processes.descendants(self.process.pid)]))
        self.fair = limits.FairShareClock()
        self._since_report()

    def _since_report(self) -> None:
        self.reported_own, self.reported_fair = self.clock.tick(), self.fair.tick()
        self.reported_wall = time.monotonic()

    def poll(self) -> list[Outcome]:
        lines = self.out_file.read_text(encoding="utf-8").splitlines() if self.out_file.exists() else []
        new = [Outcome(**json.loads(line)) for line in lines[self.reported:]]
        if new:
            self.reported = len(lines)
            self._since_report()
            del self.queue[: len(new)]
        return new

    def stuck(self) -> str | None:
        """Why the variant at the head of the queue will never be reported, or None while all is well."""
        if self.process.poll() is None and time.monotonic() - self.clock.ticked_at < 0.25:
            return None  # (its clock reads /proc: a few times a second is enough)
        if self.process.poll() is not None:
            _, stderr = self.process.communicate()
            return f"the worker exited {self.process.returncode}: {stderr.strip()[-300:]}"
        own, fair = self.clock.tick() - self.reported_own, self.fair.tick() - self.reported_fair
        wall = time.monotonic() - self.reported_wall
        if own > self.timeout or fair > session.BACKSTOP * self.timeout:
            self.process.kill()
            self.process.communicate()
            backstop = "" if own > self.timeout else f" (by the wall-clock backstop, at {wall:.0f} s: the machine is loaded)"
            return f"timed out after {self.timeout:g} s{backstop} (the variant hangs the tests)"
        return None


def run_variants(chosen: list[tuple[Chapter, Mutant | Starter]], *, selection: Selection = Selection(),
                 jobs: int = 2, timeout: float = 30) -> list[Outcome]:
    """Judge each (chapter, variant) in `jobs` worker processes; the outcomes in the same order.

    A variant that hangs the tests for `timeout` seconds (or kills its worker) is reported as an
    error, and a fresh worker takes over the rest of that worker's queue.
    """
    jobs = max(1, jobs)
    outcomes: dict[tuple[str, str], Outcome] = {}
    with tempfile.TemporaryDirectory(prefix="mutants-") as root:
        queue = []
        for chapter, variant in chosen:
            try:
                source = variant.source(reference_source(chapter))
            except StalePatch as stale:
                outcomes[chapter.number, variant.name] = Outcome(chapter.number, variant.name, [], 0, str(stale))
                continue
            directory = Path(root, chapter.number, variant.name)  # a student directory holding just this module
            directory.mkdir(parents=True)
            (directory / f"{chapter.module}.py").write_text(source, encoding="utf-8")
            queue.append([chapter.number, variant.name, str(directory)])

        started = 0

        def start(work: list[list[str]]) -> _Worker:
            nonlocal started
            started += 1
            return _Worker(work, selection, Path(root, f"worker-{started}.jsonl"), timeout)

        workers = [start(queue[i::jobs]) for i in range(jobs) if queue[i::jobs]]
        while workers:
            time.sleep(0.05)
            for worker in list(workers):
                outcomes.update(((o.chapter, o.variant), o) for o in worker.poll())
                if not worker.queue:
                    worker.process.communicate()
                    workers.remove(worker)
                    continue
                why = worker.stuck()
                if why is None:
                    continue
                outcomes.update(((o.chapter, o.variant), o) for o in worker.poll())  # reported before it stopped
                workers.remove(worker)
                if worker.queue:
                    (number, name, _), rest = worker.queue[0], worker.queue[1:]
                    outcomes[number, name] = Outcome(number, name, [], 0, error=why)
                    if rest:
                        workers.append(start(rest))
    return [outcomes[chapter.number, variant.name] for chapter, variant in chosen]


def run_gallery(chapters: list[Chapter], *, names: list[str] | None = None, selection: Selection = Selection(),
                jobs: int = 2, timeout: float = 30) -> list[Outcome]:
    """Judge the chapters' variants (all, or those named), in gallery order; a chapter without a gallery has none."""
    chosen = [(c, v) for c in chapters if gallery(c) is not None for v in variants(c) if names is None or v.name in names]
    unknown = sorted(set(names or ()) - {v.name for _, v in chosen})
    if unknown:
        raise LookupError(f"no variant {', '.join(unknown)} in chapter {', '.join(c.number for c in chapters)}")
    return run_variants(chosen, selection=selection, jobs=jobs, timeout=timeout)


def load_signatures() -> dict[str, dict[str, dict[str, str]]]:
    """Chapter number -> variant name -> {failing test: its evidence} (each chapter's judge/signatures.json,
    committed with its gallery)."""
    return {c.number: json.loads(signatures_file(c).read_text(encoding="utf-8"))
            for c in CHAPTERS if signatures_file(c).is_file()}


def signatures_of(outcomes: list[Outcome]) -> dict[str, dict[str, dict[str, str]]]:
    found: dict[str, dict[str, dict[str, str]]] = {}
    for outcome in outcomes:
        found.setdefault(outcome.chapter, {})[outcome.variant] = dict(sorted(outcome.evidence.items()))
    return found


def write_signatures(outcomes: list[Outcome]) -> None:
    found = signatures_of(outcomes)
    for chapter in CHAPTERS:
        if chapter.number in found:
            signatures_file(chapter).parent.mkdir(parents=True, exist_ok=True)
            signatures_file(chapter).write_text(json.dumps(found[chapter.number], ensure_ascii=False, indent=1) + "\n",
                                                encoding="utf-8")


def identifying(signature: dict[str, str]) -> bool:
    """Whether a signature can identify a mistake: at least one fixed scenario's first divergence or
    exception raised by the code under test. Failing generated sections, a timeout, a test's own
    assertion failing, or any exception the test raised itself (its traceback never passed through
    the code under test: a KeyError of `result["details"]` is the test finding something missing, as
    an assert would) say only that something differs somewhere: many mistakes, known or not, do that,
    so they name none."""
    return any(key not in ("generated", "timeout") and not key.endswith((": AssertionError", OUTSIDE))
               for key in signature.values())


@dataclass
class Diagnosis:
    """The known mistakes a student's evidence matches, and how: exactly one's (`one`), several's that fail
    alike (`alike`: at most one of them can be the student's; `note` names the scenario that tells them apart,
    if any), or several at once (`together`)."""

    found: list[tuple[str, str]] = field(default_factory=list)
    """(variant name, hint)."""
    how: str = "one"
    note: str | None = None

    def heading(self) -> str:
        if self.how == "alike":
            return (f"these failures fit {len(self.found)} known mistakes equally: a match of evidence, which another "
                    "mistake can also leave, and at most one of these is yours; check which, if any:")
        if self.how == "together":
            return (f"these failures are exactly those of {len(self.found)} known mistakes together (a match of "
                    "evidence, which another mistake can also leave; check which, if any, are yours):")
        return ("these failures are exactly those of a known mistake (another mistake can fail the same way: "
                "check that yours is this one):")


def diagnose(chapter_number: str, evidence: dict[str, str]) -> list[tuple[str, str]]:
    """(variant name, hint) for the known mistakes the evidence identifies (`diagnosis_of`, every track)."""
    return diagnosis_of(chapter_number, evidence).found


def diagnosis_of(chapter_number: str, evidence: dict[str, str], judged: set[str] | None = None) -> Diagnosis:
    """The known mistakes the evidence identifies.

    `evidence` is {failing scenario: `evidence_key`}; `judged` the scenarios that were run (None: all), to
    which every stored signature is narrowed first (a check without the hardening track never names a
    mistake by what only that track shows). A variant matches when its signature is exactly the evidence:
    the same failing scenarios, each with the same first divergence (or kind of exception). Failing that,
    several known mistakes at once are recognised when the evidence is exactly the union of the largest
    signatures it contains. Otherwise nothing is said: a guess is worse than none.
    """
    chapter = find_chapter(chapter_number)
    evidence = {name.split(".py::", 1)[-1]: key for name, key in evidence.items()}  # full node ids work too
    stored = {name: tests for name, tests in load_signatures().get(chapter.number, {}).items() if isinstance(tests, dict)}
    narrowed = {name: {t: k for t, k in tests.items() if judged is None or t in judged} for name, tests in stored.items()}
    signatures = {name: tests for name, tests in narrowed.items() if identifying(tests)}
    if not evidence:
        return Diagnosis()
    matched = [name for name, tests in signatures.items() if tests == evidence]
    how = "one" if len(matched) == 1 else "alike"
    if not matched:
        inside = [name for name, tests in signatures.items() if tests.items() <= evidence.items()]
        matched = [n for n in inside if not any(signatures[n].items() < signatures[m].items() for m in inside)]
        union: dict[str, str] = {}
        for name in matched:
            union.update(signatures[name])
        if union != evidence:
            return Diagnosis()
        how = "together"
    found = [(v.name, v.full_hint) for v in variants(chapter) if v.name in matched]
    note = tells_apart(chapter, [name for name, _ in found], stored) if how == "alike" else None
    return Diagnosis(found, how, note)


def tells_apart(chapter: Chapter, names: list[str], stored: dict[str, dict[str, str]]) -> str:
    """Which scenario's outcome differs between variants whose judged evidence is the same, in words."""
    scenarios = sorted({scenario for name in names for scenario in stored.get(name, {})})
    differing = [s for s in scenarios if len({stored.get(name, {}).get(s) for name in names}) > 1]
    if not differing:
        return "no scenario of the course tells them apart: read your code against each hint"
    tracks = tracks_of(chapter)
    hardening = [s for s in differing if tracks.get(s) == HARDENING]
    if hardening and len(hardening) == len(differing):
        return (f"{hardening[0]} tells them apart, in the hardening track ({HARDENING}, beyond the chapter): "
                f"course check {chapter.number} --hardening")
    return f"{differing[0]} tells them apart: course hint {chapter.number} '{differing[0]}'"


def tracks_of(chapter: Chapter) -> dict[str, str]:
    """Each scenario of the chapter and its track (a failing test the index does not know is the chapter's)."""
    from course.judge.index import expected_scenarios

    return {e.scenario: e.track for e in expected_scenarios(chapter, REPO)}


def track_problems(outcomes: list[Outcome]) -> list[str]:
    """Variants that the track they belong to does not fail: a mistake against the chapter that only the
    hardening track catches, or one only against the hardening promises that the chapter track fails (which
    would hold students to something beyond the chapter)."""
    problems = []
    for outcome in outcomes:
        if outcome.error is not None or not outcome.failed:
            continue
        chapter = find_chapter(outcome.chapter)
        tracks = tracks_of(chapter)
        variant = next(v for v in variants(chapter) if v.name == outcome.variant)
        beyond = [test for test in outcome.failed if tracks.get(test) == HARDENING]
        within = [test for test in outcome.failed if tracks.get(test) != HARDENING]
        if variant.track != HARDENING and not within:
            problems.append(f"chapter {outcome.chapter}: {outcome.variant} is a mistake against the chapter, but only "
                            f"the hardening track fails it ({', '.join(beyond[:2])}): the chapter track must")
        if variant.track == HARDENING and not beyond:
            problems.append(f"chapter {outcome.chapter}: {outcome.variant} breaks a hardening promise, but the "
                            f"hardening track does not fail it")
        if variant.track == HARDENING and within:
            problems.append(f"chapter {outcome.chapter}: {outcome.variant} breaks only hardening promises, yet the "
                            f"chapter track fails it ({', '.join(within[:2])}): that holds students to something "
                            "beyond the chapter")
    return problems


def gallery_problems(outcomes: list[Outcome]) -> list[str]:
    """What is wrong with a whole gallery's run besides survivors: the stored signatures that are not
    what the variants fail now (diagnosis would then name mistakes from stale evidence), and variants
    that diagnosis does not name from their own evidence (or names from evidence that cannot identify)."""
    problems = track_problems(outcomes)
    stored = load_signatures()
    for number, found in signatures_of(outcomes).items():
        kept = stored.get(number, {})
        changed = sorted(name for name in found.keys() | kept.keys() if found.get(name) != kept.get(name))
        if changed:
            problems.append(f"chapter {number}: the stored failure signatures of {', '.join(changed)} are not what "
                            f"{'it fails' if len(changed) == 1 else 'they fail'} now: run `course mutants "
                            f"--write-signatures` and read the diff")
    for outcome in outcomes:
        if outcome.error is not None or not outcome.failed:
            continue
        named = [name for name, _ in diagnose(outcome.chapter, outcome.evidence)]
        if identifying(outcome.evidence) and outcome.variant not in named:
            problems.append(f"chapter {outcome.chapter}: diagnosis does not name {outcome.variant} from its own "
                            f"failures (it names {', '.join(named) or 'nothing'})")
        elif not identifying(outcome.evidence) and named:
            problems.append(f"chapter {outcome.chapter}: {outcome.variant} fails only in ways that identify no "
                            f"mistake, yet diagnosis names {', '.join(named)}")
    return problems


def render_table(chapter: Chapter, outcomes: list[Outcome]) -> str:
    """One line per variant: the tests that killed it, SURVIVED, or why it could not be judged."""
    survivors = [o for o in outcomes if not o.killed]
    verdict = "all killed" if not survivors else f"{len(survivors)} not killed"
    count = f"{len(outcomes)} variant{'' if len(outcomes) == 1 else 's'}"
    lines = [f"Chapter {chapter.number} — {chapter.title}: {count}, {verdict}", ""]
    width = max(len("variant"), *(len(o.variant) for o in outcomes))
    lines.append(f"{'variant':<{width}}  killed by")
    first_with: dict[tuple[str, ...], str] = {}
    beyond = {v.name for v in variants(chapter) if v.track == HARDENING}
    tracks = tracks_of(chapter)
    for outcome in outcomes:
        same = first_with.setdefault(tuple(sorted(outcome.evidence.items())), outcome.variant)
        if outcome.error is not None:
            verdict = f"ERROR: {outcome.error}"
        elif not outcome.failed:
            verdict = f"SURVIVED ({outcome.passed} tests passed)"
        else:
            # The tests of the variant's own track first: those are the ones that must catch it.
            own = sorted(outcome.failed, key=lambda test: (tracks.get(test) == HARDENING) != (outcome.variant in beyond))
            shown = ", ".join(test.split("::")[-1] for test in own[:2])
            more = f" (+{len(outcome.failed) - 2} more)" if len(outcome.failed) > 2 else ""
            verdict = f"{len(outcome.failed)}: {shown}{more}"
            if same != outcome.variant:  # diagnosis cannot tell these two apart
                verdict += f"  (same evidence as {same})"
        if outcome.variant in beyond:
            verdict += f"  [{HARDENING}]"
        lines.append(f"{outcome.variant:<{width}}  {verdict}")
    if beyond & {o.variant for o in outcomes}:
        lines += ["", f"[{HARDENING}]: a mistake only against what the project adds beyond the chapter: the hardening "
                      "track must fail it, and the chapter track must not."]
    if any(o.error is None and not o.failed for o in outcomes):
        lines += ["", "A variant that survives is a gap in the tests: add the scenario or assertion that fails it."]
    if any(o.error is not None for o in outcomes):
        lines += ["", "A variant the tests cannot judge (a stale patch, a hang, a crash) must be fixed, "
                      "or the tests made to fail it."]
    return "\n".join(lines) + "\n"


def show_variant(chapter: Chapter, name: str) -> str:
    """The variant as a unified diff against the reference checkpoint."""
    variant = next(v for v in variants(chapter) if v.name == name)
    reference = reference_source(chapter)
    path = chapter.reference_file
    diff = difflib.unified_diff(reference.splitlines(keepends=True),
                                variant.source(reference).splitlines(keepends=True),
                                fromfile=path, tofile=f"{path} ({name})")
    return "".join(diff)


def mutants_command(args: argparse.Namespace) -> int:
    """Run each chapter's tests against its known-wrong variants; fail if any variant survives."""
    chapters = [find_chapter(n) for n in args.chapters] if args.chapters else CHAPTERS
    if args.show:
        shown = [show_variant(c, args.show) for c in chapters if args.show in {v.name for v in variants(c)}]
        print("".join(shown) or f"no variant {args.show}\n", end="")
        return 0 if shown else 2
    selection = Selection(tuple(args.deselect), args.keyword)
    if args.write_signatures and (args.variant or selection != Selection()):
        print("--write-signatures needs every variant judged by every test", file=sys.stderr)
        return 2
    missing = [c.test_file for c in chapters if not (REPO / c.test_file).is_file()]
    if missing:
        print(f"course mutants needs the chapters' tests in their folders; missing {', '.join(missing)}",
              file=sys.stderr)
        return 2
    try:
        outcomes = run_gallery(chapters, names=args.variant or None, selection=selection, jobs=args.jobs)
    except LookupError as error:
        print(error, file=sys.stderr)
        return 2
    for chapter in chapters:
        judged = [o for o in outcomes if o.chapter == chapter.number]
        if judged or gallery(chapter) is None:  # (a gallery none of whose variants was chosen: nothing to say)
            print(render_table(chapter, judged) if judged else without_gallery(chapter) + "\n")
    if not outcomes:
        return 0  # every chapter chosen was skipped: no gallery, nothing judged, nothing to fail
    if any(not o.killed for o in outcomes):
        return 1
    if args.write_signatures:
        write_signatures(outcomes)
        print(f"wrote the failure signatures to each chapter's {JUDGE}/{SIGNATURES}")
        return 0
    if args.variant or selection != Selection():
        return 0  # a part of the gallery, or of the tests: its evidence is not the stored signatures'
    problems = gallery_problems(outcomes)
    for problem in problems:
        print(problem)
    if not problems:
        print("The stored failure signatures are what the variants fail, and diagnosis names each variant "
              "its evidence identifies.")
    return 1 if problems else 0


def register(commands) -> None:
    parser = commands.add_parser("mutants", help="check that each chapter's tests fail its known-wrong variants")
    parser.add_argument("chapters", nargs="*", metavar="CHAPTER", help="chapter numbers (default: every chapter)")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME", help="judge only this variant")
    parser.add_argument("--deselect", action="append", default=[], metavar="TEST",
                        help="leave out a test, named relative to its module (TestX::test_y[param])")
    parser.add_argument("-k", dest="keyword", metavar="EXPR", help="run only the tests pytest -k EXPR selects")
    parser.add_argument("--show", metavar="NAME", help="print the variant as a diff against the reference, run nothing")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="worker processes (2)")
    parser.add_argument("--write-signatures", action="store_true",
                        help=f"store the failure signatures that diagnosis uses (each chapter's {JUDGE}/{SIGNATURES})")
    parser.set_defaults(handler=mutants_command)
