"""`course grade` against submissions that try to cheat, damage or outlast the grade.

A folder of hostile chapter 07 submissions is graded next to an honest one (the reference), from a
full copy of the course (so that a submission trying to rewrite "the checkout" aims at the copy).
The grade must pass the honest one and no cheating one; leave the checkout, its snapshots and the
other submissions as they were; leave no process running; let nothing be written outside the
sandbox; keep the grader's secrets from the submissions; and end (a wait bounded generously, not a
timed assertion). `--seed` and `--shard` are tested here too.
"""

import contextlib
import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from course.judge import differential, mutants
from course.judge.sandbox import bubblewrap
from course.manifest import find_chapter
from processes import running_with

pytestmark = pytest.mark.commands  # slow: `pytest -m commands` runs them (CI does)

ROOT = Path(__file__).resolve().parent.parent
LOOP = find_chapter("07")
REFERENCE = (ROOT / "checkpoints" / f"{LOOP.module}.py").read_text(encoding="utf-8")
WRONG = next(v for v in mutants.variants(LOOP) if v.name == "length-executes-tools").source(REFERENCE)
MARK = f"hostile-{secrets.token_hex(4)}"
"""In every path and command line the hostile submissions make: what the checks below look for."""
SECRET = f"sk-{secrets.token_hex(8)}"
"""An API key in the grader's environment: no submission may see it."""
SLEEP = "31415.9"


def hostile(course: Path, submissions: Path) -> dict[str, str]:
    """Each submission's module source, by name."""
    outside = f"/tmp/{MARK}-written-outside"
    return {
        "honest": REFERENCE,
        # Rewrites the checkout: its conftest, a snapshot, the reference, and another submission.
        "rewrites": WRONG + f'''
import pathlib
for _target in ["{course}/tests/conftest.py", "{course}/{LOOP.snapshot_dir}/TestPureStop.test_pure_stop.txt",
                "{course}/checkpoints/{LOOP.module}.py", "{submissions}/honest/{LOOP.module}.py"]:
    try:
        with open(_target, "a") as _file:
            _file.write("\\n# {MARK}\\n")
    except OSError:
        pass
''',
        # Patches the harness in memory: snapshot updating on, the judge's comparison always true,
        # and its own recorder told that every snapshot matched.
        "patches": WRONG + '''
import gc
for _thing in gc.get_objects():
    if type(_thing).__name__ == "Config" and hasattr(_thing, "option"):
        _thing.option.update_snapshots = True
try:
    import course.judge.snapshot as _snapshot
    _snapshot.RunSnapshotExtension.matches = lambda *args, **kwargs: True
except ImportError:
    pass
try:
    from course.recorder import pytest_plugin as _plugin
    _plugin.Recording.snapshot = lambda self, item, value: None
    _plugin.Recording.run_generated = lambda self, item, module, section: None
except ImportError:
    pass
''',
        "exits_at_import": "import os\nos._exit(0)\n",
        "exits_at_exit": WRONG + "\nimport atexit, os\natexit.register(lambda: os._exit(0))\n",
        "reexports": f"from checkpoints.{LOOP.module} import *  # noqa\nfrom checkpoints.{LOOP.module} import "
                     "AgentLoopOptions, AgentLoopResult, run_agent_loop  # noqa\n",
        # An honest loop whose import forks a child that keeps the grader's stdout and stderr open.
        "forks": REFERENCE + f'''
import os, time
if os.fork() == 0:
    os.setsid()
    time.sleep({SLEEP})
    os._exit(0)
''',
        # An honest loop that leaves a background process in a session of its own.
        "background": REFERENCE + f'''
import subprocess
subprocess.Popen(["sleep", "{SLEEP}"], start_new_session=True)
''',
        "allocates": REFERENCE + "\n_hoard = bytearray(8 * 2**30)\n",
        "writes_outside": WRONG + f'''
import os
for _target in ["{outside}", os.path.expanduser("~/../{MARK}-home"), "{submissions}/{MARK}-beside"]:
    try:
        with open(_target, "w") as _file:
            _file.write("{MARK}")
    except OSError:
        pass
''',
        # Prints its whole environment in every scenario (it fails, so its output is shown).
        "reads_environment": WRONG.replace(
            "async def run_agent_loop(options: AgentLoopOptions) -> AgentLoopResult:\n",
            "async def run_agent_loop(options: AgentLoopOptions) -> AgentLoopResult:\n"
            "    import os\n    print(dict(os.environ))\n", 1),
    }


