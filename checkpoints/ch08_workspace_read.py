"""Chapter 08: a `read` tool bound to a workspace root that a model cannot talk out of it.

The model's arguments are untrusted input. The tool refuses, with an error result the model can act
on, any path that is not plainly a file inside the root: absolute paths elsewhere, `..` in the path,
symbolic links (at any depth) that lead outside, directories, missing files, FIFOs, devices and
sockets, binary or non-UTF-8 files, over-long paths and NUL bytes.

How nothing outside the root gets opened: the path is never handed to the OS as a whole. Each call
opens the root and walks the path one component at a time, each step an `openat` relative to
the directory fd it already holds, with O_NOFOLLOW, so the kernel itself refuses to follow a
symbolic link. A link it meets is read with `readlinkat` and its target walked the same way, inside
the root: an absolute target must lie under the root, and a `..` in a target may climb no higher
than the root. Because every open is O_NOFOLLOW relative to a held fd, a link swapped in after the
tool looked at a component is still met as a link, not followed: there is no check-then-open gap.
The file itself is opened O_NONBLOCK (a FIFO swapped in cannot hang the open) and its type is
checked again on the open fd before a byte is read.

Residual risks, stated plainly: a directory that someone renames out of the workspace while the walk
is inside it is not noticed (Linux's openat2 with RESOLVE_BENEATH would catch that; it needs write
access outside the root too); a hard link inside the root to a file outside is indistinguishable
from an ordinary file; a device node inside the root is refused before it is opened, but one swapped
in at that very moment is opened (non-blocking) and refused afterwards. POSIX only (`dir_fd`).

Output: lines `offset`..`offset + limit - 1` (1-based), at most `max_lines` lines and `max_bytes`
bytes, ending in a notice that names the next offset when there is more. The file is read in chunks
and only as far as the window needs; between chunks the tool checks the abort signal and yields to
the event loop, and every 16 chunks (1 MiB) it reports progress, so a far `offset` in a large file
can be watched and stopped.
"""

from __future__ import annotations

import asyncio
import codecs
import errno
import json
import os
import stat
from collections import deque
from dataclasses import dataclass, field

from course.runtime.messages import text
from course.runtime.tools import Tool, ToolExecutionContext, ToolOutput

DEFAULT_MAX_LINES = 2000
DEFAULT_MAX_BYTES = 50 * 1024
MAX_PATH_BYTES = 4096  # PATH_MAX on Linux
MAX_NAME_BYTES = 255  # NAME_MAX: one path component
MAX_SYMLINKS = 40  # as the kernel allows while resolving one path
CHUNK_BYTES = 64 * 1024  # how much is read between abort checks

