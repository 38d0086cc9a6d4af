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

from course.judge import cli, mutants, starter
from course.judge.index import expected_scenarios
from course.manifest import CHAPTERS, HARDENING, find_chapter
from course.judge.session import ChapterRun
from processes import TRUSTED, running_with

pytestmark = pytest.mark.commands  # slow: `pytest -m commands` runs them (CI does)

ROOT = Path(__file__).resolve().parent.parent
LOOP = find_chapter("07")
REFERENCE_LOOP = (ROOT / LOOP.reference_file).read_text(encoding="utf-8")
# Seconds per submission. The honest ones must never reach it however loaded the machine is; the one
# that hangs in every batch always does (each of its scenarios takes the scenario limit).
GRADE_TIMEOUT, WALL_TIMEOUT, SPIN_TIMEOUT = 240, 20, 8
CHAPTER_LOOPS = ("gather", "taskgroup", "as_completed")
"""tests/chapter_loops/: chapter 07 loops written from the chapter text alone."""
HIDDEN_SEED = 7


def variant(find: str, replace: str, *also: tuple[str, str]) -> str:
    """The reference loop with a deliberate mistake, written as the mutation gallery writes one."""
    return mutants.Mutant("harness-test", "", "", find, replace, also).source(REFERENCE_LOOP)


# The hardening track's scenarios (加固): judged only when asked for (--hardening).
BEYOND = {e.scenario for e in expected_scenarios(LOOP, ROOT) if e.track == HARDENING}
# Executes the tools of a `length` answer as if it were `toolUse`: the gallery's own mistake, and what it fails
# on the chapter track.
LENGTH_SIGNATURE = {name: key for name, key in mutants.load_signatures()["07"]["length-executes-tools"].items()
                    if name not in BEYOND}
TOOLS_ON_LENGTH = next(m for m in mutants.variants(LOOP) if m.name == "length-executes-tools").source(REFERENCE_LOOP)
# Never finishes a tool batch: every scenario with a tool call hangs until its time limit stops it.
HANGING_TOOLS = variant('emit({"type": "tool_start", "call": call})', "await asyncio.Event().wait()")
# The loop under another name for its options class: nothing the chapter's tests can call.
NO_OPTIONS = REFERENCE_LOOP.replace("AgentLoopOptions", "LoopSettings")
# Hangs in the first tool batch the process runs (the README round trip), and only there.
HANGS_ONCE = variant('emit({"type": "tool_start", "call": call})',
                     'if not HUNG:\n    HUNG.append(call)\n    await asyncio.Event().wait()\n'
                     'emit({"type": "tool_start", "call": call})',
                     ("import asyncio\n", "import asyncio\n\nHUNG = []\n"))
# Keeps results in the order the tasks began: right under asyncio's own order, wrong under another.
RESULTS_IN_START_ORDER = variant(
    "return await asyncio.gather(*(execute_one(call, execute, signal, emit) for call in calls))",
    "started = []\n"
    "async def run(call):\n"
    "    slot = {}\n"
    "    started.append(slot)\n"
    "    slot['result'] = await execute_one(call, execute, signal, emit)\n"
    "await asyncio.gather(*(run(call) for call in calls))\n"
    "return [slot['result'] for slot in started]",
)


# Outside the gallery: offers the tools with the first request only, and prints as it starts.
TOOLS_OFFERED_ONCE = variant('"tools": options.tools.definitions(),',
                             '"tools": options.tools.definitions() if len(messages) == 1 else [],',
                             ("    # The caller's messages stay as they were",
                              "    print('loop starting with', len(options.context['messages']), 'message(s)')\n"
                              "    # The caller's messages stay as they were"))
