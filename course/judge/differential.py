"""Generated scenarios, judged: plans drawn per section, the reference's run of each as the oracle.

Plans come from each chapter's Hypothesis strategies (`course.judge.scenarios`). The `default`
profile draws a fixed number per section from a fixed seed, so plain pytest, `course check` and
`course grade` see the same plans every time and a failure reproduces by running the same command;
`long` draws many more from a fresh seed (printed, to rerun the same hunt). `course grade --seed TEXT`
(or `--seed-file`) draws the default number from each section's key of that secret: plans nobody
has seen (`course.judge.secret`).

Plain pytest judges in its own process (`compare_section`), where Hypothesis also shrinks a failing
plan to a small one. `course check` and `course grade` judge records (`expected_renders` and
`compare`), in a process that never runs student code.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
import random
import re
import sys
import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from course.judge import scenarios as judge_scenarios
from course.judge import secret
from course.judge.render import render_record
from course.judge.timeline import first_divergence
from course.manifest import FOLDER, JUDGE, ROOT
from course.recorder import impl
from course.recorder import scenarios as recorder_scenarios
from course.recorder.limits import PlanTimedOut, time_limit
from course.runtime.clock import StepClock, use_clock

PROFILE_ENV = "TINY_PI_HYPOTHESIS_PROFILE"
SEED_ENV = "TINY_PI_HYPOTHESIS_SEED"
PROFILES = {"default": 1, "long": 40}
"""How many times a section's default number of plans each profile draws."""
PLAN_TIMEOUT = 5.0
"""Seconds one plan's run may take: the reference needs milliseconds."""
DEFAULT_EXAMPLES = 40
"""Plans per section in the default profile, unless the chapter's STRATEGIES module says otherwise."""


def profile() -> tuple[str, int | None]:
    """The profile named by $TINY_PI_HYPOTHESIS_PROFILE, and the seed of a `long` hunt (None: fixed seeds)."""
    name = os.environ.get(PROFILE_ENV) or "default"
    if name not in PROFILES:
        raise ValueError(f"{PROFILE_ENV}={name!r}: choose one of {', '.join(PROFILES)}")
    if name == "default":
        return name, None
    return name, int(os.environ.get(SEED_ENV) or random.randrange(2**32))


def section_seed(module: str, section: str, seed: str | bytes | int | None) -> int:
    """The seed of one section's plans: fixed per section (public), or with a grading secret the section's
    own key (HMAC-SHA256 of the secret with the chapter and section): its plans tell nothing about the
    secret or another section's. (A chapter's `SEED_KEYS` may name another section's public seed for one: a
    section renamed keeps the published plans it drew; a secret's keys stay every section's own.)"""
    if seed is None:
        key = getattr(judge_scenarios.for_chapter(module), "SEED_KEYS", {}).get(section, section)
        return zlib.crc32(f"{module}:{key}:0".encode())
    return int.from_bytes(secret.derive(seed, "plans", module, section), "big")


def examples(module: str, section: str, multiplier: int = 1) -> int:
    counts = getattr(judge_scenarios.for_chapter(module), "EXAMPLES", {})
    return counts.get(section, DEFAULT_EXAMPLES) * multiplier


@contextmanager
def same_plans_everywhere() -> Iterator[None]:
    """Hypothesis also draws constants it finds in the project's modules loaded so far; which those
    are differs between processes, so the plans would too. While plans are drawn it sees none."""
    try:
        from hypothesis.internal.conjecture import providers
        original, empty = providers._get_local_constants, providers.Constants()
    except (ImportError, AttributeError):  # another Hypothesis: nothing of the kind to hold still
        yield
        return
    providers._get_local_constants = lambda: empty
    providers.CONSTANTS_CACHE.cache.clear()
    try:
        yield
    finally:
        providers._get_local_constants = original
        providers.CONSTANTS_CACHE.cache.clear()


def _settings(count: int, *, shrink: bool):
    from hypothesis import HealthCheck, Phase, settings

    from course.judge.drawing import BACKEND

    phases = [Phase.explicit, Phase.generate, Phase.shrink] if shrink else [Phase.explicit, Phase.generate]
    return settings(max_examples=count, deadline=None, database=None, derandomize=False, phases=phases,
                    print_blob=False, suppress_health_check=list(HealthCheck), backend=BACKEND,
                    report_multiple_bugs=False)


CACHE_ENV = "TINY_PI_CACHE"
disk_cache = True
"""Whether drawn plans and the reference's renderings are kept on disk. `course grade` turns it off:
student code that `course check` runs (without a sandbox) can rewrite the cache, and a grade must
trust nothing a student's process could have written; it draws and runs them once per grade anyway."""


