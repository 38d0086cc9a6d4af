"""Where a graded submission runs: a throwaway copy of the course without the answers, inside
bubblewrap when it is installed, with resource limits and an environment of its own.

The copy holds what the recorder needs and nothing the judge knows: `course/` without
`course/judge/`; of `chapters/`, every chapter's `scenarios.py`, the earlier chapters' reference
modules (carry-forward) but not the graded chapter's or later ones, and the graded chapter's folder
without its reference, its snapshots and its `judge/`; the course-wide test helpers of `tests/` (no
test module), the conftest; and the submission in `student/`. Python
starts without `site` (`-S`), with the copy and the interpreter's own site-packages on its path, so
the editable install's import hook cannot lead back to the real checkout.

Under bubblewrap (Debian package `bubblewrap`) the child sees a read-only system, the interpreter
and the copy read-only, its plans read-only, a private `/tmp`, HOME and `/dev/shm` of 64 MiB each
(memory), every other place of its own read-only (its root, `/dev`), its record directory as the
only writable place of the machine's, no network, its own process namespace (everything in it ends
with it), and nothing else of the machine. A submission folder too large or holding too many files
is not copied at all (`SubmissionRefused`): its row says so. Sandbox or not, the child joins a fresh
session keyring and runs under a seccomp filter denying keyrings, ptrace and other processes' memory
(`course.judge.confine`). Without bubblewrap only these, the limits below and the copy protect the
grade (`course grade` then needs --trusted): the child runs as the instructor's user and could read
or write what that user can.
"""

from __future__ import annotations

import functools
import os
import resource
import shutil
import site
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

from course.judge import confine, processes
from course.judge.session import Child
from course.manifest import CHAPTERS, JUDGE, Chapter

MEMORY_LIMIT = 2 * 2**30
"""Address space each process of a submission may map (bytes): per process, not in all (no cgroups)."""
FILE_LIMIT = 64 * 2**20
"""The largest file it may write (bytes): its records and its output included (per file, not in all)."""
PROCESS_LIMIT = 64
"""Processes its user may run at once. The kernel does not apply it to root, and a PID namespace
counts nothing: a grade run as root bounds no number of processes (see docs/guarantees.md)."""
TMP_SIZE = 64 * 2**20
"""The size of the private /tmp under bubblewrap (bytes; a tmpfs, so memory)."""
HOME_SIZE = 64 * 2**20
"""The size of the private HOME under bubblewrap (bytes; a tmpfs, so memory)."""
SHM_SIZE = 64 * 2**20
"""The size of the private /dev/shm under bubblewrap (bytes; a tmpfs, so memory). Every other place of
the sandbox's own is read-only: its root and /dev (bubblewrap makes them as tmpfs, of no bounded size)."""
OPEN_FILES = 256
SUBMISSION_LIMIT = 8 * 2**20
"""A submission folder's size at the most (bytes, its regular files'): a larger one is not graded (its row,
`broken`, says so). Nothing is copied in part: a module left out would be graded as the reference's."""
ENTRY_LIMIT = 2000
"""Files and folders a submission folder may hold at the most, at any depth: more, and it is not graded
(its row, `broken`, says so). Copying and removing its copy take time the run's wall does not bound."""
MARK = "TINY_PI_GRADED"
"""An environment variable every process of a submission inherits: how strays are found."""


def bubblewrap() -> str | None:
    return shutil.which("bwrap")


@functools.lru_cache(maxsize=None)
def knows_size(bwrap: str) -> bool:
    """Whether this bubblewrap takes `--size` (0.8 and later)."""
    return "--size" in processes.run_own([bwrap, "--help"], timeout=10)


def _sized(bwrap: str, size: int) -> list[str]:
    """`--size SIZE` for the next --tmpfs, where bubblewrap knows it (else the tmpfs is unbounded)."""
    return ["--size", str(size)] if knows_size(bwrap) else []


def _limits(cpu_seconds: int) -> None:
    """In the child, before it executes: the resource limits of a graded submission."""
    for limit, value in ((resource.RLIMIT_AS, MEMORY_LIMIT), (resource.RLIMIT_FSIZE, FILE_LIMIT),
                         (resource.RLIMIT_NPROC, PROCESS_LIMIT), (resource.RLIMIT_NOFILE, OPEN_FILES),
                         (resource.RLIMIT_CORE, 0), (resource.RLIMIT_CPU, cpu_seconds)):
        try:
            resource.setrlimit(limit, (value, value))
        except (ValueError, OSError):
            pass  # a hard limit lower than ours already holds


def _in_child(cpu_seconds: int, filter_here: bool) -> None:
    """In the child, before it executes anything of the submission: its limits, a fresh session keyring
    (never the grader's), and without bubblewrap the seccomp filter (bubblewrap loads it itself)."""
    _limits(cpu_seconds)
    confine.join_fresh_keyring()
    if filter_here:
        confine.load_filter_here()


IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "__snapshots__", JUDGE, "wire")
"""What no part of a graded copy holds: the judge's parts (`course/judge/`, each chapter's `judge/`) and the
snapshots (a graded run is compared with the reference's run of the same scenarios)."""


def _copy_course(root: Path, chapter: Chapter, target: Path) -> None:
    shutil.copytree(root / "course", target / "course", ignore=IGNORED)
    (target / "checkpoints").mkdir()
    shutil.copy(root / "checkpoints" / "__init__.py", target / "checkpoints" / "__init__.py")
    (target / "tests").mkdir()
    for item in (root / "tests").glob("*.py"):
        if not item.name.startswith("test_"):
            shutil.copy(item, target / "tests" / item.name)
    for name in ("conftest.py", "pyproject.toml"):
        shutil.copy(root / name, target / name)
    _copy_chapters(root, chapter, target)


def _copy_chapters(root: Path, graded: Chapter, target: Path) -> None:
    """Every chapter's scenarios, the references of the earlier chapters (and of those the graded one runs in),
    and the graded chapter's folder without its reference and its judge/."""
    earlier = {c.module for c in CHAPTERS[: CHAPTERS.index(graded)]} | set(graded.runs_in)
    for chapter in CHAPTERS:
        source, copy = root / chapter.folder, target / chapter.folder
        copy.mkdir(parents=True)
        if chapter == graded:
            shutil.copytree(source, copy, ignore=_without(IGNORED, chapter.module + ".py"), dirs_exist_ok=True)
            continue
        for name in ("scenarios.py", *([f"{chapter.module}.py"] if chapter.module in earlier else [])):
            if (source / name).is_file():
                shutil.copy(source / name, copy / name)


def _without(ignore, name: str):
    """`ignore`, also leaving out the file `name` (the graded chapter's reference) at the top of the copy."""
    return lambda folder, names: set(ignore(folder, names)) | ({name} if name in names else set())


class SubmissionRefused(Exception):
    """A submission folder that is not graded as it is (too large, too many files): the message says why."""


def _files(folder: Path) -> list[tuple[Path, int]]:
    """Every regular file below `folder` with its size (no link, nothing in `__pycache__`); raises
    SubmissionRefused past ENTRY_LIMIT entries or SUBMISSION_LIMIT bytes. Follows no link."""
    found: list[tuple[Path, int]] = []
    entries, pending = 0, [folder]
    while pending:
        try:
            with os.scandir(pending.pop()) as found_there:
                listing = list(found_there)
        except OSError:
            continue  # a folder it cannot read: nothing of it is copied
        entries += len(listing)
        if entries > ENTRY_LIMIT:
            raise SubmissionRefused(f"the submission holds more than {ENTRY_LIMIT} files and folders: it is not "
                                    "graded (hand in the chapter's modules without the rest)")
        for entry in listing:
            if entry.is_symlink() or entry.name == "__pycache__":
                continue  # a link could point anywhere on the instructor's machine
            if entry.is_dir(follow_symlinks=False):
                pending.append(Path(entry.path))
            elif entry.is_file(follow_symlinks=False):
                found.append((Path(entry.path), entry.stat(follow_symlinks=False).st_size))
    _within_size(folder, found)
    return found


def _within_size(folder: Path, files: list[tuple[Path, int]]) -> None:
    total = sum(size for _, size in files)
    if total > SUBMISSION_LIMIT:
        path, size = max(files, key=lambda item: item[1])
        raise SubmissionRefused(
            f"the submission is larger than {SUBMISSION_LIMIT // 2**20} MiB ({total / 2**20:.1f} MiB in {len(files)} "
            f"files, the largest {str(path.relative_to(folder))[:200]} of {size / 2**20:.1f} MiB): it is not graded "
            "(hand in the chapter's modules without data)")


def _copy_submission(folder: Path, target: Path) -> None:
    """Copy the submission's files (its chapter modules first), all or none: a folder too large or holding
    too many files is refused (SubmissionRefused), never graded in part."""
    modules = {f"{chapter.module}.py" for chapter in CHAPTERS}
    files = sorted(_files(folder), key=lambda item: (not (item[0].parent == folder and item[0].name in modules),
                                                     str(item[0])))
    target.mkdir()
    copied: list[tuple[Path, int]] = []
    for path, _ in files:
        destination = target / path.relative_to(folder)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, destination)
        copied.append((path, destination.stat().st_size))
    _within_size(folder, copied)  # (a file that grew since it was measured)


def _site_packages() -> list[str]:
    found = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *site.getsitepackages()]
    return list(dict.fromkeys(p for p in found if os.path.isdir(p)))


