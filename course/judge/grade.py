"""`course grade NN SUBMISSIONS_DIR`: every submission's scenarios, one table, a verdict nobody can claim.

Each submission (one folder holding the chapter's module) is recorded in its own sandbox
(`course.judge.sandbox`): a throwaway copy of the course without the answers, under bubblewrap
where installed, with limits on memory, CPU, processes, file size and time. The recorder only
records; this process, which never imports student code, judges every scenario from the records
against the stored snapshots and the reference's own runs of the generated plans
(`course.judge.session`). A scenario without a record is an error whatever the child's exit code.
`--seed SECRET` (or `--seed-file`) adds generated plans nobody has seen. `--shard K/N` grades one of N slices of the class
and `course grade merge` joins the slices' results into the same table.
"""

from __future__ import annotations

import argparse
import collections
import csv
import hashlib
import json
import os
import re
import secrets
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from course.judge import cgroups, confine, differential, processes, secret
from course.judge.check import import_message, results_json
from course.judge.index import expected_scenarios
from course.judge.sandbox import MARK, Sandbox, SubmissionRefused, bubblewrap, knows_size
from course.judge.session import ChapterRun, Masking, by_section, judge_chapter, said
from course.judge.terminal import PROBLEM_LENGTH, printable
from course.judge.testrun import course_root
from course.judge.contracts import BEYOND
from course.manifest import HARDENING, Chapter, find_chapter
from course.runtime.messages import utf8_text


NAME_LENGTH = 60
"""Characters of a submission's name shown in the table (and in its results file's name) at the most."""
NAME_BYTES = 200
"""Bytes of UTF-8 a results file's name may take (a file name may take 255)."""
PROBLEM_LIMIT = 1000
"""Characters of a row's problem kept at the most (in the files too: a submission's texts have no end)."""
FORMULA = ("=", "+", "-", "@", "\t", "\r")
"""What a CSV cell may not start with: a spreadsheet would take it for a formula (OWASP, CSV injection)."""
SHORTENED = re.compile(r"~[0-9a-f]{8,}\Z")
"""How a shortened name ends: a name of a folder that ends so is shortened too, so none is taken for another's."""


@dataclass
class Grade:
    """One submission's row."""

    submission: str
    status: str
    """pass, fail, broken (its module does not import, or nothing ran), timeout, flagged (it reached
    for the answers or the judge, or tampered with its records), missing (no chapter module), or
    error (the judge itself failed on it: a bug of the judge's, the problem says where)."""
    passed: int = 0
    total: int = 0
    points: float = 0.0
    max_points: float = 0.0
    problem: str = ""
    scenarios: dict[str, str] = field(default_factory=dict)
    """Scenario name -> passed, failed, error, timeout or not run."""
    sections: dict[str, list[float]] = field(default_factory=dict)
    """Section -> [points earned, points possible] (the hardening track, when graded, as `加固`)."""
    hardening: str = ""
    """The hardening track's scenarios passed, `3/10` (beyond the chapter: never the status), when graded."""


def section_points(chapter: Chapter, run: ChapterRun, hardening: float = 0.0,
                   replayable: frozenset[str] = frozenset()) -> dict[str, list[float]]:
    """Points per section; the hardening track's (加固) worth `hardening`, when it was graded. In a grade with a
    secret, the fixed scenarios a replay of the published answers would pass (`replayable`: their answers depend on
    nothing the mask changes) earn their share only as far as the rest of the chapter track is passed, so a correct
    submission earns them all and one with no work of its own none."""
    share = vouched_share(chapter, run, replayable)
    found: dict[str, list[float]] = {}
    for section, in_section in by_section(run.verdicts).items():
        weight = float(hardening if section == HARDENING else chapter.weights.get(section, 1))
        passed = sum(v.passed * (share if v.scenario in replayable else 1.0) for v in in_section)
        found[section] = [round(weight * passed / len(in_section), 2), weight]
    return found