# Spins for ever, in pure Python, on one scenario's batch (the one with a call named slow-call).
SPINS_ON_BATCHES = variant('    for call in calls:\n        emit({"type": "tool_start", "call": call})',
                           '    while any(call["id"] == "slow-call" for call in calls):\n        pass\n'
                           '    for call in calls:\n        emit({"type": "tool_start", "call": call})')


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
        self.pending: dict[str, tuple] = {}

    def later(self, name: str, *args: str, cwd: Path | None = None) -> None:
        """Start `course ARGS` when the first of the later ones is waited for: after the tests above it, whose
        time limits (a spinning import's 6 s, a grade's scenario limit) the extra load would otherwise reach."""
        self.pending[name] = (args, cwd)

    def _start_pending(self) -> None:
        for name, (args, cwd) in self.pending.items():
            if name.startswith("plain"):
                with (self.workspace / f"{name}.out").open("w") as out:
                    self._spawn(name, list(args), cwd, out, out, yielding=True)
            else:
                self.start(name, *args, cwd=cwd)
        self.pending = {}

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
    def every_scenario(self) -> list[str]:
        _, out, _ = self.result("collect")  # (syrupy calls a collect-only run's snapshots unused: exit 1)
        return [line.split("::", 1)[1] for line in out.splitlines() if "::" in line]

    @property
    def scenarios(self) -> list[str]:
        """The chapter track's: what `course check` and `course grade` judge unless asked for the hardening track."""
        return [name for name in self.every_scenario if name not in BEYOND]

    def stop(self) -> None:
        self.pending = {}
        for child in self.children.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()

    def result(self, name: str) -> tuple[int, str, str]:
        if name in self.pending:
            self._start_pending()
        code = self.children[name].wait(timeout=300)
        read = lambda suffix: (self.workspace / f"{name}.{suffix}").read_text(encoding="utf-8") \
            if (self.workspace / f"{name}.{suffix}").exists() else ""
        return code, read("out"), read("err")


_launched: Launched | None = None