_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class Refusal(Exception):
    """Why a read was refused: `message` for the model, `code` for programs (details.error)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def create_read_tool(root: str | os.PathLike, *, max_lines: int = DEFAULT_MAX_LINES,
                     max_bytes: int = DEFAULT_MAX_BYTES) -> Tool:
    """A `read` tool serving UTF-8 text files under `root`, at most `max_lines` / `max_bytes` per call."""
    if not os.path.isdir(root):
        raise ValueError(f"Workspace root {os.fspath(root)!r} is not a directory")
    if max_lines < 1 or max_bytes < 1:
        raise ValueError("max_lines and max_bytes must be positive")
    workspace = Workspace(os.path.abspath(root), max_lines, max_bytes)

    async def execute(arguments: dict, context: ToolExecutionContext) -> ToolOutput:
        try:
            return await workspace.read(arguments["path"], int(arguments.get("offset", 1)),
                                        arguments.get("limit"), context)
        except Refusal as refusal:
            return {"content": [text(str(refusal))], "details": {"error": refusal.code}, "isError": True}
        except OSError as error:  # EACCES, EIO, a root that vanished: still an answer, never a crash
            return {"content": [text(f"Cannot read {quote(arguments['path'])}: {error.strerror or error}")],
                    "details": {"error": "os_error"}, "isError": True}

    return Tool(
        name="read",
        description=(
            "Read a UTF-8 text file in the workspace. `path` is relative to the workspace root. "
            f"At most {max_lines} lines or {max_bytes} bytes come back per call; `offset` (1-based line) "
            "and `limit` (lines) select a window, and a notice at the end says how to read on."
        ),
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File to read, relative to the workspace root"},
                "offset": {"type": "integer", "minimum": 1, "description": "First line to read (1-based)"},
                "limit": {"type": "integer", "minimum": 1, "description": "How many lines to read at most"},
            },
            "required": ["path"],
            "additionalProperties": False,
        },
        execute=execute,
    )


@dataclass
class Workspace:
    """The root a read tool is bound to, and its output caps."""

    root: str
    """The root as given, made absolute (an absolute path under it is accepted)."""
    max_lines: int
    """Most lines one call returns."""
    max_bytes: int
    """Most bytes of file text one call returns (the notice comes on top)."""
    real_root: str = field(init=False)
    """The root with its own symbolic links resolved (absolute link targets may name either form)."""

    def __post_init__(self) -> None:
        self.real_root = os.path.realpath(self.root)

    async def read(self, path: str, offset: int, limit: int | None, context: ToolExecutionContext) -> ToolOutput:
        parts = self.relative_parts(path)
        shown = display("/".join(parts))
        fd = self.open_file(parts, shown)
        try:
            window = await read_window(fd, shown, offset, limit, self.max_lines, self.max_bytes, context)
        finally:
            os.close(fd)
        return window.output(shown, self.max_lines, self.max_bytes)

    def relative_parts(self, path: str) -> list[str]:
        """The path's components below the root; refuses what is not plainly a path inside it."""
        if path == "":
            raise Refusal("invalid_path", "Path is empty: give a file path relative to the workspace root.")
        if "\0" in path:
            raise Refusal("invalid_path", f"Path {quote(path)} contains a NUL byte.")
        try:
            size = len(path.encode("utf-8"))
        except UnicodeEncodeError:
            raise Refusal("invalid_path", f"Path {quote(path)} is not valid Unicode text.") from None
        if size > MAX_PATH_BYTES:
            raise Refusal("too_long", f"Path is {size} bytes long; the limit is {MAX_PATH_BYTES}.")
        parts = components(path)
        if any(len(part.encode("utf-8")) > MAX_NAME_BYTES for part in parts):
            raise Refusal("too_long", f"Path {quote(path)} has a component longer than {MAX_NAME_BYTES} bytes.")
        if ".." in parts:
            raise Refusal("parent_traversal", f'Path {quote(path)} contains "..": paths may not climb out of '
                                              "the workspace. Give a path relative to the workspace root.")
        if path.startswith("/"):
            below = under_root(parts, self.root, self.real_root)
            if below is None:
                raise Refusal("outside_workspace", "Absolute paths outside the workspace are refused: "
                                                   "give a path relative to the workspace root.")
            parts = below
        return parts

    def open_file(self, parts: list[str], shown: str) -> int:
        """An fd for the regular file `parts` names under the root, opened without leaving the root."""
        root_fd = os.open(self.root, _DIRECTORY_FLAGS & ~os.O_NOFOLLOW)  # the root itself may be a link
        stack: list[tuple[str, int]] = [("", root_fd)]  # the directories walked so far, with their fds
        pending = deque(parts)
        links = 0
        try:
            while pending:
                name = pending.popleft()
                if name == "..":  # only from a link's target: climb, but never above the root
                    if len(stack) == 1:
                        raise Refusal("symlink_outside", f"{shown} leads outside the workspace through a "
                                                         "symbolic link.")
                    os.close(stack.pop()[1])
                    continue
                here = stack[-1][1]
                inside = display("/".join([n for n, _ in stack[1:]] + [name]))
                try:
                    info = os.stat(name, dir_fd=here, follow_symlinks=False)
                except FileNotFoundError:
                    raise Refusal("not_found", f"No such file in the workspace: {shown}") from None
                except NotADirectoryError:
                    raise Refusal("not_a_directory", f"{shown}: a component of it is not a directory.") from None
                if stat.S_ISLNK(info.st_mode):
                    links = count_link(links, shown)
                    target = os.readlink(name, dir_fd=here)
                    target_parts = components(target)
                    if target.startswith("/"):
                        below = under_root(target_parts, self.root, self.real_root)
                        if below is None:
                            raise link_outside(shown, inside)
                        while len(stack) > 1:
                            os.close(stack.pop()[1])
                        target_parts = below
                    elif escapes(target_parts, len(stack) - 1):
                        raise link_outside(shown, inside)
                    pending.extendleft(reversed(target_parts))
                    continue
                if pending:  # an intermediate component: it must be a directory
                    if not stat.S_ISDIR(info.st_mode):
                        raise Refusal("not_a_directory", f"{shown}: {inside} is not a directory.")
                    fd = self.open_step(name, here, _DIRECTORY_FLAGS)
                    if fd is None:  # swapped for a link since the stat: look at it again
                        pending.appendleft(name)
                        links = count_link(links, shown)
                        continue
                    stack.append((name, fd))
                    continue
                check_file_type(info.st_mode, shown)  # before opening: a FIFO or device is never opened
                fd = self.open_step(name, here, _FILE_FLAGS)
                if fd is None:
                    pending.appendleft(name)
                    links = count_link(links, shown)
                    continue
                try:
                    check_file_type(os.fstat(fd).st_mode, shown)  # what was opened, in case it was swapped
                except Refusal:
                    os.close(fd)
                    raise
                return fd
            raise Refusal("directory", f"{shown or '.'} is a directory, not a file: read takes a file path.")
        finally:
            for _, held in stack:
                os.close(held)

    @staticmethod
    def open_step(name: str, dir_fd: int, flags: int) -> int | None:
        """Open one component with O_NOFOLLOW; None if it has become a symbolic link."""
        try:
            return os.open(name, flags, dir_fd=dir_fd)
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.EMLINK, errno.ENOTDIR):
                return None
            raise


