"""Run chapter tests in a child pytest process and read back what each scenario did.

The child runs `python -m pytest <test files> --impl=DIR --course-report=FILE`; the plugin writes
one record per scenario to FILE. Whether a run passed is the child's exit code (5, no tests
collected, is a failure), never the report.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from course.recorder import impl
from course.manifest import CHAPTERS, Chapter

EXIT_MEANING = {
    0: "all tests passed",
    1: "some tests failed",
    2: "the run was interrupted (a test module failed to import?)",
    3: "pytest hit an internal error",
    4: "pytest refused the command line",
    5: "no tests were collected",
}


def course_root() -> Path:
    """The course's directory (holding `tests/`): the current directory if it is one, else the
    clone this package was installed from."""
    for candidate in (Path.cwd(), Path(__file__).resolve().parents[2]):
        if (candidate / CHAPTERS[0].test_file).is_file():
            return candidate
    raise SystemExit("course: cannot find the course's tests/ directory; run this inside your clone of the course")


def shown(path: str | Path) -> str:
    """A path as the user can type it here: relative to the current directory when inside it."""
    absolute = Path(os.path.abspath(path))  # not resolve(): a venv's python is a symlink to keep
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(absolute)


@dataclass
class Scenario:
    """One test case's outcome, as the plugin's report records it."""

    scenario: str
    """The node id within its test file, e.g. `TestNonExecutingTerminals::test_terminal_row[length]`."""
    file: str
    """The test file, relative to the course root."""
    status: str
    """passed, failed (an assertion), error (an exception), skipped or timeout."""
    section: str | None = None
    """The chapter section the scenario comes from (its `section` marker)."""
    purpose: str | None = None
    """What the scenario checks: the test's one-line docstring."""
    divergence: dict | None = None
    """The first line where the run departs from the snapshot: section, index, expected, got."""
    problem: str | None = None
    """For a failure without a divergence: the exception, in one line."""
    where: str | None = None
    """The innermost line of the implementation in the failure's traceback."""
    renders: list[str] = field(default_factory=list)
    """The rendered runs this scenario compared with its snapshots."""

    @property
    def hint(self) -> str | None:
        if self.section and self.purpose:
            return f"{self.section}: {self.purpose}"
        return self.purpose or self.section

    @property
    def passed(self) -> bool:
        return self.status == "passed"


@dataclass
class PytestRun:
    """One child pytest process."""

    exit_code: int | None
    """None when the run was killed at its time limit."""
    scenarios: list[Scenario]
    output: str
    """What pytest printed (stdout, then stderr)."""
    collection_errors: list[dict] = field(default_factory=list)

    @property
    def timed_out(self) -> bool:
        return self.exit_code is None

    @property
    def passed(self) -> bool:
        return self.exit_code == 0

    def describe_exit(self) -> str:
        if self.timed_out:
            return "killed at its time limit"
        return EXIT_MEANING.get(self.exit_code, f"pytest exited with {self.exit_code}")

    def tail(self, lines: int = 12) -> str:
        return "\n".join(self.output.rstrip().splitlines()[-lines:])


def pytest_command(files: list[str], implementation: str | None, chain: bool = False) -> list[str]:
    """The child's command line (without the report option): what a student can rerun by hand."""
    command = [sys.executable, "-m", "pytest", *files]
    if implementation:
        command.append(f"--impl={implementation}")  # with '=': a separate DIR would be pytest's rootdir
    if chain:
        command.append("--impl-chain")
    return command


def rerun_command(scenario: Scenario, implementation: str | None, chain: bool = False) -> str:
    root = course_root()
    node = f"{scenario.file}::{scenario.scenario}"
    if root != Path.cwd().resolve():
        node = f"{root / scenario.file}::{scenario.scenario}"
    words = pytest_command([node], shown(implementation) if implementation else None, chain)
    words[0] = shown(words[0])
    return shlex.join(words)


def run_tests(
    chapters: list[Chapter],
    implementation: str | None,
    *,
    chain: bool = False,
    extra: list[str] = (),
    timeout: float | None = None,
) -> PytestRun:
    """Run the chapters' test files in a child pytest process, against `implementation` (a
    directory) or the reference (None)."""
    root = course_root()
    env = {k: v for k, v in os.environ.items() if k not in (impl.IMPL_ENV, impl.CHAIN_ENV)}
    location = str(Path(implementation).resolve()) if implementation else None
    with tempfile.TemporaryDirectory(prefix="course-") as scratch:
        report = Path(scratch) / "report.json"
        command = [*pytest_command([c.test_file for c in chapters], location, chain),
                   f"--course-report={report}", "-p", "no:cacheprovider", "-q", "--tb=line", *extra]
        # Its own process group, so a time limit kills whatever the student's code started as well.
        # (A group, not a session: a new session is also a new scheduling group on Linux, which
        # would take an equal share of the CPU from whoever runs `course`, whatever its nice value.)
        child = subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, process_group=0)
        try:
            stdout, stderr = child.communicate(timeout=timeout)
            exit_code = child.returncode
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            stdout, stderr = child.communicate()
            exit_code = None
        except BaseException:  # Ctrl-C reaches only this process: the child's group would live on
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            raise
        data = json.loads(report.read_text(encoding="utf-8")) if report.is_file() else {}
    scenarios = [Scenario(**{k: v for k, v in record.items() if k in Scenario.__dataclass_fields__})
                 for record in data.get("scenarios", [])]
    for scenario in scenarios:
        if scenario.status == "pending":  # it was running when the time limit struck
            scenario.status = "timeout"
    return PytestRun(exit_code=exit_code, scenarios=scenarios, output=stdout + stderr,
                   collection_errors=data.get("collectionErrors", []))


def default_implementation(given: str | None) -> str | None:
    """--impl, else $TINY_PI_IMPL, else `student/` (where `course start` writes) if it exists, else
    None (the reference)."""
    if given:
        return given
    if os.environ.get(impl.IMPL_ENV):
        return os.environ[impl.IMPL_ENV]
    return "student" if Path("student").is_dir() else None
