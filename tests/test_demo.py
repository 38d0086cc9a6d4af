"""The `course` demo: the chapter 07 README round trip, with the in-memory read or chapter 08's real one.

The demo runs whatever implementation is selected (a student's loop too), so these tests are the
command's, not a chapter's: they are not selected by `-k ch07` or `-k ch08`.
"""

import subprocess
import sys

from course.judge import cli


def test_plain_course_prints_the_readme_round_trip(capsys):
    """`course` with no arguments prints the chapter's event list and transcript and exits 0."""
    assert cli.main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Chapter 07 — README round trip on the scripted model\n")
    assert " 7  tool_start(call-1)\n 8  tool_end(call-1)\n" in out and "13  turn_end(stop)" in out
    assert "4  assistant   [stop] 项目名是 tiny-pi。" in out and "## messages" not in out


def test_demo_json_adds_the_messages(capsys):
    """`course demo --json` also prints the transcript as JSON."""
    assert cli.main(["demo", "--json"]) == 0
    assert '"toolCallId": "call-1"' in capsys.readouterr().out


def test_demo_reads_the_directory_given(tmp_path, capsys):
    """`course demo --workspace DIR` answers from DIR's own README.md."""
    (tmp_path / "README.md").write_text("# pi-mono\nThe original.\n")
    assert cli.main(["demo", "--workspace", str(tmp_path)]) == 0
    assert "[stop] 项目名是 pi-mono。" in capsys.readouterr().out


def test_demo_without_a_directory_makes_a_temporary_workspace(capsys):
    """`course demo --workspace` alone reads a README.md from a temporary workspace it creates."""
    assert cli.main(["demo", "--workspace"]) == 0
    out = capsys.readouterr().out
    assert "temporary workspace" in out and "call-1 → # tiny-pi ..." in out and "invariants       hold" in out


def test_demo_refuses_a_missing_directory(tmp_path, capsys):
    """A directory that does not exist is a usage error (exit 2), not a traceback."""
    assert cli.main(["demo", "--workspace", str(tmp_path / "nope")]) == 2
    assert "is not a directory" in capsys.readouterr().err


def test_a_reader_that_goes_away_ends_the_command_quietly():
    """`course | head`: a closed pipe ends the command with exit 1 and no traceback."""
    child = subprocess.Popen([sys.executable, "-m", "course"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    child.stdout.close()  # the reader is gone before the command writes anything
    _, stderr = child.communicate(timeout=60)
    assert (child.returncode, stderr.decode()) == (1, "")
