"""`python -m benchmarks`: the loop's overhead, against other runtimes, in one report.

Measures, in one process run: the chapter 07 loop's overhead per step as the transcript grows, on
the course's scripted model and on a model whose stream is a plain async generator, each against
the floor (a bare asyncio loop of the same shape, timed beside it); the same workload on other agent
runtimes when installed; argument validation with each validator installed; a concurrent batch of
tool calls against a bare asyncio.gather; peak memory; and the chapter tests' feedback time.
`--markdown` prints the tables that docs/benchmarks.md holds.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.feedback import PytestRun, time_check, time_pytest
from benchmarks.grading import GradingRun, measure_grading
from benchmarks.peers import PEERS, PeerReport, measure_peer
from benchmarks.validation import ValidatorTiming, time_validators
from benchmarks.workloads import BatchRun, Elapsed, median, peak_memory, time_batch, time_floor, time_steps

TARGET_FLOOR_RATIO = 6.0
TARGET_FLATNESS = 1.2
TARGET_PER_STEP = 100e-6
TARGET_PEER_RATIO = 0.01
TARGET_BATCH_RATIO = 2.0
WORKLOADS = ("scripted", "plain-stream")
"""The loop's two models: the course's ScriptedModel, and a stream of another class (a plain async generator)."""
TARGET_CHAPTER_SECONDS = 2.0
"""`pytest -k ch07`, the student's most frequent command (issue: under 2 s wall on this machine)."""
TARGET_CHECK_SECONDS = 2.5
"""`course check 07`: the chapter judged apart from the student's code."""
TARGET_SUITE_SECONDS = 25.0
"""The plain suite, `python -m pytest` (without the command tests and the gate)."""
ONE_TEST = ["tests/test_own_time.py", "-k", "quiet"]
"""A pytest run of one quick test: start-up, the plugins and one module's collection, the least any pytest
run of the course costs."""
TARGET_CHAPTER_RATIO = 1.5
"""`pytest -k ch07` against ONE_TEST's run: what a chapter's own tests add to pytest's start-up."""


@dataclass
class BenchmarkOptions:
    """What one run of the benchmarks measures and how it prints."""

    sizes: list[int] = field(default_factory=lambda: [100, 400, 1600, 6400])
    """S: the tool steps of each loop-overhead run (each followed by a final stop)."""
    repeat: int = 3
    """Timed repetitions of each tiny-pi measurement and pytest command; the report shows medians."""
    peers: list[str] = field(default_factory=lambda: [peer.name for peer in PEERS])
    """The other runtimes to run the same workload on; an uninstalled one is reported as such."""
    peer_budget: float = 60.0
    """Seconds each peer may spend on all its sizes together."""
    compare_at: int = 400
    """The S at which tiny-pi must be 100x faster per step than each peer."""
    floor_at: int = 1600
    """The S at which the loop's per-step time must be within TARGET_FLOOR_RATIO of the floor's."""
    batch: int = 1000
    """N: the tool calls of the concurrent batch, all in one assistant message."""
    validation_calls: int = 2000
    """Calls per timing of each argument validator (the best of 5 timings is shown)."""
    feedback: bool = True
    """Time `pytest -k ch07`, `course check 07`, the whole suite and a one-test run as subprocesses."""
    grading: int = 8
    """Submissions (copies of the reference) to grade, with and without the sandbox; 0 leaves it out."""
    markdown: bool = False
    """Print Markdown tables (the form docs/benchmarks.md holds) instead of plain text."""


@dataclass
class StepTiming:
    tool_steps: int
    """S."""
    runs: list[Elapsed]
    """The time of each repetition."""

    @property
    def total(self) -> Elapsed:
        return median(self.runs)

    @property
    def per_step(self) -> Elapsed:
        total = self.total
        return Elapsed(total.wall / self.tool_steps, total.cpu / self.tool_steps)


