"""The benchmarks at a tiny size: they run the workloads they claim to and report what they measured.

Nothing here looks at a time: speed is what `python -m benchmarks` reports, never what a test asserts.
"""

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.feedback import PytestRun, feedback_environment
from benchmarks.peers import Peer, PeerReport, PeerSize, Progress, measure_peer, predicted_seconds
from benchmarks.run import ONE_TEST, BenchmarkOptions, build_parser, measure, render
from benchmarks.workloads import Elapsed, WorkloadError, peak_memory, run_batch, run_floor, run_steps, step_script
from course.recorder.impl import CHAIN_ENV, IMPL_ENV
from course.judge.invariants import check_pairing


@pytest.mark.parametrize("model", ["scripted", "plain-stream"])
@pytest.mark.asyncio
async def test_step_workload_runs_s_tool_steps_then_stops(model):
    run = await run_steps(3, model)
    roles = [m["role"] for m in run.transcript]
    assert roles == ["user"] + ["assistant", "toolResult"] * 3 + ["assistant"]
    assert [m["toolCallId"] for m in run.transcript if m["role"] == "toolResult"] == ["call-1", "call-2", "call-3"]
    assert check_pairing(run.transcript, first=1) == []
    # per tool step: start, toolcall_delta, toolcall_end, done, assistant_message, tool_start, tool_end;
    # then start, text_delta, done, assistant_message for the stop, and turn_end
    assert (run.executions, run.events) == (3, 7 * 3 + 5)


@pytest.mark.asyncio
async def test_the_floor_runs_its_steps():
    elapsed = await run_floor(5)
    assert elapsed.wall > 0


@pytest.mark.asyncio
async def test_a_run_that_is_not_the_workload_is_refused(monkeypatch):
    def short_script(tool_steps):  # answers one tool step fewer than the run is timed for
        return step_script(tool_steps - 1)
    monkeypatch.setitem(__import__("benchmarks.workloads").workloads.MODELS, "scripted", short_script)
    with pytest.raises(WorkloadError, match="expected stop after 4 steps with 3 executions"):
        await run_steps(3)


@pytest.mark.asyncio
async def test_batch_runs_every_call_concurrently_and_keeps_call_order():
    # every call waits until the last one has started: a loop that ran them one by one would never finish
    batch = await asyncio.wait_for(run_batch(5), timeout=30)
    assert batch.calls == 5
    assert batch.loop.wall > 0 and batch.gather.wall > 0


def test_peak_memory_counts_the_transcript():
    assert peak_memory(60) > peak_memory(6)


def test_growth_prediction_uses_the_exponent_the_sizes_show():
    quadratic = [PeerSize(100, Elapsed(1.0, 1.0)), PeerSize(400, Elapsed(16.0, 16.0))]
    assert predicted_seconds(quadratic, 1600) == pytest.approx(256.0)
    assert predicted_seconds(quadratic[:1], 200) == pytest.approx(4.0)  # one size: assume quadratic


def fake_peer(*, work, distributions=("pytest",)):
    async def run(tool_steps, progress: Progress):
        await work(tool_steps, progress)
    return Peer("fake", distributions, run)


async def complete(tool_steps, progress):
    progress.requests, progress.executions, progress.output = tool_steps + 1, tool_steps, "done"


def test_a_missing_peer_is_reported_not_raised():
    report = measure_peer(fake_peer(work=complete, distributions=("no-such-distribution-h8",)), [10], 5.0)
    assert (report.version, report.sizes) == (None, [])
    assert report.problem.startswith("not installed")


def test_a_peer_that_does_not_do_the_workload_is_reported():
    async def one_call_short(tool_steps, progress):
        progress.executions, progress.output = tool_steps - 1, "done"
    report = measure_peer(fake_peer(work=one_call_short), [10], 5.0)
    assert report.problem.startswith("failed on a 3-step warm-up: RuntimeError: ran 2 of 3 tool calls")


def test_a_peer_over_its_budget_is_stopped_and_later_sizes_skipped():
    async def hangs_past_warm_up(tool_steps, progress):
        if tool_steps > 3:
            await asyncio.Event().wait()
        await complete(tool_steps, progress)
    report = measure_peer(fake_peer(work=hangs_past_warm_up), [5, 10], 0.05)
    assert [entry.elapsed for entry in report.sizes] == [None, None]
    assert report.sizes[0].note.startswith("stopped at its budget")
    assert report.sizes[1].note.startswith(("skipped", "stopped at its budget"))


