"""pytest options of the course: which implementation the chapter tests judge, the record mode in
which `course check` and `course grade` run a student's code, and the seeded task start order
`course snapshots verify` varies.

In record mode (`--course-record=FILE`) nothing is judged here: each scenario's snapshot assertions
and each generated plan's run are written to FILE as JSON lines, as they happen, and the judge
(`course.judge.session`), in another process, decides every verdict from them.
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import json
import os
import random
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from course.manifest import FOLDER, HARDENING
from course.recorder import impl
from course.recorder import mask as masks
from course.recorder.limits import PlanTimedOut, ScenarioTimedOut, ignore_stray_signals, time_limit
from course.recorder.record import jsonable

PLAN_TIMEOUT = 5.0
"""Seconds one generated plan may take (the reference needs milliseconds)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tiny-pi course")
    group.addoption("--impl", default=os.environ.get(impl.IMPL_ENV) or None, metavar="DIR_OR_PACKAGE",
                    help=f"run the chapter tests against a student's modules (also ${impl.IMPL_ENV}); "
                         "chapters it lacks fall back to the reference")
    group.addoption("--impl-chain", action="store_true", default=bool(os.environ.get(impl.CHAIN_ENV)),
                    help=f"earlier chapters imported by the student's modules are the student's too "
                         f"(also ${impl.CHAIN_ENV}=1)")
    group.addoption("--reference", action="store_true",
                    help="judge the reference checkpoints even where a student/ directory exists")
    group.addoption("--course-record", default=None, metavar="FILE",
                    help="record mode: write every scenario's runs to FILE as JSON lines and judge nothing")
    group.addoption("--course-plans", default=None, metavar="FILE",
                    help="record mode: the generated plans to run, per section (JSON written by the judge)")
    group.addoption("--course-forbid", default=None, metavar="MODULES",
                    help="record mode: comma-separated modules whose import is refused and recorded as a flag")
    group.addoption("--hardening", action="store_true",
                    help=f"also judge your modules on the hardening track ({HARDENING}: what the project adds beyond "
                         "the chapter, never part of its verdict); the reference is always judged on it")
    group.addoption("--course-time-limit", type=float, default=None, metavar="SECONDS",
                    help="seconds of its own time (CPU, and time blocked, not time waiting for a busy CPU) each "
                         "chapter scenario may take; also the `own_time_limit` mark")
    group.addoption("--schedule-seed", type=int, default=None, metavar="N",
                    help="start concurrent tasks in an order derived from N (0 = asyncio's own order); "
                         "what `course snapshots verify` varies")


def pytest_configure(config: pytest.Config) -> None:
    location = config.getoption("--impl")
    if location and config.inipath is None and os.path.isdir(location) and os.path.samefile(config.rootpath, location):
        # pytest picks its root directory from the command line before any plugin's options are
        # known, so a separate DIR after --impl is read as the directory under test.
        raise pytest.UsageError(f"write --impl={location} (with '='), or set {impl.IMPL_ENV}={location}")
    if location and config.getoption("--reference"):
        raise pytest.UsageError("--reference judges the reference checkpoints: leave out --impl (and $TINY_PI_IMPL)")
    if location is None and not config.getoption("--reference") and (config.rootpath / impl.STUDENT_DIRECTORY).is_dir() \
            and _judges_chapters(config):
        location = str(config.rootpath / impl.STUDENT_DIRECTORY)  # the one rule: --impl, $TINY_PI_IMPL, student/
    if location and config.getoption("update_snapshots", default=False):
        raise pytest.UsageError(
            "--snapshot-update with a student implementation is refused: snapshots belong to the reference. "
            "Run `course snapshots update` (or pytest --snapshot-update without --impl)."
        )
    try:
        chosen = impl.configure(location, chain=config.getoption("--impl-chain"))
    except impl.ImplementationError as error:
        raise pytest.UsageError(str(error)) from None
    config.stash[_IMPL_KEY] = chosen
    if config.getoption("--course-record"):
        recording = Recording(config.getoption("--course-record"), config.getoption("--course-plans"), chosen)
        config.stash[_RECORDING_KEY] = recording
        config.pluginmanager.register(recording, "course-record")
        forbidden = [m for m in (config.getoption("--course-forbid") or "").split(",") if m]
        if forbidden:
            sys.meta_path.insert(0, ForbiddenImports(forbidden, recording))
    config.addinivalue_line("markers", "own_time_limit(seconds): the scenario's limit of its own time "
                                       "(course.recorder.limits); --course-time-limit overrides it")
    config.pluginmanager.register(OwnTimeLimit(config.getoption("--course-time-limit")), "course-time-limit")
    ignore_stray_signals()
    if config.getoption("--schedule-seed"):
        config.pluginmanager.register(StartOrderShuffle(config.getoption("--schedule-seed")), "course-schedule")