def vouched_share(chapter: Chapter, run: ChapterRun, replayable: frozenset[str]) -> float:
    """The share of the chapter track's points a submission earns outside `replayable` (1 when there is none)."""
    earned = possible = 0.0
    for section, in_section in by_section(run.chapter_verdicts).items():
        each = float(chapter.weights.get(section, 1)) / len(in_section)
        vouching = [v for v in in_section if v.scenario not in replayable]
        earned += each * sum(v.passed for v in vouching)
        possible += each * len(vouching)
    return earned / possible if possible else 1.0


def grade_of(name: str, chapter: Chapter, run: ChapterRun, wall: float, student: str | None = None,
             hardening: float = 0.0, replayable: frozenset[str] = frozenset()) -> Grade:
    """One submission's row: its status, scenarios passed and points are the chapter track's; the hardening
    track, when graded, adds its own points (`hardening`) and count, and never changes the status. The
    `replayable` scenarios' points are vouched for by the rest (`section_points`)."""
    scenarios = {v.scenario: v.status for v in run.verdicts}
    chapter_track = run.chapter_verdicts
    passed = sum(v.passed for v in chapter_track)
    sections = section_points(chapter, run, hardening, replayable)
    beyond = run.hardening_verdicts
    grade = Grade(name, "fail", passed, len(chapter_track), round(sum(p for p, _ in sections.values()), 2),
                  sum(w for _, w in sections.values()), "", scenarios, sections,
                  f"{sum(v.passed for v in beyond)}/{len(beyond)}" if beyond else "")
    if run.flags:
        grade.status, grade.problem = "flagged", "; ".join(dict.fromkeys(run.flags))
        grade.points = 0.0
    elif run.judge_errors:
        grade.status, grade.problem = "error", run.judge_errors[0]
    elif run.import_errors:
        grade.status, grade.problem = "broken", import_message(run, inside=student)
        grade.points = 0.0  # a module that does not import earns nothing, whatever else its records claim
    elif run.passed:
        grade.status = "pass"
    elif run.timed_out:
        hung = [v for v in run.verdicts if v.status == "timeout"]
        grade.status = "timeout"
        grade.problem = "; ".join(
            ([f"{len(hung)} scenario(s) ran past their limit, first {hung[0].scenario}"] if hung else [])
            + ([f"the whole run was stopped at {wall:g} s"] if run.stopped else []))
    elif passed == 0 and all(v.status in ("error", "not run") for v in chapter_track):
        grade.status = "broken"
        problems = [v.problem for v in run.verdicts if v.problem]
        grade.problem = problems[0] if problems else "no scenario ran"
    if run.refused and grade.status in ("fail", "timeout"):  # (what the judge would not read, said in the row)
        grade.problem = "; ".join([grade.problem] * bool(grade.problem) + [
            f"{len(run.refused)} scenario(s) with records too large to judge, first {run.refused[0]}"])
    if len(grade.problem) > PROBLEM_LIMIT:
        grade.problem = grade.problem[:PROBLEM_LIMIT] + "…"
    return grade