def test_report_has_every_section_for_the_sizes_asked_for():
    results = measure(BenchmarkOptions(sizes=[4, 2], repeat=1, peers=[], batch=3, validation_calls=5,
                                        feedback=False, grading=0, markdown=True))
    assert [s.tool_steps for s in results.steps] == [2, 4]
    results.peers = [PeerReport("fake", None, problem="not installed (pip install -e '.[bench]' adds fake)"),
                     PeerReport("other", "other 1.0", [PeerSize(2, Elapsed(1.0, 1.0)), PeerSize(4, None, "skipped: x")])]
    report = render(results, "python -m benchmarks --sizes 2,4")
    for heading in ["### Targets", "### Loop overhead", "### Argument validation", "### Against other runtimes",
                    "### Concurrent batch", "### Peak memory"]:
        assert heading in report
    assert "| scripted: per step at S=4 / at S=2 | ≤ 1.2 |" in report
    assert "| plain-stream: per step at S=1,600 / the floor's | ≤ 6.0 | S=1,600 not measured |" in report
    loop_overhead = report.split("### Loop overhead")[1].split("###")[0]
    assert [row.split(" | ")[1] for row in loop_overhead.splitlines() if row.startswith("| 4 |")] == \
        ["floor", "scripted", "plain-stream"]
    assert "| course.runtime.validation (the loop's) |" in report and report.count("| yes |") >= 2
    assert "| tiny-pi / fake per step at S=400 | ≤ 0.01 | not installed" in report
    assert "- other at S=4: skipped: x" in report
    assert "### Feedback time" not in report
    plain = render(results.__class__(**{**results.__dict__, "options": BenchmarkOptions(sizes=[2, 4], feedback=False, grading=0)}),
                   "python -m benchmarks")
    assert "Loop overhead\n=============" in plain and "|" not in plain


def test_command_line_refuses_unknown_peers_and_accepts_none(capsys):
    assert build_parser().parse_args(["--peers", "none"]).peers == []
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--peers", "langchain"])
    assert "unknown peer langchain" in capsys.readouterr().err


def test_the_timed_pytest_runs_are_the_course_suite_on_the_reference():
    from generated_runs import PROFILE_ENV, SEED_ENV  # here, not at the top: it imports Hypothesis

    caller = {"PATH": "/bin", "PYTHONDONTWRITEBYTECODE": "1", IMPL_ENV: "student", CHAIN_ENV: "1",
              PROFILE_ENV: "long", SEED_ENV: "7"}
    assert feedback_environment(caller) == {"PATH": "/bin"}


@pytest.mark.commands  # it drives `course grade` in child processes (seconds): with the command tests
def test_the_grading_benchmark_grades_what_it_counts():
    from benchmarks.grading import time_grading

    run = time_grading(2, sandbox=False)
    assert (run.submissions, run.passed, run.sandbox) == (2, 2, False)
    assert run.per_submission == run.wall / 2


def test_the_one_test_run_selects_one_test():
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *ONE_TEST],
                          cwd=Path(__file__).resolve().parent.parent, env=feedback_environment(os.environ),
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len([line for line in done.stdout.splitlines() if "::" in line]) == 1, done.stdout


def test_the_report_holds_pytest_k_ch07_to_a_one_test_run_and_times_the_plain_suite():
    results = measure(BenchmarkOptions(sizes=[4, 2], repeat=1, peers=[], batch=3, validation_calls=5,
                                       feedback=False, grading=0, markdown=True))
    results.feedback = [PytestRun(["-k", "ch07"], Elapsed(3.0, 2.0), 0, "35 passed"),
                        PytestRun(["__course_check__", "07"], Elapsed(1.0, 1.0), 0, "35 of 35 scenarios pass"),
                        PytestRun([], Elapsed(20.0, 30.0), 0, "833 passed"),
                        PytestRun(ONE_TEST, Elapsed(1.5, 0.5), 0, "1 passed")]
    report = render(results, "python -m benchmarks")
    assert "| `python -m pytest -k ch07 / python -m pytest tests/test_own_time.py -k quiet` | ≤ 1.5 | 2.00 | 4.00 " \
           "| NO |" in report
    assert "| `python -m pytest` | < 25.00 s | 20.00 s | 30.00 s | yes |" in report
    assert "| `python -m pytest tests/test_own_time.py -k quiet` | 1.50 s | 500.0 ms | 1 passed |" in report
