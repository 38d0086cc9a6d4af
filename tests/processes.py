"""What the command tests look for after a run: processes still alive that carry a marker."""

import contextlib
from pathlib import Path

from course.judge.sandbox import bubblewrap

TRUSTED = [] if bubblewrap() is not None else ["--trusted"]
"""What a test's `course grade` adds to grade its own submissions where bubblewrap is not installed (the
grade refuses to run without the sandbox unless told the code is trusted): the tests that need the
sandbox itself say that they skip."""


def running_with(marker: str) -> list[int]:
    """Processes whose command line holds `marker` (a path or a word only one test's children use)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
    return found
