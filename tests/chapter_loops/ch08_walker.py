"""A chapter 08 read tool written from the chapter text alone, in another style: a Walker object that resolves
the path step by step, 1 MiB chunks, and the window kept as a small state machine over split pieces.

Nothing beyond the chapter: names are looked at with os.lstat and the file opened by its joined path.
The tables are the starter's.
"""

import asyncio
import codecs
import json
import os
import stat

from course.runtime.messages import text
from course.runtime.tools import Tool

DEFAULT_MAX_LINES = 2000
DEFAULT_MAX_BYTES = 51200
MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255
MAX_SYMLINKS = 40
CHUNK = 1024 * 1024

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

KIND_TESTS = (("fifo", stat.S_ISFIFO), ("character_device", stat.S_ISCHR), ("block_device", stat.S_ISBLK),
              ("socket", stat.S_ISSOCK))


class Refused(Exception):
    def __init__(self, key, **values):
        self.code = key.split("/", 1)[0]
        self.message = MESSAGES[key].format(**values)
        super().__init__(self.message)


def as_json(path):
    return json.dumps(path, ensure_ascii=False)


def quote(path):
    q = as_json(path)
    if len(q) > 200:
        q = q[:200] + '..."'
    return q


def names_of(path):
    return [n for n in path.split("/") if n not in ("", ".")]


class Walker:
    """From the root, one name at a time; links read and judged by us, never by the OS."""

    def __init__(self, root, real_root, shown):
        self.root, self.real_root, self.shown = root, real_root, shown
        self.dirs = []
        self.links = 0

    def show(self, name):
        joined = "/".join(self.dirs + [name])
        return joined if joined.isprintable() else as_json(joined)

    def below_root(self, parts):
        for base in (names_of(self.root), names_of(self.real_root)):
            n = len(base)
            if parts[:n] == base:
                return parts[n:]
        return None

    def follow(self, name, place, todo):
        self.links += 1
        if self.links > MAX_SYMLINKS:
            raise Refused("symlink_loop", path=self.shown, limit=MAX_SYMLINKS)
        target = os.readlink(place)
        parts = names_of(target)
        where = self.show(name)
        if target.startswith("/"):
            parts = self.below_root(parts)
            if parts is None:
                raise self.outside(where)
            self.dirs = []
        else:
            depth = len(self.dirs)
            for part in parts:
                depth += -1 if part == ".." else 1
                if depth < 0:
                    raise self.outside(where)
        todo[:0] = parts

    def outside(self, where):
        if where == self.shown:
            return Refused("symlink_outside/link", path=self.shown)
        return Refused("symlink_outside/through", path=self.shown, link=where)

    def open(self, parts):
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)  # the workspace must still be there
        os.close(fd)
        todo = list(parts)
        while todo:
            name = todo.pop(0)
            if name == "..":
                if not self.dirs:
                    raise Refused("symlink_outside/climbs", path=self.shown)
                self.dirs.pop()
                continue
            place = os.path.join(self.root, *self.dirs, name)
            try:
                info = os.lstat(place)
            except FileNotFoundError:
                raise Refused("not_found", path=self.shown) from None
            except NotADirectoryError:
                raise Refused("not_a_directory", path=self.shown) from None
            if stat.S_ISLNK(info.st_mode):
                self.follow(name, place, todo)
            elif todo:
                if not stat.S_ISDIR(info.st_mode):
                    raise Refused("not_a_directory/named", path=self.shown, component=self.show(name))
                self.dirs.append(name)
            else:
                if stat.S_ISDIR(info.st_mode):
                    raise Refused("directory", path=self.shown)
                if not stat.S_ISREG(info.st_mode):
                    kind = next((k for k, test in KIND_TESTS if test(info.st_mode)), "other")
                    raise Refused("not_regular", path=self.shown, kind=FILE_KINDS[kind])
                return os.open(place, os.O_RDONLY)
        raise Refused("directory", path=self.shown or ".")


def text_check(path, root, real_root):
    if not path:
        raise Refused("invalid_path/empty")
    if "\x00" in path:
        raise Refused("invalid_path/nul", quoted=quote(path))
    try:
        size = len(path.encode())
    except UnicodeError:
        raise Refused("invalid_path/unicode", quoted=quote(path)) from None
    if size > MAX_PATH_BYTES:
        raise Refused("too_long/path", size=size, limit=MAX_PATH_BYTES)
    parts = names_of(path)
    if any(len(p.encode()) > MAX_NAME_BYTES for p in parts):
        raise Refused("too_long/name", quoted=quote(path), limit=MAX_NAME_BYTES)
    if ".." in parts:
        raise Refused("parent_traversal", quoted=quote(path))
    if path[0] == "/":
        walker = Walker(root, real_root, "")
        parts = walker.below_root(parts)
        if parts is None:
            raise Refused("outside_workspace")
    return parts


