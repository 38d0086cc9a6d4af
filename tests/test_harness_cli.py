"""The `course` commands driven as a student and an instructor use them, each in a child process.

Every command runs a chapter's tests in pytest processes of its own (~1 s each here), so the
module starts them all at once in one fixture and each test waits for the ones it reads.
"""

import contextlib
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from course.judge import check, cli, mutants, starter
from course.manifest import CHAPTERS, find_chapter
from course.judge.testrun import PytestRun, Scenario

ROOT = Path(__file__).resolve().parent.parent
LOOP = find_chapter("07")
REFERENCE_LOOP = (ROOT / "checkpoints" / f"{LOOP.module}.py").read_text(encoding="utf-8")
GRADE_TIMEOUT = 12  # seconds per submission; the hanging one is killed after this


def variant(find: str, replace: str, *also: tuple[str, str]) -> str:
    """The reference loop with a deliberate mistake, written as the mutation gallery writes one."""
    return mutants.Mutant("harness-test", "", "", find, replace, also).source(REFERENCE_LOOP)


# Executes the tools of a `length` answer as if it were `toolUse`: the gallery's own mistake.
TOOLS_ON_LENGTH = next(m for m in mutants.variants(LOOP) if m.name == "length-executes-tools").source(REFERENCE_LOOP)
# The scenarios it fails: two fixed ones and the generated sections whose plans end length (its stored signature).
LENGTH_FAILS = mutants.load_signatures()["07"]["length-executes-tools"]
# Never finishes a tool batch: the first scenario with a tool call hangs until grading kills it.
HANGING_TOOLS = variant('emit({"type": "tool_start", "call": call})', "await asyncio.Event().wait()")
# Keeps results in the order the tasks began: right under asyncio's own order, wrong under another.
RESULTS_IN_START_ORDER = variant(
    "async with asyncio.TaskGroup() as group:\n"
    "            tasks = [group.create_task(execute_one(call, execute, signal, emit_keeping_results)) for call in calls]",
    "started = []\n"
    "async def run(call):\n"
    "    slot = {}\n"
    "    started.append(slot)\n"
    "    slot['result'] = await execute_one(call, execute, signal, emit_keeping_results)\n"
    "async with asyncio.TaskGroup() as group:\n"
    "    for call in calls:\n"
    "        group.create_task(run(call))",
    ("return [task.result() for task in tasks]", "return [slot['result'] for slot in started]"),
)


