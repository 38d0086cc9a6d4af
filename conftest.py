"""Shared by every chapter's tests: a deterministic clock, the run snapshot format, section keywords."""

import gc
import os
import re
import subprocess
import sys

import pytest

from course.runtime.clock import StepClock, use_clock
from course.recorder.pytest_plugin import scenario_snapshot
from course.recorder import selection

# The `course` command tests: they wait on child processes, which start before the first test.
HARNESS_MODULE = "test_harness_cli"
# Every module whose tests wait on child processes: each has `launch(tmp_path_factory)`, starting
# them, which returns something with `stop()`.
STARTS_EARLY = (HARNESS_MODULE, "test_hints", "test_watch", "test_grade_hostile")


def pytest_configure(config):
    if config.option.collectonly:  # (no test runs, so no snapshot is "unused": syrupy would fail a whole file's)
        config.option.disable_unused_snapshots = True
    gc.disable()  # importing and collecting the test modules makes no garbage worth finding (see below)
    config.addinivalue_line(
        "markers", "section(name): the chapter section a scenario comes from; `pytest -k NAME` selects it"
    )
    config.addinivalue_line(
        "markers", "cites(*names, **per_param): the sentences of the chapter text the test enforces (names of the "
                   "chapter's CITES in each chapter's `judge/contract.py`; a keyword named as a parameter id gives that case's own)"
    )
    config.addinivalue_line(
        "markers", "hardening(*names): a check of the hardening track (section 加固, beyond the chapter), with the "
                   "project's promises it holds (names of the chapter's PROMISES in each chapter's `judge/contract.py`)"
    )


PLAIN_MARKS = "not gate and not commands"
"""The marks pyproject.toml's addopts select: the plain suite."""
MOST_WORKERS = 4
"""Workers for the whole plain suite: more would each pay the suite's collection for less and less."""


def pytest_xdist_auto_num_workers(config):
    # `-n auto` (pyproject.toml): the whole plain suite on every CPU; anything narrower in this process, where
    # starting workers (each collecting the suite) costs more than it saves. The command tests' children load
    # the CPUs themselves. PYTEST_XDIST_AUTO_NUM_WORKERS still decides when it is set.
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    whole = (config.args_source == pytest.Config.ArgsSource.TESTPATHS and not config.getoption("keyword")
             and config.getoption("markexpr") == PLAIN_MARKS)
    return min(len(os.sched_getaffinity(0)), MOST_WORKERS) if whole else 0


CHAPTER_FOLDERS = pytest.StashKey[list | None]()
"""The chapter folders `-k` collects alone (None: everything), read once per run."""


def pytest_ignore_collect(collection_path, config):
    # `pytest -k ch07` (no path given): chapter 07's folder alone is collected (course/recorder/selection.py).
    if config.args_source != pytest.Config.ArgsSource.TESTPATHS:
        return None
    if CHAPTER_FOLDERS not in config.stash:
        config.stash[CHAPTER_FOLDERS] = selection.chapter_folders(config.getoption("keyword") or "", config.rootpath)
    folders = config.stash[CHAPTER_FOLDERS]
    return True if folders is not None and selection.left_out(collection_path, folders) else None


def pytest_collection_finish(session):
    # What collection built (modules, items, fixtures) lives until the end: freezing it keeps every
    # later collection, pytest's own at exit included, to the objects the tests make.
    gc.freeze()
    gc.enable()


SCENARIO_TIMEOUT = 10
"""Seconds of its own time (CPU, and time blocked: course.recorder.limits) one chapter scenario may take in
plain pytest (`course check` has its own, the same)."""
WALL_BACKSTOP = 12
"""How many times SCENARIO_TIMEOUT of wall time a chapter scenario may take, however loaded the machine:
pytest-timeout's backstop, for a scenario that stops its own clock's watcher."""
CHAPTER_MODULE = re.compile(r"test_ch\d\d_")
"""A chapter's test module (`test_ch07_agent_loop`), not another that starts alike (`test_chapter_loops`)."""


def pytest_collection_modifyitems(config, items):
    # `-k 单工具往返` selects by the chapter's own section names, while ids and snapshot files stay ASCII.
    long_hunt = 40 if os.environ.get("TINY_PI_HYPOTHESIS_PROFILE") == "long" else 1
    for item in items:
        for mark in item.iter_markers("section"):
            item.extra_keyword_matches.add(mark.args[0])
        if CHAPTER_MODULE.match(item.module.__name__) and item.get_closest_marker("own_time_limit") is None:
            # A wrong student loop may spin or wait for ever: its scenario fails, named, and the others still run.
            item.add_marker(pytest.mark.own_time_limit(SCENARIO_TIMEOUT * long_hunt))
            if item.get_closest_marker("timeout") is None and config.getoption("timeout", None) is None:
                item.add_marker(pytest.mark.timeout(SCENARIO_TIMEOUT * long_hunt * WALL_BACKSTOP))
    # The `course` command tests wait on child processes (started first, see below): they go last, so
    # that the children run on the other core while every other test runs, instead of being waited for.
    items.sort(key=lambda item: item.module.__name__ in STARTS_EARLY)


@pytest.fixture(autouse=True)
def step_clock():
    """Timestamps 1, 2, 3, ... in creation order, so snapshots hold them exactly."""
    with use_clock(StepClock()) as clock:
        yield clock


@pytest.fixture
def snapshot(request):
    """The scenario's snapshot, in the chapter's notation (a recorder when `course check` records)."""
    return scenario_snapshot(request)


SPINNER = "import os, sys\nwhile os.getppid() == int(sys.argv[1]):\n    for _ in range(100_000): pass\n"
"""A busy neighbour: it spins while the session that started it lives (a session killed outright leaves none)."""


@pytest.fixture(scope="session", autouse=True)
def busy_neighbours():
    """TINY_PI_BUSY=N: N processes spinning beside the whole session, so that a run shows its verdicts do not
    depend on the machine's load (CI runs the command tests so). The pytest runs the tests start inherit no
    TINY_PI_BUSY: they run beside these, not beside N more each."""
    count = int(os.environ.pop("TINY_PI_BUSY", None) or 0)
    spinners = [subprocess.Popen([sys.executable, "-c", SPINNER, str(os.getpid())]) for _ in range(count)]
    yield
    for spinner in spinners:
        spinner.kill()
        spinner.wait()


@pytest.fixture(scope="session", autouse=True)
def harness_commands_start_early(request, tmp_path_factory):
    """The `course` command tests wait on child processes; when they are selected, start those
    children before the first test, so that they run while the other modules do."""
    modules = dict.fromkeys(item.module for item in request.session.items
                            if item.module.__name__ in STARTS_EARLY)
    launched = [module.launch(tmp_path_factory) for module in modules]
    yield
    for children in launched:
        children.stop()  # also when their tests never ran (e.g. `-x` stopped the session)
