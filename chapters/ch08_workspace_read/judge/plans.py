"""Chapter 08's generated plans and how a run of one is shown (the plans' shape is described in
`chapters.ch08_workspace_read.scenarios`).

What is compared, per read: a successful result exactly (every line of its text, the notice, and
`details`); a refused one by `isError` and `details` (the reason in `details.error`; the wording of
the message is pinned by the fixed snapshots only), and whether the secret or a traceback shows in
it; descriptors the read left open; paths it opened outside the workspace; a read that did not
finish; more than one read call once the signal was aborted, or before the read's first yield to the
event loop. Left out: how often a read reports progress, the timestamps, and, when a call's `limit`
equals `max_lines`, which of the two the notice names as the cap.

No plan depends on the size of the chunks a read takes (anything up to 1 MiB): a bad byte sequence is
placed either where every read has to judge it (at or before the window's lines, or anywhere in a file
every read reads to its end) or more than 1 MiB past the end of every window read in that file, never
in between, where the chapter leaves the verdict to the chunk size.

Every read of a plan is of one kind (`read["kind"]`, `KINDS`): the section whose plans make it and the
sentences of the chapter text it holds a tool to. A plan cites what its reads' kinds do (`cites_of`); a
run that departs from the reference's at one read is shown what that read holds it to (`cites_at`).
Every plan stays inside the chapter's contract: none swaps a file or directory between the tool's
check and its open, the only thing beyond the chapter that the fixed tests of the section 加固 hold a
tool to, so there is no hardening section of generated plans (`HARDENING_SECTIONS` is empty).
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass

from hypothesis import strategies as st

from course.judge.timeline import json_text

SECRET = "TOP SECRET: the launch codes"
DEFAULT_MAX_LINES = 2000

# ---------------------------------------------------------------- file contents

CHARS = ["a", "b", "z", " ", "é", "汉", "😀", "\t", "\r", "\ufeff", "\u2028", "\x0c", "\x85", "\x1c"]
"""ASCII, 2-, 3- and 4-byte characters, and characters str.splitlines() (not the tool) ends a line at."""
line_texts = st.text(alphabet="".join(CHARS), max_size=9)


def line_count(data: bytes) -> int:
    """Lines of a file as the chapter counts them: each ends at "\\n"; a last one may lack it."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


@st.composite
def text_files(draw, max_lines: int) -> str:
    count = max(0, draw(st.sampled_from([0, 1, 2, max_lines - 1, max_lines, max_lines + 1, max_lines + 2,
                                         2 * max_lines, 2 * max_lines + 1])))
    lines = draw(st.lists(line_texts, min_size=count, max_size=count))
    newline = draw(st.sampled_from(["\n", "\n", "\r\n"]))
    body = newline.join(lines) + (newline if lines and draw(st.booleans()) else "")
    return ("\ufeff" if draw(st.integers(0, 5)) == 0 else "") + body


def byte_boundaries(data: bytes) -> list[int]:
    """Byte counts at and next to every window's end and every byte of every line: where max_bytes bites."""
    lines = data.split(b"\n")
    found = set(range(1, 6))
    for start in range(len(lines)):
        size = -1
        for line in lines[start:start + 8]:
            size += 1 + len(line)
            found |= {size - 1, size, size + 1}
    for line in lines[:4]:
        found |= set(range(1, len(line) + 2))
    return sorted(n for n in found if n >= 1)


BAD_BYTES = {
    "NUL": b"\0",
    "lone continuation byte": b"\x80",
    "byte 0xff": b"\xff",
    "overlong encoding": b"\xc0\xaf",
    "encoded surrogate": b"\xed\xa0\x80",
    "2-byte character cut after 1 byte": "é".encode()[:1] + b"x",
    "3-byte character cut after 1 byte": "汉".encode()[:1] + b"x",
    "3-byte character cut after 2 bytes": "汉".encode()[:2] + b"x",
    "4-byte character cut after 3 bytes": "😀".encode()[:3] + b"\n",
}
"""What makes a file binary or not UTF-8. A cut character is always followed by another byte: one cut
by the end of the file is noticed only by a read that reaches the end — as in CUT_AT_THE_END, a
one-line file that every read has to read to its end."""

CUT_AT_THE_END = ("cut_end.txt", b"ab" + "汉".encode()[:2])
"""A single line without a newline whose last character is cut by the end of the file: four bytes, under
every cap, so every read of it reaches the end, where the cut shows (a decoder told it was the end)."""


