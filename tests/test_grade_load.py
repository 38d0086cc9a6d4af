"""Verdicts that depend on the code alone, not on how busy the machine is.

A scenario's and a run's limits count the submission's own time (course.recorder.limits: CPU time,
and time blocked, not time spent waiting for a busy CPU), and each graded submission runs in a
control group of its own with an equal share of the CPUs (course.judge.cgroups). So an honest class
grades `pass` with busy processes beside it and a neighbour that starts dozens of busy threads and
processes, with limits far tighter than the defaults; the busy neighbour is stopped by its own
limit; and a loop that waits for ever is still stopped, with or without a control group.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from course.judge import cgroups, session
from course.manifest import find_chapter

pytestmark = pytest.mark.commands  # slow: `pytest -m commands` runs them (CI does)

ROOT = Path(__file__).resolve().parent.parent
LOOP = find_chapter("07")
REFERENCE = (ROOT / LOOP.reference_file).read_text(encoding="utf-8")
BUSY = 8
"""CPU-bound processes beside the grade: four times the cores of the machines the course is tested on."""

# Imports the loop, then keeps every CPU it can get busy: 24 threads in its own process and 6 processes.
STARVES_ITS_NEIGHBOURS = REFERENCE + f'''
import os as _os, threading as _threading

def _spin():
    while True:
        pass

for _ in range(6):
    if _os.fork() == 0:
        _spin()
for _ in range(24):
    _threading.Thread(target=_spin, daemon=True).start()
'''
# Waits for ever in every tool batch: no CPU used, so only the time it spends blocked can stop it.
WAITS_IN_TOOL_BATCHES = REFERENCE.replace('emit({"type": "tool_start", "call": call})',
                                          "await asyncio.Event().wait()", 1)


def write_module(folder: Path, source: str) -> None:
    folder.mkdir(parents=True)
    (folder / f"{LOOP.module}.py").write_text(source, encoding="utf-8")


@pytest.fixture
def busy_machine():
    """BUSY processes spinning beside the test, each in the test's own scheduling group."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(BUSY)]
    yield
    for spinner in spinners:
        spinner.kill()
        spinner.wait()


def test_an_honest_class_passes_beside_busy_processes_and_a_starving_neighbour(tmp_path, busy_machine):
    for name in ("ana", "ben", "cy"):
        write_module(tmp_path / "class" / name, REFERENCE)
    write_module(tmp_path / "class" / "hog", STARVES_ITS_NEIGHBOURS)
    # Limits a fifth of the defaults: an honest scenario needs milliseconds of its own time, its whole
    # run a few seconds, whatever the load; the wall-clock backstop stretches with the load.
    done = subprocess.run([sys.executable, "-m", "course", "grade", "07", str(tmp_path / "class"), "--jobs", "4",
                           "--scenario-timeout", "2", "--timeout", "15", "--json", str(tmp_path / "grades.json")],
                          cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {row["submission"]: row for row in json.loads((tmp_path / "grades.json").read_text())["grades"]}
    assert {name: rows[name]["status"] for name in ("ana", "ben", "cy")} == dict.fromkeys(("ana", "ben", "cy"), "pass"), \
        {name: (row["status"], row["problem"]) for name, row in rows.items()}
    # Its own threads take the interpreter from its import: stopped there, or in a scenario, by its own time.
    assert rows["hog"]["status"] in ("broken", "timeout"), rows["hog"]
    assert any(limit in rows["hog"]["problem"] for limit in ("no progress for 7 s", "the whole run was stopped at 15 s")), \
        rows["hog"]


def can_make_groups() -> bool:
    group = cgroups.create("probe")
    if group is not None:
        group.remove()
    return group is not None


@pytest.mark.parametrize("with_group", [True, False], ids=["control_group", "process_tree"])
def test_a_loop_that_waits_for_ever_is_stopped_by_the_time_it_spends_blocked(tmp_path, monkeypatch, with_group):
    """No CPU is used while it waits: the judge sees it blocked (its threads neither run nor wait for a
    CPU) and stops the scenario, which goes on with the next, with a control group or without one."""
    if with_group and not can_make_groups():
        pytest.skip(f"no control group can be made here: {cgroups.isolation_gap()}")
    if not with_group:
        monkeypatch.setattr(cgroups, "create", lambda purpose: None)
    write_module(tmp_path / "waits", WAITS_IN_TOOL_BATCHES)
    run = session.judge_chapter(LOOP, str(tmp_path / "waits"), root=ROOT, timeout=1.0, wall=None)
    statuses = {verdict.scenario: verdict.status for verdict in run.verdicts}
    assert statuses["TestPureStop::test_pure_stop"] == "passed"
    assert statuses["TestSingleToolRoundTrip::test_readme_round_trip"] == "timeout"
    assert statuses["TestNonExecutingTerminals::test_length_with_two_calls_starts_neither"] == "passed"  # ran on
    assert run.restarts == 0, "the waiting scenarios were stopped inside the recorder, not by ending it"


def test_the_control_groups_are_removed_after_the_grade(tmp_path):
    """Nothing of a run's control group outlives it (the grade above made dozens)."""
    if not can_make_groups():
        pytest.skip(f"no control group can be made here: {cgroups.isolation_gap()}")
    write_module(tmp_path / "one", REFERENCE)
    before = _groups()
    run = session.judge_chapter(LOOP, str(tmp_path / "one"), root=ROOT, timeout=10.0)
    assert run.passed
    assert _groups() - before == set()


def _groups() -> set[str]:
    own = f"-{os.getpid()}-"
    found = set()
    for hierarchy in [cgroups.ROOT, *(cgroups.ROOT / c for c in cgroups.V1_CONTROLLERS)]:
        if hierarchy.is_dir():
            found |= {str(p) for p in hierarchy.rglob("tiny-pi-run*") if own in p.name}
    return found
