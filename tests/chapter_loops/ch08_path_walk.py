"""A chapter 08 read tool written from the chapter text alone: the walk by joined paths, lines cut from a text buffer.

A student's `ch08_workspace_read.py`: every step the chapter shows, in its words, and nothing beyond it (no
descriptor held per directory, no O_NOFOLLOW, no fstat after the open: a file swapped between the look and
the open is outside the chapter). Chunks of 256 KiB; the tables are the starter's.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import os
import stat

from course.runtime.messages import text
from course.runtime.tools import Tool

DEFAULT_MAX_LINES = 2000
DEFAULT_MAX_BYTES = 50 * 1024
MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255
MAX_SYMLINKS = 40
CHUNK_BYTES = 256 * 1024
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


class Refusal(Exception):
    def __init__(self, key, **fields):
        super().__init__(MESSAGES[key].format(**fields))
        self.code = key.split("/")[0]


def refused(refusal):
    return {"content": [text(str(refusal))], "details": {"error": refusal.code}, "isError": True}


def plural(n):
    return f"{n} line" if n == 1 else f"{n} lines"


def quoted(path):
    s = json.dumps(path, ensure_ascii=False)
    return s[:200] + '..."' if len(s) > 200 else s


def display(path):
    return path if path.isprintable() else json.dumps(path, ensure_ascii=False)


def components(path):
    return [p for p in path.split("/") if p != "" and p != "."]


def under_root(parts, root, real_root):
    for base in (components(root), components(real_root)):
        if parts[:len(base)] == base:
            return parts[len(base):]
    return None


def climbs_above_root(parts, depth):
    for part in parts:
        depth = depth - 1 if part == ".." else depth + 1
        if depth < 0:
            return True
    return False


def check_text(path, root, real_root):
    if path == "":
        raise Refusal("invalid_path/empty")
    if "\0" in path:
        raise Refusal("invalid_path/nul", quoted=quoted(path))
    try:
        raw = path.encode("utf-8")
    except UnicodeEncodeError:
        raise Refusal("invalid_path/unicode", quoted=quoted(path))
    if len(raw) > MAX_PATH_BYTES:
        raise Refusal("too_long/path", size=len(raw), limit=MAX_PATH_BYTES)
    parts = components(path)
    for part in parts:
        if len(part.encode("utf-8")) > MAX_NAME_BYTES:
            raise Refusal("too_long/name", quoted=quoted(path), limit=MAX_NAME_BYTES)
    if ".." in parts:
        raise Refusal("parent_traversal", quoted=quoted(path))
    if path.startswith("/"):
        below = under_root(parts, root, real_root)
        if below is None:
            raise Refusal("outside_workspace")
        parts = below
    return parts


def link_outside(shown, inside):
    if inside == shown:
        return Refusal("symlink_outside/link", path=shown)
    return Refusal("symlink_outside/through", path=shown, link=inside)


def check_file_type(info, shown):
    mode = info.st_mode
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise Refusal("directory", path=shown)
    if stat.S_ISFIFO(mode):
        kind = FILE_KINDS["fifo"]
    elif stat.S_ISCHR(mode):
        kind = FILE_KINDS["character_device"]
    elif stat.S_ISBLK(mode):
        kind = FILE_KINDS["block_device"]
    elif stat.S_ISSOCK(mode):
        kind = FILE_KINDS["socket"]
    else:
        kind = FILE_KINDS["other"]
    raise Refusal("not_regular", path=shown, kind=kind)


def walk(parts, shown, root, real_root):
    """The chapter's loop: from the root, one lstat per name, links followed by hand."""
    os.close(os.open(root, os.O_RDONLY | os.O_DIRECTORY))
    dirs = []
    pending = list(parts)
    links = 0
    while pending:
        name = pending.pop(0)
        if name == "..":
            if not dirs:
                raise Refusal("symlink_outside/climbs", path=shown)
            dirs.pop()
            continue
        inside = display("/".join(dirs + [name]))
        full = os.path.join(root, *dirs, name)
        try:
            info = os.lstat(full)
        except FileNotFoundError:
            raise Refusal("not_found", path=shown)
        except NotADirectoryError:
            raise Refusal("not_a_directory", path=shown)
        if stat.S_ISLNK(info.st_mode):
            links += 1
            if links > MAX_SYMLINKS:
                raise Refusal("symlink_loop", path=shown, limit=MAX_SYMLINKS)
            target = os.readlink(full)
            target_parts = components(target)
            if target.startswith("/"):
                below = under_root(target_parts, root, real_root)
                if below is None:
                    raise link_outside(shown, inside)
                dirs = []
                target_parts = below
            elif climbs_above_root(target_parts, len(dirs)):
                raise link_outside(shown, inside)
            pending = target_parts + pending
            continue
        if pending:
            if not stat.S_ISDIR(info.st_mode):
                raise Refusal("not_a_directory/named", path=shown, component=inside)
            dirs.append(name)
            continue
        check_file_type(info, shown)
        return os.open(full, os.O_RDONLY)
    raise Refusal("directory", path=shown or ".")


