"""`course grade` against submissions that try to cheat, damage or outlast the grade.

A folder of hostile chapter 07 submissions is graded next to an honest one (the reference), from a
full copy of the course (so that a submission trying to rewrite "the checkout" aims at the copy).
The grade must pass the honest one and no cheating one; leave the checkout, its snapshots and the
other submissions as they were; leave no process running; let nothing be written outside the
sandbox; keep the grader's secrets from the submissions; and end (a wait bounded generously, not a
timed assertion). `--seed` and `--shard` are tested here too.

Further grades (and one `course check`) take submissions hostile to the judge itself: links and
FIFOs planted where the judge reads or writes, record lines of shapes the recorder never writes,
forged records, control characters in what is printed, names too long for a file, a poisoned
disk cache, daemons that wipe the judge's mark, and a sandbox's /tmp and HOME filled.
"""

import contextlib
import csv
import hashlib
import hmac
import json
import os
import secrets
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from course.judge import confine, differential, grade, mutants, secret, starter
from course.judge import processes as judge_processes
from course.judge.index import expected_scenarios
from course.judge import sandbox
from course.judge.sandbox import bubblewrap
from course.manifest import HARDENING, find_chapter
from course.recorder import scenarios as recorder_scenarios
import keyrings
from processes import TRUSTED, running_with

pytestmark = pytest.mark.commands  # slow: `pytest -m commands` runs them (CI does)

