"""pytest options of the course: which implementation the chapter tests judge."""

from __future__ import annotations

import os

import pytest

from course import impl


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tiny-pi course")
    group.addoption("--impl", default=os.environ.get(impl.IMPL_ENV) or None, metavar="DIR_OR_PACKAGE",
                    help=f"run the chapter tests against a student's modules (also ${impl.IMPL_ENV}); "
                         "chapters it lacks fall back to the reference")
    group.addoption("--impl-chain", action="store_true", default=bool(os.environ.get(impl.CHAIN_ENV)),
                    help=f"earlier chapters imported by the student's modules are the student's too "
                         f"(also ${impl.CHAIN_ENV}=1)")


def pytest_configure(config: pytest.Config) -> None:
    location = config.getoption("--impl")
    if location and config.inipath is None and os.path.isdir(location) and os.path.samefile(config.rootpath, location):
        # pytest picks its root directory from the command line before any plugin's options are
        # known, so a separate DIR after --impl is read as the directory under test.
        raise pytest.UsageError(f"write --impl={location} (with '='), or set {impl.IMPL_ENV}={location}")
    if location and config.getoption("update_snapshots", default=False):
        raise pytest.UsageError(
            "--snapshot-update with a student implementation is refused: snapshots belong to the reference. "
            "Run `course snapshots update` (or pytest --snapshot-update without --impl)."
        )
    try:
        chosen = impl.configure(location, chain=config.getoption("--impl-chain"))
    except impl.ImplementationError as error:
        raise pytest.UsageError(str(error)) from None
    config.stash[_IMPL_KEY] = chosen


_IMPL_KEY = pytest.StashKey[impl.Implementation]()


def pytest_report_header(config: pytest.Config) -> str:
    return f"tiny-pi implementation: {config.stash[_IMPL_KEY].describe()}"
