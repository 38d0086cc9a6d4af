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
import tempfile
import types
from pathlib import Path

import pytest

from course.judge import grade, invariants, processes, sandbox, session
from course.judge.render import render_record

ROOT = Path(__file__).resolve().parent.parent


# --- F2: the invariant checker's work is the size of the record, not its square ------------------------

def forged_requests(n: int) -> dict:
    """A loop-run record of `n` assistant messages and `n` requests that saw nothing (464 KB at n=4000)."""
    return {"kind": "loop-run", "reason": "stop", "steps": n, "events": [], "executions": [], "inputMessages": [],
            "definitions": [], "messagesJson": False,
            "messages": [{"role": "assistant", "content": [], "stopReason": "toolUse"}] * n,
            "requests": [{"messages": [], "tools": [], "systemPrompt": None}] * n}


class Counted(dict):
    """A call as a forged record holds it, counting how often the checker looks at it."""

    looks = 0

    def get(self, *args):
        Counted.looks += 1
        return super().get(*args)


def forged_calls(n: int) -> dict:
    """One assistant message of `n` calls, their tool_start events in reverse order, their results in order."""
    calls = [Counted(type="toolCall", id=f"c{i}", name="t", arguments={}) for i in range(n)]
    return {"kind": "loop-run", "reason": "stop", "steps": 1, "requests": [],
            "messages": [{"role": "assistant", "content": calls, "stopReason": "toolUse"},
                         *({"role": "toolResult", "toolCallId": f"c{i}", "toolName": "t", "content": []}
                           for i in range(n))],
            "events": [{"type": "assistant_message", "message": {}},
                       *({"type": "tool_start", "call": {"id": f"c{i}"}} for i in reversed(range(n)))]}


@pytest.mark.parametrize("forged", [forged_requests, forged_calls])
def test_the_checker_reads_a_forged_record_in_the_time_it_takes_to_read_it(forged, monkeypatch):
    """Counted, not timed: the text the checker serialises to compare values, and its looks at the calls."""
    serialised, key = [0], invariants._key

    def counting_key(value):
        text = key(value)
        serialised[0] += len(text)
        return text

    monkeypatch.setattr(invariants, "_key", counting_key)
    record = forged(2000)
    size = len(json.dumps(record))
    Counted.looks = 0
    render_record(record)
    assert serialised[0] <= 4 * size, (serialised[0], size)  # was 2000 * size / 2 for the requests
    assert Counted.looks <= 20 * 2000, Counted.looks  # was 2000 * 2000 / 2 for the calls, each event looking for its own


# --- F3: a record line is read within LINE_LIMIT bytes, whatever its length --------------------------

def records(tmp_path: Path, data: bytes) -> list:
    reader = session._Records(tmp_path / "record.jsonl")
    try:
        with open(tmp_path / "record.jsonl", "ab") as file:
            file.write(data)
        return reader.new_lines()
    finally:
        reader.close()


def test_a_record_line_longer_than_the_limit_is_skipped_whole_and_said(tmp_path, monkeypatch):
    monkeypatch.setattr(session, "LINE_LIMIT", 1000)
    small = json.dumps({"scenario": "a", "event": "start"}).encode()
    huge = json.dumps({"scenario": "a", "snapshot": 0, "record": {"kind": "raised", "message": "x" * 5000}}).encode()
    found = records(tmp_path, small + b"\n" + huge + b"\n" + small + b"\n")
    assert found[0] == small and session.parsed(found[0]) == {"scenario": "a", "event": "start"}
    assert found[1] == session.Oversized(len(huge) + 1)
    assert found[2] == small
    assert found[1].problem == f"a record line of {len(huge) + 1} bytes: more than any scenario writes (1000 bytes at the most)"


def test_the_largest_line_any_reference_run_writes_is_far_within_the_limit():
    """The limits are the reference's needs times a margin (measured: 230 KiB a line, 660 KiB a scenario)."""
    assert session.LINE_LIMIT >= 4 * 230 * 2**10 and session.SCENARIO_LIMIT >= 6 * 660 * 2**10


# --- F4, F6: what a submission wrote reaches the files safe: UTF-8, no formula, bounded ----------------

def test_texts_no_file_takes_are_written_as_their_escapes_and_json_reads_them_back():
    row = {"submission": "x\udcff", "problem": "lone \ud800 surrogate \\ud800"}
    text = grade.json_text(row)
    text.encode("utf-8")  # (raised UnicodeEncodeError: no table, no results file)
    assert json.loads(text) == row  # exact: JSON's own escape


def test_a_csv_cell_is_never_a_formula_and_never_a_lone_surrogate():
    cells = ["=1+1", "+1", "-1", "@SUM(A1)", "\t=1", "\r=1", "honest", "lone \ud800", 10.0, -1]
    out = io.StringIO()
    csv.writer(out).writerow([grade.csv_cell(cell) for cell in cells])
    out.getvalue().encode("utf-8")
    assert next(csv.reader(io.StringIO(out.getvalue()))) == [
        "'=1+1", "'+1", "'-1", "'@SUM(A1)", "'\t=1", "'\r=1", "honest", "lone \\ud800", "10.0", "-1"]


# --- F7: two names never share a row's name or a results file -------------------------------------