def grade_one(chapter: Chapter, folder: Path, *, root: Path, wall: float, timeout: float, isolate: bool,
              plans: dict, wanted: dict, results: Path | None, shown: dict[str, str],
              ungradable: frozenset[str] = frozenset(), hardening: float = 0.0,
              masking: Masking | None = None) -> Grade:
    """One submission's row. Whatever goes wrong in the judge on it is its row (status `error`), never
    the end of the grade: the other submissions' rows and the table are still written."""
    module = folder / f"{chapter.module}.py"
    for link, what in ((folder, "the submission's folder"), (module, module.name)):
        if link.is_symlink():  # (the copy takes no link: it could lead anywhere on this machine)
            return Grade(folder.name, "missing", problem=f"{what} is a symbolic link (to {_target(link)}), not a "
                                                          "file handed in: the grade follows no link")
    if not module.is_file():
        # Without the module, carry-forward would quietly grade the reference.
        return Grade(folder.name, "missing", problem=f"no {chapter.module}.py in the folder")
    with processes.scratch_directory("course-grade-") as work:
        token = secrets.token_hex(8)
        try:
            sandbox = Sandbox(root, chapter, folder, Path(work), wall, isolate=isolate, token=token)
        except SubmissionRefused as error:
            return Grade(folder.name, "broken", problem=str(error))
        except Exception as error:
            return Grade(folder.name, "error", problem=f"the judge could not prepare its sandbox: {said(error)}")
        try:
            run = judge_chapter(chapter, sandbox.implementation, root=root, timeout=timeout, wall=wall,
                                prepare=sandbox.prepare, forbid=sandbox.forbidden, plans=plans, wanted=wanted,
                                hardening=hardening > 0, masking=masking)
            run.verdicts = [v for v in run.verdicts if v.scenario not in ungradable]
            grade = grade_of(folder.name, chapter, run, wall, student=sandbox.implementation, hardening=hardening,
                             replayable=masking.replayable if masking else frozenset())
            grade.scenarios.update(dict.fromkeys(sorted(ungradable), "not graded"))
            report = None
            if results is not None:
                report = results_json(chapter, run, str(folder), False, root, [])
                report.update({"submission": folder.name, "gradeStatus": grade.status, "points": grade.points,
                               "maxPoints": grade.max_points, "sections": grade.sections})
        except Exception as error:
            return Grade(folder.name, "error", problem=f"the judge failed on its records: {said(error)}")
        finally:
            sandbox.close()
            processes.end_marked(MARK, token)  # whatever it started and left behind
            processes.end_orphans()  # and what left its parents, the judge's mark and its session behind
    if report is not None:
        # Named as the table shows the submission (a long name is cut and hashed); "submission" in it is the name.
        path = results / f"{shown[folder.name]}.json"
        try:
            path.write_text(json_text(report), encoding="utf-8")
        except OSError as error:
            print(f"course grade: could not write {printable(path)}: {error.strerror}", file=sys.stderr)
    return grade


def reference_gaps(chapter: Chapter, *, root: Path, **options) -> frozenset[str]:
    """The scenarios the reference itself does not pass where the submissions run (say, chapter 08's
    device node, which the sandbox lets no one create): left out of every grade, and said once. The
    reference is graded as a submission would be, in the same sandbox, before any submission."""
    with processes.scratch_directory("course-grade-reference-") as work:
        folder = reference_folder(chapter, root, Path(work))
        reference = graded(chapter, folder, root=root, results=None, shown={"reference": "reference"}, **options)
    if reference.status == "pass":
        return frozenset()
    gaps = frozenset(name for name, status in reference.scenarios.items() if status != "passed")
    if not gaps or len(gaps) == len(reference.scenarios):  # the reference fails as a whole: a problem of the judge's
        print(f"course grade: the reference itself is graded {reference.status} here ({printable(reference.problem)}): "
              "the grades below cannot be trusted", file=sys.stderr)
        return frozenset()
    print(f"course grade: the reference itself does not pass {len(gaps)} scenario(s) here, left out of every "
          f"grade: {', '.join(sorted(gaps))}", file=sys.stderr)
    return gaps


def reference_folder(chapter: Chapter, root: Path, work: Path) -> Path:
    """A submission folder holding the chapter's reference module (graded as any submission is)."""
    folder = work / "reference"
    folder.mkdir(parents=True)
    (folder / f"{chapter.module}.py").write_bytes((root / chapter.reference_file).read_bytes())
    return folder


def scenario_points(chapter: Chapter, root: Path, hardening: float, names, left_out=frozenset()) -> dict[str, float]:
    """The graded fixed scenarios among `names`, and the points each carries (its section's weight shared among the
    section's graded scenarios: those `left_out`, which no one is graded on, not counted)."""
    expected = [e for e in expected_scenarios(chapter, root)
                if (hardening > 0 or e.track != HARDENING) and e.scenario not in left_out]
    points = {}
    for e in expected:
        if e.scenario in names:
            weight = float(hardening if e.section == HARDENING else chapter.weights.get(e.section, 1))
            points[e.scenario] = weight / sum(other.section == e.section for other in expected)
    return points


def published_form(chapter: Chapter, root: Path, hardening: float, left_out=frozenset()) -> dict[str, float]:
    """The graded fixed scenarios that run in their published form all the same (the catalogue's `published_form`),
    and the points each carries."""
    return scenario_points(chapter, root, hardening, chapter.published_form, left_out)