def cache_directory() -> Path | None:
    """Where drawn plans and the reference's renderings of them are kept between runs: $TINY_PI_CACHE,
    else the user's cache directory; None (no cache) where it cannot be written."""
    base = os.environ.get(CACHE_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "tiny-pi")
    try:
        Path(base).mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return Path(base)


@functools.lru_cache(maxsize=1)
def _sources_digest() -> str:
    """What drawn plans and the reference's runs depend on: every source file of the course and the
    chapters' folders (their references, scenarios and plans), Hypothesis's version and Python's. Any change
    makes a new cache entry."""
    import hypothesis

    digest = hashlib.sha256(f"{hypothesis.__version__} {sys.version}".encode())
    root = Path(__file__).resolve().parents[2]
    for folder in ("course", "checkpoints", FOLDER):
        for path in sorted((root / folder).rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    for path in sorted((root / FOLDER).glob(f"*/{JUDGE}/pinned.json")):  # pinned plans are drawn plans too
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _cached(what: str, key: str, compute: Callable[[], list]) -> list:
    """`compute()`, kept on disk under `what` and `key` (with the sources' digest), read back next time."""
    directory = cache_directory() if disk_cache else None
    if directory is None:
        return compute()
    name = hashlib.sha256(f"{_sources_digest()} {what} {key}".encode()).hexdigest()[:32]
    path = directory / f"{what}-{name}.json"
    try:
        return json.loads(path.read_text(encoding="ascii"))
    except (OSError, ValueError):
        pass
    value = compute()
    try:
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(value), encoding="ascii")  # ASCII: plans may hold text that is not UTF-8
        os.replace(partial, path)
    except OSError:
        pass
    return value


def draw_plans(module: str, section: str, *, seed: str | bytes | int | None = None, multiplier: int = 1) -> list[dict]:
    """The plans a section's test runs: the same list wherever it is drawn, for the same seed (or secret)."""
    # (The cache's key holds no secret: the section's seed, which is derived from it.)
    return _cached("plans", f"{module} {section} {section_seed(module, section, seed)} {multiplier}",
                   lambda: _draw_plans(module, section, seed=seed, multiplier=multiplier))


def pinned_file(module: str) -> Path:
    """The chapter's pinned plans, `chapters/<module>/judge/pinned.json` (optional)."""
    return ROOT / FOLDER / module / JUDGE / "pinned.json"


def pinned_plans(module: str, section: str) -> list[dict]:
    """The section's pinned plans (the chapter's `judge/pinned.json`, then its plans module's `PINNED`, each
    {section: [{"why", "plan"}]}): cases a wrong implementation was once found to pass that drawn plans
    reach only by luck, run first, always."""
    path = pinned_file(module)
    entries = json.loads(path.read_text(encoding="utf-8")).get(section, []) if path.exists() else []
    entries += getattr(judge_scenarios.for_chapter(module), "PINNED", {}).get(section, [])
    return [entry["plan"] for entry in entries]


def _draw_plans(module: str, section: str, *, seed: str | bytes | int | None, multiplier: int) -> list[dict]:
    from hypothesis import given
    from hypothesis import seed as with_seed

    strategy = judge_scenarios.for_chapter(module).STRATEGIES[section]
    found: list[dict] = []

    @with_seed(section_seed(module, section, seed))
    @_settings(examples(module, section, multiplier), shrink=False)
    @given(strategy)
    def collect(plan):
        found.append(plan)

    with _drawing, same_plans_everywhere():
        collect()
    return pinned_plans(module, section) + found


_one_at_a_time = threading.Lock()  # the runtime's clock is one for the process: runs must not overlap
_drawing = threading.Lock()  # nor may two threads draw with Hypothesis at once (`course status` judges two chapters)


def run_plan(module: str, plan: dict, load: Callable, runner: asyncio.Runner) -> dict:
    """One plan's run, as a record, under a fresh step clock."""
    with _one_at_a_time, use_clock(StepClock()):
        return runner.run(recorder_scenarios.for_chapter(module).run_plan(plan, load))


def describe(module: str, plan: dict) -> str:
    """A plan in words, as its chapter describes it; never raises."""
    try:
        return judge_scenarios.for_chapter(module).describe(plan)
    except Exception:
        return repr(plan)[:2000]


def plan_cites(module: str, plan: dict, at: str | None = None) -> tuple[str, ...]:
    """What a plan enforces: names of its chapter's citations or hardening promises (`course.judge.contracts`);
    none where the chapter's scenarios module does not say. `at`, the section of the rendering a run first
    departed in, narrows them where the chapter can say what that part of the plan holds to (`cites_at`).
    Never raises."""
    try:
        chapter = judge_scenarios.for_chapter(module)
        narrowed = tuple(chapter.cites_at(plan, at)) if at and hasattr(chapter, "cites_at") else ()
        return narrowed or tuple(getattr(chapter, "cites_of", lambda plan: ())(plan))
    except Exception:  # a plan of an older shape: it enforces what its section says
        return ()