def write_module(directory: Path, source: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{LOOP.module}.py").write_text(source, encoding="utf-8")
    return directory


# The children may cache bytecode even where the caller's environment says not to: there are
# about twenty of them, and compiling pytest and the course anew costs each ~0.5 s of CPU.
CHILD_ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def lower_priority() -> None:
    """Run in each child (and inherited by its pytest children): they yield the CPU to this session's
    own tests, which keep a core instead of sharing both with a dozen children starting at once."""
    os.nice(10)


class Launched:
    """Child `course` processes started together; `result(name)` waits for one."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.children: dict[str, subprocess.Popen] = {}

    def start(self, name: str, *args: str, cwd: Path | None = None, yielding: bool = True) -> None:
        """Start `course ARGS`; `yielding=False` for a command whose time limits must not be starved."""
        with (self.workspace / f"{name}.out").open("w") as out, (self.workspace / f"{name}.err").open("w") as err:
            self._spawn(name, ["-m", "course", *args], cwd or self.workspace, out, err, yielding)

    def collect(self) -> None:
        """List chapter 07's scenarios (the counts the commands print are checked against it)."""
        with (self.workspace / "collect.out").open("w") as out:
            self._spawn("collect", ["-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", LOOP.test_file],
                        ROOT, out, subprocess.DEVNULL, yielding=True)

    def _spawn(self, name: str, args: list[str], cwd: Path, out, err, yielding: bool) -> None:
        # A process group of its own (stop() kills it), in this session's scheduling group (see lower_priority).
        self.children[name] = subprocess.Popen([sys.executable, *args], cwd=cwd, stdout=out, stderr=err, text=True,
                                               env=CHILD_ENV, process_group=0,
                                               preexec_fn=lower_priority if yielding else None)

    @property
    def scenarios(self) -> list[str]:
        _, out, _ = self.result("collect")  # (syrupy calls a collect-only run's snapshots unused: exit 1)
        return [line.split("::", 1)[1] for line in out.splitlines() if "::" in line]

    def stop(self) -> None:
        for child in self.children.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()

    def result(self, name: str) -> tuple[int, str, str]:
        code = self.children[name].wait(timeout=120)
        read = lambda suffix: (self.workspace / f"{name}.{suffix}").read_text(encoding="utf-8") \
            if (self.workspace / f"{name}.{suffix}").exists() else ""
        return code, read("out"), read("err")


_launched: Launched | None = None


def launch(tmp_path_factory) -> Launched:
    """Start every child command once per session. tests/conftest.py calls this before the first test
    of the session, so the children (~15 s of work) run while the other test modules do."""
    global _launched
    if _launched is not None:
        return _launched
    ws = tmp_path_factory.mktemp("harness")
    write_module(ws / "wrong", TOOLS_ON_LENGTH)
    write_module(ws / "correct", REFERENCE_LOOP)
    write_module(ws / "order", RESULTS_IN_START_ORDER)
    write_module(ws / "submissions" / "ana", REFERENCE_LOOP)
    write_module(ws / "submissions" / "ben", TOOLS_ON_LENGTH)
    write_module(ws / "submissions" / "cy", "def run_agent_loop(options:\n")
    write_module(ws / "submissions" / "dee", HANGING_TOOLS)
    (ws / "submissions" / "eve").mkdir()  # handed in nothing
    for chapter in CHAPTERS:
        assert cli.main(["start", chapter.number, "--dir", str(ws / "starter")]) == 0

    # A copy of the course's tests whose snapshots `snapshots update` may rewrite.
    course_copy = ws / "course"
    shutil.copytree(ROOT / "tests", course_copy / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", course_copy)
    snapshots = course_copy / LOOP.snapshot_dir
    (snapshots / "TestPureStop.test_pure_stop.txt").write_text("## observations\nstale\n", encoding="utf-8")
    (snapshots / "TestAbortAndMaxSteps.test_max_steps_one.txt").unlink()
    (snapshots / "TestGone.test_gone.txt").write_text("a scenario that no longer exists\n", encoding="utf-8")

    launched = Launched(ws)
    launched.collect()
    launched.start("grade", "grade", "07", "submissions", "--timeout", str(GRADE_TIMEOUT), "--jobs", "4",
                   "--out", "grades.csv", "--json", "grades.json", yielding=False)
    launched.start("wrong", "check", "07", "--impl", "wrong", "--json", "wrong.json")
    launched.start("correct", "check", "07", "--impl", "correct")
    launched.start("starter", "status", "--impl", "starter")
    launched.start("update", "snapshots", "update", "07", cwd=course_copy)
    launched.start("verify_reference", "snapshots", "verify", "07", "--runs", "2")
    launched.start("verify_order", "snapshots", "verify", "07", "--runs", "2", "--impl", "order")
    _launched = launched
    return launched


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    launched = launch(tmp_path_factory)
    yield launched
    launched.stop()


def test_check_prints_the_first_divergence_hint_and_rerun_command(runs):
    code, out, _ = runs.result("wrong")
    assert code == 1
    after = out.split("FAIL  TestNonExecutingTerminals::test_terminal_row[length]\n")[1].splitlines()
    block = after[:next(i for i, line in enumerate(after) if not line.startswith("        "))]
    assert block == [
        "        first divergence in timeline, line 7:",
        "          expected: tool_skipped(call-1)",
        "          got:      tool_start(call-1)",
        "        hint:     非执行终态: length must not start tools: every call gets a skipped result and the run ends.",
        f"        rerun:    {sys.executable} -m pytest '{ROOT / LOOP.test_file}::TestNonExecutingTerminals::"
        f"test_terminal_row[length]' --impl=wrong",
    ]
    assert "PASS  TestNonExecutingTerminals::test_terminal_row[error]" in out
    # The failures are the known `length` mistake's: its hint is shown, with the section to reread.
    assert "  length-executes-tools: your loop runs tools after a truncated response (stopReason length)" in out
    total = len(runs.scenarios)
    assert out.rstrip().endswith(f"{total - len(LENGTH_FAILS)} of {total} scenarios pass — chapter 07 fails "
                                 "(some tests failed)")

    # The printed command reruns exactly that scenario, and it fails.
    rerun = block[-1].split("rerun:    ", 1)[1]
    result = subprocess.run(rerun, shell=True, cwd=runs.workspace, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "1 failed" in result.stdout and "passed" not in result.stdout.splitlines()[-1]


def test_check_json_has_one_record_per_scenario(runs):
    runs.result("wrong")
    report = json.loads((runs.workspace / "wrong.json").read_text(encoding="utf-8"))
    assert (report["chapter"], report["status"], report["exitCode"]) == ("07", "fail", 1)
    by_name = {s["scenario"]: s for s in report["scenarios"]}
    assert list(by_name) == runs.scenarios
    length = by_name["TestNonExecutingTerminals::test_terminal_row[length]"]
    assert length["status"] == "failed" and length["section"] == "非执行终态"
    assert length["firstDivergence"] == {"section": "timeline", "index": 7,
                                         "expected": "tool_skipped(call-1)", "got": "tool_start(call-1)"}
    failed = [n for n, s in by_name.items() if s["status"] != "passed"]
    assert failed[:2] == [
        "TestNonExecutingTerminals::test_terminal_row[length]",
        "TestNonExecutingTerminals::test_length_with_two_calls_starts_neither",
    ] and sorted(failed) == sorted(LENGTH_FAILS)
    assert by_name["TestPureStop::test_pure_stop"]["rerun"] is None


def test_check_passes_a_correct_copy_of_the_reference(runs):
    code, out, _ = runs.result("correct")
    assert code == 0
    total = len(runs.scenarios)
    assert out.count("  PASS  ") == total and "FAIL" not in out and "ERROR" not in out
    assert out.rstrip().endswith(f"{total} of {total} scenarios pass — chapter 07 passes (all tests passed)")


def test_a_fresh_starter_fails_every_chapter_and_is_never_overwritten(runs, capsys):
    code, out, _ = runs.result("starter")
    assert code == 1
    rows = [line.split() for line in out.splitlines() if line[:2] in ("06", "07")]
    # Only the two chapter 06 tests of course.runtime.tools itself pass without the student's code.
    assert [row[:3] for row in rows] == [["06", "yours", "工具执行"], ["07", "yours", "纯文本"],
                                         ["07", "yours", "单工具往返"], ["07", "yours", "非执行终态"],
                                         ["07", "yours", "并发工具"], ["07", "yours", "取消与上限"]]
    assert rows[0][3].startswith("2/") and rows[1][4].startswith("0/") and all(r[3].startswith("0/") for r in rows[2:])
    later = [line.split() for line in out.splitlines() if line[:2].isdigit() and line[:2] > "07"]
    assert later and all(row[1] == "yours" and row[3].startswith("0/") for row in later)
    assert "\n2 of " in out and "next: course check 06 --impl=starter" in out

    target = runs.workspace / "starter" / f"{LOOP.module}.py"
    target.write_text("# my work so far\n", encoding="utf-8")
    assert cli.main(["start", "07", "--dir", str(runs.workspace / "starter")]) == 1
    assert "already exists" in capsys.readouterr().out
    assert target.read_text(encoding="utf-8") == "# my work so far\n"


def test_the_starter_keeps_signatures_types_docstrings_and_tables():
    source = starter.starter_source(LOOP)
    compile(source, "starter", "exec")
    assert "class AgentLoopOptions:" in source and '"""Receives every LoopEvent, in order."""' in source
    assert "NOT_EXECUTED: dict[str, tuple[str, FinishReason]] = {" in source
    assert '    """Start every call, wait for all of them together, and return the results in call order."""\n' \
           "    raise NotImplementedError('run_tool_batch: yours to write (chapter 07)')\n" in source
    assert "TaskGroup" not in source and "copy.deepcopy" not in source  # no body of the reference survives


def test_snapshots_update_reports_what_it_added_changed_and_removed(runs):
    code, out, _ = runs.result("update")
    assert code == 0
    assert out.splitlines() == [
        f"chapter 07 (tests/__snapshots__/test_ch07_agent_loop/): 1 added, 1 changed, 1 removed, "
        f"{len(list((ROOT / LOOP.snapshot_dir).glob('*.txt')))} snapshots in all",
        "  added    TestAbortAndMaxSteps.test_max_steps_one.txt",
        "  changed  TestPureStop.test_pure_stop.txt",
        "  removed  TestGone.test_gone.txt",
    ]
    regenerated = runs.workspace / "course" / LOOP.snapshot_dir / "TestPureStop.test_pure_stop.txt"
    assert regenerated.read_text(encoding="utf-8") == (ROOT / LOOP.snapshot_dir / regenerated.name).read_text(encoding="utf-8")


def test_snapshots_update_refuses_a_student_implementation(capsys, tmp_path):
    assert cli.main(["snapshots", "update", "--impl", str(tmp_path)]) == 2
    assert "refused with --impl — snapshots belong to the reference" in capsys.readouterr().out
    result = subprocess.run([sys.executable, "-m", "pytest", LOOP.test_file, "--snapshot-update", f"--impl={tmp_path}"],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 4 and "--snapshot-update with a student implementation is refused" in result.stderr


def test_verify_passes_the_reference_under_other_start_orders(runs):
    code, out, _ = runs.result("verify_reference")
    assert (code, out) == (0, f"deterministic: {len(runs.scenarios)} scenarios rendered identically in 2 runs "
                              "under different task start orders\n")


def test_verify_catches_results_kept_in_task_start_order(runs):
    # This implementation passes `course check`: only another start order shows its results are misplaced.
    code, out, _ = runs.result("verify_order")
    assert code == 1
    assert "run 2 (start order seed 1) renders tests/test_ch07_agent_loop.py::TestConcurrentTools::" \
           "test_fast_finishes_first_results_stay_in_call_order differently from run 1:\n" \
           "  first divergence in transcript, line 3:\n" \
           "    run 1:    toolResult  slow-call → slow done\n" \
           "    run 2:    toolResult  fast-call → fast done\n" in out
    assert re.search(r"not deterministic: \d+ rendered runs differ, 1 of 2 runs failed", out)


def test_watch_checks_again_after_each_change(monkeypatch, capsys, tmp_path):
    checked = []
    monkeypatch.setattr(check, "check", lambda args: checked.append(args.chapter) or 0)
    args = cli.build_parser().parse_args(["watch", "07", "--impl", str(tmp_path)])
    changes = [{(2, str(tmp_path / "ch07_agent_loop.py"))}, {(2, str(tmp_path / "helpers.py"))}]
    assert check.watch(args, changes=iter(changes)) == 0
    assert checked == ["07", "07", "07"]  # once at the start, once per change
    out = capsys.readouterr().out
    assert "changed: " in out and out.index("ch07_agent_loop.py") < out.index("helpers.py")


def test_grade_reports_each_submission_and_kills_the_hanging_one(runs):
    code, out, err = runs.result("grade")
    assert code == 0
    with (runs.workspace / "grades.csv").open(encoding="utf-8") as table:
        rows = {row["submission"]: row for row in csv.DictReader(table)}
    total = str(len(runs.scenarios))
    assert {name: (row["status"], row["passed"], row["total"]) for name, row in rows.items()} == {
        "ana": ("pass", total, total),
        "ben": ("fail", str(len(runs.scenarios) - len(LENGTH_FAILS)), total),
        "cy": ("broken", "0", total),
        "dee": ("timeout", "1", total),  # the pure stop passes; the first scenario with a tool hangs
        "eve": ("missing", "0", "0"),
    }
    assert rows["cy"]["problem"] == "SyntaxError: '(' was never closed (ch07_agent_loop.py, line 1)"
    assert rows["dee"]["problem"] == f"killed after {GRADE_TIMEOUT} s in TestSingleToolRoundTrip::test_readme_round_trip"
    assert rows["ben"]["TestNonExecutingTerminals::test_terminal_row[length]"] == "failed"
    assert rows["dee"]["TestConcurrentTools::test_rejecting_executor_does_not_lose_its_sibling"] == "not run"
    assert "grading chapter 07: 100%" in err and "5/5" in err  # tqdm's bar
    as_json = json.loads((runs.workspace / "grades.json").read_text(encoding="utf-8"))
    assert [(g["submission"], g["status"], g["passed"]) for g in as_json] == [
        (name, row["status"], int(row["passed"])) for name, row in rows.items()]
    assert as_json[3]["scenarios"]["TestSingleToolRoundTrip::test_readme_round_trip"] == "timeout"


def test_a_run_that_collected_no_tests_fails(capsys):
    # pytest's exit code decides, not the report: exit 5 (no tests collected) is a failing chapter.
    run = PytestRun(exit_code=5, scenarios=[], output="no tests ran in 0.01s\n")
    assert not run.passed
    check.report_check(LOOP, run, None, False)
    out = capsys.readouterr().out
    assert "0 of 0 scenarios pass — chapter 07 fails (no tests were collected)" in out
    assert out.rstrip().endswith("pytest said:\nno tests ran in 0.01s")


def test_known_wrong_variants_are_printed_under_the_failures(monkeypatch, capsys):
    asked = []
    monkeypatch.setattr(mutants, "diagnose", lambda number, failed: asked.append((number, failed))
                        or [("tools-on-length", "length ran its tools")])
    failing = Scenario(scenario="TestNonExecutingTerminals::test_terminal_row[length]", file=LOOP.test_file,
                       status="failed", section="非执行终态")
    passing = Scenario(scenario="TestPureStop::test_pure_stop", file=LOOP.test_file, status="passed")
    check.report_check(LOOP, PytestRun(exit_code=1, scenarios=[passing, failing], output=""), None, False)
    assert asked == [("07", {"TestNonExecutingTerminals::test_terminal_row[length]"})]
    assert "likely causes (known wrong variants these failures match):\n  tools-on-length: length ran its tools\n" \
        in capsys.readouterr().out