def rendered_as_published(chapter: Chapter, masking: Masking, root: Path) -> list[str]:
    """The masked fixed scenarios whose reference's renders are their published snapshots: what they show depends
    on nothing the mask changes (a schema's refusal, an error code alone, a path naming nothing of the workspace),
    so a replay of their published answers passes them."""
    stored = {e.scenario: e.snapshots for e in expected_scenarios(chapter, root) if not e.generated}
    return sorted(name for name, renders in masking.wanted.items()
                  if name in stored and renders == [path.read_text(encoding="utf-8") for path in stored[name]])


def reference_masking(chapter: Chapter, grading_secret: bytes, *, root: Path, wall: float, timeout: float,
                      isolate: bool, plans: dict, wanted: dict, hardening: float) -> Masking:
    """The fixed scenarios' masked form for this secret, and the reference's renderings of it (recorded once, in the
    sandbox every submission runs in): what each submission's masked runs must equal. A scenario the reference's
    masked run renders no whole answer for is judged in its published form (`say_what_is_not_masked`)."""
    masking = Masking(secret.derive(grading_secret, "mask", chapter.module))
    with processes.scratch_directory("course-grade-masked-") as work:
        folder = reference_folder(chapter, root, Path(work) / "submission")
        token = secrets.token_hex(8)
        sandbox = Sandbox(root, chapter, folder, Path(work) / "box", wall, isolate=isolate, token=token)
        try:
            run = judge_chapter(chapter, sandbox.implementation, root=root, timeout=timeout, wall=wall,
                                prepare=sandbox.prepare, forbid=sandbox.forbidden, plans=plans, wanted=wanted,
                                hardening=hardening > 0, masking=masking)
        finally:
            sandbox.close()
            processes.end_marked(MARK, token)
            processes.end_orphans()
    counts = {e.scenario: len(e.snapshots) for e in expected_scenarios(chapter, root)
              if not e.generated and (hardening > 0 or e.track != HARDENING)}
    rendered = {v.scenario: v.renders for v in run.verdicts
                if v.scenario in counts and v.status in ("passed", "failed") and len(v.renders) == counts[v.scenario]}
    return Masking(masking.key, rendered, tuple(sorted(set(counts) - set(rendered))))


def say_what_is_not_masked(chapter: Chapter, masking: Masking, ungradable: frozenset[str], *, root: Path,
                           hardening: float) -> frozenset[str]:
    """On stderr: the fixed scenarios of a grade with a secret that run in their published form all the same, and
    those whose masked form renders as the published one, with their points, but those the reference does not pass
    here, which no one is graded on; and a chapter a mask cannot protect. Returns them all: a replay of the published
    answers passes them, so their points count only as far as the rest of the chapter is passed."""
    published = [name for name in masking.published if name not in ungradable]
    if published:
        print(f"course grade: the reference's masked run rendered no answer for {len(published)} fixed scenario(s), "
              f"judged in their published form: {', '.join(published)}", file=sys.stderr)
    if chapter.unmasked:  # (the catalogue says why a mask cannot protect the chapter's fixed scenarios)
        print(f"course grade: {chapter.unmasked}", file=sys.stderr)
    unmaskable = published_form(chapter, root, hardening, ungradable)
    if unmaskable:
        why = "; ".join(sorted(set(chapter.published_form[name] for name in unmaskable)))
        print(f"course grade: {len(unmaskable)} fixed scenario(s) cannot run masked ({why}), judged in their published "
              f"form, {sum(unmaskable.values()):.2f} point(s){VOUCHED}: {', '.join(unmaskable)}", file=sys.stderr)
    replayed = scenario_points(chapter, root, hardening, chapter.replayable, ungradable)
    if replayed:
        why = "; ".join(sorted(set(chapter.replayable[name] for name in replayed)))
        print(f"course grade: {len(replayed)} fixed scenario(s) run masked, but their right answer depends on nothing a "
              f"mask changes ({why}), {sum(replayed.values()):.2f} point(s){VOUCHED}: {', '.join(replayed)}",
              file=sys.stderr)
    same = [name for name in rendered_as_published(chapter, masking, root) if name not in unmaskable]
    alike = scenario_points(chapter, root, hardening, same, ungradable)
    if alike:
        print(f"course grade: {len(alike)} fixed scenario(s) render the same masked as published (what they show "
              f"depends on nothing the mask changes), {sum(alike.values()):.2f} point(s){VOUCHED}: {', '.join(alike)}",
              file=sys.stderr)
    return frozenset(published) | frozenset(unmaskable) | frozenset(replayed) | frozenset(alike)