def count_link(links: int, shown: str) -> int:
    """One more symbolic link met (or a component that turned into one); refuses past MAX_SYMLINKS."""
    if links >= MAX_SYMLINKS:
        raise Refusal("symlink_loop", f"{shown}: more than {MAX_SYMLINKS} symbolic links (a loop?).")
    return links + 1


def link_outside(shown: str, link: str) -> Refusal:
    if link == shown:
        return Refusal("symlink_outside", f"{shown} is a symbolic link that points outside the workspace.")
    return Refusal("symlink_outside", f"{shown} leads outside the workspace: {link} is a symbolic link that "
                                      "points out of it.")


def components(path: str) -> list[str]:
    """The names in a path, without empty and `.` components (`./a//b` is `a/b`)."""
    return [part for part in path.split("/") if part not in ("", ".")]


def under_root(parts: list[str], *roots: str) -> list[str] | None:
    """The components below whichever root `parts` (of an absolute path) starts with, else None."""
    for root in roots:
        prefix = components(root)
        if parts[:len(prefix)] == prefix:
            return parts[len(prefix):]
    return None


def escapes(target_parts: list[str], depth: int) -> bool:
    """Whether a relative link target, followed from `depth` directories below the root, climbs above it."""
    for part in target_parts:
        depth += -1 if part == ".." else 1
        if depth < 0:
            return True
    return False


