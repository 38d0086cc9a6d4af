"""Chapter 09: an `edit` tool that replaces exactly one occurrence of a text in a workspace file.

Read it beside the chapter, top to bottom: the tool and its schema (编辑往返: create_edit_tool), the
arguments checked before any file is touched, then chapter 08's walk to the file (越界: relative_parts and
open_file are imported from chapter 08, not written again), the file's encoding and line endings (编码与换行:
decode_text), the one match (唯一匹配: matches_of), the diff (差异: unified_diff) and the atomic
write beside the file (原子写入: write_atomically).

Every refusal is an error result whose `details` are `{"error": CODE}`: chapter 08's refusals with
chapter 08's texts, this chapter's with the MESSAGES below. A failed write leaves the file as it was
and no temporary file behind. Races (a directory swapped for a link between the walk and the write)
are beyond the chapter, as in chapter 08.
"""

from __future__ import annotations

import difflib
import os
import stat
import tempfile
from dataclasses import dataclass

from checkpoints.ch08_workspace_read import Refusal, display, open_file, quote, refused, relative_parts
from course.runtime.messages import text
from course.runtime.tools import Tool, ToolExecutionContext, ToolOutput

# The texts the tests compare, kept in the starter that `course start 09` writes. Fields: {path} the path
# below the root as chapter 08's `display` shows it, {quoted} the model's path as chapter 08's `quote` shows
# it, {count} how many places oldText matches, {lines} the lines they start on ("line 2", "lines 2, 5"),
# {line} the line the replaced text starts on, {reason} the OS's words for an error (its strerror).
MESSAGES: dict[str, str] = {
    "empty_old_text": "oldText is empty: give the exact text to replace, copied from the file.",
    "no_change": "oldText and newText are the same: the edit would change nothing.",
    "no_match": "oldText was not found in {path}: it must match the file's text exactly, spaces, indentation "
                "and line breaks included. Read the file again and copy the text to replace from it.",
    "ambiguous": "oldText matches {count} places in {path} (on {lines}); it must match exactly one. Add the "
                 "lines around it to oldText so that only the place you mean matches.",
    "write_failed": "Cannot write {quoted}: {reason}; the file is unchanged.",
}
EDITED = "Edited {path}: replaced the one match of oldText (line {line})."

BOM = "\ufeff"


@dataclass(frozen=True)
class Workspace:
    """The root as chapter 08's read tool holds it (the path given, and the path it really is), with its walk."""
    root: str
    real_root: str

    def relative_parts(self, path: str) -> list[str]:
        return relative_parts(path, self.root, self.real_root)

    def open_file(self, parts: list[str], shown: str) -> int:
        return open_file(parts, shown, self.root, self.real_root)


class EditRefusal(Refusal):
    """Why an edit was refused once its arguments or the file's text were looked at: MESSAGES[key] filled
    in, for the model; the key is the code (details.error), as chapter 08's Refusal has it."""

    def __init__(self, key: str, **fields) -> None:
        Exception.__init__(self, MESSAGES[key].format(**fields))
        self.code = key


def create_edit_tool(root: str | os.PathLike) -> Tool:
    """An `edit` tool for the files under `root`: one exact match of oldText becomes newText.

    Raises ValueError at once when `root` is not a directory (the message says it "is not a directory")."""
    if not os.path.isdir(root):
        raise ValueError(f"Workspace root {os.fspath(root)!r} is not a directory")
    workspace = Workspace(os.path.abspath(root), os.path.realpath(root))

    async def execute(arguments: dict, context: ToolExecutionContext) -> ToolOutput:
        try:
            return edit(workspace, arguments["path"], arguments["oldText"], arguments["newText"])
        except Refusal as refusal:
            return refused(refusal)
        except OSError as error:  # EACCES, EIO while reading: chapter 08's answer
            return refused(Refusal("os_error", quoted=quote(arguments["path"]), reason=error.strerror or error))

    return Tool(
        name="edit",
        description=("Edit a UTF-8 text file in the workspace: replace oldText, which must match exactly one "
                     "place in the file, with newText. `path` is relative to the workspace root."),
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File to edit, relative to the workspace root"},
                "oldText": {"type": "string",
                            "description": "Exact text to replace; it must match exactly one place in the file"},
                "newText": {"type": "string", "description": "The text to put in its place"},
            },
            "required": ["path", "oldText", "newText"],
            "additionalProperties": False,
        },
        execute=execute,
    )


