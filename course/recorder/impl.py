"""Which implementation the chapter tests run against: the reference checkpoints or a student's.

A student's directory (or importable package) holds chapter modules named as in `checkpoints/`
(`ch07_agent_loop.py`, ...). A chapter the student has not written falls back to the reference
(carry-forward), and by default a student's module that imports an earlier chapter
(`from checkpoints.ch06_tool_execution import ...`) gets the reference too, so a bug in an early
chapter does not fail every later one. With `chain=True` those imports get the student's modules.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

REFERENCE_PACKAGE = "checkpoints"
IMPL_ENV = "TINY_PI_IMPL"
CHAIN_ENV = "TINY_PI_IMPL_CHAIN"
_STUDENT_PACKAGE = "tiny_pi_student"
STUDENT_DIRECTORY = "student"
"""Where `course start` writes a student's modules; judged by default when it exists."""


class ImplementationError(Exception):
    """The named implementation cannot be used (missing directory, module that fails to import)."""


def resolve_directory(location: str) -> Path:
    """A directory path as given, or the directory of an importable package name."""
    path = Path(location).expanduser()
    if path.is_dir():
        return path.resolve()
    if path.suffix == ".py" or os.sep in location:
        raise ImplementationError(f"Implementation directory {location!r} does not exist")
    try:
        spec = importlib.util.find_spec(location)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ImplementationError(f"{location!r} is neither a directory nor an importable package")
    return Path(list(spec.submodule_search_locations)[0]).resolve()


class _ChainFinder(importlib.abc.MetaPathFinder):
    """Serves `checkpoints.<module>` from the student's directory where the student has that file."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def find_spec(self, fullname, path=None, target=None):
        package, _, name = fullname.rpartition(".")
        if package != REFERENCE_PACKAGE:
            return None
        candidate = self.directory / f"{name}.py"
        return importlib.util.spec_from_file_location(fullname, candidate) if candidate.is_file() else None


@dataclass
class Implementation:
    directory: Path | None = None
    """The student's directory; None means the reference checkpoints."""
    chain: bool = False
    """Earlier chapters imported by a student's module are the student's too."""

    def describe(self) -> str:
        if self.directory is None:
            return "reference checkpoints"
        return f"{self.directory}{' (whole chain)' if self.chain else ' (reference carry-forward)'}"

    def describe_chapters(self) -> str:
        """Which code each chapter runs: `student/ — ch06 reference, ch07 yours, ...`."""
        from course.manifest import CHAPTERS

        if self.directory is None:
            return "the reference checkpoints (no student code: run `course start NN` to write your own)"
        per_chapter = ", ".join(f"{c.keyword} {'yours' if self.provides(c.module) else 'reference'}" for c in CHAPTERS)
        return f"{self.describe()} — {per_chapter}"

    def written_modules(self) -> list[str]:
        """The chapter modules the student wrote."""
        from course.manifest import CHAPTERS

        return [c.module for c in CHAPTERS if self.provides(c.module)]

    def provides(self, module: str) -> bool:
        """Whether the student wrote this chapter (else the reference stands in)."""
        return self.directory is not None and (self.directory / f"{module}.py").is_file()

    def install(self) -> None:
        if self.directory is None:
            return
        if str(self.directory) not in sys.path:
            sys.path.append(str(self.directory))  # a student's own helper modules import as usual
        if self.chain and not any(isinstance(f, _ChainFinder) for f in sys.meta_path):
            for name in [n for n in sys.modules if n.startswith(REFERENCE_PACKAGE + ".")]:
                del sys.modules[name]
            sys.meta_path.insert(0, _ChainFinder(self.directory))

    def load(self, module: str) -> ModuleType:
        if not self.provides(module) or self.chain:
            return importlib.import_module(f"{REFERENCE_PACKAGE}.{module}")
        qualified = f"{_STUDENT_PACKAGE}.{module}"
        if qualified in sys.modules:
            return sys.modules[qualified]
        spec = importlib.util.spec_from_file_location(qualified, self.directory / f"{module}.py")
        loaded = importlib.util.module_from_spec(spec)
        sys.modules[qualified] = loaded
        try:
            spec.loader.exec_module(loaded)
        except BaseException:
            del sys.modules[qualified]
            raise
        return loaded


_current = Implementation()


def configure(location: str | None, *, chain: bool = False) -> Implementation:
    """Select the implementation for this process (the pytest plugin calls this at start-up)."""
    global _current
    _current = Implementation(resolve_directory(location) if location else None, chain=chain)
    _current.install()
    return _current


def current() -> Implementation:
    return _current


def load_checkpoint(module: str) -> ModuleType:
    """The chapter module under test: the student's where configured and written, else the reference (in a
    masked scenario of a chapter called directly, masked: course.recorder.mask)."""
    from course.recorder import mask

    return mask.chapter_module(module, _current.load(module))


def load_prerequisite(module: str) -> ModuleType:
    """An earlier chapter a test uses besides the one it judges: the reference (carry-forward), or
    the student's under `chain` — the same module the student's own imports of it get."""
    return importlib.import_module(f"{REFERENCE_PACKAGE}.{module}")


_references: dict[str, ModuleType] = {}


def load_reference(module: str) -> ModuleType:
    """The reference checkpoint itself, with the reference's own earlier chapters, whatever is
    configured: the oracle that generated scenarios compare a student's runs with."""
    if module in _references:
        return _references[module]
    chain = [finder for finder in sys.meta_path if isinstance(finder, _ChainFinder)]
    if not chain:
        _references[module] = importlib.import_module(f"{REFERENCE_PACKAGE}.{module}")
        return _references[module]
    # Under --impl-chain `checkpoints.*` are the student's: import the reference's beside them.
    prefix = REFERENCE_PACKAGE + "."
    students = {name: sys.modules.pop(name) for name in list(sys.modules) if name.startswith(prefix)}
    for finder in chain:
        sys.meta_path.remove(finder)
    try:
        _references[module] = importlib.import_module(prefix + module)
    finally:
        for name in [name for name in sys.modules if name.startswith(prefix)]:
            del sys.modules[name]
        sys.modules.update(students)
        sys.meta_path[:0] = chain
    return _references[module]