def enforced(module: str, plan: dict, at: str | None = None) -> list[str]:
    """What a plan enforces (where its run first departed, `at`, when given), as a student reads it."""
    from course.judge import contracts

    names = plan_cites(module, plan, at)
    if names:
        return contracts.for_chapter(module).lines(names)
    hardening = getattr(judge_scenarios.for_chapter(module), "HARDENING_SECTIONS", None)
    return ["(this plan stays inside the chapter's contract: what it checks, the chapter track checks too)"] \
        if hardening is not None and not plan.get("kind") else []


def verdict(module: str, plan: dict, got: str, expected: str) -> str | None:
    """None when the runs agree; else what a student reads: the plan, the first divergence, what broke."""
    if got == expected:
        return None
    lines = ["plan: " + describe(module, plan)]
    divergence = first_divergence(expected, got)
    lines += [f"enforces: {line}" for line in enforced(module, plan, divergence.section if divergence else None)]
    lines.append(divergence.describe() if divergence else "the run differs from the reference's run")
    broken = broken_lines(got)
    if broken:
        lines += ["broken promises:", *(f"  broken {n}: {line}" for n, line in enumerate(broken, 1))]
    return "\n".join(lines)


_BROKEN = re.compile(r"^\s+broken \d+\s+(.*)$")


def broken_lines(rendered: str) -> list[str]:
    """Every promise of the chapter a rendered run broke, in words, in the order its observations
    number them (`broken 1`, `broken 2`, ...)."""
    found = []
    for line in rendered.splitlines():
        if line.startswith("## ") and found:
            break
        match = _BROKEN.match(line)
        if match:
            found.append(match.group(1).strip())
    return found


_abandoned: list[asyncio.Runner] = []


class SectionStopped(BaseException):
    """A plan ran past its time limit, or its record says a time bound cut its run short ("interrupted"):
    the section stops there (Hypothesis does not catch it to shrink)."""


def compare_section(module: str, section: str) -> None:
    """Plain pytest: every plan of the section on the implementation under test and on the reference. A failing
    plan is shrunk by Hypothesis (for SHRINK_SECONDS at the most): the failure shows the smallest plan it found
    that still diverges, in words and as JSON, and the first failing plan it came from."""
    from course.judge.shrunk import PLANS_SEED_ENV, SHRINK_SECONDS, SHRUNK_ENV, Failures, ShrinkingStopped

    name, hunt_seed = profile()
    seed = hunt_seed if hunt_seed is not None else os.environ.get(PLANS_SEED_ENV) or None
    seed = int(seed) if isinstance(seed, str) and seed.isdigit() else seed  # (`course check --seed N`'s)
    if hunt_seed is None and not os.environ.get(SHRUNK_ENV) and every_plan_agrees(module, section, seed):
        return  # (a section that passes costs its plans' runs alone, without Hypothesis's engine)
    runner = asyncio.Runner()
    count = examples(module, section, PROFILES[name])
    pinned = len(pinned_plans(module, section))
    failures = Failures(module, section, pinned + count)
    if os.environ.get(SHRUNK_ENV):  # `course check`'s shrinking: pinned plans never shrink (Hypothesis runs them as
        failures.calls, pinned = pinned, 0  # they are), so only the drawn ones run, counted after them
    check = _section_test(module, section, seed, count, runner, failures, pinned > 0,
                          known=published_renders(module, section, seed) if hunt_seed is None else {},
                          hunt=(name, hunt_seed) if hunt_seed is not None else None)
    stopped = None
    try:
        with same_plans_everywhere():
            check()
    except SectionStopped as error:
        stopped = error
    except ShrinkingStopped:
        raise AssertionError(failures.last["problem"] + f"\n(Hypothesis was still shrinking it after "
                             f"{SHRINK_SECONDS:g} s: the smallest plan it had found)") from None
    except AssertionError as error:
        said = failures.shrunk_from()
        if said:
            error.add_note(said)
        raise
    finally:
        if stopped is None:
            runner.close()  # (not after a time limit: closing would run the spinning task again)
    if stopped is not None:
        _abandoned.append(runner)  # kept, not collected: its loop still holds the task that spun
        raise AssertionError(str(stopped))


def every_plan_agrees(module: str, section: str, seed) -> bool:
    """Whether the implementation under test runs every plan of the section as the reference does: the pinned
    plans, then those the section's Hypothesis test draws for this seed (`draw_plans`, the list `course check`
    judges). At the first that does not, False: the Hypothesis test runs the section again, finds that plan and
    shrinks it. A plan past its time limit fails the section here, as it would there, without a second wait."""
    known = published_renders(module, section, seed)
    runner, stopped = asyncio.Runner(), None
    try:
        for plan in draw_plans(module, section, seed=seed):
            key = plan_key(plan)  # (before the run: the code under test could change the plan)
            record, got, left = _run_under_test(module, plan, runner)
            expected = reference_render(module, plan, key, known, runner)
            if left or got != expected:
                return False
        return True
    except SectionStopped as error:
        stopped = error
        _abandoned.append(runner)  # (as compare_section does: closing it would run the spinning task again)
        raise AssertionError(str(error)) from None
    finally:
        if stopped is None:
            runner.close()