def edit(workspace: Workspace, path: str, old_text: str, new_text: str) -> ToolOutput:
    """One edit, from the arguments to the file written; no await inside, so no other edit gets in between."""
    old_text, new_text = old_text.replace("\r\n", "\n"), new_text.replace("\r\n", "\n")
    if old_text == "":
        raise EditRefusal("empty_old_text")
    if old_text == new_text:
        raise EditRefusal("no_change")
    parts = workspace.relative_parts(path)  # chapter 08: the path as text
    shown = display("/".join(parts))
    fd = workspace.open_file(parts, shown)  # chapter 08: walked from the root, a regular file
    try:
        data = read_all(fd)
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
    finally:
        os.close(fd)
    before, bom, ending = decode_text(data, shown)
    starts = matches_of(before, old_text)
    if not starts:
        raise EditRefusal("no_match", path=shown)
    if len(starts) > 1:
        lines = list(dict.fromkeys(line_of(before, at) for at in starts))
        where = f"line {lines[0]}" if len(lines) == 1 else "lines " + ", ".join(map(str, lines))
        raise EditRefusal("ambiguous", count=len(starts), path=shown, lines=where)
    at = starts[0]
    after = before[:at] + new_text + before[at + len(old_text):]
    restored = after.replace("\n", "\r\n") if ending == "\r\n" else after
    target = os.path.realpath(os.path.join(workspace.root, *parts))
    try:
        write_atomically(target, ((BOM if bom else "") + restored).encode("utf-8"), mode)
    except OSError as error:
        raise EditRefusal("write_failed", quoted=quote(path), reason=error.strerror or error) from None
    return {"content": [text(EDITED.format(path=shown, line=line_of(before, at)))],
            "details": {"path": shown, "diff": unified_diff(before, after, shown)}}


def read_all(fd: int) -> bytes:
    """The whole file, read from its open descriptor."""
    chunks = []
    while chunk := os.read(fd, 64 * 1024):
        chunks.append(chunk)
    return b"".join(chunks)


def decode_text(data: bytes, shown: str) -> tuple[str, bool, str]:
    """(the text with "\\n" line breaks and no BOM, whether it had a BOM, its line ending "\\n" or "\\r\\n");
    a file with NUL bytes is chapter 08's `binary`, one that is not UTF-8 its `not_utf8`."""
    if b"\0" in data:
        raise Refusal("binary", path=shown)
    try:
        decoded = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise Refusal("not_utf8", path=shown, offset=error.start) from None
    bom = decoded.startswith(BOM)
    body = decoded[1:] if bom else decoded
    first = body.find("\n")
    ending = "\r\n" if first > 0 and body[first - 1] == "\r" else "\n"
    return body.replace("\r\n", "\n"), bom, ending


def matches_of(text: str, old_text: str) -> list[int]:
    """Where `old_text` starts in `text`: every start, overlapping ones included ("aa" is twice in "aaa")."""
    starts, at = [], text.find(old_text)
    while at != -1:
        starts.append(at)
        at = text.find(old_text, at + 1)
    return starts


def line_of(text: str, at: int) -> int:
    """The 1-based line of `text` that position `at` is on."""
    return text.count("\n", 0, at) + 1


def unified_diff(before: str, after: str, shown: str) -> str:
    """The change as a unified diff, old to new: lines split at "\\n", 3 lines of context."""
    return "\n".join(difflib.unified_diff(before.split("\n"), after.split("\n"), fromfile=f"a/{shown}",
                                         tofile=f"b/{shown}", n=3, lineterm=""))


def write_atomically(target: str, data: bytes, mode: int) -> None:
    """`data` as the whole of `target`: written to a temporary file beside it, given the file's permission
    bits, then renamed over it. A reader sees the old file or the new one, never half of one; a failure
    removes the temporary file and leaves `target` as it was."""
    directory, name = os.path.split(target)
    fd, temp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        os.chmod(temp, mode)
        os.replace(temp, target)
    except BaseException:
        try:
            os.unlink(temp)
        except FileNotFoundError:
            pass
        raise