@dataclass
class Results:
    options: BenchmarkOptions
    """What was asked for."""
    steps: list[StepTiming]
    """tiny-pi's loop overhead on the scripted model, one entry per S, smallest first."""
    plain_stream: list[StepTiming]
    """The same on a model whose stream is a plain async generator."""
    floor: list[StepTiming]
    """The floor at each S: a bare asyncio loop of the same shape."""
    validators: list[ValidatorTiming]
    """Argument validation per call, with each validator installed."""
    batch: list[BatchRun]
    """The concurrent batch, one entry per repetition."""
    memory: dict[int, int]
    """Peak traced bytes by S, for the two largest sizes."""
    peers: list[PeerReport]
    """One report per peer asked for."""
    feedback: list[PytestRun]
    """`pytest -k ch07`, `course check 07`, the whole suite and ONE_TEST's run; empty with feedback off."""
    grading: list[GradingRun]
    """`course grade` without and with the sandbox; empty with grading off."""
    load: tuple[float, float]
    """The 1-minute load average before and after the measurements."""


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def measure(options: BenchmarkOptions) -> Results:
    load_before = os.getloadavg()[0]
    sizes = sorted(set(options.sizes))
    for model in WORKLOADS:  # warm-up: imports, the validator's first use, untimed
        time_steps(sizes[0], model)
    time_floor(sizes[0])
    timed: dict[str, list[StepTiming]] = {name: [] for name in ("floor", *WORKLOADS)}
    for tool_steps in sizes:
        progress(f"tiny-pi and the floor: {tool_steps} steps x {options.repeat}")
        runs: dict[str, list[Elapsed]] = {name: [] for name in timed}
        for _ in range(options.repeat):  # interleaved, so that a change in the machine's load hits all three
            runs["floor"].append(time_floor(tool_steps))
            for model in WORKLOADS:
                runs[model].append(time_steps(tool_steps, model).elapsed)
        for name, elapsed in runs.items():
            timed[name].append(StepTiming(tool_steps, elapsed))
    progress("argument validation")
    validators = time_validators(options.validation_calls)
    progress(f"tiny-pi: batch of {options.batch} calls x {options.repeat}")
    batch = [time_batch(options.batch) for _ in range(options.repeat)]
    progress(f"tiny-pi: peak memory at {', '.join(map(str, sizes[-2:]))} steps")
    memory = {tool_steps: peak_memory(tool_steps) for tool_steps in sizes[-2:]}

    peers = []
    for peer in PEERS:
        if peer.name in options.peers:
            progress(f"{peer.name}: sizes {', '.join(map(str, sizes))}, budget {options.peer_budget:.0f} s")
            peers.append(measure_peer(peer, sizes, options.peer_budget))

    feedback = []
    if options.feedback:
        progress(f"python -m pytest -k ch07 x {options.repeat}")
        feedback.append(time_pytest(["-k", "ch07"], options.repeat))
        progress(f"course check 07 x {options.repeat}")
        feedback.append(time_check("07", options.repeat))
        progress(f"python -m pytest x {options.repeat}")
        feedback.append(time_pytest([], options.repeat))
        progress(f"python -m pytest {' '.join(ONE_TEST)} x {options.repeat}")
        feedback.append(time_pytest(ONE_TEST, options.repeat))
    grading = []
    if options.grading:
        progress(f"course grade 07: {options.grading} submissions, without and with the sandbox")
        grading = measure_grading(options.grading)
    return Results(options, timed["scripted"], timed["plain-stream"], timed["floor"], validators, batch, memory,
                   peers, feedback, grading, (load_before, os.getloadavg()[0]))


# ---- the report ----

def duration(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def size(count: float) -> str:
    return f"{count / 2**20:.1f} MiB" if count >= 2**20 else f"{count / 2**10:.1f} KiB"


def ratio_against(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.4f} ({theirs / ours:,.0f}x faster)"


def table(headers: list[str], rows: list[list[str]], markdown: bool) -> str:
    if markdown:
        lines = [headers, ["---"] * len(headers), *rows]
        return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)
    widths = [max(len(cells[i]) for cells in [headers, *rows]) for i in range(len(headers))]
    lines = [headers, ["-" * width for width in widths], *rows]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(cells, widths)).rstrip() for cells in lines)


