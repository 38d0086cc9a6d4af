"""Colour and screen clearing for the `course` commands, only where the output is a terminal.

Colour follows https://no-color.org: `NO_COLOR` (or `ANSI_COLORS_DISABLED`) set to anything but
the empty string turns it off, `FORCE_COLOR` turns it on even through a pipe, `TERM=dumb` and a
stream that is not a terminal (a file, a pipe, pytest's capture) get plain text. The escape codes
come from termcolor (in the test extra, the student install); without it the text stays plain.

    paint("FAIL", "fail")   # red and bold on a terminal, "FAIL" elsewhere
    clear_screen()          # a fresh screen for `course watch`'s next run, on a terminal only
    printable(problem)      # a submission's text, its control characters shown as escapes

Text a submission wrote (a problem, a flag, its output, a folder's name) goes through `printable`
before it reaches a terminal: a carriage return or an escape sequence in it could otherwise rewrite
what the command printed (a `flagged` row reading `pass`).
"""

from __future__ import annotations

import os
import sys
import unicodedata
from typing import TextIO

PROBLEM_LENGTH = 300
"""Characters of a submission's text shown on one line at the most (the files written keep it whole)."""
_ESCAPED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
_CONTROL = ("Cc", "Cf", "Cs", "Co", "Zl", "Zp")
"""Unicode categories that move the cursor, reorder or hide text, or are no character at all."""


def printable(text: object, limit: int | None = None) -> str:
    """`text` safe to print: every control character (C0, DEL, C1: carriage returns, escape sequences),
    format character (bidirectional overrides, zero widths), line separator and lone surrogate shown
    as its escape (`\\r`, `\\x1b`, `\\u202e`); cut after `limit` characters with "…"."""
    text = str(text)
    if limit is not None and len(text) > limit:
        text = text[:limit] + "…"
    if text.isprintable():
        return text
    shown = []
    for char in text:
        if char in _ESCAPED:
            shown.append(_ESCAPED[char])
        elif unicodedata.category(char) in _CONTROL:
            code = ord(char)
            shown.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        else:
            shown.append(char)
    return "".join(shown)

# Each style: (termcolor colour, attributes).
STYLES: dict[str, tuple[str | None, tuple[str, ...]]] = {
    "fail": ("red", ("bold",)),
    "pass": ("green", ()),
    "warn": ("yellow", ()),
    "dim": ("dark_grey", ()),
    "hint": ("cyan", ()),
    "bold": (None, ("bold",)),
}

# Home, erase the screen, erase the scrollback: what `clear` does, so the new run starts at the top.
CLEAR = "\033[H\033[2J\033[3J"


def is_terminal(stream: TextIO | None = None) -> bool:
    stream = sys.stdout if stream is None else stream
    try:
        return bool(stream.isatty()) and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


def colour_enabled(stream: TextIO | None = None) -> bool:
    """Whether text written to `stream` (default stdout) should be coloured."""
    if os.environ.get("NO_COLOR") or os.environ.get("ANSI_COLORS_DISABLED"):
        return False
    try:
        import termcolor  # noqa: F401  (the test extra; plain text without it)
    except ImportError:
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return is_terminal(stream)


def paint(text: str, style: str, stream: TextIO | None = None) -> str:
    """`text` in `style` (fail, pass, warn, dim, hint, bold) if `stream` gets colour, else unchanged.

    Each line is painted on its own, so a multi-line text stays coloured line by line when a
    pager or a terminal cuts it."""
    if style not in STYLES:
        raise ValueError(f"unknown style {style!r}; the styles are {', '.join(STYLES)}")
    if not text or not colour_enabled(stream):
        return text
    from termcolor import colored

    colour, attributes = STYLES[style]
    return "\n".join(colored(line, colour, attrs=attributes or None, force_color=True) if line else line
                     for line in text.split("\n"))


def clear_screen(stream: TextIO | None = None) -> bool:
    """Clear the terminal `stream` (default stdout) writes to; do nothing elsewhere (a log keeps
    every run). Returns whether it cleared."""
    stream = sys.stdout if stream is None else stream
    if not is_terminal(stream):
        return False
    stream.write(CLEAR)
    stream.flush()
    return True