def in_hardening_track(item: pytest.Item) -> bool:
    """Whether a test is one of the hardening track's (its section is 加固)."""
    marker = item.get_closest_marker("section")
    return marker is not None and bool(marker.args) and marker.args[0] == HARDENING


def _chapter_module(item: pytest.Item) -> str | None:
    """The chapter module a chapter test judges (`test_ch07_agent_loop.py`, in its chapter's folder, judges
    ch07_agent_loop)."""
    name = getattr(item, "path", Path("")).stem
    return name.removeprefix("test_") if re.match(r"test_ch\d\d_", name) else None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A student's chapter is held to its chapter text: the hardening track's tests are skipped unless
    `--hardening` asks for them (the reference, which passes both tracks, is always judged on both)."""
    if config.getoption("--hardening"):
        return
    chosen = config.stash[_IMPL_KEY]
    skip = pytest.mark.skip(reason=f"{HARDENING} (beyond the chapter): not part of the chapter's verdict; "
                                   "run it with --hardening")
    for item in items:
        module = _chapter_module(item)
        if module is not None and chosen.provides(module) and in_hardening_track(item):
            item.add_marker(skip)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Plain pytest: a failing chapter test says, beside its failure, what of the chapter it enforces."""
    report = yield
    if report.failed and call.when == "call" and recording(item.config) is None:
        cited = citations_of(item)
        if cited:
            report.sections.append(("what this check enforces", "\n".join(cited)))
    return report


def citations_of(item: pytest.Item) -> list[str]:
    """The sentences of the chapter (or the hardening promises) the test names, as a student reads them."""
    module = _chapter_module(item)
    if module is None:
        return []
    from course.judge import contracts  # plain pytest only: a graded copy holds no judge

    callspec = getattr(item, "callspec", None)
    names: list[str] = []
    for mark in item.iter_markers("cites"):  # (the case's own names first, as the judge's index reads them)
        names += list(mark.kwargs.get(callspec.id, ())) if callspec is not None else []
        names += list(mark.args)
    for mark in item.iter_markers("hardening"):
        names += list(mark.args)
    return contracts.for_chapter(module).lines(list(dict.fromkeys(names)))