ROOT = Path(__file__).resolve().parent.parent
LOOP = find_chapter("07")
REFERENCE = (ROOT / LOOP.reference_file).read_text(encoding="utf-8")
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
for _target in ["{course}/conftest.py", "{course}/{LOOP.snapshot_dir}/TestPureStop.test_pure_stop.txt",
                "{course}/{LOOP.reference_file}", "{submissions}/honest/{LOOP.module}.py"]:
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
        "with_data": REFERENCE,  # (its data file: see Grades)
        "many_files": REFERENCE,
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
    for folder in ("course", "checkpoints", "tests", "chapters"):
        shutil.copytree(ROOT / folder, target / folder, ignore=shutil.ignore_patterns("__pycache__", ".hypothesis"))
    for name in ("pyproject.toml", "conftest.py"):
        shutil.copy(ROOT / name, target)
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
        # An honest module beside a data file that sorts before it and is larger than a submission may be
        # (the copy stopped before the module: carry-forward graded the reference, and flagged the row);
        # and an honest module beside more files than a submission may hold (copied before the clock started).
        (self.hostile / "with_data" / "a_dataset.bin").write_bytes(bytes(sandbox.SUBMISSION_LIMIT + 2**20))
        for n in range(sandbox.ENTRY_LIMIT):
            (self.hostile / "many_files" / "junk" / str(n // 100)).mkdir(parents=True, exist_ok=True)
            (self.hostile / "many_files" / "junk" / str(n // 100) / str(n)).touch()
        self.before = digest(self.course, self.hostile)
        self.seeded = workspace / "seeded"
        self.seed, feature = find_unpublished_feature()
        self.long_secret = long_secret(feature)
        write(self.seeded / "reference", REFERENCE)
        write(self.seeded / "tuned", tuned_to(feature))
        self.secret_file = workspace / "grading-secret.txt"
        self.secret_file.write_text(self.long_secret + "\n", encoding="ascii")
        write(self.seeded / "finds_secret", in_the_loop(WRONG, find_secret(self.long_secret)))
        self.sharded = workspace / "sharded"
        for name, source in (("ana", REFERENCE), ("ben", WRONG), ("cy", "def run_agent_loop(options:\n")):
            write(self.sharded / name, source)
        (self.sharded / "eve").mkdir()
        self.judged = judged_submissions(workspace)
        self.chapter06 = workspace / "chapter06"  # its in_the_loop plans run it in chapter 07's reference loop
        (self.chapter06 / "reference").mkdir(parents=True)
        shutil.copy(ROOT / "chapters" / "ch06_tool_execution" / "ch06_tool_execution.py", self.chapter06 / "reference")
        self.chapter08 = workspace / "chapter08"  # its device scenarios need a device node no sandbox lets it make
        (self.chapter08 / "reference").mkdir(parents=True)
        shutil.copy(ROOT / "chapters" / "ch08_workspace_read" / "ch08_workspace_read.py", self.chapter08 / "reference")
        self.cache = poisoned_cache(workspace / "poisoned-cache")
        env = {**os.environ, "TINY_PI_TEST_SECRET": SECRET, "OPENAI_API_KEY": SECRET}
        judged = [str(self.judged[name]) for name in ("malformed", "tampered", "fifo", "spoof", "daemon", "poisoned")]
        self.scratch = workspace / "malformed-tmp"
        self.scratch.mkdir()
        (self.course / "results").mkdir()  # (where `course check` writes too: it may end before any grade made it)
        self.children: dict[str, subprocess.Popen] = {}
        for name, args in {
            "hostile": ["07", str(self.hostile), "--timeout", "120", "--scenario-timeout", "8", "--jobs", "2",
                        "--json", "hostile.json", "--results", "results"],
            "published": ["07", str(self.seeded), "--json", "published.json"],
            "secret": ["07", str(self.seeded), "--seed", str(self.seed), "--json", "secret.json"],
            "whole": ["07", str(self.sharded), "--json", "whole.json"],
            "shard1": ["07", str(self.sharded), "--shard", "1/2", "--json", "shard1.json"],
            "shard2": ["07", str(self.sharded), "--shard", "2/2", "--json", "shard2.json"],
            # Submissions hostile to the judge itself (results under results/: the checkout's digest skips it).
            # Their honest neighbours must pass however loaded the machine: limits no honest scenario reaches
            # beside a dozen grading children on two cores (what hangs is stopped by them all the same).
            "malformed": ["07", judged[0], "--scenario-timeout", "10", "--timeout", "120", "--jobs", "2",
                          "--json", "malformed.json", "--results", "results/malformed"],
            "tampered": ["07", judged[1], "--scenario-timeout", "10", "--timeout", "120", "--jobs", "2",
                         "--json", "tampered.json", "--results", "results/tampered"],
            "fifo": ["07", judged[2], "--scenario-timeout", "10", "--timeout", "120", "--json", "fifo.json"],
            "spoof": ["07", judged[3], "--jobs", "1", "--json", "spoof.json", "--out", "results/spoof.csv",
                      "--results", "results/spoof"],
            "daemon": ["07", judged[4], "--no-sandbox", "--trusted", "--jobs", "1", "--json", "daemon.json"],
            "poisoned": ["07", judged[5], "--json", "poisoned.json"],
            "chapter06": ["06", str(self.chapter06), "--json", "chapter06.json"],
            "chapter08": ["08", str(self.chapter08), "--json", "chapter08.json"],
        }.items():
            own_tmp = {"TMPDIR": str(self.scratch)} if name == "malformed" else {}  # what it leaves there, test sees
            self.start(name, ["-m", "course", "grade", *args, *TRUSTED],
                       {**env, **own_tmp, differential.CACHE_ENV: str(self.cache)} if name == "poisoned"
                       else {**env, **own_tmp})
        self.isolation(env)
        self.start("check_malformed", ["-m", "course", "check", "07", "--impl", str(self.judged["check"]),
                                       "--json", "results/check.json"], env)
        self.start("judge_fails", ["-c", JUDGE_FAILS_ON_BOOM, "07", str(self.judged["boom"]), "--jobs", "1",
                                   "--json", "judge_fails.json", *TRUSTED], env)
        self.zombies = ZombieWatch(self.children["spoof"].pid)

    def isolation(self, env: dict[str, str]) -> None:
        """The grades of issue 23's isolation: a secret in a file, keyrings (sandboxed and not), a re-forking
        chain without the sandbox (under a guard that ends whatever outlives the grade, after looking)."""
        self.start("secret_file", ["-m", "course", "grade", "07", str(self.seeded), "--seed-file", str(self.secret_file),
                                   "--json", "secret_file.json", "--results", "results/secret_file", *TRUSTED], env)
        self.keyring = self.workspace / "keyring"
        write(self.keyring / "a_keys", in_the_loop(WRONG, PROBE_KEYS_AND_THE_JUDGE))
        write(self.keyring / "b_receiver", STUB + RECEIVE_A_MODULE)
        self.grader_key = keyrings.add_key(GRADER_KEY, GRADER_PAYLOAD, keyrings.SESSION) if keyrings.known() else -1
        for name, mode in (("keyring", []), ("keyring_trusted", ["--no-sandbox", "--trusted"])):
            self.start(name, ["-m", "course", "grade", "07", str(self.keyring), "--jobs", "1", "--json", f"{name}.json",
                              "--results", f"results/{name}", *(mode or TRUSTED)], env)
        self.chain_lock = self.workspace / "chain.lock"
        write(self.workspace / "reforks" / "chain", REFERENCE + re_forking_chain(self.chain_lock))
        self.start("reforks", ["-c", GUARD, str(self.chain_lock), str(self.workspace / "reforks.lock-state"), "07",
                               str(self.workspace / "reforks"), "--no-sandbox", "--trusted", "--jobs", "1",
                               "--json", "reforks.json"], env)

    def start(self, name: str, args: list[str], env: dict[str, str]) -> None:
        with (self.workspace / f"{name}.out").open("w") as out, (self.workspace / f"{name}.err").open("w") as err:
            self.children[name] = subprocess.Popen([sys.executable, *args], cwd=self.course, env=env, stdout=out,
                                                   stderr=err, stdin=subprocess.DEVNULL, process_group=0)

    def result(self, name: str, wait: float = 600) -> tuple[int, str]:
        """The command's exit code, and what it printed (stdout, then stderr)."""
        code = self.children[name].wait(timeout=wait)
        return code, self.printed(name) + (self.workspace / f"{name}.err").read_text(encoding="utf-8")

    def printed(self, name: str) -> str:
        """What the command printed on stdout (the table), not its progress bar."""
        return (self.workspace / f"{name}.out").read_text(encoding="utf-8", errors="surrogateescape")

    def table(self, name: str, wait: float = 600) -> dict[str, dict]:
        self.result(name, wait)
        data = json.loads((self.course / f"{name}.json").read_text(encoding="utf-8"))
        return {row["submission"]: row for row in data["grades"]}

    def stop(self) -> None:
        for child in self.children.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, 9)
            child.wait()
        for description in (GRADER_KEY, HANDOFF):  # (the test's key, and any a submission left behind)
            for key in keyrings.find(description):
                for keyring in keyrings.KEYRINGS:
                    keyrings.unlink(key, keyring)
        # A grade stopped before its clean-up (a test run with -k, a failure) leaves the submissions' deep
        # trees in its scratch directory; pytest's own remover recurses and would fail on them in a later run.
        judge_processes.remove_tree(self.scratch)


def plan_feature(plan: dict) -> tuple | None:
    """What a loop can see of a generated plan in its first step: the number of calls in the first
    answer and `max_steps` (only plans with a small explicit bound: the fixed scenarios use 1 and 32),
    where that answer reaches the loop as a `toolUse` message (not a stream that fails, nor after an abort)."""
    steps, bound = plan.get("steps") or [], plan.get("maxSteps")
    if not steps or not isinstance(bound, int) or not 2 <= bound <= 31 or plan.get("abortBeforeStart") \
            or steps[0].get("stopReason") != "toolUse":
        return None
    return len(steps[0].get("calls", [])), bound


def graded_sections(module: str) -> list[str]:
    """The chapter track's generated sections: what a grade judges unless asked for the hardening track (加固)."""
    return [s for s, name in recorder_scenarios.for_chapter(module).SECTIONS.items() if name != HARDENING]


def find_unpublished_feature() -> tuple[int, tuple]:
    """A seed whose plans have a feature no published (default) plan has."""
    module = LOOP.module
    sections = graded_sections(module)
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


def test_a_folder_too_large_or_too_full_is_refused_plainly_never_flagged(grades):
    rows = grades.table("hostile")
    assert rows["with_data"]["status"] == "broken", rows["with_data"]  # was flagged: the reference, imported
    assert rows["with_data"]["problem"].startswith("the submission is larger than 8 MiB (9.0 MiB in 2 files, the "
                                                   "largest a_dataset.bin of 9.0 MiB): it is not graded")
    assert rows["many_files"]["status"] == "broken", rows["many_files"]  # was pass, copied before the clock
    assert rows["many_files"]["problem"].startswith(f"the submission holds more than {sandbox.ENTRY_LIMIT} files "
                                                    "and folders: it is not graded")


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


# --- Submissions hostile to the judge itself: its files, its records, its terminal, its cache, its processes.

STUB = starter.starter_source(LOOP)
FIXED = {e.scenario: [p.read_text(encoding="utf-8") for p in e.snapshots]
         for e in expected_scenarios(LOOP, ROOT) if not e.generated and e.track != HARDENING}
"""Every fixed scenario's published snapshots, by scenario: what a forger can copy (of the chapter track, which
a grade judges unless asked for the hardening track)."""
FIRST = "TestPureStop::test_pure_stop"
GENERATED = "test_generated[pure_stop]"
# Writes lines into the submission's own record file: its path is on the recorder's command line.
FORGE = r'''
import json as _json, sys as _sys
def _course_arg(prefix):
    return next(a.split("=", 1)[1] for a in _sys.argv if a.startswith(prefix))
def _forge(*lines):
    with open(_course_arg("--course-record="), "a", encoding="utf-8") as _file:
        for _line in lines:
            _file.write((_line if isinstance(_line, str) else _json.dumps(_line)) + "\n")
'''
# In the loop: the first run in a record directory calls `_before_hanging()`, then hangs where the
# scenario's time limit cannot stop it (SIGALRM blocked): the judge must start the child again without it.
HANG_ONCE = r'''
import os as _os, signal as _signal, time as _time
_marker = _os.path.join(_os.path.dirname(_course_arg("--course-record=")), "hung-once")
if not _os.path.exists(_marker):
    open(_marker, "w").close()
    _before_hanging()
    _signal.pthread_sigmask(_signal.SIG_BLOCK, {_signal.SIGALRM})
    _time.sleep(1000)
'''
LOOP_HEAD = "async def run_agent_loop(options: AgentLoopOptions) -> AgentLoopResult:\n"
SPOOF = "\r\x1b[2Kspoof                    pass      28/28      10/10  \x1b[8m"
"""A text that, printed raw on a terminal, rewrites its own row into a pass and hides what follows."""
FORMULA_FLAG = "@SUM(1+1) lone \ud800 surrogate"
"""A flag's text a spreadsheet takes for a formula, holding a lone surrogate (no UTF-8 file takes it)."""
NOT_UTF8 = os.fsdecode(b"x\xff")
"""A folder's name that is not UTF-8 (as Python reads it: 'x\\udcff')."""
IMPOSTOR = grade.short_name("M" * 255)
"""A short, printable name: exactly how the table shortens the 255-character one."""
DAEMON = f"daemon-{MARK}"
"""In the command line of the daemon a submission leaves behind (unsandboxed)."""
JUDGE_FAILS_ON_BOOM = r'''
import sys
from course.judge import cli, grade
real = grade.grade_of
def grade_of(name, *args, **kwargs):
    if name == "boom":
        raise TypeError("a bug of the judge, on this submission only")
    return real(name, *args, **kwargs)
grade.grade_of = grade_of
sys.exit(cli.main(["grade", *sys.argv[1:]]))
'''


def in_the_loop(source: str, code: str) -> str:
    """`source` with `code` run first in every call of run_agent_loop."""
    assert source.count(LOOP_HEAD) == 1
    return source.replace(LOOP_HEAD, LOOP_HEAD + "".join(f"    {line}\n" for line in code.strip("\n").splitlines()), 1)


def forging(source: str, *lines) -> str:
    """`source` that writes `lines` into its record file when imported (before any scenario runs)."""
    return source + FORGE + f"\n_forge(*{lines!r})\n"


def judged_submissions(workspace: Path) -> dict[str, Path]:
    """Folders of submissions hostile to the judge (one folder per grade run), and the victim file."""
    victim = workspace / "victim.txt"
    victim.write_text("untouched\n", encoding="utf-8")
    folders = {name: workspace / name for name in ("malformed", "tampered", "fifo", "spoof", "daemon", "poisoned",
                                                   "check", "boom")}
    forge_a_plan = f"""
def _before_hanging():
    import os
    name = os.environ["PYTEST_CURRENT_TEST"].split("::", 1)[1].rsplit(" ", 1)[0]
    _forge({{"scenario": name, "plan": 10**9, "event": "start"}})
"""
    in_a_generated_scenario = 'import os as _o\nif "test_generated" in _o.environ.get("PYTEST_CURRENT_TEST", ""):\n' + \
        "".join(f"    {line}\n" for line in HANG_ONCE.strip().splitlines())
    timeout_end = {"scenario": FIRST, "event": "end", "outcome": "failed",
                   "problem": "Failed: Timeout (>5.0s) from pytest-timeout."}
    for name, source in {
        "honest": REFERENCE,
        # Each record line below is JSON but not a shape the recorder writes.
        "kind_unhashable": forging(REFERENCE, {"scenario": FIRST, "event": "start"},
                                   {"scenario": FIRST, "snapshot": 0, "record": {"kind": []}},
                                   {"scenario": FIRST, "event": "end", "phase": "call", "outcome": "passed"}),
        "where_not_text": forging(REFERENCE, {"scenario": FIRST, "event": "start"},
                                  {"scenario": FIRST, "snapshot": 0, "record": {"kind": "raised"}},
                                  {**timeout_end, "where": 5}),
        "import_file_number": forging(REFERENCE, {"importError": {"module": LOOP.module, "file": 5, "line": None,
                                                                  "problem": "x"}}),
        "output_numbers": forging(REFERENCE, {"scenario": FIRST, "event": "start"},
                                  {"scenario": FIRST, "event": "end", "outcome": "failed", "output": [1, 2]}),
        "deep_json": forging(REFERENCE, "[" * 100000),
        # Leaves a chain of directories 3,000 deep beside its record: more than Python's own remover can take.
        "deep_tree": REFERENCE + FORGE + """
import os as _os
_fd = _os.open(_os.path.dirname(_course_arg("--course-record=")), _os.O_RDONLY)
for _n in range(3000):
    try:
        _os.mkdir("d", dir_fd=_fd)
    except FileExistsError:
        pass
    _next = _os.open("d", _os.O_RDONLY, dir_fd=_fd)
    _os.close(_fd)
    _fd = _next
_os.close(_fd)
""",
        # Says a generated scenario started a plan past its plans, then hangs there.
        "plan_out_of_range": in_the_loop(REFERENCE + FORGE + forge_a_plan, in_a_generated_scenario),
        # Records that cost the judge more than their size, or more than any scenario's: a loop-run of 3,000
        # requests (the judge compared each request's messages afresh: 6 s, quadratic), asserted three times
        # for a scenario of one snapshot (the judge rendered all three); a line of 1.5 MiB (the judge held
        # ~150 bytes per byte of it); 4.5 MiB of lines for one scenario.
        "quadratic": STUB + FORGE + f"""
_N = 3000
_record = {{"kind": "loop-run", "reason": "stop", "steps": _N, "events": [], "executions": [], "inputMessages": [],
           "definitions": [], "messagesJson": False,
           "messages": [{{"role": "assistant", "content": [], "stopReason": "toolUse"}}] * _N,
           "requests": [{{"messages": [], "tools": [], "systemPrompt": None}}] * _N}}
_forge({{"scenario": {FIRST!r}, "event": "start"}}, *[{{"scenario": {FIRST!r}, "snapshot": _n, "record": _record}}
                                                     for _n in range(3)])
""",
        "huge_line": REFERENCE + FORGE + f"""
_forge({{"scenario": {FIRST!r}, "event": "start"}},
       {{"scenario": {FIRST!r}, "snapshot": 0, "record": {{"kind": "raised", "raised": "x", "message": "x" * 3 * 2**19}}}})
""",
        "huge_scenario": STUB + FORGE + f"""
_forge({{"scenario": {GENERATED!r}, "event": "start"}},
       *[{{"scenario": {GENERATED!r}, "plan": 0, "record": {{"kind": "raised", "message": "x" * 900 * 2**10}}}}] * 5)
""",
        # Twenty import errors of 5,000 characters each: the row's problem was all of them, joined.
        "long_import_errors": STUB + FORGE + f"""
_forge(*[{{"importError": {{"module": {LOOP.module!r}, "file": None, "line": None, "problem": "x" * 5000}}}}] * 20)
""",
        # An honest loop that prints a line of 2 MiB: the recorder keeps the start of it, within what the judge reads.
        "chatty": in_the_loop(REFERENCE, """
global _SAID
try:
    _SAID
except NameError:
    _SAID = True
    print("x" * 2**21)
"""),
    }.items():
        write(folders["malformed"] / name, source)

    replace_plans = f'''
def _before_hanging():
    import os
    plans = _course_arg("--course-plans=")
    for attempt in (lambda: os.unlink(plans), lambda: os.symlink({str(victim)!r}, plans),
                    lambda: os.symlink({str(workspace)!r}, os.path.join(os.path.dirname(plans), "x"))):
        try:
            attempt()
        except OSError:
            pass
'''
    # Fills every place of the sandbox's own it can find (bubblewrap makes its root and /dev as tmpfs of no
    # bounded size: the red team wrote 3840 MiB of the machine's memory there), 240 MiB each at the most.
    fill = '''
import json as _json, os as _os
global _FILLED
try:
    _FILLED
except NameError:
    _FILLED = {}
    for _place, _folder in (("HOME", _os.environ["HOME"]), ("/tmp", "/tmp"), ("/dev/shm", "/dev/shm"), ("/", "/"),
                            ("/etc", "/etc"), ("/dev", "/dev"), ("the copy", _os.getcwd())):
        _FILLED[_place] = 0
        for _n in range(4):
            try:
                with open(_os.path.join(_folder, f"fill{_n}"), "wb") as _file:
                    for _k in range(60):
                        _file.write(bytes(2**20))
                        _FILLED[_place] += 1
            except OSError:
                break
        for _n in range(4):  # (room again for pytest's own temporary files)
            try:
                _os.unlink(_os.path.join(_folder, f"fill{_n}"))
            except OSError:
                pass
print("EVIDENCE MiB written:", _json.dumps(_FILLED))
'''
    for name, source in {
        "honest": REFERENCE,
        # Replaces its plans file with a link to a file of the grader's, then hangs: the judge restarts it.
        "plans_to_symlink": in_the_loop(REFERENCE + FORGE + replace_plans, HANG_ONCE),
        # A stub that writes the published snapshots' text as its records, each scenario ending 'passed'.
        "forged_snapshots": forging(STUB, *[line for scenario, texts in FIXED.items() for line in (
            {"scenario": scenario, "event": "start"},
            *({"scenario": scenario, "snapshot": n, "record": text} for n, text in enumerate(texts)),
            {"scenario": scenario, "event": "end", "phase": "call", "outcome": "passed"})]),
        "fills_disk": in_the_loop(WRONG, fill),
    }.items():
        write(folders["tampered"] / name, source)
    (folders["tampered"] / "linked_module").mkdir()
    (folders["tampered"] / "linked_module" / f"{LOOP.module}.py").symlink_to(ROOT / LOOP.reference_file)

    write(folders["fifo"] / "honest", REFERENCE)
    write(folders["fifo"] / "fifo_record", REFERENCE + FORGE + "\nimport os\nos.unlink(_course_arg('--course-record='))\n"
                                            "os.mkfifo(_course_arg('--course-record='))\n")
    write(folders["fifo"] / "record_to_stdin", REFERENCE + FORGE + "\nimport os\nos.unlink(_course_arg('--course-record='))\n"
                                                "os.symlink('/proc/self/fd/0', _course_arg('--course-record='))\n")

    write(folders["spoof"] / "ana", REFERENCE)
    write(folders["spoof"] / "spoof", forging(STUB, {"flag": SPOOF}, *[line for scenario in FIXED for line in (
        {"scenario": scenario, "event": "start"},
        {"scenario": scenario, "event": "end", "outcome": "failed", "problem": SPOOF})]))
    write(folders["spoof"] / "\x1b[31mred\x1b[0m\r", WRONG)
    write(folders["spoof"] / ("M" * 255), WRONG)
    write(folders["spoof"] / NOT_UTF8, STUB)
    write(folders["spoof"] / "=1+1", forging(STUB, {"flag": FORMULA_FLAG}))
    write(folders["spoof"] / IMPOSTOR, STUB)

    write(folders["daemon"] / "a_daemon", REFERENCE + f'''
import os as _os, sys as _sys
if _os.fork() == 0:
    _os.setsid()
    if _os.fork() == 0:  # a daemon: its own session, its parent gone, its environment (the judge's mark) wiped
        _os.execve(_sys.executable, [_sys.executable, "-c", "import time; time.sleep(60)", {DAEMON!r}], {{}})
    _os._exit(0)
''')
    write(folders["daemon"] / "b_probe", REFERENCE + f'''
import os as _os
_alive = []
for _pid in _os.listdir("/proc"):
    try:
        if _pid.isdigit() and {DAEMON.encode()!r} in open(f"/proc/{{_pid}}/cmdline", "rb").read():
            _alive.append(_pid)
    except OSError:
        pass
open({str(workspace / "probe.txt")!r}, "w").write(" ".join(_alive) or "none")
''')

    write(folders["poisoned"] / "honest", REFERENCE)
    write(folders["poisoned"] / "wrong", WRONG)

    names = list(FIXED)
    write(folders["check"], forging(
        REFERENCE,
        {"scenario": names[0], "snapshot": 0, "record": {"kind": []}},
        {"scenario": names[1], "event": "start"}, {**timeout_end, "scenario": names[1], "where": 5},
        {"scenario": names[2], "event": "start"},
        {"scenario": names[2], "event": "end", "outcome": "failed", "problem": SPOOF, "output": [1, 2]},
        {"scenario": names[3], "event": "start"},
        {"scenario": names[3], "event": "end", "outcome": "failed", "problem": SPOOF, "output": [SPOOF]},
        {"scenario": "test_generated[pure_stop]", "plan": 10**9, "event": "start"},
        {"importError": {"module": LOOP.module, "file": 5, "line": None, "problem": "x"}},
        "[" * 100000, {"flag": SPOOF}))

    write(folders["boom"] / "ana", REFERENCE)
    write(folders["boom"] / "boom", REFERENCE)
    return {**folders, "victim": victim}


def poisoned_cache(directory: Path) -> Path:
    """The judge's disk cache of the reference's runs of the default plans, every rendering then
    rewritten, as a submission run by `course check` (which has no sandbox) can rewrite it."""
    directory.mkdir()
    before = os.environ.get(differential.CACHE_ENV)
    os.environ[differential.CACHE_ENV] = str(directory)
    try:
        for section in differential.judge_scenarios.for_chapter(LOOP.module).STRATEGIES:
            differential.expected_renders(LOOP.module, section, differential.draw_plans(LOOP.module, section))
    finally:
        if before is None:
            del os.environ[differential.CACHE_ENV]
        else:
            os.environ[differential.CACHE_ENV] = before
    poisoned = list(directory.glob("renders-*.json"))
    assert poisoned
    for path in poisoned:
        count = len(json.loads(path.read_text(encoding="ascii")))
        path.write_text(json.dumps(["## poisoned\n"] * count), encoding="ascii")
    return directory


class ZombieWatch:
    """The most zombie children `pid` had at once, sampled until it ends (or 600 s pass)."""

    def __init__(self, pid: int) -> None:
        self.pid, self.most = pid, 0
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        end = time.monotonic() + 600
        while time.monotonic() < end and Path(f"/proc/{self.pid}").exists():
            zombies = 0
            for entry in Path("/proc").iterdir():
                with contextlib.suppress(OSError, IndexError, ValueError):
                    if entry.name.isdigit():
                        text = (entry / "stat").read_text()
                        state, ppid = text[text.rfind(")") + 2:].split()[:2]
                        zombies += state == "Z" and int(ppid) == self.pid
            self.most = max(self.most, zombies)
            time.sleep(0.05)

    def result(self) -> int:
        self.thread.join()
        return self.most


def results_of(grades: Grades, run: str, submission: str) -> dict:
    """A submission's --results file, found by the name it holds."""
    for path in (grades.course / "results" / run).glob("*.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        if data["submission"] == submission:
            return data
    raise AssertionError(f"no results file of {submission!r} in results/{run}")


def scenario_of(results: dict, scenario: str) -> dict:
    return next(test for test in results["tests"] if test["name"] == scenario)


def test_a_link_planted_in_the_sandbox_never_leads_the_judge_outside(grades):
    rows = grades.table("tampered")
    assert grades.judged["victim"].read_text(encoding="utf-8") == "untouched\n"
    assert rows["honest"]["status"] == "pass", rows["honest"]
    assert rows["plans_to_symlink"]["status"] != "pass"


def test_a_record_file_swapped_for_a_fifo_or_a_link_is_flagged_not_opened(grades):
    rows = grades.table("fifo", wait=300)  # a judge that opens the FIFO waits for ever
    assert rows["honest"]["status"] == "pass", rows["honest"]
    assert (rows["fifo_record"]["status"], rows["record_to_stdin"]["status"]) == ("flagged", "flagged")
    for name, put_there in (("fifo_record", "FIFO"), ("record_to_stdin", "symbolic link")):
        # It removes the file, then makes the other thing: the judge may look in between, and says what it saw.
        problem = rows[name]["problem"]
        assert put_there in problem or "removed its record file" in problem, rows[name]


def test_malformed_record_lines_are_the_submissions_errors_and_the_table_is_written(grades):
    code, out = grades.result("malformed")
    assert code == 0 and "Traceback" not in out, out
    rows = grades.table("malformed")
    assert rows["honest"]["status"] == "pass" and rows["deep_json"]["status"] == "pass"  # a line not JSON is no line
    assert rows["deep_tree"]["status"] == "pass"  # what it left beside its record is removed, not the end of the grade
    assert list(grades.scratch.iterdir()) == []  # every submission's scratch directory, the deep one's included
    assert rows["kind_unhashable"]["scenarios"][FIRST] == "failed"
    for name in ("where_not_text", "output_numbers"):
        assert rows[name]["status"] == "fail" and rows[name]["scenarios"][FIRST] == "error", rows[name]
        assert scenario_of(results_of(grades, "malformed", name), FIRST)["problem"].startswith("malformed record line")
    assert rows["import_file_number"]["status"] == "flagged" and "importError" in rows["import_file_number"]["problem"]
    (generated,) = [test for test in results_of(grades, "malformed", "plan_out_of_range")["tests"]
                    if test["status"] != "passed"]
    assert generated["name"].startswith("test_generated[") and "plan 1000000000" in generated["problem"], generated
    assert generated["status"] == "error" and rows["plan_out_of_range"]["status"] == "fail"


def test_records_larger_than_any_scenarios_are_refused_and_the_row_says_so(grades):
    rows = grades.table("malformed")
    assert rows["chatty"]["status"] == "pass", rows["chatty"]  # (what the recorder writes stays within the bounds)
    quadratic = scenario_of(results_of(grades, "malformed", "quadratic"), FIRST)
    assert quadratic["status"] == "error", quadratic
    assert quadratic["problem"] == "malformed record line: a snapshot line past the scenario's 1 snapshot(s)"
    huge = rows["huge_line"]
    assert (huge["status"], huge["scenarios"][FIRST], huge["passed"]) == ("fail", "error", huge["total"] - 1), huge
    assert huge["problem"] == (f"1 scenario(s) with records too large to judge, first {FIRST}: a record line of "
                               f"1.5 MiB: more than any scenario writes (1.0 MiB at the most)")
    assert scenario_of(results_of(grades, "malformed", "huge_scenario"), GENERATED)["problem"] == \
        "its record lines take more than 4.0 MiB: more than any scenario writes"
    assert rows["long_import_errors"]["status"] == "broken"
    assert len(rows["long_import_errors"]["problem"]) <= grade.PROBLEM_LIMIT + 1  # was 106,000 characters


def test_a_judge_failure_on_one_submission_is_its_row_not_the_end_of_the_grade(grades):
    code, out = grades.result("judge_fails")
    assert code == 0, out
    rows = grades.table("judge_fails")
    assert rows["ana"]["status"] == "pass"
    assert rows["boom"]["status"] == "error"
    assert rows["boom"]["problem"] == "the judge failed on its records: TypeError: a bug of the judge, on this " \
                                      "submission only"


def test_check_prints_a_verdict_whatever_the_records_hold(grades):
    code, out = grades.result("check_malformed")
    assert code == 1 and "Traceback" not in out, out
    printed = grades.printed("check_malformed")
    assert "scenarios pass — chapter 07 fails" in printed and "flagged: " in printed
    assert "\x1b" not in printed and "\r" not in printed and "\\x1b[2K" in printed
    assert json.loads((grades.course / "results" / "check.json").read_text(encoding="utf-8"))["status"] == "fail"


def test_texts_from_submissions_are_printed_escaped_and_written_as_they_are(grades):
    code, out = grades.result("spoof")
    assert code == 0, out
    printed = grades.printed("spoof")
    assert "\x1b" not in printed and "\r" not in printed, printed
    lines = printed.splitlines()
    (spoof,) = [line for line in lines if line.startswith("spoof ")]
    assert spoof.split()[1] == "flagged" and "\\r\\x1b[2Kspoof" in spoof
    assert any(line.startswith("\\x1b[31mred\\x1b[0m\\r~") for line in lines), printed  # (escaped: then a hash)
    assert all(len(line) < 400 for line in lines)
    rows = grades.table("spoof")
    assert rows["spoof"]["problem"] == SPOOF and "\x1b[31mred\x1b[0m\r" in rows
    with (grades.course / "results" / "spoof.csv").open(encoding="utf-8", newline="") as table:
        assert {row["submission"]: row["problem"] for row in csv.DictReader(table)}["spoof"] == "'" + SPOOF  # (see below)


def test_texts_no_file_takes_and_formulas_reach_the_files_safe(grades):
    """A lone surrogate (a flag's text, a folder's name that is not UTF-8) made the grade end with a
    traceback and no table; a formula reached the CSV as it was. The JSON keeps every text exactly."""
    code, out = grades.result("spoof")
    assert code == 0 and "Traceback" not in out, out
    rows = grades.table("spoof")
    assert (rows["=1+1"]["status"], rows["=1+1"]["problem"]) == ("flagged", FORMULA_FLAG)
    assert rows[NOT_UTF8]["status"] == "fail"  # (a stub)
    with (grades.course / "results" / "spoof.csv").open(encoding="utf-8", newline="") as table:
        cells = {row["submission"]: row for row in csv.DictReader(table)}
    assert cells["'=1+1"]["problem"] == "'@SUM(1+1) lone \\ud800 surrogate"
    assert cells["x\\udcff"]["status"] == "fail"
    assert not any(cell.startswith(grade.FORMULA) for row in cells.values() for cell in [*row, *row.values()])
    assert results_of(grades, "spoof", "=1+1")["flags"] == [FORMULA_FLAG]
    assert results_of(grades, "spoof", NOT_UTF8)["gradeStatus"] == "fail"
    assert any(line.startswith("x\\udcff~") for line in grades.printed("spoof").splitlines())


def test_every_submission_gets_a_results_file_however_long_its_name(grades):
    rows = grades.table("spoof")
    files = list((grades.course / "results" / "spoof").glob("*.json"))
    assert len(files) == len(rows) == 7 and all(len(path.name.encode()) <= 255 for path in files)
    assert results_of(grades, "spoof", "M" * 255)["gradeStatus"] == rows["M" * 255]["status"] == "fail"


def test_a_name_made_like_a_shortened_one_gets_a_row_name_and_results_of_its_own(grades):
    rows = grades.table("spoof")
    files = list((grades.course / "results" / "spoof").glob("*.json"))
    named = sorted(json.loads(path.read_text(encoding="utf-8"))["submission"] for path in files)
    assert named == sorted(rows), named  # the impostor's results overwrote the long name's
    assert results_of(grades, "spoof", IMPOSTOR)["gradeStatus"] == rows[IMPOSTOR]["status"] == "fail"
    shown = [line.split()[0] for line in grades.printed("spoof").splitlines() if line.startswith(("MMMM", "\\x1b"))]
    assert len(shown) == len(set(shown)) == 3, shown


@needs_bubblewrap
def test_no_sandbox_is_left_a_zombie(grades):
    grades.result("spoof")  # seven submissions, one at a time: each left a bwrap zombie until the grade ended
    assert grades.zombies.result() <= 2  # one submission's two bwrap processes, between its end and their reaping


def test_a_daemon_without_the_judges_mark_ends_with_its_submission(grades):
    code, out = grades.result("daemon")
    assert code == 0, out
    # Graded with --no-sandbox: said once, on stderr, with what does not hold (the table on stdout stays the table).
    warned = (grades.workspace / "daemon.err").read_text(encoding="utf-8")
    assert warned.count("course grade: --trusted, --no-sandbox: these guarantees of docs/guarantees.md do not hold") == 1, warned
    assert all(f"  - {gap}\n" in warned for gap in grade.UNSANDBOXED), warned
    assert "--no-sandbox" not in grades.printed("daemon")
    rows = grades.table("daemon")
    assert (rows["a_daemon"]["status"], rows["b_probe"]["status"]) == ("pass", "pass")
    assert (grades.workspace / "probe.txt").read_text() == "none"  # gone before the next submission began
    assert running_with(DAEMON) == []


def test_the_grade_never_trusts_the_disk_cache_a_student_could_write(grades):
    rows, unpoisoned = grades.table("poisoned"), grades.table("whole")
    assert rows["honest"]["status"] == "pass", rows["honest"]
    assert (rows["wrong"]["status"], rows["wrong"]["points"]) == ("fail", unpoisoned["ben"]["points"])


def test_records_in_the_published_snapshots_text_earn_nothing(grades):
    rows = grades.table("tampered")
    forged = rows["forged_snapshots"]
    assert forged["points"] == 0 and not any(forged["scenarios"][name] == "passed" for name in FIXED), forged


def test_a_module_that_is_a_link_is_reported_as_one(grades):
    row = grades.table("tampered")["linked_module"]
    assert row["status"] == "missing" and "symbolic link" in row["problem"], row


@needs_bubblewrap
def test_the_sandbox_bounds_what_it_writes_in_every_place_of_its_own(grades):
    rows = grades.table("tampered")
    output = "\n".join(test["output"] or "" for test in results_of(grades, "tampered", "fills_disk")["tests"])
    evidence = [json.loads(line.split(":", 1)[1]) for line in output.splitlines() if "EVIDENCE MiB written:" in line]
    assert evidence, output
    bounds = {"HOME": sandbox.HOME_SIZE, "/tmp": sandbox.TMP_SIZE,
              "/dev/shm": sandbox.SHM_SIZE if sandbox.knows_size(bubblewrap()) else 0}
    for written in evidence:  # (one line per process that filled: the wrong loop's failing scenarios share one)
        for place, mib in written.items():
            assert mib * 2**20 <= bounds.get(place, 0), (place, written)  # / and /dev took 240 MiB each, unbounded
    assert rows["fills_disk"]["status"] == "fail"  # (its wrong loop's five scenarios), not a timeout


def test_what_the_reference_cannot_pass_in_the_sandbox_is_left_out_of_every_grade(grades):
    """The reference is graded as a submission first: chapter 08's device scenarios, whose device node the
    sandbox lets no one create, are left out (said once), not counted against every submission."""
    code, out = grades.result("chapter08")
    row = grades.table("chapter08")["reference"]
    assert code == 0 and (row["status"], row["passed"], row["points"]) == ("pass", row["total"], row["max_points"]), row
    left_out = sorted(name for name, status in row["scenarios"].items() if status == "not graded")
    if bubblewrap() is not None or os.geteuid() != 0:  # (only root outside a sandbox may make device nodes)
        assert left_out == ["TestRefusals::test_a_special_file_is_refused_without_being_opened[device]",
                            "TestRefusals::test_refused_read[device]"], row["scenarios"]
        assert out.count("the reference itself does not pass 2 scenario(s) here, left out of every grade") == 1
    else:
        assert left_out == [] and "the reference itself" not in out


def test_chapter_06_is_graded_with_the_loop_its_plans_run_in(grades):
    """A graded copy holds chapter 07's reference loop (not chapter 06's answer): the reference passes every section."""
    row = grades.table("chapter06")["reference"]
    assert (row["status"], row["passed"], row["total"]) == ("pass", 19, 19), row  # the chapter track's (加固 left out)


# --- Issue 23: secrets a submission cannot reach, and nothing that outlives a grade without the sandbox.

def long_secret(feature: tuple) -> str:
    """A grading secret of 128 bits, given in a file (--seed-file), whose plans hold `feature`, which no published
    plan has and the tuned submission has no answer for: random, drawn again until its plans hold it (about three
    secrets in four do), so that the grade fails the tuned submission in every run."""
    module = LOOP.module
    sections = graded_sections(module)
    while True:
        candidate = secrets.token_hex(16)
        if any(plan_feature(plan) == feature for section in sections
               for plan in differential.draw_plans(module, section, seed=candidate.encode())):
            return candidate


GRADER_KEY = f"grader-{MARK}"
GRADER_PAYLOAD = f"keyring-{secrets.token_hex(8)}".encode()
"""A key the grader's session keyring holds (as a login shell's or a service's would): no submission reads it."""
HANDOFF = f"handoff-{MARK}"
"""The key a submission leaves its module in, for a later one to run as its own."""
KEYRINGS_SOURCE = (Path(__file__).parent / "keyrings.py").read_text(encoding="utf-8")
# In the loop: everything a submission may try on the grader's keys and on the judge's memory, each
# result the kernel's (minus errno on failure), printed (the loop is wrong, so its output is shown).
PROBE_KEYS_AND_THE_JUDGE = f'''
import ctypes as _ct, json as _json, os as _o
_k = {{}}
exec({KEYRINGS_SOURCE!r}, _k)
_found = {{}}
_grader = [_k["search"]({GRADER_KEY!r}, _ring) for _ring in _k["KEYRINGS"]]
_found["search the grader's key"] = _grader
_found["read it"] = [repr(_k["read"](_key)) for _key in _grader if _key > 0]
_found["revoke it"] = [_k["revoke"](_key) for _key in _grader if _key > 0]
_found["list the session keyring"] = repr(_k["read"](_k["SESSION"]))
_found["leave a module behind"] = [_k["add_key"]({HANDOFF!r}, __import__("zlib").compress(open(__file__, "rb").read()),
                                                 _ring) for _ring in _k["KEYRINGS"]]
_libc = _ct.CDLL(None, use_errno=True)
_attached = _libc.ptrace(16, _o.getppid(), 0, 0)  # PTRACE_ATTACH to the judge (or the sandbox's init)
_found["ptrace the judge"] = _attached if _attached >= 0 else -_ct.get_errno()
if _attached >= 0:
    _libc.ptrace(17, _o.getppid(), 0, 0)  # (PTRACE_DETACH: the judge must go on)
class _Iovec(_ct.Structure):
    _fields_ = [("base", _ct.c_void_p), ("size", _ct.c_size_t)]
_mine, _into = _ct.create_string_buffer(b"12345678"), _ct.create_string_buffer(8)
for _what, _pid in (("read own memory", _o.getpid()), ("read the judge's memory", _o.getppid())):
    _read = _libc.process_vm_readv(_pid, _ct.byref(_Iovec(_ct.addressof(_into), 8)), 1,
                                   _ct.byref(_Iovec(_ct.addressof(_mine), 8)), 1, 0)
    _found[_what] = _read if _read >= 0 else -_ct.get_errno()
print("EVIDENCE", _json.dumps(_found))
'''
# At import: a stub that runs, as its own, a module some earlier submission left in a keyring.
RECEIVE_A_MODULE = f'''
_k = {{}}
exec({KEYRINGS_SOURCE!r}, _k)
for _key in _k["find"]({HANDOFF!r}):
    exec(__import__("zlib").decompress(_k["read"](_key)).decode("utf-8"), globals())
    break
'''
# In the loop: looks for the grading secret everywhere a process can look (its command line, environment,
# plans, and every process's command line and environment it can see), once.
def find_secret(hidden: str) -> str:
    """In the loop: looks for `hidden` everywhere a process can look, once."""
    return f'''
global _LOOKED
try:
    _LOOKED
except NameError:
    import os as _o, sys as _s
    _LOOKED, _places = True, []
    if {hidden!r} in " ".join(_s.argv) or any({hidden!r} in _v for _v in _o.environ.values()):
        _places.append("its own command line or environment")
    for _arg in _s.argv:
        if _arg.startswith("--course-plans=") and {hidden!r} in open(_arg[15:], errors="replace").read():
            _places.append("its plans")
    for _pid in filter(str.isdigit, _o.listdir("/proc")):
        for _name in ("cmdline", "environ"):
            try:
                if {hidden.encode()!r} in open(f"/proc/{{_pid}}/{{_name}}", "rb").read():
                    _places.append(f"/proc/{{_pid}}/{{_name}}")
            except OSError:
                pass
    print("EVIDENCE secret found in:", _places)
'''
# Runs `course grade` as a subreaper: whatever outlives the grade is re-parented here. After the grade, it
# says whether the re-forking chain still holds its lock (it holds it while any process of it lives), and
# then ends everything left, following each new child until none is left, so that no test leaves it running.
GUARD = r'''
import ctypes, fcntl, os, signal, subprocess, sys
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)
lock, report = sys.argv[1], sys.argv[2]
code = subprocess.call([sys.executable, "-m", "course", "grade", *sys.argv[3:]])
held = os.open(lock, os.O_RDWR | os.O_CREAT)
try:
    fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
    state = "free"
except BlockingIOError:
    state = "held"
open(report, "w").write(state)
while True:
    tasks = f"/proc/{os.getpid()}/task"
    children = [int(pid) for task in os.listdir(tasks) for pid in open(f"{tasks}/{task}/children").read().split()]
    if not children:
        break
    for pid in children:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, os.WNOHANG)
        except (ProcessLookupError, ChildProcessError):
            pass
sys.exit(code)
'''


def re_forking_chain(lock: Path) -> str:
    """At import: a process that holds `lock`, wipes its environment (the judge's mark) and keeps forking
    into a new session, each parent ending at once, for ever."""
    chain = "import os\nwhile True:\n    if os.fork():\n        os._exit(0)\n    os.setsid()\n"
    return f'''
import fcntl as _fcntl, os as _os, sys as _sys
if _os.fork() == 0:
    _held = _os.open({str(lock)!r}, _os.O_RDWR | _os.O_CREAT)
    _fcntl.flock(_held, _fcntl.LOCK_EX)
    _os.set_inheritable(_held, True)
    _os.execve(_sys.executable, [_sys.executable, "-c", {chain!r}, "chain-{MARK}"], {{}})
'''


def evidence(grades: Grades, run: str, submission: str) -> list[str]:
    """The EVIDENCE lines a submission printed in its scenarios (as its results file holds them)."""
    tests = results_of(grades, run, submission)["tests"]
    return sorted({line for test in tests for line in (test["output"] or "").splitlines() if "EVIDENCE" in line})


needs_keyrings = pytest.mark.skipif(not keyrings.known(), reason="this machine's keyctl system call number is not "
                                    "known to tests/keyrings.py: the keyring tests cannot make keys")
needs_seccomp = pytest.mark.skipif(confine.filter_program() is None, reason="libseccomp is not installed (Debian "
                                   "package libseccomp2): without the filter a submission reaches keyrings and ptrace")


def keyrings_unreached(grades: Grades, run: str) -> None:
    """The grade `run` of the keyring submissions: neither reached a key, the judge, or anything of the
    other's; the grader's key is still there and readable; nothing was left behind."""
    code, out = grades.result(run)
    assert code == 0, out
    assert grades.grader_key > 0, f"the test could not add its own key: {grades.grader_key}"
    rows = grades.table(run)
    (line,) = evidence(grades, run, "a_keys")
    found = json.loads(line.split("EVIDENCE", 1)[1])
    assert found["search the grader's key"] == [-1] * 3 and found["read it"] == found["revoke it"] == [], found
    assert found["leave a module behind"] == [-1] * 3, found  # (EPERM: the filter)
    assert found["list the session keyring"] == "-1", found
    assert found["ptrace the judge"] == found["read own memory"] == found["read the judge's memory"] == -1, found
    assert GRADER_PAYLOAD.decode() not in json.dumps(results_of(grades, run, "a_keys"))
    assert keyrings.read(grades.grader_key) == GRADER_PAYLOAD  # neither revoked nor unlinked
    assert keyrings.find(HANDOFF) == []
    receiver = rows["b_receiver"]
    assert receiver["status"] != "pass" and receiver["points"] < rows["a_keys"]["points"], receiver


@needs_bubblewrap
@needs_keyrings
@needs_seccomp
def test_a_sandboxed_submission_reaches_no_keyring_and_hands_nothing_on(grades):
    keyrings_unreached(grades, "keyring")


@needs_keyrings
@needs_seccomp
def test_without_the_sandbox_the_keyrings_and_the_judges_memory_are_out_of_reach_too(grades):
    keyrings_unreached(grades, "keyring_trusted")


@needs_bubblewrap
def test_no_submission_finds_the_secret_it_is_graded_with(grades):
    rows = grades.table("secret_file")
    assert (rows["reference"]["status"], rows["tuned"]["status"]) == ("pass", "fail"), rows
    assert evidence(grades, "secret_file", "finds_secret") == ["EVIDENCE secret found in: []"]
    _, said = grades.result("secret_file")
    assert "bits at the most" not in said, said  # (128 bits, from a file: nothing to warn of)
    _, said = grades.result("secret")
    bits = secret.strength(str(grades.seed).encode())  # (`--seed N`, a small number: what the issue's search found)
    assert f"course grade: the secret holds {bits:.0f} bits at the most: a submission" in said, said


def test_a_seed_search_finds_a_short_secret_and_never_a_long_ones_plans(grades, monkeypatch):
    """The issue's attack: redraw the public strategy for candidate seeds until the plans seen come out.
    A short secret falls to it; a long one's sections are drawn from HMAC keys no candidate reaches, one
    section's key telling nothing of another's."""
    monkeypatch.setattr(differential, "disk_cache", False)
    module = LOOP.module
    section = next(iter(differential.judge_scenarios.for_chapter(module).STRATEGIES))

    def search(seen: list[dict]) -> list[int]:
        return [n for n in range(1, 50) if differential.draw_plans(module, section, seed=n) == seen]

    assert search(differential.draw_plans(module, section, seed=grades.seed)) == [grades.seed]
    assert search(differential.draw_plans(module, section, seed=grades.long_secret)) == []
    key = hmac.new(grades.long_secret.encode(), f"plans\0{module}\0{section}".encode(), hashlib.sha256).digest()
    assert differential.section_seed(module, section, grades.long_secret) == int.from_bytes(key, "big") >= 2**32
    others = {differential.section_seed(module, other, grades.long_secret)
              for other in differential.judge_scenarios.for_chapter(module).STRATEGIES}
    assert len(others) == len(differential.judge_scenarios.for_chapter(module).STRATEGIES)


def test_a_chain_re_forking_into_new_sessions_ends_with_the_grade_without_the_sandbox(grades):
    code, out = grades.result("reforks")
    assert code == 0, out
    assert grades.table("reforks")["chain"]["status"] == "pass"
    assert (grades.workspace / "reforks.lock-state").read_text() == "free"  # no process of the chain outlived it


def test_grading_without_the_sandbox_needs_trusted(grades, tmp_path):
    refused = subprocess.run([sys.executable, "-m", "course", "grade", "07", str(grades.keyring), "--no-sandbox"],
                             cwd=grades.course, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and refused.stdout == "", refused
    assert refused.stderr.startswith("course grade: --no-sandbox: without its sandbox a submission runs as your user")
    assert "with --trusted" in refused.stderr
