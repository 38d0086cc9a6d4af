"""The judge's own bounds, one unit at a time: what `course grade` does with records, names, texts and
folders a hostile submission makes, without grading anything (tests/test_grade_hostile.py grades).

Each test here fails on the judge the red team attacked: quadratic work on forged records, lines
read whole however long, texts no file takes, formulas in the CSV, names taken for another's,
folders copied however large, and scratch directories a user other than root could not remove.
"""

import csv
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from course.judge import grade, invariants, processes, sandbox, session
from course.judge.render import render_record

ROOT = Path(__file__).resolve().parent.parent


# --- F11: a scratch directory is removed whatever permissions a submission left in it -----------------

REMOVE_LOCKED = r"""
import os, sys
from course.judge import processes
with processes.scratch_directory("judge-limits-locked-") as work:
    inner = work / "out" / "locked" / "inner"
    inner.mkdir(parents=True)
    (inner / "file").write_text("x")
    os.chmod(inner, 0)
    os.chmod(inner.parent, 0)
print(work, os.path.lexists(work))
"""


def test_a_directory_left_without_permissions_is_removed_by_a_judge_that_is_not_root(tmp_path):
    """Root removes a mode-000 directory anyway: as root, the removal runs as `nobody` (setpriv)."""
    command = [sys.executable, "-c", REMOVE_LOCKED]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root, and no setpriv to remove as another user")
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", *command]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": "/tmp"})
    assert done.returncode == 0, done.stderr
    work, left = done.stdout.split()
    if left == "True":  # (as root, clean up what `nobody` could not)
        subprocess.run(["rm", "-rf", "--", work], check=False)
    assert left == "False"