class OwnTimeLimit:
    """Stops a chapter scenario after its limit of its own time (course.recorder.limits: its CPU time here;
    time blocked too where the judge watches), so that a loaded machine does not stop a correct one: the
    wall clock is only pytest-timeout's backstop."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        mark = item.get_closest_marker("own_time_limit")
        seconds = self.seconds or (mark.args[0] if mark else None)
        if not seconds:
            return (yield)
        with time_limit(seconds, "the scenario", ScenarioTimedOut):
            return (yield)


def _judges_chapters(config: pytest.Config) -> bool:
    """Whether this run is the course's own (its chapters/ holds the chapter tests), not another project's."""
    return (config.rootpath / "conftest.py").is_file() and (config.rootpath / "checkpoints").is_dir() \
        and (config.rootpath / FOLDER).is_dir()


_IMPL_KEY = pytest.StashKey[impl.Implementation]()
_RECORDING_KEY = pytest.StashKey["Recording"]()


def pytest_report_header(config: pytest.Config) -> str:
    return f"tiny-pi implementation: {config.stash[_IMPL_KEY].describe_chapters()}"


def recording(config: pytest.Config) -> Recording | None:
    """The recorder of a `--course-record` run (the judge decides elsewhere), or None under plain pytest."""
    return config.stash.get(_RECORDING_KEY, None)


def scenario_snapshot(request: pytest.FixtureRequest):
    """The `snapshot` fixture: syrupy's, in the chapter's notation; in record mode, a recorder."""
    recorder = recording(request.config)
    if recorder is not None:
        return SnapshotRecorder(recorder, request.node)
    from course.judge.snapshot import snapshot_assertion  # the judge's comparison: plain pytest only

    return snapshot_assertion(request)


# --- Record mode: what `course check` and `course grade` read back --------------------------------
# One JSON object per line, written as it happens (a run killed at its time limit still tells what
# it reached): {"scenario": id, "event": "start"} | {"scenario", "snapshot": n, "record"} |
# {"scenario", "plan": i, "event": "start"} | {"scenario", "plan": i, "record"} |
# {"scenario", "event": "end", "outcome", "problem", "where", "output"} | {"importError": {...}} |
# {"collectionError": {...}} | {"flag": "..."}; each kind's shape is a JSON Schema in
# course.judge.session.RECORD_LINES. The judge trusts none of it beyond what it shows.

OUTPUT_LINES = 40
"""How many lines of a scenario's own output (print, logging) a record keeps."""
TEXT_LENGTH = 2000
"""Characters of one text a record line keeps of what the implementation said (a line of its output,
an error's message): the judge refuses record lines far longer than any of these (session.LINE_LIMIT)."""


def _cut(text: str, limit: int = TEXT_LENGTH) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


