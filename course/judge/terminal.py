"""Colour and screen clearing for the `course` commands, only where the output is a terminal.

Colour follows https://no-color.org: `NO_COLOR` (or `ANSI_COLORS_DISABLED`) set to anything but
the empty string turns it off, `FORCE_COLOR` turns it on even through a pipe, `TERM=dumb` and a
stream that is not a terminal (a file, a pipe, pytest's capture) get plain text. The escape codes
come from termcolor (in the test extra, the student install); without it the text stays plain.

    paint("FAIL", "fail")   # red and bold on a terminal, "FAIL" elsewhere
    clear_screen()          # a fresh screen for `course watch`'s next run, on a terminal only
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

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