def section(title: str, intro: str, body: str, markdown: bool) -> str:
    underlined = f"### {title}" if markdown else f"{title}\n{'=' * len(title)}"
    return f"{underlined}\n\n{intro}\n\n{body}"


def notes(lines: list[str], markdown: bool) -> str:
    bullet = "- " if markdown else "  "
    return "".join(["\n\n", *("\n".join(bullet + line for line in lines))]) if lines else ""


def verdict(met: bool | None) -> str:
    return {True: "yes", False: "NO", None: "n/a"}[met]


def versions(results: Results) -> str:
    found = []
    for name in ["tiny-pi-course", "jsonschema", "jsonschema-rs", "fastjsonschema", "pytest"]:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} (not installed)")
    return ", ".join(found + [peer.version for peer in results.peers if peer.version])


def cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def peer_per_step(report: PeerReport, tool_steps: int) -> Elapsed | None:
    for entry in report.sizes:
        if entry.tool_steps == tool_steps and entry.elapsed is not None:
            return Elapsed(entry.elapsed.wall / tool_steps, entry.elapsed.cpu / tool_steps)
    return None


def workload_timings(results: Results) -> dict[str, list[StepTiming]]:
    return {"scripted": results.steps, "plain-stream": results.plain_stream}


def at_size(timings: list[StepTiming], tool_steps: int) -> StepTiming | None:
    return next((timing for timing in timings if timing.tool_steps == tool_steps), None)


def targets(results: Results) -> list[list[str]]:
    """One row per target: what, the target, the figure by wall and by CPU time, met (by wall)."""
    rows = []
    at = results.options.floor_at
    floor = at_size(results.floor, at)
    for model, timings in workload_timings(results).items():
        ours = at_size(timings, at)
        what = f"{model}: per step at S={at:,} / the floor's"
        if ours is None or floor is None:
            rows.append([what, f"≤ {TARGET_FLOOR_RATIO}", f"S={at:,} not measured", "", verdict(None)])
            continue
        wall, cpu = ours.per_step.wall / floor.per_step.wall, ours.per_step.cpu / floor.per_step.cpu
        rows.append([what, f"≤ {TARGET_FLOOR_RATIO}", f"{wall:.2f}", f"{cpu:.2f}", verdict(wall <= TARGET_FLOOR_RATIO)])
    for model, timings in workload_timings(results).items():
        first, last = timings[0].per_step, timings[-1].per_step
        rows.append([f"{model}: per step at S={timings[-1].tool_steps:,} / at S={timings[0].tool_steps:,}",
                     f"≤ {TARGET_FLATNESS}", f"{last.wall / first.wall:.2f}", f"{last.cpu / first.cpu:.2f}",
                     verdict(last.wall / first.wall <= TARGET_FLATNESS)])
    last = results.steps[-1].per_step
    rows.append([f"scripted: per step at S={results.steps[-1].tool_steps:,}", f"< {duration(TARGET_PER_STEP)}",
                 duration(last.wall), duration(last.cpu), verdict(last.wall < TARGET_PER_STEP)])
    at = results.options.compare_at
    ours = next((s.per_step for s in results.steps if s.tool_steps == at), None)
    for report in results.peers:
        theirs = peer_per_step(report, at) if ours else None
        what = f"tiny-pi / {report.peer} per step at S={at:,}"
        if theirs is None:
            rows.append([what, f"≤ {TARGET_PEER_RATIO}", report.problem or "not measured", "", verdict(None)])
        else:
            rows.append([what, f"≤ {TARGET_PEER_RATIO} (100x faster)", ratio_against(ours.wall, theirs.wall),
                         ratio_against(ours.cpu, theirs.cpu), verdict(ours.wall / theirs.wall <= TARGET_PEER_RATIO)])
    loop, gather = median([b.loop for b in results.batch]), median([b.gather for b in results.batch])
    rows.append([f"{results.options.batch:,}-call batch / bare asyncio.gather", f"≤ {TARGET_BATCH_RATIO}",
                 f"{loop.wall / gather.wall:.2f}", f"{loop.cpu / gather.cpu:.2f}",
                 verdict(loop.wall / gather.wall <= TARGET_BATCH_RATIO)])
    for run, target in zip(results.feedback, (TARGET_CHAPTER_SECONDS, TARGET_CHECK_SECONDS, TARGET_SUITE_SECONDS)):
        rows.append([f"`{run.command}`" if results.options.markdown else run.command, f"< {duration(target)}",
                     duration(run.elapsed.wall), duration(run.elapsed.cpu),
                     verdict(run.elapsed.wall < target and run.exit_code == 0)])
    rows += chapter_ratio(results)
    return rows