VOUCHED = (", earned in the share of the chapter's other points a submission earns (a replay of the published "
           "answers earns none of them)")


def _target(link: Path) -> str:
    try:
        return os.readlink(link)[:200]
    except OSError as error:
        return f"somewhere it cannot read: {error.strerror}"


def graded(chapter: Chapter, folder: Path, **options) -> Grade:
    """`grade_one`, and whatever escapes it (its clean-up included) is the submission's row, not the end of the grade."""
    try:
        return grade_one(chapter, folder, **options)
    except Exception as error:  # e.g. a results file its text cannot be written to
        return Grade(folder.name, "error", problem=f"the judge failed on it: {said(error)}")


def shard_of(folders: list[Path], shard: str | None) -> list[Path]:
    if not shard:
        return folders
    k, _, n = shard.partition("/")
    if not (k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise ValueError(f"--shard {shard!r}: write K/N with 1 <= K <= N, e.g. 2/4")
    return folders[int(k) - 1::int(n)]


def grade(args: argparse.Namespace) -> int:
    """Grade every submission folder (or one shard of them) and write the table."""
    chapter = find_chapter(args.chapter)
    root_dir = Path(args.submissions)
    if not root_dir.is_dir():
        print(f"course grade: {root_dir} is not a directory of submissions")
        return 2
    folders = sorted(p for p in root_dir.iterdir() if p.is_dir() and not p.name.startswith((".", "__")))
    shown = shown_names([folder.name for folder in folders])  # (of every folder: each shard names them alike)
    try:
        folders = shard_of(folders, args.shard)
    except ValueError as error:
        print(f"course grade: {error}")
        return 2
    if not folders:
        print(f"course grade: {root_dir} holds no submission folders" + (" in this shard" if args.shard else ""))
        return 1
    root = course_root()
    try:
        grading_secret = secret.read(args.seed, args.seed_file)
    except ValueError as error:
        print(f"course grade: {error}")
        return 2
    isolate = sandbox_mode(args)
    if isolate is None:
        return 2
    warning = secret.warning(grading_secret, args.seed is not None) if grading_secret is not None else None
    if warning:
        print(f"course grade: {warning}", file=sys.stderr)
    processes.become_subreaper()
    hardening = chapter.hardening_weight if args.hardening is None else args.hardening
    if hardening < 0:
        print(f"course grade: --hardening {hardening:g}: the hardening track's weight is 0 (left out) or more")
        return 2
    plans, wanted = graded_plans(chapter, root, grading_secret, hardening=hardening > 0)
    results = Path(args.results) if args.results else None
    if results is not None:
        results.mkdir(parents=True, exist_ok=True)
    masking = None if grading_secret is None else reference_masking(
        chapter, grading_secret, root=root, wall=args.timeout, timeout=args.scenario_timeout, isolate=isolate,
        plans=plans, wanted=wanted, hardening=hardening)
    ungradable = reference_gaps(chapter, root=root, wall=args.timeout, timeout=args.scenario_timeout,
                                isolate=isolate, plans=plans, wanted=wanted, hardening=hardening, masking=masking)
    if masking is not None:
        masking = replace(masking, replayable=say_what_is_not_masked(chapter, masking, ungradable, root=root,
                                                                     hardening=hardening))
    grades = grade_in_parallel(chapter, folders, args.jobs, root=root, wall=args.timeout,
                               timeout=args.scenario_timeout, isolate=isolate, plans=plans, wanted=wanted,
                               results=results, shown=shown, ungradable=ungradable, hardening=hardening,
                               masking=masking)
    if cgroups.isolation_gap():
        print(f"course grade: {cgroups.isolation_gap()}", file=sys.stderr)
    return finish(chapter, grades, args, shown)


def grade_in_parallel(chapter: Chapter, folders: list[Path], jobs: int | None, **options) -> list[Grade]:
    """Each folder `graded` with `options`, `jobs` at a time (one per CPU by default), under a progress bar;
    whatever a submission left running is ended before this returns."""
    from tqdm import tqdm  # part of the test extra, like pytest itself

    grades: list[Grade] = []
    with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        pending = [pool.submit(graded, chapter, folder, **options) for folder in folders]
        try:
            for done in tqdm(as_completed(pending), total=len(pending), desc=f"grading chapter {chapter.number}",
                             unit="submission"):
                grades.append(done.result())
        except KeyboardInterrupt:
            pool.shutdown(cancel_futures=True)
            raise
        finally:
            processes.end_strays()
            processes.end_orphans()  # (what a stray left behind: this process is their subreaper)
    return grades


def graded_plans(chapter: Chapter, root: Path, grading_secret: bytes | None,
                 hardening: bool = False) -> tuple[dict, dict]:
    """Every generated section's plans (the published ones, then the secret's) and the reference's runs of them:
    the chapter track's, and the hardening track's when `hardening` grades it too.

    Computed here, once per grade, in memory, and shared by every submission: never read from the disk
    cache, which any student code `course check` ran (without a sandbox, as this user) could have
    rewritten. (Half a second for chapter 07's.)"""
    differential.disk_cache = False
    seeds = [None] if grading_secret is None else [None, grading_secret]
    expected = [e for e in expected_scenarios(chapter, root) if e.generated and (hardening or e.track != HARDENING)]
    plans = {e.generated: [p for s in seeds for p in differential.draw_plans(chapter.module, e.generated, seed=s)]
             for e in expected}
    wanted = {key: differential.expected_renders(chapter.module, key, section_plans)
              for key, section_plans in plans.items()}
    return plans, wanted


def sandbox_mode(args: argparse.Namespace) -> bool | None:
    """Whether submissions run in bubblewrap's sandbox; None when they may not run at all: without the
    sandbox (not installed, or --no-sandbox) only code the grader trusts is graded (--trusted), and
    every such run says which of docs/guarantees.md's guarantees do not hold."""
    if not args.no_sandbox and bubblewrap() is not None:
        if not knows_size(bubblewrap()):
            print("course grade: this bubblewrap takes no --size (it is older than 0.8): each submission's private "
                  "/tmp and HOME are not bounded in size (and its /dev/shm is read-only)")
        for gap in confine.missing():
            print(f"course grade: {gap}", file=sys.stderr)
        return True
    why = "--no-sandbox" if args.no_sandbox else "bubblewrap (bwrap) is not installed"
    if not args.trusted:
        print(f"course grade: {why}: without its sandbox a submission runs as your user and can read and change what "
              "you can, the answers and the other submissions included. Grade untrusted code with bubblewrap "
              "(apt-get install bubblewrap); code you trust, with --trusted.", file=sys.stderr)
        return None
    print(f"course grade: --trusted, {why}: these guarantees of docs/guarantees.md do not hold in this grade:", file=sys.stderr)
    for gap in [*UNSANDBOXED, *confine.missing()]:
        print(f"  - {gap}", file=sys.stderr)
    confine.shield_judge()
    return False


UNSANDBOXED = (
    "the submission never sees the answers: it runs as your user and can read the checkout (the chapter's "
    "reference, its snapshots, the judge) and the other submissions",
    "it cannot change the checkout, the snapshots or another submission, nor write outside its sandbox: it "
    "writes wherever you can, and its /tmp and HOME are on your disk, of no bounded size",
    "it has no network: it has yours",
    "it sees none of your processes: it sees them all, reads this command's line (a --seed given there: use "
    "--seed-file) and, graded as root, the judge's environment and memory through /proc; it can stop or end the "
    "judge (no table is written) and, under --jobs 2 or more, another submission's run",
    "System V IPC objects and /dev/shm files it makes end with it: they outlive the grade",
    "everything it starts ends with its process namespace: the judge ends what it finds instead (its own "
    "children, followed until none is left), so a process that forks faster than the judge ends it could outlive "
    "the grade",
)
"""docs/guarantees.md's guarantees of a graded submission that need bubblewrap's sandbox, as a grade without it
says they do not hold. (Its limits, the copy without the answers, its environment of its own, a fresh
session keyring and the seccomp filter hold all the same.)"""


def short_name(name: str, digits: int = 8) -> str:
    """A submission's name as the table shows it (and its results file is named): the name itself when
    it is printable and short (NAME_LENGTH characters, NAME_BYTES bytes of UTF-8 at the most) and does
    not end as a shortened name does; else its first characters, control characters escaped, then `~`
    and the first `digits` hex digits of the name's SHA-256."""
    if name.isprintable() and len(name) <= NAME_LENGTH and len(name.encode("utf-8", "surrogateescape")) <= NAME_BYTES \
            and not SHORTENED.search(name):
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:digits]
    return f"{printable(name)[:NAME_LENGTH - 20]}~{digest}"