def launch(tmp_path_factory) -> Launched:
    """Start every child command once per session. tests/conftest.py calls this before the first test
    of the session, so the children run while the other test modules do."""
    global _launched
    if _launched is not None:
        return _launched
    ws = tmp_path_factory.mktemp("harness")
    write_module(ws / "wrong", TOOLS_ON_LENGTH)
    write_module(ws / "correct", REFERENCE_LOOP)
    write_module(ws / "order", RESULTS_IN_START_ORDER)
    write_module(ws / "tools_once", TOOLS_OFFERED_ONCE)
    write_module(ws / "syntax", "import asyncio\n\n\ndef run_agent_loop(options:\n    pass\n")
    write_module(ws / "no_names", NO_OPTIONS)
    write_module(ws / "later_broken", REFERENCE_LOOP)
    (ws / "later_broken" / "ch08_workspace_read.py").write_text("import os\n\ndef create_read_tool(root:\n")
    write_module(ws / "spins", SPINS_ON_BATCHES)
    write_module(ws / "spins_at_import", "while True:\n    pass\n")
    write_module(ws / "submissions" / "ana", REFERENCE_LOOP)
    write_module(ws / "submissions" / "ben", TOOLS_ON_LENGTH)
    write_module(ws / "submissions" / "cy", "def run_agent_loop(options:\n")
    write_module(ws / "submissions" / "dee", HANGS_ONCE)
    write_module(ws / "submissions" / "gus", REFERENCE_LOOP)  # with a chapter 08 begun and broken
    (ws / "submissions" / "gus" / "ch08_workspace_read.py").write_text("def create_read_tool(root:\n")
    write_module(ws / "submissions" / "hal", NO_OPTIONS)
    write_module(ws / "slow_submissions" / "flo", HANGING_TOOLS)
    (ws / "submissions" / "eve").mkdir()  # handed in nothing
    (ws / "nothing").mkdir()  # a directory without student/: the reference is judged, and says so
    for style in CHAPTER_LOOPS:  # loops written from the chapter text alone
        write_module(ws / f"{style}_loop", (ROOT / "tests" / "chapter_loops" / f"{style}_loop.py").read_text("utf-8"))
    write_module(ws / "graded_with_hardening" / "ana", REFERENCE_LOOP)
    write_module(ws / "graded_with_hardening" / "gil", (ws / "gather_loop" / f"{LOOP.module}.py").read_text("utf-8"))
    for chapter in CHAPTERS:
        assert cli.main(["start", chapter.number, "--dir", str(ws / "starter")]) == 0

    # A copy of the course's tests whose snapshots `snapshots update` may rewrite.
    course_copy = ws / "course"
    for folder in ("tests", "chapters"):
        shutil.copytree(ROOT / folder, course_copy / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "conftest.py"):
        shutil.copy(ROOT / name, course_copy)
    snapshots = course_copy / LOOP.snapshot_dir
    (snapshots / "TestPureStop.test_pure_stop.txt").write_text("## observations\nstale\n", encoding="utf-8")
    (snapshots / "TestAbortAndMaxSteps.test_max_steps_one.txt").unlink()
    (snapshots / "TestGone.test_gone.txt").write_text("a scenario that no longer exists\n", encoding="utf-8")

    # A clone with a wrong student/ in it: plain pytest there judges student/ (the one rule).
    with_student = ws / "with_student"
    for folder in ("tests", "chapters", "checkpoints", "benchmarks"):
        shutil.copytree(ROOT / folder, with_student / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "conftest.py"):
        shutil.copy(ROOT / name, with_student)
    write_module(with_student / "student", TOOLS_ON_LENGTH)

    launched = Launched(ws)
    launched.collect()
    launched.start("grade", "grade", "07", "submissions", "--timeout", str(GRADE_TIMEOUT), "--scenario-timeout", "8",
                   "--jobs", "4", "--out", "grades.csv", "--json", "grades.json", "--results", "results",
                   *TRUSTED, yielding=False)
    launched.start("grade_wall", "grade", "07", "slow_submissions", "--timeout", str(WALL_TIMEOUT),
                   "--scenario-timeout", "2", "--out", "slow.csv", *TRUSTED, yielding=False)
    launched.start("wrong", "check", "07", "--impl", "wrong", "--json", "wrong.json")
    launched.start("correct", "check", "07", "--impl", "correct")
    launched.start("tools_once", "check", "07", "--impl", "tools_once", "--json", "tools_once.json")
    launched.start("syntax", "check", "07", "--impl", "syntax")
    launched.start("no_names", "check", "07", "--impl", "no_names")
    launched.start("later_broken", "check", "07", "--impl", "later_broken")
    # A limit no honest scenario reaches on a loaded machine (2 s did: the 32-step one, with CI beside it).
    launched.start("spins", "check", "07", "--impl", "spins", "--timeout", str(SPIN_TIMEOUT), yielding=False)
    launched.start("nothing", "check", "07", cwd=ws / "nothing")
    launched.start("spins_at_import", "check", "07", "--impl", "spins_at_import", "--timeout", "1", yielding=False)
    launched.start("starter", "status", "--impl", "starter")
    # A starter of its own: test_a_fresh_starter_... writes into starter/ (course start must not overwrite it).
    assert cli.main(["start", LOOP.number, "--dir", str(ws / "fresh_starter")]) == 0
    launched.later("starter_check", "check", "07", "--impl", "fresh_starter")
    launched.later("wrong_hardening", "check", "07", "--impl", "wrong", "--hardening", "--json", "wrong_hardening.json")
    for style in CHAPTER_LOOPS:
        launched.later(f"{style}_loop", "check", "07", "--impl", f"{style}_loop")
        launched.later(f"{style}_loop_seed", "check", "07", "--impl", f"{style}_loop", "--seed", str(HIDDEN_SEED))
    launched.later("grade_hardening", "grade", "07", "graded_with_hardening", "--hardening", "2", "--timeout",
                   str(GRADE_TIMEOUT), "--out", "hardening.csv")
    launched.start("update", "snapshots", "update", "07", cwd=course_copy)
    launched.start("verify_reference", "snapshots", "verify", "07", "--runs", "2")
    launched.start("verify_order", "snapshots", "verify", "07", "--runs", "2", "--impl", "order")
    with (ws / "plain.out").open("w") as out:
        launched._spawn("plain", ["-m", "pytest", "-k", "ch07", "-p", "no:cacheprovider"], with_student, out, out,
                        yielding=True)
    # A loop written from the chapter alone, judged by plain pytest.
    launched.later("plain_loop", "-m", "pytest", "-k", "ch07", "-p", "no:cacheprovider", "-rs",
                   f"--impl={ws / 'as_completed_loop'}", cwd=ROOT)
    _launched = launched
    return launched


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    launched = launch(tmp_path_factory)
    yield launched
    launched.stop()


def failure_block(out: str, scenario: str, label: str = "FAIL") -> list[str]:
    """The indented lines printed under one failing scenario."""
    after = out.split(f"{label:<7} {scenario}\n")[1].splitlines()
    return after[:next(i for i, line in enumerate(after) if not line.startswith("        "))]