@st.composite
def bad_files(draw) -> dict:
    """A text file of 10 bytes to 9 KB with one bad byte sequence at a character boundary anywhere in it
    (at the start, around 1, 4 and 8 KiB, in the middle, at the end), or none; and the windows read in it.
    With a bad sequence, each window starts after the line that holds it (or past the end of the file):
    every read reads through it, whatever its chunks. (A window that ends before it, less than 1 MiB
    before, may or may not be refused: the chapter leaves that to the chunk size.)"""
    size = draw(st.sampled_from([10, 100, 1030, 5000, 9000]))
    unit = draw(st.sampled_from(["line of text\n", "汉字 é\n", "ab\r\n"]))
    text = (unit * (size // len(unit.encode()) + 1))
    data = text.encode()
    at = draw(st.sampled_from([0, 1, 1023, 1024, 1025, 4096, 8192, len(data) // 2, len(data) - 1, len(data), len(data)]))
    at = min(at, len(data))
    while at < len(data) and (data[at] & 0xC0) == 0x80:  # a character boundary
        at += 1
    bad = draw(st.sampled_from([None, "NUL", "NUL", *BAD_BYTES]))
    windows = [{}, {"limit": 1}, {"offset": 2, "limit": 1}]
    if bad is not None:
        data = data[:at] + BAD_BYTES[bad] + data[at:]
        line = data[:at + len(BAD_BYTES[bad]) - 1].count(b"\n") + 1  # the line holding its last byte
        windows = [{"offset": line + 1}, {"offset": line + 1, "limit": 1}, {"offset": line + 2, "limit": 1}]
    return {"hex": data.hex(), "what": f"{len(data)} bytes of {unit!r}" + (f", {bad} at byte {at}" if bad else ""),
            "windows": windows}


FILLER = b"x" * 99 + b"\n"
"""A 100-byte line: the two big files below are made of it, so that a byte offset may land anywhere in a line."""


def filled(start: int, end: int) -> list[list]:
    """Pieces ([hex, times], one line each) of FILLER lines from byte `start` to `end`, a shorter last line
    making up the rest."""
    gap = end - start
    pieces = [[FILLER.hex(), gap // len(FILLER)]] if gap >= len(FILLER) else []
    if gap % len(FILLER):
        pieces.append([(b"x" * (gap % len(FILLER) - 1) + b"\n").hex(), 1])
    return pieces


CHUNK_CUTS = [(65536, "😀", 1), (131072, "汉", 2), (196608, "é", 1), (1048576, "😀", 3)]
"""(a byte offset, a character, how many of its bytes lie before the offset): characters cut by the
reference's 64 KiB chunks, and by a chunk of any power of two up to 1 MiB."""


def chunk_cut_file() -> tuple[dict, list[dict]]:
    """A 1 MB UTF-8 text file with each CHUNK_CUTS character across its offset, two bytes into its line
    (a decoder that forgets the head of a cut character refuses the file; a chunk's end is not a line's),
    its last line without a newline, and the windows read in it: its first line, each line with a cut
    character, the last line and one past it."""
    pieces, at, marks = [], 0, []
    for offset, char, before in CHUNK_CUTS:
        line = f"> {char} across byte {offset}\n".encode()
        pieces += filled(at, offset - before - 2)
        pieces.append([line.hex(), 1])
        marks.append(sum(times for _, times in pieces))
        at = offset - before - 2 + len(line)
    pieces += filled(at, at + 1000) + [[b"the end".hex(), 1]]
    total = sum(times for _, times in pieces)
    windows = [{"limit": 1}, {"offset": total}, {"offset": total + 1}]
    for line in marks:
        windows += [{"offset": line}, {"offset": line - 1, "limit": 3}]
    cuts = ", ".join(f"{char} across byte {offset} (line {line})" for (offset, char, _), line in zip(CHUNK_CUTS, marks))
    entry = {"path": "chunks.txt", "type": "pieces", "pieces": pieces,
             "what": f"{total} lines of up to {len(FILLER)} bytes, {cuts}, the last one without a newline"}
    return entry, windows


FAR_LINE = 13_001
"""The line of far.txt that starts with a bad byte sequence, at byte 1,300,000: more than 1 MiB past the end
of a window of the default 2,000 lines from the start (200,000 bytes), so every read of such a window
serves the file, whatever its chunks (of up to 1 MiB); a read that reaches the line meets it."""
FAR_BYTE = (FAR_LINE - 1) * len(FILLER)


def far_bad_file(bad: str) -> tuple[dict, list[dict]]:
    """A text file with `bad` (of BAD_BYTES) far past the windows read first, and windows that end more than
    1 MiB before it, at it and after it."""
    pieces = [[FILLER.hex(), FAR_LINE - 1], [(BAD_BYTES[bad] + b" past the window\n").hex(), 1], [FILLER.hex(), 10]]
    windows = [{"limit": 1}, {}, {"offset": 2, "limit": 3}, {"offset": 1000, "limit": 5}, {"offset": FAR_LINE},
               {"offset": FAR_LINE + 2}]
    entry = {"path": "far.txt", "type": "pieces", "pieces": pieces,
             "what": f"lines of {len(FILLER)} bytes, {bad} at byte {FAR_BYTE} (the start of line {FAR_LINE}), "
                     "10 more lines"}
    return entry, windows


def long_line_file(bad: str) -> tuple[dict, list[dict]]:
    """A file whose first line is 1.3 MB of x with `bad` at byte 1,300,000, then a short line: a window of it
    shows the line's first max_bytes bytes (at most 50 KiB) and stops reading there, more than 1 MiB before
    the bad sequence; a read of the second line reads the whole first one and meets it."""
    pieces = [["78", FAR_BYTE], [BAD_BYTES[bad].hex(), 1], ["78", 1000], [b"\nthe second line\n".hex(), 1]]
    windows = [{}, {"limit": 1}, {"offset": 2}, {"offset": 3}]
    entry = {"path": "one_line.txt", "type": "pieces", "pieces": pieces,
             "what": f"one line of {FAR_BYTE} x, {bad}, 1000 x, then a second line"}
    return entry, windows


LARGE_BYTES = 11 * 1024 * 1024
"""The size of large.txt: past 10 MiB, a size a tool might wrongly refuse a file for."""


def large_file() -> tuple[dict, list[dict]]:
    """An 11 MiB file: FAR_LINE - 1 lines of text, then NUL bytes to its end (a sparse hole, cheap to make),
    and windows that end more than 1 MiB before the NULs (served) and in them (binary)."""
    entry = {"path": "large.txt", "type": "pieces", "pieces": [[FILLER.hex(), FAR_LINE - 1]], "size": LARGE_BYTES,
             "what": f"{FAR_LINE - 1} lines of {len(FILLER)} bytes, then NUL bytes to {LARGE_BYTES} bytes "
                     "(a sparse file)"}
    return entry, [{"limit": 1}, {}, {"offset": 50, "limit": 2}, {"offset": FAR_LINE}, {"offset": FAR_LINE + 5}]


# ---------------------------------------------------------------- the workspace every plan starts from

NFC_NAME, NFD_NAME = "caf\u00e9.txt", "cafe\u0301.txt"
"""café.txt spelled with é as one character (NFC) and as e and a combining accent (NFD): two names, two files."""
BASE_FILES = {
    "README.md": "# tiny-pi\nA small agent runtime.\n",
    "docs/guide.md": "# Guide\nRead the docs.\n",
    "a/b/c/deep.txt": "deep inside\n",
    NFC_NAME: "the name with é composed (NFC)\n",
    NFD_NAME: "the name with e and a combining accent (NFD)\n",
    ".env": "A_DOTFILE=read like any other file\n",
    "docs/.notes.md": "a dotfile in a directory\n",
}
NAMES = [NFC_NAME, NFD_NAME, ".env", "docs/.notes.md"]
"""Names a tool must take as the bytes they are: both spellings of café.txt, and dotfiles."""
OTHER_CASE = ["readme.md", "README.MD", "Docs/guide.md", "docs/GUIDE.md", "DL/guide.md"]
"""Names that differ from an existing one only in case: not found (names are case-sensitive)."""
LINKS = {
    "docs/readme": "../README.md",  # inside
    "in_abs": "{root}/docs/guide.md",  # inside, through the root as given (a link when the root is one)
    "in_real": "{real}/docs/guide.md",  # inside, through the real directory
    "c1": "c2", "c2": "README.md",  # a chain inside
    "dl": "docs",  # a directory link inside
    "here": ".",  # the workspace itself, again and again
    "docs/inner": "../a/b",  # climbs, but stays inside
    "a/b/abs_readme": "{root}/README.md",  # an absolute target met below the root
    "out_abs": "{tmp}/secret.txt", "out_rel": "../secret.txt", "out_dir": "{tmp}/outside",
    "a/b/c/deep_out": "../../../../secret.txt", "slash": "/", "docs/up2": "../..",
    "prefix": "{real}-evil/secret.txt", "fifolink": "{tmp}/fifo", "in_then_up": "{real}/../secret.txt",
    "dotdot_middle": "docs/../../secret.txt", "chain_out": "c3", "c3": "{tmp}/secret.txt",
    "loop1": "loop2", "loop2": "loop1", "self": "self", "dirloop": "dirloop/x",
    # loops that pass through a directory on every turn: a count of links kept per directory never ends them
    "ring/back": "../ring/back", "ring/abs": "{real}/ring/abs", "ring/there": "../docs/to_ring",
    "docs/to_ring": "../ring/there", "ring/via_dl": "../dl/to_ring_dl", "docs/to_ring_dl": "../ring/via_dl",
    # the root itself, absolutely (real_again), reached through an absolute ".." that stays inside: inside
    "root_again": "{root}/docs/../real_again", "real_again": "{real}",
    "dangling": "nope.md", "dangling_abs": "{real}/nope.md",  # inside, to nothing: not found
    "dangling_out": "{tmp}/nope.txt",  # outside, to nothing: refused as outside, not as missing
    "slashy": ".//docs/./",  # a target spelled with ./, // and a trailing /
}
LONG_NAMES = ["n" * 255, "汉" * 85, "é" * 127]
"""File names of 255 bytes or just under: they exist. One byte or character more is too long."""


def base_entries() -> list[dict]:
    entries = [{"path": p, "type": "file", "hex": t.encode().hex()} for p, t in BASE_FILES.items()]
    entries += [{"path": name, "type": "file", "hex": b"long name\n".hex()} for name in LONG_NAMES]
    return entries + [{"path": p, "type": "link", "target": t} for p, t in LINKS.items()]


INSIDE = ["README.md", "docs/guide.md", "a/b/c/deep.txt", "docs/readme", "in_abs", "in_real", "c1", "dl/guide.md",
          "here/here/README.md", "docs/inner/c/deep.txt", "a/b/abs_readme", *LONG_NAMES, *NAMES]
OUTSIDE_LINKS = ["out_abs", "out_rel", "out_dir/secret.txt", "a/b/c/deep_out", "slash/etc/passwd",
                 "docs/up2/secret.txt", "docs/inner/c/deep_out", "prefix", "fifolink", "in_then_up",
                 "dotdot_middle", "chain_out", "dl/up2/secret.txt"]
LINK_EDGES = ["dangling_out", "root_again/README.md", "real_again/docs/guide.md", "dangling", "dangling_abs",
              "slashy/guide.md"]
"""Links to nothing outside and inside, to the root itself (reached through an absolute ".." that stays inside),
and one whose target is spelled with ./ and //."""
LOOPS = ["loop1", "self", "dirloop", "here/loop2", "ring/back", "ring/abs", "ring/there", "docs/to_ring",
         "ring/via_dl", "dl/to_ring", "here/ring/back/x"]
ABSOLUTE_OUTSIDE = ["{tmp}/secret.txt", "/etc/passwd", "{real}-evil/secret.txt", "{root}-evil/secret.txt",
                    "/proc/self/root{real}/README.md", "{tmp}/outside/secret.txt", "{tmp}", "/"]
TOO_LONG = ["n" * 256, "docs/" + "x" * 256, "." + "/" * 4087 + "README.md", "./" * 2044 + "docs/guide.md"]
TOO_LONG_IN_BYTES = ["汉" * 86, "é" * 128, "/".join(["汉" * 80] * 17) + "/x.txt",
                     "/".join(["é" * 120] * 17) + "/x.txt"]
"""Too long in bytes, not in characters: names of 258 and 256 bytes, paths of 4102 bytes (1382 and 2062 characters)."""
FIT = ["." + "/" * 4085 + "README.md", "./" * 2040 + "docs/guide.md"]
"""4095 and 4093 bytes: just inside. (At exactly 4096 bytes the kernel and the chapter disagree; no plan goes there.)"""


@st.composite
def spelled(draw, relative: str) -> str:
    """`relative` as a model may spell it: as it is, with ./ and //, absolute through the root as given (also
    with // around it), through the real directory, through /proc, or with a .. that climbs back in."""
    how = draw(st.sampled_from(["plain", "plain", "dot", "double", "root", "real", "root_dot", "root_double", "proc",
                                "climb", "parent_in"]))
    return {"plain": relative, "dot": "./" + relative, "double": relative.replace("/", "//"),
            "root": "{root}/" + relative, "real": "{real}/" + relative, "root_dot": "{root}/./" + relative,
            "root_double": "/{root}//" + relative,
            "proc": "/proc/self/root{real}/" + relative, "climb": "{root}/../ws/" + relative,
            "parent_in": "docs/../" + relative}[how]


@st.composite
def escape_reads(draw) -> dict:
    """One read of an escape plan: a path of one kind (`KINDS`), spelled as a model may."""
    kind = draw(st.sampled_from(["inside", "inside", "outside_link", "link_edge", "loop", "absolute", "too_long",
                                 "too_long_in_bytes", "fit", "links", "names"]))
    if kind == "inside":
        path = draw(spelled(draw(st.sampled_from(INSIDE))))
    elif kind == "names":
        path = draw(spelled(draw(st.sampled_from(NAMES + OTHER_CASE))))
    elif kind == "outside_link":
        path = draw(spelled(draw(st.sampled_from(OUTSIDE_LINKS))))
    elif kind == "link_edge":
        path = draw(spelled(draw(st.sampled_from(LINK_EDGES))))
    elif kind == "loop":
        path = draw(spelled(draw(st.sampled_from(LOOPS))))
    elif kind == "absolute":
        path = draw(st.sampled_from(ABSOLUTE_OUTSIDE))
    elif kind == "too_long":
        path = draw(st.sampled_from(TOO_LONG))
    elif kind == "too_long_in_bytes":
        path = draw(st.sampled_from(TOO_LONG_IN_BYTES))
    elif kind == "fit":
        path = draw(st.sampled_from(FIT))
    else:
        links = draw(st.sampled_from([1, 39, 40, 40, 41, 41, 45]))  # the walk follows at most 40 links
        path = "here/" * links + draw(st.sampled_from(["README.md", "docs/guide.md"]))
    return {"kind": ESCAPE_KINDS[kind], "arguments": {"path": path}}


ESCAPE_KINDS = {"inside": "inside", "names": "names", "outside_link": "links-out", "link_edge": "link-edges",
                "loop": "link-loops", "links": "link-count", "absolute": "absolute-outside", "too_long": "too-long",
                "too_long_in_bytes": "too-long", "fit": "just-fits"}


def root_options(draw) -> dict:
    return {"rootLink": draw(st.booleans()),
            "rootSpelling": draw(st.sampled_from(["str", "str", "path", "slash", "relative"]))}


@st.composite
def escape_plans(draw) -> dict:
    reads = draw(st.lists(escape_reads(), min_size=3, max_size=8))
    return {**root_options(draw), "caps": {}, "entries": base_entries(), "reads": reads}


# ---------------------------------------------------------------- 真实往返: reads in one batch through the loop


@st.composite
def round_trip_plans(draw) -> dict:
    max_lines = draw(st.integers(1, 6))
    files = {f"notes{n}.txt": draw(text_files(max_lines)) for n in range(draw(st.integers(1, 3)))}
    entries = base_entries() + [{"path": name, "type": "file", "hex": t.encode().hex()} for name, t in files.items()]
    paths = st.one_of(st.sampled_from(list(files)).flatmap(spelled), st.sampled_from(INSIDE[:10]).flatmap(spelled))
    caps = {"max_lines": max_lines, "max_bytes": draw(st.integers(8, 80))} if draw(st.booleans()) else {}
    reads = [{"kind": "loop-read", "arguments": {"path": p}} for p in draw(st.lists(paths, min_size=1, max_size=4))]
    return {**root_options(draw), "caps": caps, "entries": entries, "reads": reads, "loop": True}


# ---------------------------------------------------------------- 截断: windows at and next to every edge


@st.composite
def truncation_plans(draw) -> dict:
    max_lines = draw(st.integers(1, 5))
    data = draw(text_files(max_lines)).encode()
    n = line_count(data)
    max_bytes = draw(st.sampled_from(byte_boundaries(data)))
    caps = draw(st.sampled_from([{"max_lines": max_lines, "max_bytes": max_bytes}] * 4
                                + [{"max_lines": max_lines}, {"max_bytes": max_bytes}, {}]))
    lines = caps.get("max_lines", DEFAULT_MAX_LINES)
    offsets = st.sampled_from([None, None, 1, 2, n - 1, n, n + 1, n + 2, lines, lines + 1])
    limits = st.sampled_from([None, None, 1, 2, lines - 1, lines, lines + 1, 2 * lines, n, n + 1])

    @st.composite
    def reads(draw2):
        arguments = {"path": "notes.txt"}
        offset, limit = draw2(offsets), draw2(limits)
        if offset is not None and offset >= 1:
            arguments["offset"] = offset
        if limit is not None and limit >= 1:
            arguments["limit"] = limit
        follow = draw2(st.sampled_from([0, 0, n + 2]))
        return {"kind": "reading-on" if follow else "window", "arguments": arguments, "follow": follow}

    entries = [{"path": "notes.txt", "type": "file", "hex": data.hex()}, {"path": "empty.txt", "type": "file", "hex": ""}]
    chosen = draw(st.lists(reads(), min_size=1, max_size=3))
    if draw(st.integers(0, 4)) == 0:
        chosen.append({"kind": "empty-file",
                       "arguments": {"path": "empty.txt", **({"offset": 2} if draw(st.booleans()) else {})}})
    return {"rootLink": False, "rootSpelling": "str", "caps": caps, "entries": entries, "reads": chosen}


# ---------------------------------------------------------------- 拒绝: everything that is not a text file to read

SCHEMA_BREAKERS = [{"offset": 0}, {"offset": -1}, {"limit": 0}, {"limit": -1}, {"offset": "2"}, {"offset": 1.5},
                   {"offset": True}, {"limit": None}, {"mode": "w"}]


@st.composite
def refusal_reads(draw, windows: dict[str, list[dict]]) -> dict:
    kind = draw(st.sampled_from(["bad", "bad", "bad", "special", "path", "names", "schema", "past_end", "gone"]))
    if kind == "bad":
        path = draw(st.sampled_from(sorted(windows)))
        return {"kind": "bad-bytes", "arguments": {"path": path, **draw(st.sampled_from(windows[path]))}}
    if kind == "special":
        return {"kind": "special", "arguments": {"path": draw(st.sampled_from(
            ["pipelink", "docs", ".", "pipe", "agent.sock", "null", "dl", "docs/", "{root}", "{real}"]))}}
    if kind == "path":
        return {"kind": "paths", "arguments": {"path": draw(st.sampled_from(
            ["", "nope.md", "nope/x.md", "README.md/x", "README.md\0", "docs\0/guide.md", "\udcff.md", "empty.txt/x"]))}}
    if kind == "names":
        return {"kind": "names-again", "arguments": {"path": draw(st.sampled_from(NAMES + OTHER_CASE))}}
    if kind == "schema":
        breaker = draw(st.sampled_from(SCHEMA_BREAKERS + [{"path": 7}, {"path": None}, {"path": ["README.md"]}, {}]))
        return {"kind": "schema", "arguments": {"path": "README.md", **breaker} if "path" not in breaker and breaker
                else {k: v for k, v in breaker.items()}}
    if kind == "gone":
        return {"kind": "gone", "vanish": True, "arguments": {"path": draw(st.sampled_from(
            ["README.md", "docs/guide.md", "nope.md", "{root}/README.md"]))}}
    path, lines = draw(st.sampled_from([("README.md", 2), ("empty.txt", 0)]))
    return {"kind": "past-end",
            "arguments": {"path": path, "offset": draw(st.sampled_from([max(lines, 1), lines + 1, lines + 2, 10**9]))}}


BIG_FILES = {"chunks": lambda bad: chunk_cut_file(), "far": far_bad_file, "one_line": long_line_file,
             "large": lambda bad: large_file()}
"""The 1 MB and larger files a refusal plan may hold (up to two of them), each read twice."""
BIG_KINDS = {"chunks": "chunk-cuts", "far": "far-bytes", "one_line": "long-line-far", "large": "large-file"}


@st.composite
def refusal_plans(draw) -> dict:
    files = {f"bad{n}.txt": draw(bad_files()) for n in range(draw(st.integers(1, 3)))}
    entries = base_entries() + [{"path": name, "type": "file", "hex": f["hex"], "what": f["what"]}
                                for name, f in files.items()]
    entries += [{"path": "empty.txt", "type": "file", "hex": ""}, {"path": "pipe", "type": "fifo"},
                {"path": "agent.sock", "type": "socket"}, {"path": "null", "type": "device"},
                {"path": "pipelink", "type": "link", "target": "pipe"},  # the FIFO, reached through a link
                {"path": CUT_AT_THE_END[0], "type": "file", "hex": CUT_AT_THE_END[1].hex()}]
    caps = draw(st.sampled_from([{}, {"max_lines": 1}, {"max_lines": 2, "max_bytes": 30}, {"max_bytes": 5}]))
    windows = {name: f["windows"] for name, f in files.items()}
    windows[CUT_AT_THE_END[0]] = [{}, {"limit": 1}, {"offset": 2, "limit": 1}]  # every read reads it to its end
    reads = draw(st.lists(refusal_reads(windows), min_size=2, max_size=6))
    # One number picks the big files and their windows: Hypothesis's own choices would favour a few of them.
    pick = draw(st.integers(0, 2**32))
    bad = list(BAD_BYTES)[pick % len(BAD_BYTES)]
    pick //= len(BAD_BYTES)
    names = list(BIG_FILES)
    chosen = dict.fromkeys(names[n - 1] for n in (pick % 5, pick // 5 % 5) if n)  # none, one or two of them
    pick //= 25
    for name in chosen:  # two reads of each: they are 1 MB or more
        entry, big_windows = BIG_FILES[name](bad)
        entries.append(entry)
        reads += [{"kind": BIG_KINDS[name], "arguments": {"path": entry["path"], **big_windows[pick % len(big_windows)]}},
                  {"kind": BIG_KINDS[name],
                   "arguments": {"path": entry["path"], **big_windows[pick // len(big_windows) % len(big_windows)]}}]
        pick //= len(big_windows) ** 2
    return {**root_options(draw), "caps": caps, "entries": entries, "reads": reads}


# ---------------------------------------------------------------- 中止: aborted before and during a read

BIG_LINES = 40_000
"""A 2.5 MB file: a far window in it is read in many chunks by any tool that reads in chunks at all."""


@st.composite
def abort_reads(draw, big: bool) -> dict:
    """A far read in big.txt under any signal, or cancelled at its first yield; or a read of a small file
    (an empty one, a window of one line: nothing a second chunk would add) with its signal aborted before
    it, never aborted, or absent. (A small read aborted or cancelled at its first yield is left out: whether
    a reader yields before it knows the file ended, it reads in one chunk, is its own choice.)"""
    if big and draw(st.booleans()):
        offset = draw(st.sampled_from([BIG_LINES - 1, BIG_LINES, 36_000]))
        mode = draw(st.sampled_from(["during", "during", "cancel", "cancel", "before", "fresh", "none"]))
        kind = {"cancel": "far-cancel", "fresh": "far-unaborted", "none": "far-unaborted"}.get(mode, "far-abort")
        return {"kind": kind, "arguments": {"path": "big.txt", "offset": offset}, "signal": mode}
    path = draw(st.sampled_from(["README.md", "empty.txt", "empty.txt", "docs/guide.md", "docs/readme", ".env"]))
    window = draw(st.sampled_from([{}, {"limit": 1}, {"limit": 1}, {"offset": 2}, {"offset": 2, "limit": 1}]))
    return {"kind": "small-read", "arguments": {"path": path, **window},
            "signal": draw(st.sampled_from(["before", "before", "fresh", "none"]))}


@st.composite
def abort_plans(draw) -> dict:
    big = draw(st.integers(0, 2)) > 0
    entries = base_entries() + [{"path": "empty.txt", "type": "file", "hex": ""}]
    if big:
        entries.append({"path": "big.txt", "type": "big", "lines": BIG_LINES, "width": 64})
    reads = draw(st.lists(abort_reads(big), min_size=1, max_size=3))
    return {**root_options(draw), "caps": {}, "entries": entries, "reads": reads}


STRATEGIES = {
    "roundtrip": round_trip_plans(),
    "escape": escape_plans(),
    "refuse": refusal_plans(),
    "truncate": truncation_plans(),
    "abort": abort_plans(),
}
EXAMPLES = {"roundtrip": 8, "escape": 20, "refuse": 20, "truncate": 30, "abort": 10}


# ---------------------------------------------------------------- what each kind of read holds a tool to

@dataclass(frozen=True)
class PlanKind:
    """A kind of read a plan makes: the section whose plans make it and the chapter's sentences it holds the
    tool to (names of the contract's CITES, chapters/ch08_workspace_read/judge/contract.py)."""

    section: str
    cites: tuple[str, ...]


KINDS: dict[str, PlanKind] = {
    "loop-read": PlanKind("roundtrip", ("real-file", "content-lines", "inside-links", "details")),
    "inside": PlanKind("escape", ("split-only-slash", "absolute-inside", "inside-links", "walk")),
    "names": PlanKind("escape", ("names-bytes",)),
    "links-out": PlanKind("escape", ("absolute-target", "relative-target", "climbs", "opens-nothing-outside")),
    "link-edges": PlanKind("escape", ("absolute-target", "not-found", "ends-at-directory", "split-only-slash")),
    "link-loops": PlanKind("escape", ("symlink-limit", "loop")),
    "link-count": PlanKind("escape", ("symlink-limit",)),
    "absolute-outside": PlanKind("escape", ("outside", "absolute-by-components")),
    "too-long": PlanKind("escape", ("too-long-path", "too-long-name")),
    "just-fits": PlanKind("escape", ("too-long-path", "split-only-slash")),
    "bad-bytes": PlanKind("refuse", ("bytes-judged", "eof-flush")),
    "special": PlanKind("refuse", ("type-before-open", "directory", "root-directory", "ends-at-directory")),
    "paths": PlanKind("refuse", ("empty", "not-found", "not-a-directory", "nul")),
    "names-again": PlanKind("refuse", ("names-bytes",)),
    "schema": PlanKind("refuse", ("schema",)),
    "past-end": PlanKind("refuse", ("offset-beyond", "empty-file")),
    "gone": PlanKind("refuse", ("root-opened", "os-error")),
    "chunk-cuts": PlanKind("refuse", ("incremental",)),
    "far-bytes": PlanKind("refuse", ("judged-when-read", "chunks")),
    "long-line-far": PlanKind("refuse", ("long-line-cut", "judged-when-read", "chunks")),
    "large-file": PlanKind("refuse", ("no-size-refusal", "judged-when-read", "chunks")),
    "window": PlanKind("truncate", ("body", "details", "lines")),
    "reading-on": PlanKind("truncate", ("reassemble", "last-page", "notice-format")),
    "empty-file": PlanKind("truncate", ("empty-file", "offset-beyond")),
    "far-abort": PlanKind("abort", ("abort-before-chunk", "yield", "cancel-closes")),
    "far-cancel": PlanKind("abort", ("yield", "cancel-closes")),
    "far-unaborted": PlanKind("abort", ("abort-before-chunk", "chunks")),
    "small-read": PlanKind("abort", ("aborted-even-small",)),
}
"""Every read a plan makes is of one kind (`read["kind"]`); a plan holds a tool to what its reads' kinds do."""
CHAPTER_SECTIONS = tuple(STRATEGIES)
HARDENING_SECTIONS: dict[str, str] = {}
"""None: no plan swaps a file or directory between the tool's check and its open, the only thing beyond the
chapter that chapter 08's checks hold a tool to (its fixed tests of the section 加固 do)."""


def beyond_the_chapter(plan: dict) -> list[str]:
    """The hardening promises a plan leans on: none (every plan stays inside the chapter's contract)."""
    return []


def _spelling_cites(path) -> list[str]:
    """The sentences a path's spelling holds a tool to, besides its kind's."""
    if not isinstance(path, str):
        return []
    found = []
    if "/proc/self/root" in path:
        found.append("absolute-by-components")
    if ".." in path.split("/"):
        found += ["parent", "parent-before-absolute"] if path.startswith(("{", "/")) else ["parent"]
    elif path.startswith(("{root}", "{real}", "/{root}")):
        found.append("absolute-inside")
    if "\udcff" in path:  # a lone surrogate
        found.append("unicode")
    return found


def _window_cites(read: dict, plan: dict) -> list[str]:
    """The rows of the window's table a truncation read meets, and the lines of its file."""
    caps = plan.get("caps") or {}
    limit = read["arguments"].get("limit")
    found = ["cap-limit" if isinstance(limit, int) and limit < caps.get("max_lines", DEFAULT_MAX_LINES)
             else "cap-max-lines"]
    if "max_bytes" in caps:
        found += ["cap-max-bytes", "long-line"]
    data = b"".join(bytes.fromhex(e.get("hex", "")) for e in plan.get("entries", []) if e.get("type") == "file")
    if b"\r" in data:
        found.append("only-newline")
    if "\ufeff".encode() in data:
        found.append("bom")
    return found


def read_cites(read: dict, plan: dict) -> list[str]:
    """What one read of a plan holds a tool to: its kind's sentences, then those its path's spelling adds."""
    kind = KINDS.get(read.get("kind"))
    if kind is None:
        return []
    names = list(kind.cites)
    if read.get("kind") == "window":
        names += _window_cites(read, plan)
    return names + _spelling_cites((read.get("arguments") or {}).get("path"))


def _root_cites(plan: dict) -> list[str]:
    return (["root-link"] if plan.get("rootLink") else []) + \
        (["root-absolute"] if plan.get("rootSpelling") == "relative" else [])


def cites_of(plan: dict) -> tuple[str, ...]:
    """What a plan holds a tool to: what each of its reads does (in order), and its root."""
    names = [name for read in plan.get("reads", []) for name in read_cites(read, plan)]
    return tuple(dict.fromkeys(names + _root_cites(plan)))


def cites_at(plan: dict, section: str) -> tuple[str, ...]:
    """What the read whose rendering (`## read N`) a run first departs at holds a tool to, and the plan's
    root; () when that read is not one of the plan's own (a read on from a notice: the plan's whole list
    applies)."""
    reads = plan.get("reads", [])
    number = section.removeprefix("read ")
    if not number.isdigit() or any(read.get("follow") for read in reads) or not 1 <= int(number) <= len(reads):
        return ()
    return tuple(dict.fromkeys(read_cites(reads[int(number) - 1], plan) + _root_cites(plan)))


# ---------------------------------------------------------------- how a run is shown

SIGNALS = {"fresh": "a signal that is never aborted", "before": "aborted before the read",
           "during": "aborted at the read's first yield to the event loop",
           "cancel": "its task cancelled at the read's first yield to the event loop"}


def visible(value) -> str:
    """A string (or any JSON value) as JSON, with every character that does not print escaped, and every
    combining one (so that an NFD name does not look like its NFC spelling)."""
    try:
        shown = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        shown = repr(value)
    shown = "".join(c if c.isprintable() and not unicodedata.combining(c) else _escape(c) for c in shown)
    return re.sub(r"(.)\1{19,}", lambda m: f"{m.group(1)}⟨×{len(m.group())}⟩", shown)


def _escape(c: str) -> str:
    return f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}"


def _text_of(content) -> str | None:
    if not isinstance(content, list):
        return None
    texts = [b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"]
    return "".join(t for t in texts if isinstance(t, str))


def render_result(result, arguments, caps: dict) -> list[str]:
    if not isinstance(result, dict):
        return [f"result     not a tool result: {visible(result)}"]
    content, details = result.get("content"), result.get("details")
    body = _text_of(content)
    out = []
    single = isinstance(content, list) and len(content) == 1 and isinstance(content[0], dict) \
        and set(content[0]) == {"type", "text"} and content[0]["type"] == "text"
    if result.get("isError") is True:
        if isinstance(details, dict) and isinstance(details.get("error"), str):
            out.append(f"result     error {visible(details)}")
        elif (body or "").startswith("Invalid arguments for tool read"):
            out.append("result     error: refused by the schema")
        else:
            out.append(f"result     error {visible(details)}: {visible(body)}")
        if SECRET in (body or ""):
            out.append("secret shown  yes")
        if "Traceback" in (body or ""):
            out.append("traceback shown  yes")
        return out
    out.append(f"result     ok {visible(details)}" + ("" if result.get("isError") is False
                                                      else f" (isError {visible(result.get('isError'))})"))
    if not single:
        out.append(f"content    {visible(content)}")
        return out
    limit = arguments.get("limit") if isinstance(arguments, dict) else None
    lines = caps.get("max_lines", DEFAULT_MAX_LINES)
    if limit == lines:  # both caps are met at once: the notice may name either
        body = body.replace(f" (at most {lines} line{'s' * (lines != 1)} per read)", "")
    out += ["  " + visible(line) for line in body.split("\n")]
    return out


def render_outcome(outcome: dict, arguments, caps: dict) -> list[str]:
    if outcome.get("timedOut"):
        out = ["result     did not finish: interrupted after its time bound"]
    elif "raised" in outcome:
        out = [f"result     raised {outcome['raised']}"]
    elif "result" in outcome:
        out = render_result(outcome.get("result"), arguments, caps)
    else:
        out = []
    if outcome.get("fdsLeft"):
        out.append(f"descriptors left open  {outcome['fdsLeft']}")
    out += [f"opened outside the workspace  {path}" for path in outcome.get("openedOutside") or []]
    # Read calls the recorder saw (os.read and its kin): one in flight when the signal is aborted, or before
    # the first yield, is every correct reader's; more are not (a chunk is one read call).
    late = outcome.get("readsAfterAbort")
    if isinstance(late, int) and late > 1:
        out.append(f"read calls after the signal was aborted  {late} (at most one in flight may finish)")
    early = outcome.get("readsBeforeFirstYield")
    if isinstance(early, int) and early > 1:
        out.append(f"read calls before the first yield to the event loop  {early} (one chunk, then a yield)")
    return out


def render_reads(record: dict) -> str:
    caps = record.get("caps") or {}
    if "createRaised" in record:
        return f"## tool\ncreate_read_tool raised {record['createRaised']}\n"
    out: list[str] = []
    loop = record.get("loop")
    if loop is not None:
        run = loop.get("run") or {}
        calls = {}
        for message in run.get("messages") or []:
            for block in message.get("content") or [] if message.get("role") == "assistant" else []:
                if isinstance(block, dict) and block.get("type") == "toolCall":
                    calls[block.get("id")] = block.get("arguments")
        out.append("## loop")
        if "run" in loop:
            out += [f"reason     {visible(run.get('reason'))}", f"steps      {visible(run.get('steps'))}"]
        else:
            out += render_outcome(loop, {}, caps)
        if loop.get("fdsLeft"):
            out.append(f"descriptors left open  {loop['fdsLeft']}")
        out += [f"opened outside the workspace  {path}" for path in loop.get("openedOutside") or []]
        results = [m for m in run.get("messages") or [] if m.get("role") == "toolResult"]
        for n, message in enumerate(results, 1):
            arguments = calls.get(message.get("toolCallId"))
            out += ["", f"## read {n}", f"arguments  {visible(arguments)}"]
            out += render_result(message, arguments, caps)
    for n, read in enumerate(record.get("reads") or [], 1):
        out += ["" if out else None, f"## read {n}", f"arguments  {visible(read.get('arguments'))}"]
        if read.get("signal", "none") != "none":
            out.append(f"signal     {SIGNALS.get(read['signal'], read['signal'])}")
        if read.get("vanish"):
            out.append("root       gone: the workspace directory was renamed away for this read")
        if "progressReports" in read:
            out.append(f"progress   {read['progressReports']}")
        out += render_outcome(read, read.get("arguments"), caps)
    if record.get("openedSomething") is not None:
        out += ["", f"seen opening files  {'yes' if record['openedSomething'] else 'no'}"]
    return "\n".join(line for line in out if line is not None) + "\n"


def render_tool_result(record: dict) -> str:
    """A result exactly as the fixed scenarios snapshot it (the whole message as JSON), and what else the test saw."""
    out = json_text(record.get("result")) + "\n"
    if record.get("blocked"):
        out += "blocked: the read waited on a FIFO until the test opened its other end\n"
    if "openedSpecial" in record:
        out += f"the special file was opened  {'yes' if record['openedSpecial'] else 'no'}\n"
        out += f"the probe saw the test open it  {'yes' if record.get('probeSeesOpens') else 'no'}\n"
    return out


def render_refusal_check(record: dict) -> str:
    """An escape attempt: refused, with which reason, and nothing shown or opened that lies outside."""
    result = record.get("result") if isinstance(record.get("result"), dict) else {}
    body = _text_of(result.get("content")) or ""
    opened = record.get("openedOutside") or []
    lines = [f"isError          {visible(result.get('isError'))}",
             f"details          {visible(result.get('details'))}",
             f"secret shown     {'yes' if SECRET in body else 'no'}",
             f"traceback shown  {'yes' if 'Traceback' in body else 'no'}",
             "opened outside the workspace  " + (", ".join(opened) if opened else "nothing")]
    if record.get("swapped") is not None:
        lines.append(f"blocked on the FIFO swapped in  {'yes' if record.get('blocked') else 'no'}")
        read_swap = record["swapped"] and result.get("isError") is not True
        lines.append(f"read what was swapped in  {'yes' if read_swap else 'no'}")
        lines = [line for line in lines if not line.startswith(("isError", "details"))]
    return "\n".join(lines) + "\n"


def render_facts(record: dict) -> str:
    facts = record.get("facts") if isinstance(record.get("facts"), dict) else {}
    width = max([len(k) for k in facts] or [0])
    return "".join(f"{k:<{width}}  {visible(v)}\n" for k, v in facts.items())


RENDERERS = {"workspace-reads": render_reads, "tool-result": render_tool_result,
             "refusal-check": render_refusal_check, "facts": render_facts}


# ---------------------------------------------------------------- the plan in words


def _bytes(hex_text: str) -> str:
    data = bytes.fromhex(hex_text)
    shown = repr(data)
    return shown if len(shown) <= 160 else f"{shown[:150]}...' ({len(data)} bytes)"


def describe(plan: dict) -> str:
    root = "{tmp}/ws, a symbolic link to {tmp}/ws-real" if plan.get("rootLink") else "{tmp}/ws"
    spelling = {"path": " (handed over as a pathlib.Path)", "slash": " (handed over with a trailing /)",
                "relative": ' (handed over as "ws", relative to {tmp}, the current directory while the tool is '
                            "made; the reads are made from {tmp}/outside, which holds a decoy ws/)"}
    parts = [f"root {root}{spelling.get(plan.get('rootSpelling'), '')}",
             "caps " + (", ".join(f"{k}={v}" for k, v in (plan.get("caps") or {}).items()) or "default")]
    base = {e["path"] for e in base_entries()}
    for entry in plan.get("entries", []):
        if entry["path"] in base:
            continue
        if entry["type"] in ("file", "pieces"):
            parts.append(f"{entry['path']}: {entry.get('what') or _bytes(entry['hex'])}"
                         + (f", made {entry['size']} bytes long" if "size" in entry and "what" not in entry else ""))
        elif entry["type"] == "big":
            parts.append(f"{entry['path']}: {entry['lines']} lines of {entry['width']} bytes")
        elif entry["type"] == "link":
            parts.append(f"{entry['path']} -> {entry['target']}")
        else:
            parts.append(f"{entry['path']}: a {entry['type']}")
    present = [e["path"] for e in plan.get("entries", []) if e["path"] in base]
    if len(set(present)) == len(base):
        parts.append("the standard files and links of chapters/ch08_workspace_read/judge/plans.py "
                     "(BASE_FILES, LINKS, LONG_NAMES)")
    elif present:
        parts.append("of the standard files (BASE_FILES): " + ", ".join(visible(p) for p in present))
    how = "one batch of calls through the reference loop" if plan.get("loop") else "one after another"
    reads = []
    for n, read in enumerate(plan.get("reads", []), 1):
        arguments = dict(read["arguments"])
        if isinstance(arguments.get("path"), str) and len(arguments["path"]) > 80:
            p = arguments["path"]
            arguments["path"] = f"{p[:30]}...{p[-30:]} ({len(p.encode('utf-8', 'surrogatepass'))} bytes)"
        words = f"{n}. read {visible(arguments)}"
        if read.get("signal", "none") != "none":
            words += f", {SIGNALS[read['signal']]}"
        if read.get("vanish"):
            words += ", with the workspace directory renamed away"
        if read.get("follow"):
            words += f", then read on from each nextOffset (at most {read['follow']} more)"
        reads.append(words)
    return " | ".join(parts) + f" || reads ({how}): " + "; ".join(reads)