def shown_names(names: list[str]) -> dict[str, str]:
    """Each name as the table shows it (`short_name`), a different one for each name: where two shortened
    names would be the same, each of them takes more of its hash (up to all 64 digits), so that two names
    never share a row's name or a results file."""
    shown = {name: short_name(name) for name in names}
    digits = 8
    while len(set(shown.values())) < len(shown) and digits < 64:
        digits *= 2
        taken = collections.Counter(shown.values())
        shown = {name: short_name(name, digits) if taken[was] > 1 else was for name, was in shown.items()}
    return shown


def json_text(data: object) -> str:
    """`data` as JSON text that any file takes: a lone surrogate (a submission's text, a folder's name that
    is not UTF-8) written as JSON's own escape (`\\ud800`), which reads back as the same text."""
    return utf8_text(json.dumps(data, ensure_ascii=False, indent=2)) + "\n"


def csv_cell(value: object) -> object:
    """A text for a CSV cell: a lone surrogate shown as its escape (`\\ud800`), and a text a spreadsheet
    would take for a formula (`=1+1`, `@SUM(...)`) after a `'` (numbers as they are)."""
    if not isinstance(value, str):
        return value
    text = utf8_text(value)
    return "'" + text if text.startswith(FORMULA) else text


def finish(chapter: Chapter, grades: list[Grade], args: argparse.Namespace, shown: dict[str, str] | None = None) -> int:
    grades.sort(key=lambda g: g.submission)
    names = list(dict.fromkeys(name for g in grades for name in g.scenarios))
    outputs = [out for out in (args.out, args.json) if out]
    for out in outputs:
        write_table(chapter, grades, names, out, as_json=out == args.json or out.endswith(".json"))
    # A submission's name and problem are its own text: escaped, so that no control character in them
    # rewrites the table on a terminal; the files written above hold them as they are.
    names = shown or shown_names([g.submission for g in grades])
    width = max(24, *(len(name) + 1 for name in names.values()))
    beyond = any(g.hardening for g in grades)
    if beyond:
        print(f"(the {BEYOND} column: beyond the chapter, weighted into the points, never the status)")
    for g in grades:
        points = f"{g.points:g}/{g.max_points:g}" if g.max_points else ""
        extra = f" {HARDENING} {g.hardening:<7}" if beyond else ""
        print(f"{names[g.submission]:<{width}} {g.status:<8} {g.passed:>3}/{g.total:<3}{extra} {points:>9}  "
              f"{printable(g.problem, PROBLEM_LENGTH)}")
    if outputs:
        print(f"\nwrote {', '.join(outputs)}")
    return 0


