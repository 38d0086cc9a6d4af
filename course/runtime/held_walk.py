"""What a chapter 08 read tool may opt into beyond the chapter (加固): a walk no swap can fool.

The chapter's walk looks at each name with `lstat` and opens the file afterwards, each by its path from
the root; a file or directory swapped in between is not the chapter's business (its line 156). The
hardening track holds a tool to more, and `HeldWalk` gives it without changing what the walk decides:

- every step is taken relative to a descriptor of the directory before it, each directory opened with
  O_NOFOLLOW: a directory swapped for a link after its look is met as the link it now is (the open
  fails), never followed out of the workspace;
- the file is opened O_NOFOLLOW | O_NONBLOCK: a link swapped in is not followed, a FIFO swapped in does
  not block the open;
- what was opened is checked again on its descriptor (`fstat`), by the caller's own check: a FIFO swapped
  in for the open and put back afterwards is what was opened, and is refused.

A tool opts in by walking with it: `with HeldWalk(root) as at:` then `at.lstat(dirs, name)`,
`at.readlink(dirs, name)` and `at.open_file(dirs, name, check)` where the chapter writes
`os.lstat(join(root, *dirs, name))`, `os.readlink(...)` and `os.open(...)`. A swap it meets is an OSError
(ELOOP, ENOTDIR), which the tool answers as any other (os_error). POSIX only (`dir_fd`).
"""

from __future__ import annotations

import os
from collections.abc import Callable

DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class HeldWalk:
    """The descriptors of the root and of the directories a walk went into, each opened from the one before."""

    def __init__(self, root: str) -> None:
        self._held: dict[tuple[str, ...], int] = {(): os.open(root, DIRECTORY_FLAGS)}  # the root may be a link

    def __enter__(self) -> HeldWalk:
        return self

    def __exit__(self, *exc_info) -> None:
        for fd in self._held.values():
            os.close(fd)
        self._held.clear()

    def directory(self, dirs: list[str]) -> int:
        """The descriptor of the directory `dirs` names below the root, opened step by step without following
        a link (a directory that became one since it was looked at fails with ELOOP or ENOTDIR)."""
        key = tuple(dirs)
        if key not in self._held:
            parent = self.directory(dirs[:-1])
            self._held[key] = os.open(dirs[-1], DIRECTORY_FLAGS | os.O_NOFOLLOW, dir_fd=parent)
        return self._held[key]

    def lstat(self, dirs: list[str], name: str) -> os.stat_result:
        return os.stat(name, dir_fd=self.directory(dirs), follow_symlinks=False)

    def readlink(self, dirs: list[str], name: str) -> str:
        return os.readlink(name, dir_fd=self.directory(dirs))

    def open_file(self, dirs: list[str], name: str, check: Callable[[int], None]) -> int:
        """The file's descriptor, once `check(mode)` accepted what was opened (it raises to refuse it)."""
        fd = os.open(name, FILE_FLAGS, dir_fd=self.directory(dirs))
        try:
            check(os.fstat(fd).st_mode)
        except BaseException:
            os.close(fd)
            raise
        return fd
