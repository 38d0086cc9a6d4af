"""Chapter 08: a `read` tool bound to a workspace root that a model cannot talk out of it.

The model's arguments are untrusted input. The tool refuses, with an error result the model can act
on, any path that is not plainly a file inside the root: absolute paths elsewhere, `..` in the path,
symbolic links (at any depth) that lead outside, directories, missing files, FIFOs, devices and
sockets, binary or non-UTF-8 files, over-long paths and NUL bytes. Every refusal is an error result
whose `details` are `{"error": CODE}` and whose text is the MESSAGES entry for it, filled in.

A name is its bytes, as the file system holds it: the path is not Unicode-normalised (an NFC and an
NFD spelling of `café.txt` are two names), not matched case-insensitively (`readme.md` is not
`README.md`), and a name starting with a dot (`.env`) is a file like any other. No file is refused
for its size: a read goes only as far as its window needs. The root is made absolute when the tool
is made, so a later change of the process's current directory changes nothing.

How nothing outside the root gets opened: the path is never handed to the OS as a whole. Each call
opens the root and walks the path one component at a time, each step an `openat` relative to
the directory fd it already holds, with O_NOFOLLOW, so the kernel itself refuses to follow a
symbolic link: directories on the way as well as the file. A link it meets is read with `readlinkat`
and its target walked the same way, inside the root: an absolute target must lie under the root, and
a `..` in a target may climb no higher than the root. Because every open is O_NOFOLLOW relative to a
held fd, a link swapped in after the tool looked at a component (a directory on the way, or the file)
is still met as a link, not followed: there is no check-then-open gap. The file itself is opened
O_NONBLOCK (a FIFO swapped in cannot hang the open) and its type is checked again with `fstat` on the
open fd before a byte is read (a check by name would see whatever is at that name by then, not what
was opened).

Residual risks, stated plainly: a directory that someone renames out of the workspace while the walk
is inside it is not noticed (Linux's openat2 with RESOLVE_BENEATH would catch that; it needs write
access outside the root too); a hard link inside the root to a file outside is indistinguishable
from an ordinary file; a device node inside the root is refused before it is opened, but one swapped
in at that very moment is opened (non-blocking) and refused afterwards. POSIX only (`dir_fd`).

An OS error the walk or the read meets (EACCES, EIO, the root itself gone) is still an answer: an
error result with `details` `{"error": "os_error"}`, its text naming the path as the model gave it and
the error, never the workspace's place on the disk.

Output: lines `offset`..`offset + limit - 1` (1-based), at most `max_lines` lines and `max_bytes`
bytes, ending in a notice (NOTICES) that names the next offset when there is more.

Reading: the file is read from its start in chunks, one read call of at most 1 MiB each (CHUNK_BYTES:
64 KiB here; the size is the tool's choice), and only as far as the window needs: the read stops with
the chunk in which it learns that its window is complete (its last line and whether anything follows;
for a line longer than `max_bytes`, its first `max_bytes` bytes and one more). Before each chunk, the
first included, the tool checks the abort signal: a read whose signal is aborted reads no further chunk
and ends with the `aborted` refusal, even when its file is empty or its window would fit in the chunk
it did not read. After each chunk it yields to the event loop (`await asyncio.sleep(0)`), so an abort,
a cancellation or another tool gets in between any two chunks; and each time another MiB has been
read, it reports progress (PROGRESS), so a far `offset` in a large file can be watched and stopped. A
read whose task is cancelled ends with CancelledError (never swallowed) and closes its file, as every
read does however it ends.

Binary and non-UTF-8 files: every byte the read takes from the file is judged. A NUL byte in it makes
the file `binary`; a sequence that does not decode as UTF-8 (a character cut by the end of the file
included) makes it `not_utf8`. So the bytes from the file's start to the end of the window are always
judged; bytes after the window are judged only as far as the chunk the read stopped with reaches, which
depends on the chunk size: a bad sequence less than 1 MiB after the window may or may not refuse the
read, one further on never does (a later read that reaches it is refused).
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
CHUNK_BYTES = 64 * 1024  # one read call; the signal is checked before each, the event loop gets a turn after each
MIB = 1024 * 1024  # progress is reported each time another MiB has been read

# The texts the tests compare (the fixed scenarios' snapshots hold them), kept in the starter that
# `course start 08` writes. MESSAGES: every refusal's text, by key; its code (details.error) is the key up to
# any "/". Fields: {path} the path below the root as `display` shows it ("." for the root itself), {quoted}
# the model's path as `quote` shows it, {link} and {component} a path below the root as far as a link or a
# component that is not a directory, {kind} a FILE_KINDS word, {lines} a count of lines with its noun
# ("1 line", "2 lines"), {reason} the OS's words for an error (its strerror), {offset} a byte offset in the
# file (not_utf8) or the call's offset (offset_beyond_end), {size} and {limit} numbers.
MESSAGES: dict[str, str] = {
    "invalid_path/empty": "Path is empty: give a file path relative to the workspace root.",
    "invalid_path/nul": "Path {quoted} contains a NUL byte.",
    "invalid_path/unicode": "Path {quoted} is not valid Unicode text.",
    "too_long/path": "Path is {size} bytes long; the limit is {limit}.",
    "too_long/name": "Path {quoted} has a component longer than {limit} bytes.",
    "parent_traversal": 'Path {quoted} contains "..": paths may not climb out of the workspace. '
                        "Give a path relative to the workspace root.",
    "outside_workspace": "Absolute paths outside the workspace are refused: give a path relative to the workspace root.",
    "symlink_outside/link": "{path} is a symbolic link that points outside the workspace.",
    "symlink_outside/through": "{path} leads outside the workspace: {link} is a symbolic link that points out of it.",
    "symlink_outside/climbs": "{path} leads outside the workspace through a symbolic link.",
    "symlink_loop": "{path}: more than {limit} symbolic links (a loop?).",
    "not_found": "No such file in the workspace: {path}",
    "not_a_directory": "{path}: a component of it is not a directory.",
    "not_a_directory/named": "{path}: {component} is not a directory.",
    "directory": "{path} is a directory, not a file: read takes a file path.",
    "not_regular": "{path} is {kind}, not a regular file: only regular text files are read.",
    "binary": "{path} looks like a binary file (it contains NUL bytes): only UTF-8 text is read.",
    "not_utf8": "{path} is not UTF-8 text (the bytes at offset {offset} do not decode).",
    "offset_beyond_end": "Offset {offset} is past the end of {path}, which has {lines}.",
    "aborted": "Reading {path} was aborted.",
    "os_error": "Cannot read {quoted}: {reason}",
}

# The {kind} of a not_regular refusal (a directory is refused as `directory` instead).
FILE_KINDS: dict[str, str] = {"fifo": "a FIFO", "character_device": "a character device", "block_device": "a block device",
                              "socket": "a socket", "other": "not a regular file"}

# The notice after the text of a read that did not reach the end of the file (after a blank line), by why the
# window ended: the call's `limit`, `max_lines` ({lines}: "1 line", "2 lines"), `max_bytes` (cap/...: what
# goes into {cap}), or a first line longer than `max_bytes` ({shown}: how many bytes of it are shown).
NOTICES: dict[str, str] = {
    "goes_on": "[Showing lines {start}-{end}{cap}; the file goes on. Use offset={next} to read on.]",
    "cap/limit": "",
    "cap/max_lines": " (at most {lines} per read)",
    "cap/max_bytes": " (at most {max_bytes} bytes per read)",
    "long_line": "[Line {end} is longer than the {max_bytes}-byte limit: showing its first {shown} bytes only. "
                 "Use offset={next} to read on after it.]",
}

# The progress a read reports each time another MiB has been read ({mib}: how many MiB so far).
PROGRESS = "read {mib} MiB of {path}"

_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def count(number: int, noun: str) -> str:
    """`2 lines`, `1 line`."""
    return f"{number} {noun}{'s' * (number != 1)}"


class Refusal(Exception):
    """Why a read was refused: `str()` is MESSAGES[key] filled in, for the model; `code` (the key up to
    any "/") is for programs (details.error)."""

    def __init__(self, key: str, **fields) -> None:
        super().__init__(MESSAGES[key].format(**fields))
        self.code = key.partition("/")[0]


def refused(refusal: Refusal) -> ToolOutput:
    """The tool's answer to a refused read: an error result for the model, its code in details.error."""
    return {"content": [text(str(refusal))], "details": {"error": refusal.code}, "isError": True}


