"""What the command tests look for after a run: processes still alive that carry a marker."""

import contextlib
from pathlib import Path


def running_with(marker: str) -> list[int]:
    """Processes whose command line holds `marker` (a path or a word only one test's children use)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
    return found
