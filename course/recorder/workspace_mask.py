"""Chapter 08's and 09's fixed scenarios masked at the tool (course.recorder.mask): what the tool's answers are
made of is the workspace, so the workspace is masked while the tool works in it.

The tool a masked scenario's test makes (`create_read_tool(root)`, `create_edit_tool(root)`) is the submission's,
made on the same root, with each call wrapped: while it runs, every name below the root is renamed to its masked
form, every regular file's bytes are masked (as UTF-8, invalid bytes and NULs kept, so line counts, byte sizes,
BOMs, CRLFs and binary-ness stay), every link's target is masked where it names something below the root, and the
call's path (and an edit's oldText and newText) is masked the same way; afterwards the workspace is unmasked again
(an edit the tool made included), and its answer's texts reach the test unmasked. What lies outside the root (the
secret beside it, /etc/passwd) is never masked: it is no answer, and a path that climbs out of the root names it
as published. The root's own path is the harness's place, not the scenario's: it is kept, as {tmp} is.

The record a test builds from such answers (not a loop run, which records itself masked) is masked again when it
is written (`recorded`): the answers' texts it holds are then the tool's own answers on the masked workspace, and
everything else in it (the test's words, the tool's own words) is masked consistently for every submission.
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from course.runtime.tools import Tool, ToolExecutionContext

_CHUNK_TAIL = b"\0"
_OS = {name: getattr(os, name) for name in ("open", "close", "read", "pwrite", "rename", "symlink", "unlink",
                                             "readlink", "lstat")}
"""The os functions as they were at import: a test's spies and patches (a failing os.rename, an os.open that
notes what it opens) watch the tool, never the masking around it."""



def masked_bytes(f: Callable[[str], str], data: bytes) -> bytes:
    """Bytes with their UTF-8 characters substituted (invalid bytes kept: a masked character is a whole
    character of the same length, so what was invalid stays invalid and what was valid stays valid)."""
    return f(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")


PROC_ROOT = "/proc/self/root"
"""A prefix naming the file system's root again: a path under it names what the path after it names."""


@dataclass(frozen=True)
class Place:
    """Where a workspace stands: its root (as given, and its real path), the folders holding it, and the names
    beside it that its chapter's tests make (the catalogue's `masked_beside`, as they stand on the disk now)."""

    roots: tuple[str, ...]
    beside: frozenset[str] = frozenset()

    @property
    def parents(self) -> tuple[str, ...]:
        return tuple(os.path.dirname(root) for root in self.roots)

    def masks(self, where: list[str]) -> bool:
        """Whether a name in the folder `where` (its names from a folder holding the root) is masked: below the
        root, or beside it and named in `beside` (or below such a name)."""
        if not where:
            return False
        return where[0] in {os.path.basename(root) for root in self.roots} or where[0] in self.beside


def masked_path(f: Callable[[str], str], path: str, place: Place, where: tuple[str, ...] | None = None) -> str:
    """A path with the names that lie below the root (and the `beside` names next to it) masked: relative to the
    folder `where` (its names from the root's folder; None: the root itself), or absolute under a root or,
    with names beside, under a root's folder (either also through /proc/self/root). `..` and `.` are kept; a name reached beyond the root's folder is
    outside (kept, as any other absolute path)."""
    if not isinstance(path, str):
        return path
    names = os.path.basename(place.roots[0])
    prefix, rest, at = "", path, [names] if where is None else list(where)
    if path.startswith("/"):
        starts = [(r, [os.path.basename(r)]) for r in place.roots] + [(p, []) for p in place.parents] * bool(place.beside)
        starts += [(PROC_ROOT + r, at) for r, at in starts]  # (the same place, through the process's root)
        found = next(((r, w) for r, w in starts if path == r or path.startswith(r + "/")), None)
        if found is None:
            return path
        prefix, rest, at = found[0], path[len(found[0]):], list(found[1])
    parts, beyond = [], False
    for part in rest.split("/"):
        if part == "..":
            beyond = beyond or not at
            at = at[:-1]
        elif part not in ("", "."):
            name = part
            if not beyond and (place.masks(at) or (not at and part in place.beside)):
                part = f(part)
            at.append(name)
        parts.append(part)
    return prefix + "/".join(parts)