def test_check_prints_the_first_divergence_hint_and_rerun_command(runs):
    code, out, _ = runs.result("wrong")
    assert code == 1
    assert out.splitlines()[1] == f"judging: yours, {Path('wrong', LOOP.module + '.py')}"
    block = failure_block(out, "TestNonExecutingTerminals::test_terminal_row[length]")
    # What the scenario enforces, quoted from the chapter text (stored with the citation), beside its divergence.
    assert block[:6] == [
        "        enforces: 「length：工具不启动，调用仍然闭合」 line 202: loop 先保存这条 assistant，再进入非执行分支。",
        "                  「length：工具不启动，调用仍然闭合」 line 210: 实际事件顺序是 assistant_message → tool_skipped → "
        "turn_end，整个过程没有 tool_start 或 tool_end。",
        "                  「length：工具不启动，调用仍然闭合」 line 225: 只要其中已经出现工具调用，loop 就会在结束或再次 "
        "请求模型前，为每个调用写入具有相同 toolCallId 的工具结果。",
        "        first divergence in timeline, line 7:",
        "          expected: tool_skipped(call-1)",
        "          got:      tool_start(call-1)",
    ]
    # Every promise the run broke, in words, numbered as the snapshot's observations number them.
    assert block[6] == "        broken promises of the chapter:"
    assert "          broken 3: event 7 tool_start for call-1, but the latest assistant message (stopReason length) " \
           "does not run its calls" in block
    assert block[-3:] == [
        "        hint:     非执行终态: length must not start tools: every call gets a skipped result and the run ends.",
        "        more:     course hint 07 'TestNonExecutingTerminals::test_terminal_row[length]'",
        f"        rerun:    {sys.executable} -m pytest '{ROOT / LOOP.test_file}::TestNonExecutingTerminals::"
        f"test_terminal_row[length]' -vv --impl=wrong",
    ]
    assert "PASS    TestNonExecutingTerminals::test_terminal_row[error]" in out
    # The section's later failures are counted under it, not shown again one by one.
    assert "FAIL    TestNonExecutingTerminals::test_length_with_two_calls_starts_neither" not in out
    assert "\n非执行终态: " in out and "failing: test_terminal_row[length] (shown), " in out
    assert out.splitlines()[2] == "tracks:  the chapter's (加固 (beyond the chapter) runs with --hardening)"
    # The evidence is exactly the known `length` mistake's: its hint is shown, with the section to reread.
    assert "these failures are exactly those of a known mistake (another mistake can fail the same way: " \
           "check that yours is this one):\n  length-executes-tools: your loop runs tools after a " \
           "truncated response (stopReason length) — see 非执行终态" in out
    total, failing = len(runs.scenarios), len(LENGTH_SIGNATURE)
    assert out.rstrip().endswith(f"{total - failing} of {total} scenarios pass — chapter 07 fails")

    # The printed command reruns exactly that scenario with the whole diff, and it fails.
    rerun = block[-1].split("rerun:    ", 1)[1]
    result = subprocess.run(rerun, shell=True, cwd=runs.workspace, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "1 failed" in result.stdout and "passed" not in result.stdout.splitlines()[-1]
    assert "Full output truncated" not in result.stdout and "- 7  tool_skipped(call-1)" in result.stdout


def test_check_json_has_one_result_per_scenario(runs):
    runs.result("wrong")
    report = json.loads((runs.workspace / "wrong.json").read_text(encoding="utf-8"))
    assert (report["version"], report["chapter"], report["status"]) == (3, "07", "fail")
    failing = len(LENGTH_SIGNATURE)
    assert report["summary"] == {"passed": len(runs.scenarios) - failing, "total": len(runs.scenarios),
                                 "failed": failing, "errors": 0, "timeouts": 0}
    by_name = {s["name"]: s for s in report["tests"]}
    assert sorted(by_name) == sorted(runs.scenarios)
    length = by_name["TestNonExecutingTerminals::test_terminal_row[length]"]
    assert length["status"] == "failed" and length["section"] == "非执行终态"
    assert length["firstDivergence"] == {"section": "timeline", "index": 7,
                                         "expected": "tool_skipped(call-1)", "got": "tool_start(call-1)"}
    assert length["hint"].startswith("非执行终态: ") and "-vv" in length["rerun"]
    assert (length["track"], length["beyondTheChapter"], length["cites"]) == (
        "chapter", False, ["length-not-run", "length-events", "pairing"])
    assert length["enforces"][0] == "「length：工具不启动，调用仍然闭合」 line 202: loop 先保存这条 assistant，再进入非执行分支。"
    assert report["hardening"] is None  # not judged: not asked for
    assert sorted(n for n, s in by_name.items() if s["status"] != "passed") == sorted(LENGTH_SIGNATURE)
    assert by_name["TestPureStop::test_pure_stop"]["rerun"] is None
    assert [d["variant"] for d in report["diagnosis"]] == ["length-executes-tools"]


def test_a_mistake_outside_the_gallery_is_shown_in_words_and_not_guessed(runs):
    assert "tools-offered-once" not in {v.name for v in mutants.variants(LOOP)}
    code, out, _ = runs.result("tools_once")
    assert code == 1
    block = failure_block(out, "TestSingleToolRoundTrip::test_readme_round_trip")
    assert "        broken promises of the chapter:" in block
    assert "          broken 1: request 2 does not carry the registry's tool definitions" in block
    # The scenario's own print() output is shown under it.
    assert "        your output (1 line):" in block and "          | loop starting with 1 message(s)" in block
    assert "no known mistake matches these failures exactly" in out and "likely" not in out
    report = json.loads((runs.workspace / "tools_once.json").read_text(encoding="utf-8"))
    failing = [t for t in report["tests"] if t["status"] != "passed"]
    assert failing and report["diagnosis"] == []
    assert all("request 2 does not carry the registry's tool definitions" in " ".join(t["brokenPromises"]) for t in failing
               if not t["name"].startswith("test_generated"))


def test_a_module_that_does_not_import_is_reported_once_with_its_line(runs):
    code, out, _ = runs.result("syntax")
    assert code == 1
    assert out.splitlines() == [
        "Chapter 07 — The agent loop",
        f"judging: yours, {Path('syntax', LOOP.module + '.py')}",
        "tracks:  the chapter's (加固 (beyond the chapter) runs with --hardening)",
        "",
        "your module does not import, so no scenario could be judged:",
        f"  {Path('syntax', LOOP.module + '.py')}, line 4: SyntaxError: '(' was never closed",
        "      def run_agent_loop(options:",
        "",
        f"0 of {len(runs.scenarios)} scenarios pass — chapter 07 fails: your module does not import",
    ]


def test_a_module_without_the_chapters_names_is_reported_once(runs):
    code, out, _ = runs.result("no_names")
    assert code == 1
    assert out.splitlines() == [
        "Chapter 07 — The agent loop",
        f"judging: yours, {Path('no_names', LOOP.module + '.py')}",
        "tracks:  the chapter's (加固 (beyond the chapter) runs with --hardening)",
        "",
        "your module lacks what the chapter's tests use, so no scenario could be judged:",
        f"  {Path('no_names', LOOP.module + '.py')}: it has no AgentLoopOptions: the chapter's tests use "
        "`AgentLoopOptions` and `run_agent_loop` (`course start 07` writes each of them, for you to fill in)",
        "",
        f"0 of {len(runs.scenarios)} scenarios pass — chapter 07 fails: your module lacks what the chapter's tests use",
    ]


def test_a_later_chapters_broken_module_does_not_fail_this_one(runs):
    code, out, _ = runs.result("later_broken")
    assert (code, out.splitlines()[-1]) == (0, f"{len(runs.scenarios)} of {len(runs.scenarios)} scenarios pass "
                                               "— chapter 07 passes"), out


def test_a_loop_that_spins_for_ever_fails_named_scenarios_and_the_rest_still_run(runs):
    code, out, _ = runs.result("spins")
    assert code == 1
    timed_out = [line.split()[1] for line in out.splitlines() if line.startswith("  TIMEOUT ")]
    assert timed_out == ["TestConcurrentTools::test_fast_finishes_first_results_stay_in_call_order"]
    assert "PASS    TestConcurrentTools::test_tools_overlap_even_when_they_finish_in_call_order" in out  # the next one
    assert out.count("  PASS  ") == len(runs.scenarios) - 1  # every other scenario still ran, and passed
    block = failure_block(out, "TestConcurrentTools::test_fast_finishes_first_results_stay_in_call_order", "TIMEOUT")
    problem = next(line for line in block if line.startswith("        problem:  "))
    assert block[0].startswith("        enforces: 「多个工具同时运行，结果仍按工具调用顺序追加」 line 247: ")
    assert problem.startswith(f"        problem:  did not finish within {SPIN_TIMEOUT} s (stopped at ")
    assert f"spins/{LOOP.module}.py:" in problem
    assert running_with(str(runs.workspace / "spins")) == []  # nothing of the check is left running


def test_a_module_whose_import_never_ends_is_reported_once_and_not_retried(runs):
    code, out, _ = runs.result("spins_at_import")
    assert code == 1
    assert f"  {Path('spins_at_import', LOOP.module + '.py')}: importing it did not finish: no progress for 6 s" in out
    assert "PASS" not in out and "TIMEOUT" not in out
    assert running_with(str(runs.workspace / "spins_at_import")) == []


def test_ctrl_c_stops_the_check_and_leaves_nothing_running(runs, tmp_path):
    write_module(tmp_path / "spinning", SPINS_ON_BATCHES)
    with subprocess.Popen([sys.executable, "-m", "course", "check", "07", "--impl", str(tmp_path / "spinning"),
                           "--timeout", "60"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=CHILD_ENV) as child:
        # Wait until it prints a scenario (a line, not a time): the pytest child is running by then.
        assert child.stdout.readline().startswith("Chapter 07")
        for line in child.stdout:
            if line.startswith("  PASS    TestNonExecutingTerminals::test_length_with_two_calls_starts_neither"):
                break  # the next scenario is the one that spins
        child.send_signal(signal.SIGINT)
        assert child.wait(timeout=60) == 130
        assert "Traceback" not in child.stderr.read()
    assert running_with(str(tmp_path / "spinning")) == []


def test_check_passes_a_correct_copy_of_the_reference(runs):
    code, out, _ = runs.result("correct")
    assert code == 0
    total = len(runs.scenarios)
    assert out.count("  PASS  ") == total and "FAIL" not in out and "ERROR" not in out
    assert out.rstrip().endswith(f"{total} of {total} scenarios pass — chapter 07 passes")


def test_without_student_code_check_says_it_judged_the_reference_and_what_to_do(runs):
    code, out, _ = runs.result("nothing")
    assert code == 0
    assert out.splitlines()[1] == "judging: the reference (no student code)"
    assert "passes" not in out
    assert out.rstrip().endswith("on the reference — none of it is your code; write yours with "
                                 "`course start 07`, then `course check 07`")


def test_plain_pytest_judges_student_when_it_exists_and_says_so(runs):
    code, out, _ = runs.result("plain")
    assert code == 1
    header = next(line for line in out.splitlines() if line.startswith("tiny-pi implementation: "))
    assert str(runs.workspace / "with_student" / "student") in header and "ch07 yours" in header \
        and "ch06 reference" in header
    assert "FAILED chapters/ch07_agent_loop/test_ch07_agent_loop.py::TestNonExecutingTerminals::test_terminal_row[length]" in out


def test_a_fresh_starter_fails_every_chapter_and_is_never_overwritten(runs, capsys):
    code, out, _ = runs.result("starter")
    assert code == 1, out
    rows = [line.split() for line in out.splitlines() if line[:2] in ("06", "07")]
    assert [row[:2] for row in rows] == [["06", "yours"]] * sum(r[0] == "06" for r in rows) + \
        [["07", "yours"]] * sum(r[0] == "07" for r in rows)
    sections_07 = [row[2] for row in rows if row[0] == "07"]
    assert sections_07[:5] == ["纯文本", "单工具往返", "非执行终态", "并发工具", "取消与上限"]
    assert all(re.search(r"\s0/\d+\s", line) for line in out.splitlines() if line[:2] == "07"), out
    later = [line for line in out.splitlines() if line[:2].isdigit() and line[:2] > "07"]
    assert later and all(line.split()[1] == "yours" and re.search(r"\s0/\d+\s", line) for line in later)
    assert "next: course check 06 --impl=starter" in out

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
    assert "asyncio.gather(" not in source and "copy.deepcopy" not in source  # no body of the reference survives


def test_grade_stops_a_submission_at_its_wall_time(runs):
    code, out, err = runs.result("grade_wall")
    assert code == 0, out + err
    with (runs.workspace / "slow.csv").open(encoding="utf-8") as table:
        (row,) = csv.DictReader(table)
    assert (row["submission"], row["status"]) == ("flo", "timeout")
    assert row["problem"].endswith(f"the whole run was stopped at {WALL_TIMEOUT} s"), row["problem"]
    # Every tool scenario hangs until its 2 s limit: far more than the wall in all, so some never ran (on a
    # loaded machine the wall may come before the first one starts). Whatever ran either passed without a
    # tool call or was stopped; the round trip, whose tool hangs, never passes.
    statuses = {name: row[name] for name in runs.scenarios}
    assert "not run" in statuses.values() and set(statuses.values()) <= {"passed", "timeout", "not run"}, statuses
    assert int(row["passed"]) == list(statuses.values()).count("passed")
    assert statuses["TestSingleToolRoundTrip::test_readme_round_trip"] in ("timeout", "not run")


def test_snapshots_update_reports_what_it_added_changed_and_removed(runs):
    code, out, _ = runs.result("update")
    assert code == 0, out
    assert out.splitlines() == [
        f"chapter 07 (chapters/ch07_agent_loop/__snapshots__/test_ch07_agent_loop/): 1 added, 1 changed, 1 removed, "
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
    # (the reference on both tracks)
    assert (code, out) == (0, f"deterministic: {len(runs.every_scenario)} scenarios rendered identically in 2 runs "
                              "under different task start orders\n")


def test_verify_catches_results_kept_in_task_start_order(runs):
    # This implementation passes `course check`: only another start order shows its results are misplaced.
    code, out, _ = runs.result("verify_order")
    assert code == 1
    assert "run 2 (start order seed 1) renders chapters/ch07_agent_loop/test_ch07_agent_loop.py::TestConcurrentTools::" \
           "test_fast_finishes_first_results_stay_in_call_order differently from run 1:\n" \
           "  first divergence in transcript, line 3:\n" \
           "    run 1:    toolResult  slow-call → slow done\n" \
           "    run 2:    toolResult  fast-call → fast done\n" in out
    assert re.search(r"not deterministic: \d+ rendered runs differ, 1 of 2 runs failed", out)


def test_grade_reports_each_submission_and_stops_the_hanging_one(runs):
    code, out, err = runs.result("grade")
    assert code == 0, out + err
    with (runs.workspace / "grades.csv").open(encoding="utf-8") as table:
        rows = {row["submission"]: row for row in csv.DictReader(table)}
    total = str(len(runs.scenarios))
    assert {name: (row["status"], row["total"]) for name, row in rows.items()} == {
        "ana": ("pass", total), "ben": ("fail", total), "cy": ("broken", total), "dee": ("timeout", total),
        "eve": ("missing", "0"), "gus": ("pass", total), "hal": ("broken", total),
    }
    assert rows["hal"]["problem"] == f"{LOOP.module}.py: it has no AgentLoopOptions: the chapter's tests use " \
                                     "`AgentLoopOptions` and `run_agent_loop` (`course start 07` writes each of them, " \
                                     "for you to fill in)"
    assert rows["ana"]["passed"] == total and rows["ana"]["points"] == rows["ana"]["max_points"] == "10.0"
    assert rows["ben"]["passed"] == str(len(runs.scenarios) - len(LENGTH_SIGNATURE)) and float(rows["ben"]["points"]) < 10
    assert rows["cy"]["problem"] == f"{LOOP.module}.py, line 1: SyntaxError: '(' was never closed"
    assert rows["dee"]["problem"] == "1 scenario(s) ran past their limit, first " \
                                     "TestSingleToolRoundTrip::test_readme_round_trip"
    assert rows["dee"]["TestSingleToolRoundTrip::test_readme_round_trip"] == "timeout"
    assert rows["dee"]["passed"] == str(len(runs.scenarios) - 1)  # the others still ran, and passed
    assert rows["ben"]["TestNonExecutingTerminals::test_terminal_row[length]"] == "failed"
    assert "grading chapter 07: 100%" in err and "7/7" in err  # tqdm's bar
    as_json = json.loads((runs.workspace / "grades.json").read_text(encoding="utf-8"))
    assert [(g["submission"], g["status"], g["passed"]) for g in as_json["grades"]] == [
        (name, row["status"], int(row["passed"])) for name, row in rows.items()]
    results = json.loads((runs.workspace / "results" / "ben.json").read_text(encoding="utf-8"))
    length = next(t for t in results["tests"] if t["name"] == "TestNonExecutingTerminals::test_terminal_row[length]")
    assert (results["gradeStatus"], length["status"], length["firstDivergence"]["got"]) == (
        "fail", "failed", "tool_start(call-1)")


def test_no_exit_code_alone_makes_a_pass(tmp_path):
    # A child that exits 0 while importing the student's module leaves no records: every scenario the
    # judge expected is a failure, and the module is reported as what ended the run.
    from course.judge.session import judge_chapter

    write_module(tmp_path / "exits", "import os\nos._exit(0)\n")
    run = judge_chapter(LOOP, str(tmp_path / "exits"), root=ROOT)
    assert not run.passed and run.verdicts and not any(v.passed for v in run.verdicts)
    assert run.import_errors[0]["problem"].startswith("the test process ended while importing it")
    assert not ChapterRun(LOOP, []).passed  # and judging nothing passes nothing


@pytest.mark.parametrize("style", CHAPTER_LOOPS)
@pytest.mark.parametrize("seed", [False, True], ids=["published plans", "hidden seed"])
def test_a_loop_written_from_the_chapter_alone_passes_the_check(runs, style, seed):
    code, out, _ = runs.result(f"{style}_loop" + ("_seed" if seed else ""))
    total = len(runs.scenarios)
    assert (code, out.rstrip().splitlines()[-1]) == (0, f"{total} of {total} scenarios pass — chapter 07 passes"), out
    assert "FAIL" not in out and "加固" not in out.split("\n", 3)[3]  # the hardening track was not judged
    if seed:
        assert out.splitlines()[2].endswith(f"; the generated plans of seed {HIDDEN_SEED}")


def test_an_untouched_starter_gets_one_screen_what_to_do_first_and_each_sections_first_failure(runs):
    code, out, _ = runs.result("starter_check")
    assert code == 1
    lines = out.rstrip().splitlines()
    assert len(lines) <= 45, out
    first = next(n for n, line in enumerate(lines) if line.startswith("first: "))
    assert lines[first].startswith("first: run_agent_loop still raises NotImplementedError, the starter's body")
    failures = [line for line in lines if re.match(r"  (FAIL|ERROR) ", line)]
    sections = ["纯文本 stop", "单工具往返", "非执行终态", "并发工具", "取消与上限"]
    assert len(failures) == len(sections) and first < lines.index(failures[0])
    # The first in full; the same problem in the other sections said once, each with what it enforces.
    assert out.count("        problem:  NotImplementedError: run_agent_loop") == 1
    assert out.count("the same problem as TestPureStop::test_pure_stop (shown above)") == len(sections) - 1
    assert out.count("        enforces: 「") == len(sections)
    assert re.search(r"\nthe same problem in \d+ scenarios: NotImplementedError: run_agent_loop", out)
    assert [line.split(":")[0] for line in lines if line.split(":")[0] in sections] == sections
    assert lines[-1] == f"0 of {len(runs.scenarios)} scenarios pass — chapter 07 fails"


def test_the_hardening_track_is_labelled_beyond_the_chapter_and_never_decides_the_verdict(runs):
    code, out, _ = runs.result("wrong_hardening")
    assert code == 1
    assert out.splitlines()[2] == "tracks:  the chapter's, and 加固 (beyond the chapter): never part of the verdict"
    chapter_total = len(runs.scenarios)
    assert f"{chapter_total - len(LENGTH_SIGNATURE)} of {chapter_total} scenarios pass — chapter 07 fails" in out
    assert re.search(r"\n加固 \(beyond the chapter\): \d+ of %d pass \(not part of the chapter's verdict\)" % len(BEYOND),
                     out)
    report = json.loads((runs.workspace / "wrong_hardening.json").read_text(encoding="utf-8"))
    beyond = [t for t in report["tests"] if t["track"] == HARDENING]
    assert {t["name"] for t in beyond} == BEYOND and all(t["beyondTheChapter"] for t in beyond)
    assert report["hardening"]["total"] == len(BEYOND) and report["summary"]["total"] == chapter_total
    promise = next(t for t in beyond if t["name"] == "TestHardening::test_max_steps_must_be_a_positive_integer[0]")
    assert promise["enforces"] == ["加固 (beyond the chapter), promise max-steps-checked: a max_steps that is not a "
                                   "positive integer (0, -1, 1.5) is a ValueError before any model request"]


def test_grade_weighs_the_hardening_track_and_never_lets_it_decide_the_status(runs):
    code, out, err = runs.result("grade_hardening")
    assert code == 0, out + err
    with (runs.workspace / "hardening.csv").open(encoding="utf-8") as table:
        rows = {row["submission"]: row for row in csv.DictReader(table)}
    beyond = f"{len(BEYOND)}/{len(BEYOND)}"
    assert (rows["ana"]["status"], rows["ana"]["加固 (beyond the chapter) passed"], rows["ana"]["points"],
            rows["ana"]["max_points"]) == ("pass", beyond, "12.0", "12.0")
    # A loop written from the chapter alone passes the chapter, and earns less of the hardening track's 2 points.
    gil = rows["gil"]
    assert (gil["status"], gil["passed"], gil["total"]) == ("pass", str(len(runs.scenarios)), str(len(runs.scenarios)))
    assert gil["加固 (beyond the chapter) passed"] != beyond and 10 <= float(gil["points"]) < 12
    assert "(the 加固 (beyond the chapter) column: beyond the chapter, weighted into the points, never the status)" in out


def test_plain_pytest_passes_a_loop_written_from_the_chapter_and_skips_the_hardening_track_saying_why(runs):
    code, out, _ = runs.result("plain_loop")
    assert code == 0, out
    assert f"{len(BEYOND)} skipped" in out.splitlines()[-1] and "failed" not in out.splitlines()[-1]
    assert "加固 (beyond the chapter): not part of the chapter's verdict; run it with --hardening" in out