class Recording:
    def __init__(self, path: str, plans: str | None, implementation: impl.Implementation) -> None:
        self.file = open(path, "a", encoding="utf-8")  # noqa: SIM115 (open for the whole session)
        self.plans = json.loads(Path(plans).read_text(encoding="utf-8")) if plans else None
        self.implementation = implementation
        self.snapshots: dict[str, int] = {}
        masking = (self.plans or {}).get("mask") or {}
        self.mask_key = bytes.fromhex(masking["key"]) if masking.get("key") else None
        """A grade with a secret: the chapter's mask key (never the secret), each fixed scenario masked by it."""
        self.published = frozenset(masking.get("published") or ())
        """Fixed scenarios that run in their published form all the same (the judge found no masked answer)."""

    def write(self, line: dict) -> None:
        try:
            self.file.write(json.dumps(jsonable(line), ensure_ascii=False) + "\n")
            self.file.flush()
        except (OSError, ValueError):
            pass  # the file was closed or the disk is full: what is missing, the judge counts as missing

    @staticmethod
    def scenario(item: pytest.Item) -> str:
        return item.nodeid.split("::", 1)[-1]

    def snapshot(self, item: pytest.Item, value) -> None:
        name = self.scenario(item)
        index = self.snapshots.get(name, 0)
        self.snapshots[name] = index + 1
        record = value.record() if hasattr(value, "record") and callable(value.record) else masks.recorded(value)
        self.write({"scenario": name, "snapshot": index, "record": record})

    def run_generated(self, item: pytest.Item, module: str, section: str) -> None:
        import asyncio

        from course.recorder import scenarios
        from course.runtime.clock import StepClock, use_clock

        name = self.scenario(item)
        plans = ((self.plans or {}).get("sections") or {}).get(section, [])
        runner = scenarios.for_chapter(module).run_plan
        limit = min(PLAN_TIMEOUT, item.config.getoption("--course-time-limit") or PLAN_TIMEOUT)
        loop, timed_out = asyncio.Runner(), False
        for index, plan in enumerate(plans):
            self.write({"scenario": name, "plan": index, "event": "start"})
            with use_clock(StepClock()):
                stopped = None
                try:
                    with time_limit(limit, f"plan {index + 1}") as watch:
                        record = loop.run(runner(plan, impl.load_checkpoint))
                except PlanTimedOut as error:
                    stopped = error
                except Exception as error:  # the plan's runner failed on this implementation: that is its record
                    record = {"kind": "crashed", "raised": type(error).__name__, "message": str(error)[:500],
                              "where": _where(error, self.implementation)}
            timed_out = stopped is not None or watch.fired > 0  # (even if something caught the interruption)
            if timed_out:
                record = {"kind": "timed out", "message": f"plan {index + 1} did not finish within {limit:g} s",
                          "where": _where(stopped, self.implementation) if stopped else None}
            self.write({"scenario": name, "plan": index, "record": record})
            if timed_out:
                break  # the section fails on this plan; the others would spin as long
        if not timed_out:
            loop.close()  # (after a time limit, never: closing would run the spinning task again)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """A module that does not import, or lacks a name the chapter's tests use, is reported once,
        before any scenario, with file and line. Only the modules this run judges are looked at: a
        later chapter's half-written module is none of chapter 07's business."""
        written = set(self.implementation.written_modules())
        for chapter in judged_chapters(session, self.implementation.chain):
            if chapter.module not in written:
                continue
            self.write({"event": "importing", "module": chapter.module})
            try:
                loaded = self.implementation.load(chapter.module)
            except BaseException as error:  # SyntaxError, ImportError, SystemExit, anything at import
                self.write({"importError": import_problem(chapter.module, error, self.implementation)})
            else:
                missing = [name for name in chapter.names if not hasattr(loaded, name)]
                if missing:
                    self.write({"importError": missing_names(chapter, missing, self.implementation)})
            self.write({"event": "imported", "module": chapter.module})

    def mask_of(self, item: pytest.Item) -> masks.Mask | None:
        """The mask a scenario runs under: a fixed scenario's, in a grade with a secret; else None."""
        name = self.scenario(item)
        if self.mask_key is None or name in self.published or getattr(getattr(item, "function", None),
                                                                         "course_generated", False) \
                or name in masks.published_form((self.plans or {}).get("module")):
            return None
        return masks.Mask(masks.scenario_key(self.mask_key, name))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem):
        with masks.masking(self.mask_of(item)):  # (its fixtures too: chapter 06's module is masked at the fixture)
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        with masks.masked_clock():  # (inside the test's own clock, which a fixture installs)
            return (yield)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logstart(self, nodeid: str, location) -> None:
        self.write({"scenario": nodeid.split("::", 1)[-1], "event": "start"})

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        report = yield
        if report.failed or report.when == "call" or report.skipped:
            line = {"scenario": self.scenario(item), "event": "end", "phase": report.when,
                    "outcome": "skipped" if report.skipped else ("passed" if report.passed else "failed")}
            if call.excinfo is not None and not report.skipped:
                line["problem"] = _problem(call.excinfo)
                line["where"] = _where(call.excinfo.value, self.implementation)
            output = (report.capstdout or "") + (report.capstderr or "")
            if output.strip():
                lines = output.rstrip().splitlines()
                line["output"] = [_cut(output_line) for output_line in lines[:OUTPUT_LINES]]
                line["outputLines"] = len(lines)
            self.write(line)
        return report

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            lines = report.longreprtext.strip().splitlines()
            self.write({"collectionError": {"where": _cut(report.nodeid), "problem": _cut(lines[-1]) if lines else "?"}})

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.write({"event": "finished"})
        self.file.close()


class SnapshotRecorder:
    """Stands where syrupy's assertion stands: `assert value == snapshot` records `value` and holds."""

    def __init__(self, recording: Recording, item: pytest.Item) -> None:
        self.recording, self.item = recording, item

    def __eq__(self, other) -> bool:
        self.recording.snapshot(self.item, other)
        return True

    __hash__ = None


class ForbiddenImports:
    """Refuses the modules a graded submission must not reach (the chapter's reference, the judge),
    and records that it tried."""

    def __init__(self, modules: list[str], recording: Recording) -> None:
        self.modules, self.recording = modules, recording

    def find_spec(self, fullname, path=None, target=None):
        if any(fullname == m or fullname.startswith(m + ".") for m in self.modules):
            self.recording.write({"flag": f"tried to import {fullname}"})
            raise ImportError(f"{fullname} is not available to a graded submission")
        return None