_KINDS = [(stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")]


def check_file_type(mode: int, shown: str) -> None:
    if stat.S_ISREG(mode):
        return
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    code = "directory" if stat.S_ISDIR(mode) else "not_regular"
    raise Refusal(code, f"{shown} is {kind}, not a file: read takes a file path." if code == "directory"
                  else f"{shown} is {kind}, not a regular file: only regular text files are read.")


def quote(path: str) -> str:
    """A path as the model gave it, quoted, with control characters escaped and a long one cut."""
    quoted = json.dumps(path, ensure_ascii=False)
    return quoted if len(quoted) <= 200 else quoted[:200] + '..."'


def display(path: str) -> str:
    """A path for a message, unquoted when it is plain text."""
    return path if path.isprintable() else quote(path)


@dataclass
class Window:
    """The lines one call returns, and what reading them learned about the rest of the file."""

    start: int
    """The first line asked for (1-based)."""
    lines: list[str] = field(default_factory=list)
    """The lines shown, without their newlines."""
    ended_by: str | None = None
    """Why lines after the last one shown were left out: "limit", "max_lines", "max_bytes", "long_line"; None if none follow."""
    total_lines: int | None = None
    """How many lines the file has, when the read reached its end."""

    def output(self, shown: str, max_lines: int, max_bytes: int) -> ToolOutput:
        if not self.lines and self.total_lines is not None and self.start > max(self.total_lines, 1):
            raise Refusal("offset_beyond_end", f"Offset {self.start} is past the end of {shown}, which has "
                                               f"{self.total_lines} lines.")
        end = self.start + len(self.lines) - 1
        body = "\n".join(self.lines)
        details = {"path": shown, "startLine": self.start, "endLine": end, "truncated": self.ended_by is not None}
        if self.ended_by is None:
            return {"content": [text(body)], "details": details}
        details["nextOffset"] = end + 1
        if self.ended_by == "long_line":
            notice = (f"[Line {end} is longer than the {max_bytes}-byte limit: showing its first "
                      f"{len(body.encode('utf-8'))} bytes only. Use offset={end + 1} to read on after it.]")
        else:
            why = {"limit": "", "max_lines": f" (at most {max_lines} line{'s' * (max_lines != 1)} per read)",
                   "max_bytes": f" (at most {max_bytes} bytes per read)"}[self.ended_by]
            notice = f"[Showing lines {self.start}-{end}{why}; the file goes on. Use offset={end + 1} to read on.]"
        return {"content": [text(f"{body}\n\n{notice}")], "details": details}


async def read_window(fd: int, shown: str, start: int, limit: int | None, max_lines: int, max_bytes: int,
                      context: ToolExecutionContext) -> Window:
    """Lines start..start+limit-1 of the open file, read chunk by chunk; stops once the window is full."""
    window = Window(start)
    capped_by = "limit" if limit is not None and limit < max_lines else "max_lines"
    limit = max_lines if capped_by == "max_lines" else int(limit)
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    line_no = 0  # lines finished so far (skipped or kept); the line being read is line_no + 1
    current: list[str] = []  # pieces of the line being read, once it is inside the window
    current_bytes = 0
    kept_bytes = 0  # bytes of the kept lines and the newlines between them
    position = 0  # bytes read so far
    chunks = 0
    while True:
        if context.signal is not None and context.signal.aborted:
            raise Refusal("aborted", f"Reading {shown} was aborted.")
        chunk = os.read(fd, CHUNK_BYTES)
        if b"\0" in chunk:
            raise Refusal("binary", f"{shown} looks like a binary file (it contains NUL bytes): only UTF-8 "
                                    "text is read.")
        try:
            decoded = decoder.decode(chunk, final=not chunk)
        except UnicodeDecodeError as error:
            at = position + error.start
            raise Refusal("not_utf8", f"{shown} is not UTF-8 text (the bytes at offset {at} do not decode)."
                          ) from None
        position += len(chunk)
        pieces = decoded.split("\n")
        for index, piece in enumerate(pieces):
            complete = index < len(pieces) - 1  # a newline ends this piece
            if line_no + 1 < start:  # before the window: only count
                line_no += complete
                continue
            if len(window.lines) == limit:
                if complete or piece:  # a line exists after the window
                    window.ended_by = capped_by
                    return window
                continue
            if not (complete or piece):
                continue  # nothing of the next line yet
            current.append(piece)
            current_bytes += len(piece.encode("utf-8"))
            separator = 1 if window.lines else 0
            if kept_bytes + separator + current_bytes > max_bytes:
                if window.lines:
                    window.ended_by = "max_bytes"
                else:  # a single line longer than the cap: show its head, cut on a character boundary
                    window.lines.append(cut_utf8("".join(current), max_bytes))
                    window.ended_by = "long_line"
                return window
            if complete:
                window.lines.append("".join(current))
                kept_bytes += separator + current_bytes
                current, current_bytes = [], 0
                line_no += 1
        if not chunk:
            if current:  # the last line had no newline
                window.lines.append("".join(current))
                line_no += 1
            window.total_lines = line_no
            return window
        chunks += 1
        if chunks % 16 == 0:  # every MiB: a long skip to a far offset shows it is alive
            context.report_progress([text(f"read {position} bytes of {shown}")])
        await asyncio.sleep(0)  # let an abort, or another tool, in between chunks


def cut_utf8(line: str, max_bytes: int) -> str:
    return line.encode("utf-8")[:max_bytes].decode("utf-8", "ignore")