class Page:
    """Lines from `offset`, until limit / maxLines, maxBytes, or the end of the file."""

    def __init__(self, offset, limit, max_lines, max_bytes):
        self.offset = offset
        self.max_lines = max_lines
        self.max_bytes = max_bytes
        if limit is not None and limit < max_lines:
            self.most, self.cap = limit, "limit"
        else:
            self.most, self.cap = max_lines, "max_lines"
        self.buffer = ""
        self.seen = 0
        self.kept = []
        self.size = 0
        self.why = None
        self.total = None

    def would_pass(self, line):
        extra = len(line.encode("utf-8")) + (1 if self.kept else 0)
        return self.size + extra > self.max_bytes

    def offer(self, line):
        """One line (or the beginning of one); True when the page is done."""
        if self.seen + 1 < self.offset:
            self.seen += 1
            return False
        if len(self.kept) == self.most:
            self.why = self.cap
            return True
        if self.would_pass(line):
            if self.kept:
                self.why = "max_bytes"
            else:
                self.kept.append(line.encode("utf-8")[:self.max_bytes].decode("utf-8", errors="ignore"))
                self.why = "long_line"
            return True
        self.size += len(line.encode("utf-8")) + (1 if self.kept else 0)
        self.kept.append(line)
        self.seen += 1
        return False

    def feed(self, piece, finished):
        self.buffer += piece
        while True:
            at = self.buffer.find("\n")
            if at < 0:
                break
            line, self.buffer = self.buffer[:at], self.buffer[at + 1:]
            if self.offer(line):
                return True
        if self.buffer and self.seen + 1 >= self.offset:
            if len(self.kept) == self.most or self.would_pass(self.buffer):
                return self.offer(self.buffer)
        if finished:
            if self.buffer and self.offer(self.buffer):
                return True
            self.total = self.seen
            return True
        return False

    def result(self, shown):
        if not self.kept and self.total is not None and self.offset > max(self.total, 1):
            raise Refusal("offset_beyond_end", offset=self.offset, path=shown, lines=plural(self.total))
        end = self.offset + len(self.kept) - 1
        body = "\n".join(self.kept)
        details = {"path": shown, "startLine": self.offset, "endLine": end, "truncated": self.why is not None}
        if self.why is None:
            return {"content": [text(body)], "details": details}
        details["nextOffset"] = end + 1
        if self.why == "long_line":
            notice = NOTICES["long_line"].format(end=end, max_bytes=self.max_bytes, shown=len(body.encode("utf-8")),
                                                 next=end + 1)
        else:
            cap = NOTICES["cap/" + self.why].format(lines=plural(self.max_lines), max_bytes=self.max_bytes)
            notice = NOTICES["goes_on"].format(start=self.offset, end=end, cap=cap, next=end + 1)
        return {"content": [text(body + "\n\n" + notice)], "details": details}


async def read_page(fd, shown, page, ctx):
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    done_bytes = 0
    while True:
        if ctx.signal is not None and ctx.signal.aborted:
            raise Refusal("aborted", path=shown)
        chunk = os.read(fd, CHUNK_BYTES)
        if 0 in chunk:
            raise Refusal("binary", path=shown)
        pending = len(decoder.getstate()[0])
        try:
            piece = decoder.decode(chunk, final=len(chunk) == 0)
        except UnicodeDecodeError as error:
            raise Refusal("not_utf8", path=shown, offset=done_bytes - pending + error.start)
        before = done_bytes
        done_bytes += len(chunk)
        if page.feed(piece, len(chunk) == 0):
            return page.result(shown)
        if done_bytes // MIB > before // MIB:
            ctx.report_progress([text(PROGRESS.format(mib=done_bytes // MIB, path=shown))])
        await asyncio.sleep(0)


def create_read_tool(root, *, max_lines=DEFAULT_MAX_LINES, max_bytes=DEFAULT_MAX_BYTES):
    if not os.path.isdir(root):
        raise ValueError(f"{root} is not a directory")
    if max_lines < 1 or max_bytes < 1:
        raise ValueError("maxLines and maxBytes must be at least 1")
    root = os.path.abspath(root)
    real_root = os.path.realpath(root)

    async def execute(args, ctx):
        path = args["path"]
        try:
            parts = check_text(path, root, real_root)
            shown = display("/".join(parts))
            fd = walk(parts, shown, root, real_root)
            try:
                return await read_page(fd, shown, Page(args.get("offset", 1), args.get("limit"), max_lines, max_bytes),
                                       ctx)
            finally:
                os.close(fd)
        except Refusal as refusal:
            return refused(refusal)
        except OSError as error:
            return refused(Refusal("os_error", quoted=quoted(path), reason=error.strerror))

    return Tool(
        name="read",
        description="Read a text file of the workspace.",
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
