"""What each `course` command needs beyond the core install, and the install hint when it is missing.

The core install (`pip install -e .`) runs the demo; running a chapter's tests needs the test
extra, which is the student install (`pip install -e '.[test]'`). A command whose packages are
missing says what to install and exits 2, before it starts anything: no traceback, and no
"0 of 0 scenarios pass" from a child pytest that could not start.
"""

from __future__ import annotations

import sys
from importlib.util import find_spec
from pathlib import Path

EXTRA = "test"

# Module to import -> the distribution to install (both are in the test extra).
RUN_TESTS = {"pytest": "pytest", "pytest_asyncio": "pytest-asyncio", "pytest_timeout": "pytest-timeout", "syrupy": "syrupy",
             "hypothesis": "hypothesis"}

NEEDS: dict[str, dict[str, str]] = {
    "check": RUN_TESTS,
    "status": RUN_TESTS,
    "hint": RUN_TESTS,
    "watch": {**RUN_TESTS, "watchfiles": "watchfiles"},
    "grade": {**RUN_TESTS, "tqdm": "tqdm"},
    "snapshots": RUN_TESTS,
    "mutants": RUN_TESTS,
}


def _installed(module: str) -> bool:
    try:
        return find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing(modules: dict[str, str]) -> list[str]:
    """The distributions of `modules` (module -> distribution) that cannot be imported."""
    return [distribution for module, distribution in modules.items() if not _installed(module)]


def install_command() -> str:
    """The command that installs the extra into the Python running `course`, as one can type it here."""
    from course.judge.testrun import shown  # testrun imports nothing optional

    python = Path(sys.executable)
    pip = python.parent / "pip"
    installer = f"{shown(pip)} install" if pip.exists() else f"{shown(python)} -m pip install"
    root = Path(__file__).resolve().parents[2]
    where = "." if root == Path.cwd().resolve() else shown(root)
    return f"{installer} -e '{where}[{EXTRA}]'"


def install_hint(command: str, absent: list[str]) -> str:
    return (f"course {command} needs the {EXTRA} extra (missing: {', '.join(absent)}): "
            f"{install_command()}")


def check_installed(command: str | None) -> int | None:
    """None when `command` has what it needs; else print the install hint to stderr and return 2."""
    absent = missing(NEEDS.get(command or "", {}))
    if not absent:
        return None
    print(install_hint(command, absent), file=sys.stderr)
    return 2