def lines_word(n):
    return "1 line" if n == 1 else f"{n} lines"


async def read_window(fd, shown, offset, limit, max_lines, max_bytes, ctx):
    want = max_lines if limit is None or limit >= max_lines else limit
    cap = "cap/max_lines" if want == max_lines else "cap/limit"
    state = {"line": 0, "got": [], "bytes": 0, "rest": "", "end": None}
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset_in_file = 0

    def cost(line):
        return len(line.encode()) + (1 if state["got"] else 0)

    def step(line, complete):
        """'more', or why the window ended: a cap key, 'long', or 'eof'."""
        if state["line"] + 1 < offset:
            state["line"] += complete
            return "more"
        if len(state["got"]) == want:
            return cap
        if state["bytes"] + cost(line) > max_bytes:
            if state["got"]:
                return "cap/max_bytes"
            state["got"].append(line.encode()[:max_bytes].decode(errors="ignore"))
            return "long"
        if complete:
            state["bytes"] += cost(line)
            state["got"].append(line)
            state["line"] += 1
        return "more"

    while True:
        if ctx.signal is not None and ctx.signal.aborted:
            raise Refused("aborted", path=shown)
        data = os.read(fd, CHUNK)
        if b"\x00" in data:
            raise Refused("binary", path=shown)
        cut = len(decoder.getstate()[0])
        try:
            piece = decoder.decode(data, final=not data)
        except UnicodeDecodeError as bad:
            raise Refused("not_utf8", path=shown, offset=offset_in_file - cut + bad.start) from None
        offset_in_file += len(data)
        pieces = (state["rest"] + piece).split("\n")
        state["rest"] = pieces.pop()
        verdict = "more"
        for line in pieces:
            verdict = step(line, True)
            if verdict != "more":
                break
        if verdict == "more" and state["rest"]:
            verdict = step(state["rest"], not data)
            if verdict == "more" and not data:
                state["rest"] = ""
        if verdict == "more" and not data:
            verdict = "eof"
        if verdict != "more":
            return finish(verdict, state, shown, offset, max_lines, max_bytes)
        if offset_in_file // (1024 * 1024) > (offset_in_file - len(data)) // (1024 * 1024):
            ctx.report_progress([text(PROGRESS.format(mib=offset_in_file // (1024 * 1024), path=shown))])
        await asyncio.sleep(0)


def finish(verdict, state, shown, offset, max_lines, max_bytes):
    got = state["got"]
    if verdict == "eof" and not got and offset > max(state["line"], 1):
        raise Refused("offset_beyond_end", offset=offset, path=shown, lines=lines_word(state["line"]))
    end = offset + len(got) - 1
    body = "\n".join(got)
    details = {"path": shown, "startLine": offset, "endLine": end, "truncated": verdict != "eof"}
    if verdict == "eof":
        return {"content": [text(body)], "details": details}
    details["nextOffset"] = end + 1
    if verdict == "long":
        notice = NOTICES["long_line"].format(end=end, max_bytes=max_bytes, shown=len(body.encode()), next=end + 1)
    else:
        extra = NOTICES[verdict].format(lines=lines_word(max_lines), max_bytes=max_bytes)
        notice = NOTICES["goes_on"].format(start=offset, end=end, cap=extra, next=end + 1)
    return {"content": [text(f"{body}\n\n{notice}")], "details": details}


def create_read_tool(root, *, max_lines=DEFAULT_MAX_LINES, max_bytes=DEFAULT_MAX_BYTES):
    if not os.path.isdir(root):
        raise ValueError(f"workspace root {root!s} is not a directory")
    if max_lines < 1 or max_bytes < 1:
        raise ValueError("max_lines and max_bytes must be >= 1")
    root = os.path.abspath(root)
    real_root = os.path.realpath(root)

    async def execute(args, ctx):
        try:
            parts = text_check(args["path"], root, real_root)
            shown = "/".join(parts)
            shown = shown if shown.isprintable() else as_json(shown)
            fd = Walker(root, real_root, shown).open(parts)
            try:
                return await read_window(fd, shown, args.get("offset", 1), args.get("limit"), max_lines, max_bytes, ctx)
            finally:
                os.close(fd)
        except Refused as why:
            return {"content": [text(why.message)], "details": {"error": why.code}, "isError": True}
        except OSError as error:
            why = Refused("os_error", quoted=quote(args["path"]), reason=error.strerror)
            return {"content": [text(why.message)], "details": {"error": why.code}, "isError": True}

    schema = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File to read, relative to the workspace root"},
            "offset": {"type": "integer", "minimum": 1, "description": "First line to read (1-based)"},
            "limit": {"type": "integer", "minimum": 1, "description": "How many lines to read at most"},
        },
        "required": ["path"],
        "additionalProperties": False,
    }
    return Tool(name="read", description="Read a file in the workspace", parameters=schema, execute=execute)