def create_read_tool(root: str | os.PathLike, *, max_lines: int = DEFAULT_MAX_LINES,
                     max_bytes: int = DEFAULT_MAX_BYTES) -> Tool:
    """A `read` tool serving UTF-8 text files under `root`, at most `max_lines` / `max_bytes` per call.

    Raises ValueError at once (the operator's mistake, not the model's) when `root` is not a directory (the
    message says the root "is not a directory") or a cap is below 1."""
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
            return refused(refusal)
        except OSError as error:  # EACCES, EIO, a root that vanished: still an answer, never a crash
            return refused(Refusal("os_error", quoted=quote(arguments["path"]), reason=error.strerror or error))

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
            raise Refusal("invalid_path/empty")
        if "\0" in path:
            raise Refusal("invalid_path/nul", quoted=quote(path))
        try:
            size = len(path.encode("utf-8"))
        except UnicodeEncodeError:
            raise Refusal("invalid_path/unicode", quoted=quote(path)) from None
        if size > MAX_PATH_BYTES:
            raise Refusal("too_long/path", size=size, limit=MAX_PATH_BYTES)
        parts = components(path)
        if any(len(part.encode("utf-8")) > MAX_NAME_BYTES for part in parts):
            raise Refusal("too_long/name", quoted=quote(path), limit=MAX_NAME_BYTES)
        if ".." in parts:
            raise Refusal("parent_traversal", quoted=quote(path))
        if path.startswith("/"):
            below = under_root(parts, self.root, self.real_root)
            if below is None:
                raise Refusal("outside_workspace")
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
                        raise Refusal("symlink_outside/climbs", path=shown)
                    os.close(stack.pop()[1])
                    continue
                here = stack[-1][1]
                inside = display("/".join([n for n, _ in stack[1:]] + [name]))
                try:
                    info = os.stat(name, dir_fd=here, follow_symlinks=False)
                except FileNotFoundError:
                    raise Refusal("not_found", path=shown) from None
                except NotADirectoryError:
                    raise Refusal("not_a_directory", path=shown) from None
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
                        raise Refusal("not_a_directory/named", path=shown, component=inside)
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
            raise Refusal("directory", path=shown or ".")
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
        raise Refusal("symlink_loop", path=shown, limit=MAX_SYMLINKS)
    return links + 1


