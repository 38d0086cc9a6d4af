"""Where the course is, how paths are shown, which implementation a command judges, and plain
child pytest runs (`course snapshots update`)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from course.manifest import CHAPTERS, Chapter
from course.recorder import impl

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
class PytestRun:
    """One plain child pytest process: its exit code and what it printed."""

    exit_code: int
    output: str

    @property
    def passed(self) -> bool:
        return self.exit_code == 0

    def describe_exit(self) -> str:
        return EXIT_MEANING.get(self.exit_code, f"pytest exited with {self.exit_code}")

    def tail(self, lines: int = 12) -> str:
        return "\n".join(self.output.rstrip().splitlines()[-lines:])


def child_environment() -> dict[str, str]:
    """This process's environment for a child pytest, without the implementation it would pick up:
    the child is told which code to judge on its command line."""
    return {k: v for k, v in os.environ.items() if k not in (impl.IMPL_ENV, impl.CHAIN_ENV)}


def run_pytest(chapters: list[Chapter], extra: list[str] = ()) -> PytestRun:
    """The chapters' tests on the reference, in a child pytest (an instructor's command, not a verdict)."""
    env = child_environment()
    command = [sys.executable, "-m", "pytest", *[c.test_file for c in chapters], "--reference", "-p",
               "no:cacheprovider", "-q", "--tb=line", *extra]
    result = subprocess.run(command, cwd=course_root(), env=env, stdin=subprocess.DEVNULL, capture_output=True,
                            text=True, process_group=0)
    return PytestRun(result.returncode, result.stdout + result.stderr)


def default_implementation(given: str | None) -> str | None:
    """--impl, else $TINY_PI_IMPL, else `student/` (where `course start` writes) if it exists, else
    None (the reference). The same rule as the pytest plugin's."""
    if given:
        return given
    if os.environ.get(impl.IMPL_ENV):
        return os.environ[impl.IMPL_ENV]
    return impl.STUDENT_DIRECTORY if Path(impl.STUDENT_DIRECTORY).is_dir() else None
