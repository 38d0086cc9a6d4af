"""TINY_PI_BUSY's spinners (conftest.py): they load the machine beside a session and never outlive it."""

import os
import subprocess
import sys
import time
from pathlib import Path

from conftest import SPINNER

PATIENCE = 120
"""Seconds a spinner may take to notice its session is gone, however loaded the machine (it notices in one
inner loop of its own, milliseconds)."""


def gone(pid: int) -> bool:
    """Whether the process has ended (a zombie its new parent has not reaped yet counts as ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


def test_a_spinner_ends_when_the_session_that_started_it_is_killed_outright():
    session = subprocess.Popen(
        [sys.executable, "-c", "import os, subprocess, sys, time\n"
         f"spinner = subprocess.Popen([sys.executable, '-c', {SPINNER!r}, str(os.getpid())])\n"
         "print(spinner.pid, flush=True)\ntime.sleep(600)\n"], stdout=subprocess.PIPE, text=True)
    spinner = int(session.stdout.readline())
    assert not gone(spinner)  # (it spins while its session lives)
    session.kill()  # no teardown runs: the spinner must see it by itself
    session.wait()
    session.stdout.close()
    deadline = time.monotonic() + PATIENCE
    while not gone(spinner) and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        assert gone(spinner), f"spinner {spinner} outlived its session"
    finally:
        if not gone(spinner):
            os.kill(spinner, 9)