def link_outside(shown: str, link: str) -> Refusal:
    if link == shown:
        return Refusal("symlink_outside/link", path=shown)
    return Refusal("symlink_outside/through", path=shown, link=link)


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


_KINDS = [(stat.S_ISFIFO, "fifo"), (stat.S_ISCHR, "character_device"), (stat.S_ISBLK, "block_device"),
          (stat.S_ISSOCK, "socket")]


def check_file_type(mode: int, shown: str) -> None:
    """Refuses a mode that is not a regular file's: `directory`, else `not_regular` with its FILE_KINDS word."""
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise Refusal("directory", path=shown)
    kind = next((name for test, name in _KINDS if test(mode)), "other")
    raise Refusal("not_regular", path=shown, kind=FILE_KINDS[kind])


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
            raise Refusal("offset_beyond_end", offset=self.start, path=shown, lines=count(self.total_lines, "line"))
        end = self.start + len(self.lines) - 1
        body = "\n".join(self.lines)
        details = {"path": shown, "startLine": self.start, "endLine": end, "truncated": self.ended_by is not None}
        if self.ended_by is None:
            return {"content": [text(body)], "details": details}
        details["nextOffset"] = end + 1
        if self.ended_by == "long_line":
            notice = NOTICES["long_line"].format(end=end, max_bytes=max_bytes, shown=len(body.encode("utf-8")),
                                                 next=end + 1)
        else:
            cap = NOTICES[f"cap/{self.ended_by}"].format(lines=count(max_lines, "line"), max_bytes=max_bytes)
            notice = NOTICES["goes_on"].format(start=self.start, end=end, cap=cap, next=end + 1)
        return {"content": [text(f"{body}\n\n{notice}")], "details": details}


async def read_window(fd: int, shown: str, start: int, limit: int | None, max_lines: int, max_bytes: int,
                      context: ToolExecutionContext) -> Window:
    """Lines start..start+limit-1 of the open file, read chunk by chunk; stops once the window is full."""
    window = Window(start)
    capped_by = "limit" if limit is not None and limit < max_lines else "max_lines"
    limit = max_lines if capped_by == "max_lines" else int(limit)
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    line_no = 0  # lines finished so far (skipped or kept); the line being read is line_no + 1
    in_line = False  # whether bytes of line line_no + 1 have been read (it may lack a newline at the end)
    current: list[str] = []  # pieces of the line being read, once it is inside the window
    current_bytes = 0
    kept_bytes = 0  # bytes of the kept lines and the newlines between them
    position = 0  # bytes read so far
    while True:
        if context.signal is not None and context.signal.aborted:  # before every chunk, the first included
            raise Refusal("aborted", path=shown)
        chunk = os.read(fd, CHUNK_BYTES)
        if b"\0" in chunk:
            raise Refusal("binary", path=shown)
        held = len(decoder.getstate()[0])  # bytes of a character cut by the last chunk's end
        try:
            decoded = decoder.decode(chunk, final=not chunk)
        except UnicodeDecodeError as error:
            raise Refusal("not_utf8", path=shown, offset=position - held + error.start) from None
        position += len(chunk)
        pieces = decoded.split("\n")
        if not chunk and in_line:
            pieces = ["", ""]  # the end of the file ends its last line, which had no newline
        for index, piece in enumerate(pieces):
            complete = index < len(pieces) - 1  # a newline (or the end of the file) ends this piece
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
            window.total_lines = line_no
            return window
        in_line = pieces[-1] != "" or (in_line and len(pieces) == 1)
        if position // MIB > (position - len(chunk)) // MIB:  # another MiB: a long skip shows it is alive
            context.report_progress([text(PROGRESS.format(mib=position // MIB, path=shown))])
        await asyncio.sleep(0)  # let an abort, a cancellation or another tool in between chunks


def cut_utf8(line: str, max_bytes: int) -> str:
    return line.encode("utf-8")[:max_bytes].decode("utf-8", "ignore")