def test_a_name_that_looks_shortened_is_shortened_itself():
    victim = "v" * 70
    impostor = grade.short_name(victim)
    assert len(impostor) == 49 and impostor.isprintable()
    shown = grade.shown_names([victim, impostor, "honest"])
    assert len(set(shown.values())) == 3 and shown["honest"] == "honest"


def test_names_whose_shortened_forms_collide_take_more_of_their_hash(monkeypatch):
    monkeypatch.setattr(grade, "hashlib", types.SimpleNamespace(sha256=FixedHash))
    names = ["a" * 70, "a" * 71, "b"]
    shown = grade.shown_names(names)
    assert len(set(shown.values())) == 3, shown
    assert shown["b"] == "b"


class FixedHash:
    """A SHA-256 stand-in whose first 8 hex digits are the same for every name (a collision found by search)."""

    def __init__(self, data: bytes) -> None:
        self.real = hashlib.sha256(data).hexdigest()

    def hexdigest(self) -> str:
        return "00000000" + self.real[8:]


# --- F5, F8: a folder too large or too full is refused whole, never graded in part ---------------------

def test_a_submission_over_the_size_limit_is_refused_not_copied_in_part(tmp_path):
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "ch07_agent_loop.py").write_text("x = 1\n")
    (folder / "a_dataset.bin").write_bytes(b"\0" * (sandbox.SUBMISSION_LIMIT + 1))  # (sorts before the module)
    with pytest.raises(sandbox.SubmissionRefused, match=r"the submission is larger than 8 MiB .*a_dataset\.bin"):
        sandbox._copy_submission(folder, tmp_path / "copy")


def test_a_submission_of_too_many_files_is_refused_before_anything_is_copied(tmp_path):
    folder = tmp_path / "sub"
    (folder / "junk").mkdir(parents=True)
    (folder / "ch07_agent_loop.py").write_text("x = 1\n")
    for n in range(sandbox.ENTRY_LIMIT):
        (folder / "junk" / str(n)).touch()
    with pytest.raises(sandbox.SubmissionRefused, match=f"more than {sandbox.ENTRY_LIMIT} files and folders"):
        sandbox._copy_submission(folder, tmp_path / "copy")
    assert not (tmp_path / "copy").exists()


def test_the_chapter_modules_are_copied_first(tmp_path):
    folder = tmp_path / "sub"
    (folder / "data").mkdir(parents=True)
    for name in ("a.txt", "ch07_agent_loop.py", "ch06_tool_execution.py", "data/b.txt"):
        (folder / name).write_text(name)
    copied = []
    real = shutil.copyfile

    def copyfile(source, destination):
        copied.append(Path(source).name)
        return real(source, destination)

    sandbox.shutil.copyfile, saved = copyfile, sandbox.shutil.copyfile
    try:
        sandbox._copy_submission(folder, tmp_path / "copy")
    finally:
        sandbox.shutil.copyfile = saved
    assert copied[:2] == ["ch06_tool_execution.py", "ch07_agent_loop.py"] and sorted(copied[2:]) == ["a.txt", "b.txt"]


# --- F11: a scratch directory is removed whatever permissions a submission left in it -----------------

REMOVE_LOCKED = r"""
import os, sys
import processes  # the judge's course/judge/processes.py (standard library only), copied where `nobody` reads it
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
    # The checkout may lie where `nobody` cannot read (a clone in a directory of mode 0700): the module runs
    # from a copy in a directory of its own that anyone may read.
    judge = Path(tempfile.mkdtemp(prefix="judge-limits-module-", dir="/tmp"))
    try:
        judge.chmod(0o755)
        shutil.copy(ROOT / "course" / "judge" / "processes.py", judge / "processes.py")
        (judge / "processes.py").chmod(0o644)
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=judge,
                              env={**os.environ, "PYTHONPATH": str(judge), "PYTHONDONTWRITEBYTECODE": "1",
                                   "TMPDIR": "/tmp"})
    finally:
        shutil.rmtree(judge)
    assert done.returncode == 0, done.stderr
    work, left = done.stdout.split()
    if left == "True":  # (as root, clean up what `nobody` could not)
        subprocess.run(["rm", "-rf", "--", work], check=False)
    assert left == "False"


# --- F9: a graded copy holds a later chapter's reference only where docs/guarantees.md says so ------------------

def test_a_graded_copy_holds_a_later_chapters_reference_only_where_the_guarantees_say_so(tmp_path):
    """Chapter 06's `in_the_loop` plans run in chapter 07's reference loop, in the submission's process:
    its copy holds that loop, which the submission can read. That is the one exception, said plainly."""
    from course.manifest import CHAPTERS

    readme = (ROOT / "docs" / "guarantees.md").read_text(encoding="utf-8")
    for chapter in CHAPTERS:
        target = tmp_path / chapter.number
        target.mkdir()
        sandbox._copy_course(ROOT, chapter, target)
        later = {c.module for c in CHAPTERS[CHAPTERS.index(chapter):]}
        held = {path.stem for path in (target / "chapters").glob("*/*.py") if path.stem == path.parent.name} & later
        assert held == set(chapter.runs_in), (chapter.number, held)
        for module in held:
            assert f"`course grade {chapter.number}`'s copy holds `chapters/{module}/{module}.py`: a" in readme