def chapter_ratio(results: Results) -> list[list[str]]:
    """The target row of `pytest -k ch07` against a one-test run, when both were timed."""
    timed = {tuple(run.args): run for run in results.feedback}
    chapter, one = timed.get(("-k", "ch07")), timed.get(tuple(ONE_TEST))
    if chapter is None or one is None:
        return []
    wall, cpu = chapter.elapsed.wall / one.elapsed.wall, chapter.elapsed.cpu / one.elapsed.cpu
    what = f"{chapter.command} / {one.command}"
    return [[f"`{what}`" if results.options.markdown else what, f"≤ {TARGET_CHAPTER_RATIO}", f"{wall:.2f}",
             f"{cpu:.2f}", verdict(wall <= TARGET_CHAPTER_RATIO and chapter.exit_code == one.exit_code == 0)]]


def render(results: Results, command: str) -> str:
    md = results.options.markdown
    options = results.options
    machine = (f"{os.cpu_count()} cores ({cpu_model()}), Python {platform.python_version()} on {platform.platform()}; "
               f"load average {results.load[0]:.2f} before, {results.load[1]:.2f} after")
    header = [f"command: `{command}`" if md else f"command: {command}", f"machine: {machine}",
              f"versions: {versions(results)}"]
    sections = [("  \n" if md else "\n").join(header)]

    sections.append(section(
        "Targets", "Met is judged by wall time; CPU time (this process's, or the pytest process's) shows what the "
        "code costs without the waiting for a core that a loaded machine adds.",
        table(["what", "target", "wall", "CPU", "met"], targets(results), md), md))

    rows = []
    for index, floor in enumerate(results.floor):
        rows.append([f"{floor.tool_steps:,}", "floor", duration(floor.total.wall), duration(floor.per_step.wall),
                     duration(floor.per_step.cpu), "1", "1",
                     f"{floor.per_step.wall / results.floor[0].per_step.wall:.2f}"])
        for model, timings in workload_timings(results).items():
            timing, first = timings[index], timings[0]
            rows.append([f"{timing.tool_steps:,}", model, duration(timing.total.wall), duration(timing.per_step.wall),
                         duration(timing.per_step.cpu), f"{timing.per_step.wall / floor.per_step.wall:.2f}",
                         f"{timing.per_step.cpu / floor.per_step.cpu:.2f}",
                         f"{timing.per_step.wall / first.per_step.wall:.2f}"])
    sections.append(section(
        "Loop overhead",
        "S steps of one no-op tool call each, then a final stop, an observer counting the events: on the "
        "course's scripted model (requests not recorded), and on a model whose stream is another class, a plain "
        "async generator and `result()` (plain-stream). The floor is a bare asyncio loop of the same shape in the "
        "same process: per step it reads one async generator of four events to its end, awaits one tool "
        f"coroutine and appends two dicts. Median of {options.repeat} runs, the three interleaved.",
        table(["S", "workload", "total", "per step", "per step (CPU)", "/ floor", "/ floor (CPU)",
               f"vs S={results.floor[0].tool_steps:,}"], rows, md), md))

    if results.validators:
        sections.append(section(
            "Argument validation",
            "One call's arguments checked against a tool's schema, per call "
            f"(best of 5 x {options.validation_calls:,} calls): the "
            "benchmark's no-argument schema with `{}`, the chapter's `read` schema with a path and an offset. "
            "\"same messages\": whether the validator's own messages for the chapter's invalid-arguments scenarios "
            "are jsonschema's, word for word (the messages students see). course.runtime.validation is what the "
            "loop uses: jsonschema-rs decides valid arguments, jsonschema gives every message.",
            table(["validator", "no arguments", "read", "same messages"],
                  [[v.name, duration(v.empty), duration(v.read), v.same_messages] for v in results.validators], md), md))

    if results.peers:
        headers = ["S", "tiny-pi per step"]
        for report in results.peers:
            headers += [f"{report.peer} per step", f"tiny-pi / {report.peer}"]
        rows = []
        for timing in results.steps:
            row = [f"{timing.tool_steps:,}", duration(timing.per_step.wall)]
            for report in results.peers:
                theirs = peer_per_step(report, timing.tool_steps)
                row += [duration(theirs.wall), ratio_against(timing.per_step.wall, theirs.wall)] if theirs else ["—"] * 2
            rows.append(row)
        remarks = []
        for report in results.peers:
            if report.problem:
                remarks.append(f"{report.peer}: {report.problem}")
            remarks += [f"{report.peer} at S={e.tool_steps:,}: {e.note}" for e in report.sizes if e.note]
            completed = [e for e in report.sizes if e.elapsed is not None]
            if len(completed) >= 2:
                small, large = completed[0], completed[-1]
                growth = (large.elapsed.wall / large.tool_steps) / (small.elapsed.wall / small.tool_steps)
                remarks.append(f"{report.peer}: per step grows {growth:.1f}x from S={small.tool_steps:,} "
                               f"to S={large.tool_steps:,}")
        sections.append(section(
            "Against other runtimes",
            "The same workload on each runtime's own offline scripted model: one run per size after a 3-step "
            f"warm-up, wall time, {options.peer_budget:.0f} s budget per runtime.",
            table(headers, rows, md) + notes(remarks, md), md))

    loop, gather = median([b.loop for b in results.batch]), median([b.gather for b in results.batch])
    calls = options.batch
    overhead = Elapsed(loop.wall - gather.wall, loop.cpu - gather.cpu)
    sections.append(section(
        "Concurrent batch",
        f"{calls:,} tool calls in one assistant message, each awaiting one shared asyncio.Event that the last "
        f"call to start sets; median of {options.repeat}.",
        table(["", "total", "per call", "per call (CPU)"], [
            [label, duration(e.wall), duration(e.wall / calls), duration(e.cpu / calls)] for label, e in [
                ("tiny-pi loop: first tool_start to the next model request", loop),
                ("bare asyncio.gather of the same coroutines", gather),
                ("the loop's overhead (difference)", overhead)]], md), md))

    memory = sorted(results.memory.items())
    (small, small_peak), (large, large_peak) = memory[0], memory[-1]
    growth = [] if large == small else [
        f"From S={small:,} to S={large:,}: the peak grows {large_peak / small_peak:.2f}x for {large / small:.0f}x "
        f"the steps, {size((large_peak - small_peak) / (large - small))} per added step (the transcript's growth)."]
    sections.append(section(
        "Peak memory", "tracemalloc's peak during one run of the loop-overhead workload, the transcript included.",
        table(["S", "peak", "per step"], [[f"{s:,}", size(peak), size(peak / s)] for s, peak in memory], md)
        + notes(growth, md), md))

    if results.feedback:
        rows = [[f"`{r.command}`" if md else r.command, duration(r.elapsed.wall), duration(r.elapsed.cpu),
                 r.summary + ("" if r.exit_code == 0 else f" (exit {r.exit_code})")] for r in results.feedback]
        sections.append(section(
            "Feedback time",
            f"Wall time from process start to exit, median of {options.repeat} after one untimed run "
            "(bytecode caches and the reference's runs of the published plans written, as on a student's machine "
            "after the first run).",
            table(["command", "wall", "CPU", "it says"], rows, md), md))
    if results.grading:
        rows = [["with bubblewrap" if g.sandbox else "without the sandbox", str(g.submissions), duration(g.wall),
                 f"{g.per_minute:.1f}", duration(g.per_submission), f"{g.passed}/{g.submissions}"]
                for g in results.grading]
        extra = []
        if len(results.grading) == 2:
            plain, boxed = results.grading
            cost = boxed.per_submission - plain.per_submission
            extra = [f"The sandbox costs {duration(cost)} per submission ({boxed.wall / plain.wall:.2f}x the wall "
                     "time without it)." if cost > 0 else
                     f"The sandbox's cost is below this run's noise ({boxed.wall / plain.wall:.2f}x the wall time "
                     "without it)."]
        sections.append(section(
            "Grading throughput",
            "`course grade 07` on copies of the reference, two at a time (`--jobs 2`), the whole command timed once.",
            table(["run", "submissions", "wall", "per minute", "per submission", "passed"], rows, md)
            + notes(extra, md), md))
    return "\n\n".join(sections) + "\n"