def _section_test(module: str, section: str, seed, count: int, runner: asyncio.Runner, failures, with_pinned: bool,
                  known: dict[str, str], hunt: tuple[str, int] | None) -> Callable[[], None]:
    """The Hypothesis test of one section: each plan (the pinned ones first) on the implementation under test
    and on the reference; a failing one shrinks."""
    from hypothesis import example, given, note
    from hypothesis import seed as with_seed

    def pinned(test):
        for plan in reversed(pinned_plans(module, section) if with_pinned else []):  # (decorators apply bottom-up: keep the file's order)
            test = example(plan)(test)
        return test

    @with_seed(section_seed(module, section, seed))
    @_settings(count, shrink=True)
    @pinned
    @given(judge_scenarios.for_chapter(module).STRATEGIES[section])
    def check(plan):
        failures.called()
        key = plan_key(plan)  # (before the run: the code under test could change the plan)
        record, got, left = _run_under_test(module, plan, runner)
        expected = reference_render(module, plan, key, known, runner)
        problem = verdict(module, plan, got, expected)
        if problem is None and left:
            problem = f"plan: {describe(module, plan)}\n{len(left)} task(s) still running after the run ended"
        if problem is None:
            return
        problem += "\nplan (JSON): " + json.dumps(plan, ensure_ascii=False, default=repr)
        failures.failed(plan, problem)
        if hunt is not None:
            note(f"profile {hunt[0]}, seed {hunt[1]}: rerun with {PROFILE_ENV}={hunt[0]} {SEED_ENV}={hunt[1]}")
        note(got)
        if record.get("interrupted"):  # not shrunk: each smaller plan could spin as long again
            raise SectionStopped(problem)
        raise AssertionError(problem)

    return check


def reference_render(module: str, plan: dict, key: str | None, known: dict[str, str], runner: asyncio.Runner) -> str:
    """The reference's run of the plan, rendered: from `known` (the published plans' runs) by its key taken before
    the run under test, else run now."""
    return known.get(key) or render_record(run_plan(module, plan, impl.load_reference, runner))


def _run_under_test(module: str, plan: dict, runner: asyncio.Runner) -> tuple[dict, str, list]:
    """The plan's run on the implementation under test: its record, rendered, and the tasks it left running."""
    try:
        with time_limit(PLAN_TIMEOUT, "a generated plan") as watch:
            record = run_plan(module, plan, impl.load_checkpoint, runner)
            got = render_record(record)
    except PlanTimedOut:
        watch.fired = watch.fired or 1
    if watch.fired:  # not shrunk: each smaller plan could spin as long again
        raise SectionStopped(f"plan: {describe(module, plan)}\nit did not finish within {PLAN_TIMEOUT:g} s")
    return record, got, list(asyncio.all_tasks(runner.get_loop()))


def plan_key(plan: dict) -> str | None:
    """The plan as JSON text, when that text reads back as the very same plan (no tuple, no NaN, no key that is
    not a string); else None."""
    try:
        text = json.dumps(plan, sort_keys=True)
        return text if json.loads(text) == plan else None
    except (TypeError, ValueError, RecursionError):
        return None


def published_renders(module: str, section: str, seed: str | bytes | int | None = None) -> dict[str, str]:
    """The reference's run of each published plan of the section, rendered, by `plan_key`: the ones `course check`
    keeps in the disk cache. Plain pytest draws the same plans in the default profile, so it runs the reference on
    each once, not in every run; a plan not among them (a shrunk one) runs the reference then. Nothing without
    the disk cache (it would run them all twice)."""
    if not disk_cache or cache_directory() is None:
        return {}
    plans = draw_plans(module, section, seed=seed)
    return {plan_key(plan): render for plan, render in zip(plans, expected_renders(module, section, plans))
            if plan_key(plan) is not None}


def expected_renders(module: str, section: str, plans: list[dict]) -> list[str]:
    """The reference's run of each plan, rendered: what a student's record of the same plan must render as."""
    def run_them() -> list[str]:
        with asyncio.Runner() as runner:
            return [render_record(run_plan(module, plan, impl.load_reference, runner)) for plan in plans]

    key = hashlib.sha256(json.dumps(plans, sort_keys=True).encode()).hexdigest()
    return _cached("renders", f"{module} {section} {key}", run_them)