def _mask_file(f: Callable[[str], str], path: str) -> None:
    """A regular file's bytes, masked where they stand (its trailing NULs, a sparse hole, left as they are)."""
    with contextlib.suppress(OSError):
        fd = _OS["open"](path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            chunks = []
            while chunk := _OS["read"](fd, 1 << 20):
                chunks.append(chunk)
            head = b"".join(chunks).rstrip(_CHUNK_TAIL)
            masked = masked_bytes(f, head)
            if masked != head:
                _OS["pwrite"](fd, masked, 0)
        finally:
            _OS["close"](fd)


def _mask_entry(f: Callable[[str], str], path: str, place: Place, where: tuple[str, ...]) -> None:
    """One entry (not followed) of the folder `where`: a link's target or a file's bytes, then its name."""
    with contextlib.suppress(OSError):
        kind = stat.S_IFMT(_OS["lstat"](path).st_mode)
        if kind == stat.S_IFLNK:
            target = masked_path(f, _OS["readlink"](path), place, where)
            _OS["unlink"](path)
            _OS["symlink"](target, path)
        elif kind == stat.S_IFREG:
            _mask_file(f, path)
        _OS["rename"](path, os.path.join(os.path.dirname(path), f(os.path.basename(path))))


def mask_tree(f: Callable[[str], str], top: str, place: Place) -> None:
    """Every name, file and link target below `top` (a root, or a name beside it) through `f` (masked, or
    unmasked with the inverse); `place` says how a link's target is read."""
    parent = os.path.dirname(top)
    for folder, directories, files in os.walk(top, topdown=False):
        where = tuple(os.path.relpath(folder, parent).split("/"))
        for name in files + directories:
            _mask_entry(f, os.path.join(folder, name), place, where)


class MaskedWorkspace:
    """One root's masking while the tool works in it (calls of one batch may overlap: masked once)."""

    def __init__(self, mask: Any, root: str, beside: tuple[str, ...] = ()) -> None:
        self.mask, self.root, self.users = mask, os.path.abspath(root), 0  # (a relative root: the cwd's now)
        self.roots, self.beside = (self.root, os.path.realpath(self.root)), beside

    def place(self, forward: bool) -> Place:
        """The place as it stands on the disk: published (before masking), or masked (before unmasking)."""
        return Place(self.roots, frozenset(self.beside if forward else map(self.mask.text, self.beside)))

    def _mask_all(self, forward: bool) -> None:
        f, place = (self.mask.text if forward else self.mask.untext), self.place(forward)
        mask_tree(f, self.root, place)
        for parent in {os.path.realpath(parent) for parent in place.parents}:  # (once, however the root is spelled)
            for name in sorted(place.beside):
                path = os.path.join(parent, name)
                if os.path.isdir(path) and not os.path.islink(path):
                    mask_tree(f, path, place)
                _mask_entry(f, path, place, ())

    @contextlib.contextmanager
    def masked(self) -> Iterator[None]:
        if self.users == 0:
            self._mask_all(forward=True)
        self.users += 1
        try:
            yield
        finally:
            self.users -= 1
            if self.users == 0:
                self._mask_all(forward=False)

    def arguments(self, arguments: Any, texts: tuple[str, ...]) -> Any:
        """A call's arguments as the tool gets them: its path, and the `texts` (an edit's), masked."""
        if not isinstance(arguments, dict):
            return arguments
        masked = copy.deepcopy(arguments)
        if isinstance(masked.get("path"), str):
            masked["path"] = masked_path(self.mask.text, masked["path"], self.place(True))
        for key in texts:
            if isinstance(masked.get(key), str):
                masked[key] = self.mask.text(masked[key])
        return masked

    def tool(self, tool: Tool, texts: tuple[str, ...] = ()) -> Tool:
        """The submission's tool, each call made in the masked workspace; its answer's texts reach the caller
        unmasked (its details as they are)."""
        async def execute(arguments: dict, context: Any) -> Any:
            seen = ToolExecutionContext(signal=getattr(context, "signal", None),
                                        report_progress=self.mask.progress(
                                            getattr(context, "report_progress", None) or (lambda _: None),
                                            forward=False))
            with self.masked():
                output = await tool.execute(self.arguments(arguments, texts), seen)
            if isinstance(output, dict) and "content" in output:
                return {**output, "content": self.mask.content(output["content"], forward=False)}
            return output

        masked = copy.copy(tool)  # not dataclasses.replace: that would check the tool's schema again
        masked.execute = execute
        return masked

    def published_path(self, path: str) -> str:
        """A path the kernel names while the workspace is masked, as the test knows it."""
        return masked_path(self.mask.untext, path, self.place(False)) if self.users else path


class MaskedToolModule:
    """A chapter's module as a masked scenario's test sees it: the tools its makers (the catalogue entry's
    `masked_tools`: name -> the argument texts to mask) make work on the masked workspace, and the names its tests
    make beside the workspace (`masked_beside`) masked with it."""

    def __init__(self, module: Any, mask: Any, makers: dict[str, tuple[str, ...]], beside: tuple[str, ...] = ()) -> None:
        self._module, self._mask, self._makers, self._beside = module, mask, makers, beside
        mask.records_views = True  # (what its tests record is their view of the answers: masked when written)

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._module, name)
        if name not in self._makers or not callable(found):
            return found

        def make(root: Any, *args: Any, **kwargs: Any) -> Any:
            if not isinstance(root, (str, os.PathLike)) or not os.path.isdir(root):
                return found(root, *args, **kwargs)  # (refused as the tool refuses it, unmasked: no workspace)
            workspace = self._mask.workspaces.setdefault(os.path.abspath(root), MaskedWorkspace(self._mask, root, self._beside))
            with workspace.masked():  # (what the tool reads of the workspace when it is made is masked too)
                tool = found(root, *args, **kwargs)
            return workspace.tool(tool, self._makers[name]) if isinstance(tool, Tool) else tool
        return make


KEPT = frozenset({"kind", "type", "role"})
"""Keys whose values say what a record or block is (never masked again: its renderer reads them)."""


FILE = re.compile(r"([0-7]{4}) ((?:[0-9a-f]{2})*)")
"""A file as chapter 09's records show it (its mode, then its bytes in hex): its bytes are what is masked."""


def recorded(mask: Any, value: Any, key: str | None = None) -> Any:
    """A record a test built from its view of masked answers, masked again (strings; keys and KEPT kept)."""
    if isinstance(value, str):
        file = FILE.fullmatch(value)
        if file:
            return f"{file[1]} {masked_bytes(mask.text, bytes.fromhex(file[2])).hex()}"
        return value if key in KEPT else mask.text(value)
    if isinstance(value, dict):
        return {k: recorded(mask, v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [recorded(mask, v) for v in value]
    return value