def sizes_list(text: str) -> list[int]:
    sizes = [int(part) for part in text.split(",") if part.strip()]
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError("give positive step counts, e.g. 100,400,1600,6400")
    return sizes


def positive(kind):
    def parse(text: str):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value
    return parse


def peers_list(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip() and part.strip() != "none"]
    known = [peer.name for peer in PEERS]
    unknown = [name for name in names if name not in known]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown peer {', '.join(unknown)}; the peers are {', '.join(known)}")
    return names


def build_parser() -> argparse.ArgumentParser:
    defaults = BenchmarkOptions()
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=sizes_list, default=defaults.sizes, metavar="S,S,...",
                        help="tool steps per loop-overhead run (default: 100,400,1600,6400)")
    parser.add_argument("--repeat", type=positive(int), default=defaults.repeat, metavar="N",
                        help="repetitions of each tiny-pi measurement; medians are shown (default: 3)")
    parser.add_argument("--peers", type=peers_list, default=defaults.peers, metavar="NAME,...",
                        help=f"runtimes to compare with, or 'none' (default: {','.join(defaults.peers)})")
    parser.add_argument("--peer-budget", type=positive(float), default=defaults.peer_budget, metavar="SECONDS",
                        help="time each peer may spend on all sizes (default: 60)")
    parser.add_argument("--compare-at", type=positive(int), default=defaults.compare_at, metavar="S",
                        help="the size whose ratio to each peer is a target (default: 400)")
    parser.add_argument("--floor-at", type=positive(int), default=defaults.floor_at, metavar="S",
                        help="the size whose ratio to the floor is a target (default: 1600)")
    parser.add_argument("--batch", type=positive(int), default=defaults.batch, metavar="N",
                        help="tool calls in the concurrent batch (default: 1000)")
    parser.add_argument("--no-feedback", dest="feedback", action="store_false",
                        help="do not time the pytest runs")
    parser.add_argument("--grading", type=int, default=defaults.grading, metavar="N",
                        help="submissions to grade with and without the sandbox, 0 for none (default: 8)")
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables, as in docs/benchmarks.md")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    options = BenchmarkOptions(sizes=args.sizes, repeat=args.repeat, peers=args.peers, peer_budget=args.peer_budget,
                               compare_at=args.compare_at, floor_at=args.floor_at, batch=args.batch, feedback=args.feedback,
                               grading=args.grading,
                               markdown=args.markdown)
    print(render(measure(options), " ".join(["python -m benchmarks", *argv])), end="")
    return 0