@dataclass
class Sandbox:
    """Prepares one submission's copy and the command that runs the recorder on it."""

    root: Path
    """The course (the judge's checkout)."""
    chapter: Chapter
    folder: Path
    """The submission."""
    work: Path
    """A fresh directory for this submission: its copy and its records."""
    wall: float
    """Seconds the whole run may take (also its CPU time limit)."""
    isolate: bool = True
    """Use bubblewrap when it is installed."""
    token: str = ""
    inputs: list[str] = field(default_factory=list)
    """Files the judge wrote for the child (its plans), shown to it read-only."""

    def __post_init__(self) -> None:
        self.copy = self.work / "course"
        self.out = self.work / "out"
        self.copy.mkdir(parents=True)
        self.out.mkdir()
        _copy_course(self.root, self.chapter, self.copy)
        _copy_submission(self.folder, self.copy / "student")
        self.home = self.work / "home"
        self.home.mkdir()
        self.filter_fds: list[int] = []
        """The seccomp filter's descriptors handed to bubblewrap: one per child started, closed by `close`."""

    @property
    def implementation(self) -> str:
        return str(self.copy / "student")

    @property
    def forbidden(self) -> list[str]:
        later = [c.module for c in CHAPTERS[CHAPTERS.index(self.chapter):]]
        return [*(f"checkpoints.{m}" for m in later), "course.judge", *(f"{c.package}.{JUDGE}" for c in CHAPTERS)]

    def prepare(self, command: list[str], scratch: Path) -> Child:
        """The recorder's command, rewritten to run in the copy, its record in `out/`, in the sandbox.

        The plans stay where the judge wrote them, outside anything the child can write: bubblewrap
        shows them to the child read-only, at the same path. (A copy in `out/` would let the child
        put a link in its place for the judge's next copy to follow.)"""
        self.close()  # (the previous child's filter: bubblewrap read it when it started)
        moved, self.inputs = [], []
        for word in command:
            if word.startswith("--course-record="):
                word = "--course-record=" + str(self.out / Path(word.split("=", 1)[1]).name)
            elif word.startswith("--course-plans="):
                self.inputs.append(word.split("=", 1)[1])
            moved.append(word)
        record = Path(next(w for w in moved if w.startswith("--course-record=")).split("=", 1)[1])
        python = moved[0]
        moved = [python, "-S", *moved[1:]]
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.home),
            "USER": "student",
            "LANG": "C.UTF-8",
            "TMPDIR": "/tmp" if self.bwrap else str(self.home),
            "PYTHONPATH": os.pathsep.join([str(self.copy), *_site_packages()]),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONHASHSEED": "0",
            MARK: self.token,
        }
        confine.prepare()  # (what the child calls is loaded here, before the fork)
        filtered = confine.filter_program() is not None
        if self.bwrap:
            moved = self.bwrap_command(moved)
        cpu = max(1, int(self.wall) + 5)
        return Child(moved, self.copy, env, preexec=lambda: _in_child(cpu, filtered and not self.bwrap), record=record,
                     pass_fds=tuple(self.filter_fds[-1:]) if self.bwrap and filtered else ())

    def close(self) -> None:
        """Close what the sandbox kept open for its children (bubblewrap has read it by now)."""
        for fd in self.filter_fds:
            os.close(fd)
        self.filter_fds.clear()

    @property
    def bwrap(self) -> str | None:
        return bubblewrap() if self.isolate else None

    def bwrap_command(self, command: list[str]) -> list[str]:
        # bubblewrap's own root and /dev are tmpfs of no bounded size (half the machine's memory): both are
        # made read-only once everything is mounted, and the child writes only in places of a bounded size
        # (/tmp, HOME, /dev/shm; /dev/shm only where bubblewrap takes --size) and in its record directory.
        words = [self.bwrap, "--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL",
                 "--ro-bind", "/usr", "/usr", "--proc", "/proc", "--dev", "/dev",
                 *_sized(self.bwrap, TMP_SIZE), "--tmpfs", "/tmp", "--dir", "/etc"]
        if knows_size(self.bwrap):
            words += [*_sized(self.bwrap, SHM_SIZE), "--tmpfs", "/dev/shm"]
        for link in ("bin", "lib", "lib64", "sbin", "lib32"):
            path = Path("/") / link
            if path.is_symlink():
                words += ["--symlink", os.readlink(path), str(path)]
            elif path.is_dir():
                words += ["--ro-bind", str(path), str(path)]
        for name in ("ld.so.cache", "passwd", "group", "localtime", "nsswitch.conf"):
            if (Path("/etc") / name).exists():
                words += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
        for path in dict.fromkeys([sys.base_prefix, sys.prefix, *_site_packages()]):
            if not path.startswith("/usr/"):
                words += ["--ro-bind", path, path]
        words += ["--ro-bind", str(self.copy), str(self.copy), "--bind", str(self.out), str(self.out),
                  *_sized(self.bwrap, HOME_SIZE), "--tmpfs", str(self.home)]
        for path in self.inputs:
            words += ["--ro-bind", path, path]
        if confine.filter_program() is not None:
            self.filter_fds.append(confine.program_fd())  # (a descriptor per child: bubblewrap reads it to its end)
            words += ["--seccomp", str(self.filter_fds[-1])]
        words += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", str(self.copy), "--"]
        return words + command