def write_table(chapter: Chapter, grades: list[Grade], names: list[str], out: str, *, as_json: bool) -> None:
    path = Path(out)
    if as_json:
        data = {"chapter": chapter.number, "grades": [asdict(g) for g in grades]}
        path.write_text(json_text(data), encoding="utf-8")
        return
    sections = list(dict.fromkeys(s for g in grades for s in g.sections))
    with path.open("w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow([csv_cell(cell) for cell in ["submission", "status", "passed", "total", "points", "max_points",
                                                     "problem", f"{BEYOND} passed",
                                                     *(f"points: {s}" for s in sections), *names]])
        for g in grades:
            writer.writerow([csv_cell(cell) for cell in [
                g.submission, g.status, g.passed, g.total, g.points, g.max_points, g.problem, g.hardening,
                *(g.sections.get(s, ["", ""])[0] for s in sections), *(g.scenarios.get(name, "") for name in names)]])


def merge(args: argparse.Namespace) -> int:
    """Join the JSON tables of several shards into one table, as if graded in one run."""
    grades: list[Grade] = []
    chapters = set()
    for part in args.parts:
        data = json.loads(Path(part).read_text(encoding="utf-8"))
        chapters.add(data["chapter"])
        grades += [Grade(**row) for row in data["grades"]]
    if len(chapters) != 1:
        print(f"course grade merge: the parts grade different chapters ({', '.join(sorted(chapters))})")
        return 2
    seen = [g.submission for g in grades]
    if len(seen) != len(set(seen)):
        print("course grade merge: a submission appears in more than one part")
        return 2
    return finish(find_chapter(chapters.pop()), grades, args)


