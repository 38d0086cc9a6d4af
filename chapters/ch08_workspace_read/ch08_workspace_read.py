"""Chapter 08: the workspace read tool — the model reads real files, and only files inside the workspace.

Read it beside the chapter, top to bottom: the tool bound to its root (README 往返换上真实的 read:
create_read_tool), every refusal an error result (拒绝也是一条模型读得懂的结果: Refusal, refused), the
textual checks in the table's order (路径先按文字检查: relative_parts), the walk from the root that follows
links itself (逐段走过路径: open_file), file types before the open (只读普通的 UTF-8 文本文件:
check_file_type), the window and its notice (窗口: Window), and the chunks read only as far as the window
needs, the signal checked before each (分块读取 / 中止: read_window).

Lines marked `加固` opt into the runtime's hardening (course/runtime/held_walk.py): a walk whose every step
opens relative to the directory before it, never following a link, and a type checked again on what was
opened, so that a file or directory swapped between the check and the open fools nothing. They change
nothing while nothing is swapped.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import os
import stat
from collections import deque
from dataclasses import dataclass, field

from course.runtime.messages import text
from course.runtime.tools import Tool, ToolExecutionContext, ToolOutput
from course.runtime.held_walk import HeldWalk  # 加固: a walk no swap between check and open can fool

DEFAULT_MAX_LINES = 2000
DEFAULT_MAX_BYTES = 50 * 1024
MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255
MAX_SYMLINKS = 40
CHUNK_BYTES = 64 * 1024  # one read call (at most 1 MiB)
MIB = 1024 * 1024

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


def count(number: int, noun: str) -> str:
    """`2 lines`, `1 line`, `0 lines`."""
    return f"{number} {noun}{'s' * (number != 1)}"


class Refusal(Exception):
    """A refused read: `str()` is MESSAGES[key] filled in, for the model; `code` (the key before any "/")
    goes into details.error, for programs."""

    def __init__(self, key: str, **fields) -> None:
        super().__init__(MESSAGES[key].format(**fields))
        self.code = key.partition("/")[0]


def refused(refusal: Refusal) -> ToolOutput:
    return {"content": [text(str(refusal))], "details": {"error": refusal.code}, "isError": True}


def create_read_tool(root: str | os.PathLike, *, max_lines: int = DEFAULT_MAX_LINES,
                     max_bytes: int = DEFAULT_MAX_BYTES) -> Tool:
    """A tool named `read` serving UTF-8 text files under `root`. A root that is not a directory, or a cap
    below 1, is the programmer's error: a ValueError now, not when the model calls."""
    if not os.path.isdir(root):
        raise ValueError(f"Workspace root {os.fspath(root)!r} is not a directory")
    if max_lines < 1 or max_bytes < 1:
        raise ValueError("max_lines and max_bytes must be at least 1")
    root = os.path.abspath(root)  # a later change of the current directory changes nothing
    real_root = os.path.realpath(root)

    async def execute(arguments: dict, context: ToolExecutionContext) -> ToolOutput:
        path = arguments["path"]
        try:
            parts = relative_parts(path, root, real_root)
            shown = display("/".join(parts))
            fd = open_file(parts, shown, root, real_root)
            window = Window(arguments.get("offset", 1), arguments.get("limit"), max_lines, max_bytes)
            try:
                await read_window(fd, shown, window, context)
            finally:  # however the read ends (a refusal, a cancellation), its file is closed
                os.close(fd)
            return window.output(shown)
        except Refusal as refusal:
            return refused(refusal)
        except OSError as error:  # Permission denied, the workspace gone, ...: still an answer
            return refused(Refusal("os_error", quoted=quote(path), reason=error.strerror))

    return Tool(
        name="read",
        description=("Read a UTF-8 text file in the workspace. `path` is relative to the workspace root. "
                     f"At most {max_lines} lines or {max_bytes} bytes come back per call; `offset` (1-based line) "
                     "and `limit` (lines) select a window, and a notice at the end says how to read on."),
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


def relative_parts(path: str, root: str, real_root: str) -> list[str]:
    """The path's components below the root: the string checked first, in the table's order."""
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
        below = under_root(parts, root, real_root)
        if below is None:
            raise Refusal("outside_workspace")
        parts = below
    return parts


def open_file(parts: list[str], shown: str, root: str, real_root: str) -> int:
    """Walk from the root one name at a time, following links ourselves; open only the last, regular file."""
    with HeldWalk(root) as at:  # 加固: opens the root (gone: os_error); each step relative to the last
        dirs: list[str] = []  # the directories walked into, below the root
        pending = deque(parts)
        links = 0
        while pending:
            name = pending.popleft()
            if name == "..":  # only from a link's target
                if not dirs:
                    raise Refusal("symlink_outside/climbs", path=shown)
                dirs.pop()
                continue
            inside = display("/".join([*dirs, name]))
            try:
                info = at.lstat(dirs, name)  # the chapter: os.lstat(os.path.join(root, *dirs, name))
            except FileNotFoundError:
                raise Refusal("not_found", path=shown) from None
            except NotADirectoryError:
                raise Refusal("not_a_directory", path=shown) from None
            if stat.S_ISLNK(info.st_mode):
                links += 1
                if links > MAX_SYMLINKS:
                    raise Refusal("symlink_loop", path=shown, limit=MAX_SYMLINKS)
                target = at.readlink(dirs, name)
                target_parts = components(target)
                if target.startswith("/"):
                    below = under_root(target_parts, root, real_root)
                    if below is None:
                        raise link_outside(shown, inside)
                    dirs, target_parts = [], below
                elif climbs_above_root(target_parts, len(dirs)):
                    raise link_outside(shown, inside)
                pending.extendleft(reversed(target_parts))
                continue
            if pending:  # a component in the middle must be a directory
                if not stat.S_ISDIR(info.st_mode):
                    raise Refusal("not_a_directory/named", path=shown, component=inside)
                dirs.append(name)
                continue
            check_file_type(info.st_mode, shown)  # before the open: a FIFO or a device is never opened
            # 加固: opened O_NOFOLLOW | O_NONBLOCK, its type checked again on the descriptor (the chapter: os.open)
            return at.open_file(dirs, name, lambda mode: check_file_type(mode, shown))
        raise Refusal("directory", path=shown or ".")


def link_outside(shown: str, link: str) -> Refusal:
    if link == shown:
        return Refusal("symlink_outside/link", path=shown)
    return Refusal("symlink_outside/through", path=shown, link=link)


def components(path: str) -> list[str]:
    """A path split at "/" only, without empty and "." components: "./docs//guide.md" is docs, guide.md."""
    return [part for part in path.split("/") if part not in ("", ".")]


def under_root(parts: list[str], *roots: str) -> list[str] | None:
    """The components below whichever root an absolute path's components start with, else None."""
    for root in roots:
        prefix = components(root)
        if parts[:len(prefix)] == prefix:
            return parts[len(prefix):]
    return None


def climbs_above_root(target_parts: list[str], depth: int) -> bool:
    """Whether a relative link target, followed from `depth` directories below the root, climbs above it."""
    for part in target_parts:
        depth += -1 if part == ".." else 1
        if depth < 0:
            return True
    return False


KINDS_BY_MODE = [(stat.S_ISFIFO, "fifo"), (stat.S_ISCHR, "character_device"), (stat.S_ISBLK, "block_device"),
                 (stat.S_ISSOCK, "socket")]


def check_file_type(mode: int, shown: str) -> None:
    """Only a regular file is read: a directory is `directory`, anything else `not_regular`."""
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise Refusal("directory", path=shown)
    kind = next((name for test, name in KINDS_BY_MODE if test(mode)), "other")
    raise Refusal("not_regular", path=shown, kind=FILE_KINDS[kind])


def quote(path: str) -> str:
    """The model's path as a JSON string, cut after 200 characters."""
    quoted = json.dumps(path, ensure_ascii=False)
    return quoted if len(quoted) <= 200 else quoted[:200] + '..."'


def display(path: str) -> str:
    """A path below the root for a message: as it is, or quoted when it holds a character that does not print."""
    return path if path.isprintable() else quote(path)


@dataclass
class Window:
    """The lines one read returns, collected from `start` until a cap, the call's limit or the end of the file."""

    start: int
    limit: int | None
    max_lines: int
    max_bytes: int
    lines: list[str] = field(default_factory=list)
    line_no: int = 0  # the lines passed so far, skipped or kept
    kept_bytes: int = 0  # UTF-8 bytes of the kept lines joined with "\n"
    partial: str = ""  # the line read so far, its "\n" not yet seen
    ended_by: str | None = None  # "limit", "max_lines", "max_bytes", "long_line"; None: the file ended
    total_lines: int | None = None  # known once the file ended

    def add(self, piece: str, at_end: bool) -> bool:
        """Take the next decoded text (split at "\\n" only); True once the window is complete."""
        *complete, self.partial = (self.partial + piece).split("\n")
        for line in complete:
            if self.take(line):
                return True
        if self.partial and self.line_no + 1 >= self.start and (self.full() or self.too_big(self.partial)):
            return self.take(self.partial)  # a line follows the full window, or this one passes max_bytes
        if at_end:
            if self.partial and self.take(self.partial):  # the last line, without its "\n"
                return True
            self.total_lines = self.line_no
            return True
        return False

    def full(self) -> bool:
        return len(self.lines) == min(self.limit or self.max_lines, self.max_lines)

    def too_big(self, line: str) -> bool:
        return self.kept_bytes + (1 if self.lines else 0) + len(line.encode("utf-8")) > self.max_bytes

    def take(self, line: str) -> bool:
        """One more line (or the start of one); True once the window is complete."""
        if self.line_no + 1 < self.start:  # before the window
            self.line_no += 1
            return False
        if self.full():  # the maxLines cap comes before the byte cap
            self.ended_by = "limit" if self.limit is not None and self.limit < self.max_lines else "max_lines"
            return True
        if self.too_big(line):
            if self.lines:
                self.ended_by = "max_bytes"
            else:  # the first line alone is longer: its first max_bytes bytes, cut on a character boundary
                self.lines.append(line.encode("utf-8")[:self.max_bytes].decode("utf-8", "ignore"))
                self.ended_by = "long_line"
            return True
        self.kept_bytes += (1 if self.lines else 0) + len(line.encode("utf-8"))
        self.lines.append(line)
        self.line_no += 1
        return False

    def output(self, shown: str) -> ToolOutput:
        if not self.lines and self.total_lines is not None and self.start > max(self.total_lines, 1):
            raise Refusal("offset_beyond_end", offset=self.start, path=shown, lines=count(self.total_lines, "line"))
        end = self.start + len(self.lines) - 1
        body = "\n".join(self.lines)
        details = {"path": shown, "startLine": self.start, "endLine": end, "truncated": self.ended_by is not None}
        if self.ended_by is None:
            return {"content": [text(body)], "details": details}
        details["nextOffset"] = end + 1
        if self.ended_by == "long_line":
            notice = NOTICES["long_line"].format(end=end, max_bytes=self.max_bytes, shown=len(body.encode("utf-8")),
                                                 next=end + 1)
        else:
            cap = NOTICES[f"cap/{self.ended_by}"].format(lines=count(self.max_lines, "line"), max_bytes=self.max_bytes)
            notice = NOTICES["goes_on"].format(start=self.start, end=end, cap=cap, next=end + 1)
        return {"content": [text(f"{body}\n\n{notice}")], "details": details}


async def read_window(fd: int, shown: str, window: Window, context: ToolExecutionContext) -> None:
    """Read the file chunk by chunk into `window`, only until it is complete."""
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    position = 0  # bytes read so far
    while True:
        if context.signal is not None and context.signal.aborted:  # before every chunk, the first included
            raise Refusal("aborted", path=shown)
        chunk = os.read(fd, CHUNK_BYTES)
        if b"\0" in chunk:
            raise Refusal("binary", path=shown)
        held = len(decoder.getstate()[0])  # the head of a character the last chunk cut
        try:
            piece = decoder.decode(chunk, final=not chunk)  # an empty chunk: the end of the file
        except UnicodeDecodeError as error:
            raise Refusal("not_utf8", path=shown, offset=position - held + error.start) from None
        position += len(chunk)
        if window.add(piece, at_end=not chunk):
            return
        if position // MIB > (position - len(chunk)) // MIB:  # another MiB read
            context.report_progress([text(PROGRESS.format(mib=position // MIB, path=shown))])
        await asyncio.sleep(0)  # an abort, a cancellation or another tool of the batch gets in here
