"""pytest options of the course: which implementation the chapter tests judge, the per-scenario
report the `course` commands read back, and the seeded task start order `course snapshots verify` varies."""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import json
import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from course.recorder import impl
from course.judge.timeline import first_divergence


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tiny-pi course")
    group.addoption("--impl", default=os.environ.get(impl.IMPL_ENV) or None, metavar="DIR_OR_PACKAGE",
                    help=f"run the chapter tests against a student's modules (also ${impl.IMPL_ENV}); "
                         "chapters it lacks fall back to the reference")
    group.addoption("--impl-chain", action="store_true", default=bool(os.environ.get(impl.CHAIN_ENV)),
                    help=f"earlier chapters imported by the student's modules are the student's too "
                         f"(also ${impl.CHAIN_ENV}=1)")
    _add_course_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    location = config.getoption("--impl")
    if location and config.inipath is None and os.path.isdir(location) and os.path.samefile(config.rootpath, location):
        # pytest picks its root directory from the command line before any plugin's options are
        # known, so a separate DIR after --impl is read as the directory under test.
        raise pytest.UsageError(f"write --impl={location} (with '='), or set {impl.IMPL_ENV}={location}")
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
    if config.getoption("--course-report"):
        config.pluginmanager.register(ScenarioReport(config.getoption("--course-report"), chosen), "course-report")
    if config.getoption("--schedule-seed"):
        config.pluginmanager.register(StartOrderShuffle(config.getoption("--schedule-seed")), "course-schedule")


_IMPL_KEY = pytest.StashKey[impl.Implementation]()


def pytest_report_header(config: pytest.Config) -> str:
    return f"tiny-pi implementation: {config.stash[_IMPL_KEY].describe()}"


# --- What the `course` commands read back from a test run -------------------------------------
# `course check`, `status`, `grade` and `snapshots verify` run pytest in a child process with
# --course-report=FILE and read one JSON record per scenario from FILE; whether the chapter passes
# is decided by that process's exit code, not by this report.


def _add_course_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("tiny-pi course")
    group.addoption("--course-report", default=None, metavar="FILE",
                    help="write one JSON record per scenario to FILE (what `course check` reads)")
    group.addoption("--schedule-seed", type=int, default=None, metavar="N",
                    help="start concurrent tasks in an order derived from N (0 = asyncio's own order); "
                         "what `course snapshots verify` varies")


class ScenarioReport:
    """Records, per scenario: status, section, purpose, first divergence, problem and rendered runs."""

    def __init__(self, path: str, implementation: impl.Implementation) -> None:
        self.path = Path(path)
        self.implementation = implementation
        self.records: dict[str, dict] = {}
        self.collection_errors: list[dict] = []

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        report = yield
        record = self.records.setdefault(item.nodeid, _new_record(item))
        if report.when == "call":
            record["renders"] = [result.asserted_data for result in _snapshot_results(item)]
        if report.failed and record["status"] in ("passed", "pending"):
            assertion = report.when == "call" and call.excinfo.errisinstance(AssertionError)
            record["status"] = "failed" if assertion else "error"
            record.update(_what_went_wrong(item, call, self.implementation))
        elif report.skipped:
            record["status"] = "skipped"
        elif report.when == "call" and record["status"] == "pending":
            record["status"] = "passed"
        if report.when != "call":
            self.write()  # as it goes: a run killed at its time limit still tells what it reached
        return report

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            lines = report.longreprtext.strip().splitlines()
            self.collection_errors.append({"where": report.nodeid, "problem": lines[-1] if lines else "?"})

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.write(int(exitstatus))

    def write(self, exit_status: int | None = None) -> None:
        self.path.write_text(json.dumps({
            "implementation": self.implementation.describe(),
            "exitStatus": exit_status,
            "scenarios": list(self.records.values()),
            "collectionErrors": self.collection_errors,
        }, ensure_ascii=False), encoding="utf-8")


def _new_record(item: pytest.Item) -> dict:
    section = item.get_closest_marker("section")
    return {
        "scenario": item.nodeid.split("::", 1)[-1],
        "file": item.nodeid.split("::", 1)[0],
        "section": section.args[0] if section else None,
        "purpose": _purpose(item),
        "status": "pending",
        "divergence": None,
        "problem": None,
        "where": None,
        "renders": [],
    }


def _purpose(item: pytest.Item) -> str | None:
    """The test's one-line docstring; `{row}` in it becomes the parameter `row` of this case."""
    doc = getattr(getattr(item, "function", None), "__doc__", None)
    if not doc:
        return None
    line = doc.strip().splitlines()[0]
    params = getattr(getattr(item, "callspec", None), "params", {})
    try:
        return line.format_map(params)
    except (KeyError, IndexError, ValueError):
        return line


def _snapshot_results(item: pytest.Item) -> list:
    assertion = getattr(item, "funcargs", {}).get("snapshot")
    executions = getattr(assertion, "executions", None)
    return list(executions.values()) if executions else []


def _what_went_wrong(item: pytest.Item, call: pytest.CallInfo, implementation: impl.Implementation) -> dict:
    found: dict = {}
    for result in _snapshot_results(item):
        if result.success:
            continue
        if result.recalled_data is None:
            found["problem"] = "no snapshot is stored for this scenario (an instructor runs `course snapshots update`)"
        else:
            divergence = first_divergence(str(result.recalled_data), str(result.asserted_data))
            if divergence is not None:
                found["divergence"] = {"section": divergence.section, "index": divergence.index,
                                       "expected": divergence.expected, "got": divergence.actual}
        break
    if call.excinfo is not None and "divergence" not in found and "problem" not in found:
        message = str(call.excinfo.value).strip().splitlines()
        found["problem"] = f"{call.excinfo.typename}: {message[0]}"[:300] if message else call.excinfo.typename
    if call.excinfo is not None:
        found["where"] = _where_in_implementation(call.excinfo, implementation)
    return found


def _where_in_implementation(excinfo: pytest.ExceptionInfo, implementation: impl.Implementation) -> str | None:
    """The innermost traceback line inside the implementation under test, as `path:line`."""
    home = implementation.directory or Path(importlib.util.find_spec(impl.REFERENCE_PACKAGE).origin).parent
    for entry in reversed(excinfo.traceback):
        path = Path(str(entry.path))
        if path.is_relative_to(home):
            return f"{path}:{entry.lineno + 1}"
    return None


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


def recording(config: pytest.Config):
    """The recorder of a `--course-record` run (the judge decides elsewhere), or None under plain pytest."""
    return config.stash.get(_RECORDING_KEY, None)


_RECORDING_KEY = pytest.StashKey["Recording"]()