def digest(*folders: Path) -> dict[str, str]:
    """Every file's hash (not the grader's own caches, nor the tables and results it writes)."""
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
            for folder in folders for p in sorted(folder.rglob("*"))
            if p.is_file() and not {"__pycache__", ".hypothesis", "results"} & set(p.parts)
            and not (p.parent == folder and p.suffix in (".json", ".out"))}


def copy_course(target: Path) -> Path:
    for folder in ("course", "checkpoints", "tests"):
        shutil.copytree(ROOT / folder, target / folder, ignore=shutil.ignore_patterns("__pycache__", ".hypothesis"))
    shutil.copy(ROOT / "pyproject.toml", target)
    return target


def write(folder: Path, source: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{LOOP.module}.py").write_text(source, encoding="utf-8")


class Grades:
    """The grading children, started together before the first test of the session."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.course = copy_course(workspace / "course")
        self.hostile = workspace / "hostile"
        for name, source in hostile(self.course, self.hostile).items():
            write(self.hostile / name, source)
        self.before = digest(self.course, self.hostile)
        self.seeded = workspace / "seeded"
        self.seed, feature = find_unpublished_feature()
        write(self.seeded / "reference", REFERENCE)
        write(self.seeded / "tuned", tuned_to(feature))
        self.sharded = workspace / "sharded"
        for name, source in (("ana", REFERENCE), ("ben", WRONG), ("cy", "def run_agent_loop(options:\n")):
            write(self.sharded / name, source)
        (self.sharded / "eve").mkdir()
        env = {**os.environ, "TINY_PI_TEST_SECRET": SECRET, "OPENAI_API_KEY": SECRET}
        self.children: dict[str, subprocess.Popen] = {}
        for name, args in {
            "hostile": ["07", str(self.hostile), "--timeout", "120", "--scenario-timeout", "8", "--jobs", "2",
                        "--json", "hostile.json", "--results", "results"],
            "published": ["07", str(self.seeded), "--json", "published.json"],
            "secret": ["07", str(self.seeded), "--seed", str(self.seed), "--json", "secret.json"],
            "whole": ["07", str(self.sharded), "--json", "whole.json"],
            "shard1": ["07", str(self.sharded), "--shard", "1/2", "--json", "shard1.json"],
            "shard2": ["07", str(self.sharded), "--shard", "2/2", "--json", "shard2.json"],
        }.items():
            with (workspace / f"{name}.out").open("w") as out:
                self.children[name] = subprocess.Popen(
                    [sys.executable, "-m", "course", "grade", *args], cwd=self.course, env=env, stdout=out,
                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, process_group=0)

    def result(self, name: str) -> tuple[int, str]:
        code = self.children[name].wait(timeout=600)
        return code, (self.workspace / f"{name}.out").read_text(encoding="utf-8")

    def table(self, name: str) -> dict[str, dict]:
        self.result(name)
        data = json.loads((self.course / f"{name}.json").read_text(encoding="utf-8"))
        return {row["submission"]: row for row in data["grades"]}

    def stop(self) -> None:
        for child in self.children.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, 9)
            child.wait()


def plan_feature(plan: dict) -> tuple | None:
    """What a loop can see of a generated plan in its first step: the number of calls in the first
    answer and `max_steps` (only plans with a small explicit bound: the fixed scenarios use 1 and 32)."""
    steps, bound = plan.get("steps") or [], plan.get("maxSteps")
    if not steps or not isinstance(bound, int) or not 2 <= bound <= 31:
        return None
    return len(steps[0].get("calls", [])), bound


def find_unpublished_feature() -> tuple[int, tuple]:
    """A seed whose plans have a feature no published (default) plan has."""
    module = LOOP.module
    sections = differential.judge_scenarios.for_chapter(module).STRATEGIES
    published = {plan_feature(p) for s in sections for p in differential.draw_plans(module, s)}
    for seed in range(1, 50):
        hidden = {plan_feature(p) for s in sections for p in differential.draw_plans(module, s, seed=seed)}
        new = sorted(f for f in hidden - published if f is not None)
        if new:
            return seed, new[0]
    raise AssertionError("every seed's plans look like the published ones")


def tuned_to(feature: tuple) -> str:
    """The reference, except on runs it could not have seen published: a submission tuned to the
    published scenarios' answers, that does something else where it has no answer to copy."""
    calls, bound = feature
    assert REFERENCE.count('            calls = tool_calls(assistant)\n') == 1
    return REFERENCE.replace(
        '            calls = tool_calls(assistant)\n',
        '            calls = tool_calls(assistant)\n'
        f'            if steps == 1 and len(calls) == {calls} and options.max_steps == {bound}:\n'
        '                return finish("stop", steps)  # never seen published: no answer to copy\n', 1)


_grades: Grades | None = None


def launch(tmp_path_factory) -> Grades:
    global _grades
    if _grades is None:
        _grades = Grades(tmp_path_factory.mktemp("grades"))
    return _grades


@pytest.fixture(scope="module")
def grades(tmp_path_factory):
    launched = launch(tmp_path_factory)
    yield launched
    launched.stop()


needs_bubblewrap = pytest.mark.skipif(bubblewrap() is None, reason="bubblewrap (bwrap) is not installed: "
                                      ".ci/run installs it; without it the sandbox is only a copy with limits")


def test_the_honest_submission_passes_and_no_cheating_one_does(grades):
    code, out = grades.result("hostile")
    assert code == 0, out
    rows = grades.table("hostile")
    assert rows["honest"]["status"] == "pass", rows["honest"]
    assert sorted(name for name, row in rows.items() if row["status"] == "pass") == ["background", "forks", "honest"]
    assert rows["reexports"]["status"] == "flagged" and "checkpoints.ch07_agent_loop" in rows["reexports"]["problem"]
    assert rows["patches"]["status"] in ("flagged", "fail") and rows["patches"]["points"] < 10
    assert rows["exits_at_import"]["status"] == "broken" and rows["exits_at_import"]["passed"] == 0
    assert rows["exits_at_exit"]["status"] == "fail"  # judged from its records, whatever its exit code
    assert rows["allocates"]["status"] == "broken" and "MemoryError" in rows["allocates"]["problem"]
    for name in ("rewrites", "writes_outside", "reads_environment"):
        assert rows[name]["status"] == "fail", (name, rows[name])


def test_a_forked_child_holding_the_pipes_does_not_stall_or_fail_the_grade(grades):
    rows = grades.table("hostile")
    assert rows["forks"]["status"] == "pass" and rows["background"]["status"] == "pass"
    assert running_with(SLEEP) == []  # nothing it started outlived the grade


@needs_bubblewrap
def test_the_checkout_its_snapshots_and_the_other_submissions_are_untouched(grades):
    grades.result("hostile")
    assert digest(grades.course, grades.hostile) == grades.before


@needs_bubblewrap
def test_nothing_is_written_outside_the_sandbox(grades):
    grades.result("hostile")
    assert not Path(f"/tmp/{MARK}-written-outside").exists()
    assert not list(grades.hostile.glob(f"{MARK}*")) and not list(grades.workspace.rglob(f"{MARK}-home"))


def test_the_submissions_never_see_the_graders_secrets(grades):
    grades.result("hostile")
    results = (grades.course / "results" / "reads_environment.json").read_text(encoding="utf-8")
    assert "'PATH'" in results  # it did print its environment
    assert SECRET not in results and "TINY_PI_TEST_SECRET" not in results


def test_a_secret_seed_fails_a_submission_tuned_to_the_published_scenarios(grades):
    published, secret = grades.table("published"), grades.table("secret")
    assert (published["reference"]["status"], published["tuned"]["status"]) == ("pass", "pass")
    assert (secret["reference"]["status"], secret["tuned"]["status"]) == ("pass", "fail")


def test_sharded_grading_merges_into_the_same_table(grades):
    whole = grades.table("whole")
    grades.result("shard1"), grades.result("shard2")
    merged = subprocess.run([sys.executable, "-m", "course", "grade", "merge", "shard1.json", "shard2.json",
                             "--json", "merged.json"], cwd=grades.course, capture_output=True, text=True, timeout=120)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    rows = json.loads((grades.course / "merged.json").read_text(encoding="utf-8"))["grades"]
    assert {row["submission"]: row for row in rows} == whole
    assert sorted(grades.table("shard1")) == ["ana", "cy"] and sorted(grades.table("shard2")) == ["ben", "eve"]