def judged_chapters(session: pytest.Session, chain: bool) -> list:
    """The chapters whose test modules this run collected, and under `chain` the earlier ones their
    modules import (carry-forward gives them the reference otherwise)."""
    from course.manifest import CHAPTERS

    collected = {item.path.name for item in session.items}
    judged = [i for i, chapter in enumerate(CHAPTERS) if Path(chapter.test_file).name in collected]
    if chain and judged:
        return CHAPTERS[: max(judged) + 1]
    return [CHAPTERS[i] for i in judged]


def missing_names(chapter, missing: list[str], implementation: impl.Implementation) -> dict:
    """A chapter module that imports but lacks what the chapter's tests call: one problem, not one per scenario."""
    file = implementation.directory / f"{chapter.module}.py" if implementation.directory else None
    names = " and ".join(f"`{name}`" for name in chapter.names)
    return {"module": chapter.module, "file": str(file) if file else None, "line": None, "missing": missing,
            "problem": f"it has no {', '.join(missing)}: the chapter's tests use {names} "
                       f"(`course start {chapter.number}` writes each of them, for you to fill in)"}


def import_problem(module: str, error: BaseException, implementation: impl.Implementation) -> dict:
    """Where and why a chapter module failed to import: file, line and the message, in one block."""
    if isinstance(error, SyntaxError):
        return {"module": module, "file": error.filename, "line": error.lineno,
                "problem": _cut(f"SyntaxError: {error.msg}"), "text": _cut((error.text or "").rstrip())}
    where = _where(error, implementation)
    file, _, line = (where or "").rpartition(":")
    return {"module": module, "file": file or None, "line": int(line) if line.isdigit() else None,
            "problem": _cut(f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}".rstrip(": "))}


def _problem(excinfo: pytest.ExceptionInfo) -> str:
    message = str(excinfo.value).strip().splitlines()
    return f"{excinfo.typename}: {message[0]}"[:300] if message else excinfo.typename


def _where(error: BaseException, implementation: impl.Implementation) -> str | None:
    """The innermost traceback line inside the implementation under test, as `path:line`."""
    found = None
    tb = error.__traceback__
    while tb is not None:
        path = Path(tb.tb_frame.f_code.co_filename)
        if _under_test(path, implementation):
            found = f"{path}:{tb.tb_lineno}"
        tb = tb.tb_next
    return found


def _under_test(path: Path, implementation: impl.Implementation) -> bool:
    """Whether a file is the implementation's: the student's directory, or a reference module (the module of its
    chapter's folder named as the folder, not the tests or scenarios beside it)."""
    if implementation.directory:
        return path.is_relative_to(implementation.directory)
    return path.stem == path.parent.name and str(path.parent) in importlib.import_module(impl.REFERENCE_PACKAGE).__path__


class StartOrderShuffle:
    """Event loops whose tasks start in an order derived from a seed.

    Each new task first yields to the loop a seed-determined number of times, so tasks created
    together (a tool batch) begin in another order. Seed 1 reverses the start order of up to eight
    tasks created together; other seeds draw each task's delay from their own random sequence. A
    loop whose transcript is fixed by its code gives the same run under every seed.
    """

    def __init__(self, seed: int) -> None:
        self.seed = seed

    @pytest.hookimpl
    def pytest_asyncio_loop_factories(self, config: pytest.Config, item: pytest.Item):
        return {f"start-order-{self.seed}": self.new_loop}

    def new_loop(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.new_event_loop()
        delays = self._delays()

        def create_task(loop, coro, **kwargs):
            return asyncio.Task(_after_yields(coro, next(delays)), loop=loop, **kwargs)

        loop.set_task_factory(create_task)
        return loop

    def _delays(self) -> Iterator[int]:
        draw = random.Random(self.seed)
        for n in itertools.count():
            yield max(0, 8 - n) if self.seed == 1 else draw.randrange(4)


async def _after_yields(coro, times: int):
    try:
        for _ in range(times):
            await asyncio.sleep(0)
    except BaseException:
        coro.close()  # cancelled before it began: close it, so it is not reported as never awaited
        raise
    return await coro