def register(commands) -> None:
    parser = commands.add_parser(
        "grade", help="instructors: grade a folder of submissions into one table (or: grade merge PART.json ...)",
        usage="course grade NN SUBMISSIONS_DIR [options]\n       course grade merge PART.json [PART.json ...] [--out FILE]")
    parser.add_argument("words", nargs="+", metavar="NN SUBMISSIONS_DIR | merge PART.json ...")
    parser.add_argument("--out", metavar="FILE", help="write the table to FILE (CSV; JSON if FILE ends in .json)")
    parser.add_argument("--json", metavar="FILE", help="write the table as JSON to FILE (what `grade merge` reads)")
    parser.add_argument("--results", metavar="DIR", help="write each submission's results (per scenario) to DIR/NAME.json "
                        "(a long or unprintable NAME shortened as the table shows it)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds of its own time per submission in all (CPU time, and time blocked; not time "
                             "waiting for a busy CPU), default 60")
    parser.add_argument("--scenario-timeout", type=float, default=10.0, help="seconds of its own time per scenario (default 10)")
    parser.add_argument("--seed", metavar="SECRET", default=None,
                        help="add generated plans drawn from this secret (128 bits or more: 32 hex digits)")
    parser.add_argument("--seed-file", metavar="FILE", default=None,
                        help="--seed, read from FILE (so that it is not on the command line)")
    parser.add_argument("--trusted", action="store_true",
                        help="grade without bubblewrap's sandbox (not installed, or --no-sandbox): trusted code only")
    parser.add_argument("--hardening", type=float, default=None, metavar="WEIGHT",
                        help=f"also grade the hardening track ({BEYOND}: beyond the chapter), worth WEIGHT points "
                             "besides the sections' (default: the catalogue's hardening_weight, 0: left out); "
                             "it never decides the status")
    parser.add_argument("--shard", metavar="K/N", help="grade only the K-th of N slices of the submissions")
    parser.add_argument("--jobs", type=int, default=None, help="submissions at a time (default: the cores)")
    parser.add_argument("--no-sandbox", action="store_true",
                        help="run without bubblewrap even where installed (needs --trusted)")
    parser.set_defaults(handler=_grade_or_merge)


def _grade_or_merge(args: argparse.Namespace) -> int:
    if args.words[0] == "merge":
        args.parts = args.words[1:]
        if not args.parts:
            print("course grade merge: name the --json tables of the shards to join")
            return 2
        return merge(args)
    if len(args.words) != 2:
        print("course grade: usage: course grade NN SUBMISSIONS_DIR [options] | course grade merge PART.json ...")
        return 2
    args.chapter, args.submissions = args.words
    return grade(args)
