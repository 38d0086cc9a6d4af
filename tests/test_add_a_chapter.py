"""docs/instructors.md's add-a-chapter checklist, followed step by step in a temporary clone of the
course: `course new 10 "Shouting"`, the skeleton filled in as an instructor would (a checkpoint of two
functions and its catalogue entry's names, snapshot tests of a plain string and a
list in two sections), then every command on chapter 10. The chapter has no gallery, no hints, no stored signatures and no
generated plans: nothing of another chapter may notice (`pytest -k ch07` passes the same tests).

The steps run once, in order, in one module fixture (each needs the one before); each test asserts
what one step did.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from processes import TRUSTED

# Slow: `pytest -m commands` runs them (CI does). The module fixture runs the checklist's 19 commands one
# after another: minutes of wall time beside CI's busy processes, past pytest's default bound of 300 s.
pytestmark = [pytest.mark.commands, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parent.parent
STEP_TIMEOUT = 600
"""Seconds of wall time one step may take before the test gives up on it (a backstop: none needs a tenth)."""

# Step 2 of the checklist: the chapter's own checkpoint, names and tests, in place of the skeleton's.
CHECKPOINT = '''"""Chapter 10: Shouting. A text is shouted in capitals with an exclamation mark; its words, in capitals."""

from __future__ import annotations


def shout(text: str) -> str:
    """`text` in capitals, with one exclamation mark at the end."""
    return text.upper() + "!"


def words(text: str) -> list[str]:
    """The words of `text`, shouted (without the exclamation mark)."""
    return shout(text).removesuffix("!").split()
'''
WRONG = CHECKPOINT.replace('return text.upper() + "!"', "return text.upper()")
"""Forgets the exclamation mark: both shouting scenarios fail, the words are right."""
TESTS = '''"""Chapter 10: Shouting."""

import pytest

from course.recorder.harness import load_checkpoint


@pytest.fixture
def ch10():
    return load_checkpoint("ch10_shouting")


@pytest.mark.section("喊出来")
class TestShout:
    def test_hi(self, ch10, snapshot):
        """a word is shouted in capitals with an exclamation mark."""
        assert ch10.shout("hi") == snapshot

    def test_empty(self, ch10, snapshot):
        """an empty text is shouted as the exclamation mark alone."""
        assert ch10.shout("") == snapshot


@pytest.mark.section("分词")
class TestWords:
    def test_two_words(self, ch10, snapshot):
        """each word is shouted, in order."""
        assert ch10.words("hello  world") == snapshot
'''


def passed_count(output: str) -> int:
    found = re.search(r"(\d+) passed", output)
    return int(found.group(1)) if found else -1


class Clone:
    """A temporary clone of the course (its tracked and unignored files as they are in the working tree),
    where the `course` commands run with this interpreter, each to its end."""

    def __init__(self, root: Path) -> None:
        self.root = root
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
        for name in filter(None, listed):
            if (ROOT / name).is_file():
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / name, root / name)
        # The child pytest runs are this session's children: no implementation of the caller's, no busy
        # neighbours of their own (CI's are the session's), no colour.
        drop = {"TINY_PI_IMPL", "TINY_PI_IMPL_CHAIN", "TINY_PI_BUSY", "PYTEST_ADDOPTS"}
        self.env = {k: v for k, v in os.environ.items() if k not in drop} | {
            "NO_COLOR": "1", "TINY_PI_HINT_STATE": str(root / ".hints.json")}

    def run(self, *args: str) -> tuple[int, str]:
        """`python -m ARGS` in the clone: the exit code and what it printed (stdout, then stderr)."""
        done = subprocess.run([sys.executable, "-m", *args], cwd=self.root, env=self.env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=STEP_TIMEOUT)
        return done.returncode, done.stdout + done.stderr

    def course(self, *args: str) -> tuple[int, str]:
        return self.run("course", *args)

    def pytest(self, *args: str) -> tuple[int, str]:
        return self.run("pytest", "-q", "-p", "no:cacheprovider", *args)

    def write(self, name: str, text: str) -> None:
        (self.root / name).parent.mkdir(parents=True, exist_ok=True)
        (self.root / name).write_text(text, encoding="utf-8")

    def watch_once(self, *args: str) -> tuple[int, str]:
        """`course watch ARGS` until its first check has run, then Ctrl-C (what ends a watch)."""
        child = subprocess.Popen([sys.executable, "-m", "course", "watch", *args], cwd=self.root, env=self.env,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        seen = []
        for line in child.stdout:  # (its output as it comes: the first "waiting" line ends the first run)
            seen.append(line)
            if line.startswith("waiting for a change"):
                break
        child.send_signal(signal.SIGINT)
        rest, _ = child.communicate(timeout=STEP_TIMEOUT)
        return child.returncode, "".join(seen) + rest


def fill_in(clone: Clone) -> None:
    """Step 2: the chapter's checkpoint and tests in place of the skeleton's, its names in the catalogue."""
    clone.write("chapters/ch10_shouting/ch10_shouting.py", CHECKPOINT)
    clone.write("chapters/ch10_shouting/test_ch10_shouting.py", TESTS)
    catalogue = (clone.root / "course" / "catalogue.toml").read_text(encoding="utf-8")
    assert catalogue.count('names = ["example"]') == 1
    clone.write("course/catalogue.toml", catalogue.replace('names = ["example"]', 'names = ["shout", "words"]'))


def follow_the_checklist(clone: Clone) -> dict[str, tuple[int, str]]:
    """Every step of docs/instructors.md's checklist on chapter 10, in order: what each printed."""
    done = {"ch07 before": clone.pytest("-k", "ch07")}
    done["new"] = clone.course("new", "10", "Shouting")
    done["skeleton pytest"] = clone.pytest("-k", "ch10")
    fill_in(clone)
    done["update"] = clone.course("snapshots", "update", "10")
    done["pytest"] = clone.pytest("-k", "ch10")
    done["check"] = clone.course("check", "10")
    done["start"] = clone.course("start", "10", "--dir", "starter")
    done["check starter"] = clone.course("check", "10", "--impl", "starter")
    clone.write("student/ch10_shouting.py", WRONG)  # (from here on a wrong student/ is beside the reference)
    done["check wrong"] = clone.course("check", "10", "--json", "wrong.json")
    done["hint"] = clone.course("hint", "10", "--step", "3")
    done["status"] = clone.course("status")
    done["watch"] = clone.watch_once("10")
    done["verify"] = clone.course("snapshots", "verify", "10", "--runs", "2")
    for name, source in {"ana": CHECKPOINT, "ben": WRONG}.items():
        clone.write(f"submissions/{name}/ch10_shouting.py", source)
    done["grade"] = clone.course("grade", "10", "submissions", "--out", "grades.csv", *TRUSTED)
    done["mutants"] = clone.course("mutants", "10")
    shutil.rmtree(clone.root / "student")
    done["ch07 after"] = clone.pytest("-k", "ch07")
    return done


@pytest.fixture(scope="module")
def steps(tmp_path_factory):
    clone = Clone(tmp_path_factory.mktemp("course-clone"))
    before = (ROOT / "course" / "catalogue.toml").read_text(encoding="utf-8")
    done = follow_the_checklist(clone)
    done["clone"] = clone
    # The commands ran on the clone's own course package, never on this checkout's.
    assert (ROOT / "course" / "catalogue.toml").read_text(encoding="utf-8") == before
    return done


def test_new_writes_a_skeleton_that_passes_its_own_tests(steps):
    code, out = steps["new"]
    assert code == 0, out
    assert out.splitlines()[:5] == ["chapter 10 — Shouting", "  wrote course/catalogue.toml",
                                    "  wrote chapters/ch10_shouting/ch10_shouting.py", "  wrote chapters/ch10_shouting/test_ch10_shouting.py",
                                    "  wrote 2 snapshots in chapters/ch10_shouting/__snapshots__/test_ch10_shouting/ (from the reference)"]
    code, out = steps["skeleton pytest"]
    assert (code, passed_count(out)) == (0, 2), out


def test_snapshots_update_replaces_the_skeleton_s_snapshots_with_the_chapter_s(steps):
    code, out = steps["update"]
    assert code == 0, out
    assert out.splitlines() == [
        "chapter 10 (chapters/ch10_shouting/__snapshots__/test_ch10_shouting/): 3 added, 0 changed, 2 removed, 3 snapshots in all",
        "  added    TestShout.test_empty.txt", "  added    TestShout.test_hi.txt",
        "  added    TestWords.test_two_words.txt",
        "  removed  TestExample.test_empty_text.txt", "  removed  TestExample.test_two_words.txt"]
    stored = steps["clone"].root / "chapters" / "ch10_shouting" / "__snapshots__" / "test_ch10_shouting"
    # A plain string and a list, each in the course's notation without a renderer of the chapter's.
    assert (stored / "TestShout.test_hi.txt").read_text(encoding="utf-8") == '## value\n"HI!"\n'
    assert (stored / "TestWords.test_two_words.txt").read_text(encoding="utf-8") == \
        '## value\n[\n  "HELLO",\n  "WORLD"\n]\n'


def test_pytest_k_ch10_passes_the_reference(steps):
    code, out = steps["pytest"]
    assert (code, passed_count(out)) == (0, 3), out
    assert "3 snapshots passed" in out


def test_check_passes_the_reference_where_plain_pytest_does(steps):
    code, out = steps["check"]
    assert code == 0, out
    assert "3 of 3 scenarios pass on the reference" in out
    for scenario in ("TestShout::test_hi", "TestShout::test_empty", "TestWords::test_two_words"):
        assert f"  PASS    {scenario}\n" in out


def test_start_writes_a_starter_that_fails_every_scenario(steps):
    code, out = steps["start"]
    assert code == 0 and "wrote starter/ch10_shouting.py — chapter 10, Shouting" in out, out
    starter = (steps["clone"].root / "starter" / "ch10_shouting.py").read_text(encoding="utf-8")
    assert "raise NotImplementedError('shout: yours to write (chapter 10)')" in starter
    code, out = steps["check starter"]
    assert code == 1 and "0 of 3 scenarios pass — chapter 10 fails" in out, out
    # Each section's first failure in full (its two functions raise two problems), the rest counted.
    assert out.count("problem:  NotImplementedError: ") == 2
    assert "first: shout still raises NotImplementedError, the starter's body" in out


def test_check_fails_a_wrong_module_at_its_first_divergence(steps):
    code, out = steps["check wrong"]
    assert code == 1, out
    assert "judging: yours, student/ch10_shouting.py" in out
    assert '  FAIL    TestShout::test_hi\n        first divergence in value, line 1:\n' \
           '          expected: "HI!"\n          got:      "HI"\n' in out
    assert "  PASS    TestWords::test_two_words\n" in out
    assert "no known mistake matches these failures exactly" in out  # (no gallery: nothing to match)
    assert "1 of 3 scenarios pass — chapter 10 fails" in out
    assert "Traceback" not in out


def test_hint_shows_every_step_without_hints_written_for_the_chapter(steps):
    code, out = steps["hint"]
    assert code == 0, out
    assert "Chapter 10 — Shouting: hints for TestShout::test_hi" in out
    assert "This scenario belongs to section 喊出来 of chapter 10." in out
    assert "This scenario: a word is shouted in capitals with an exclamation mark." in out
    assert "Read the section of chapter 10 that the scenario's section names (喊出来)." in out
    assert '  first divergence in value, line 1:\n    expected: "HI!"\n    got:      "HI"\n' in out
    assert "Traceback" not in out


def test_status_shows_chapter_10_section_by_section(steps):
    code, out = steps["status"]
    assert code == 1, out  # chapter 10 is not finished
    rows = [line.split() for line in out.splitlines() if line.startswith("10 ")]
    assert [row[:5] for row in rows] == [["10", "yours", "喊出来", "0/2", "○○"], ["10", "yours", "分词", "1/1", "●"]]
    assert "next: course check 10" in out and "Traceback" not in out


def test_watch_runs_the_check_once_and_stops_on_ctrl_c(steps):
    code, out = steps["watch"]
    assert code == 0, out
    assert "1 of 3 scenarios pass — chapter 10 fails" in out
    assert out.rstrip().endswith("stopped watching")


def test_verify_judges_the_reference_not_the_wrong_student_module_beside_it(steps):
    code, out = steps["verify"]
    assert (code, out) == (0, "deterministic: 3 scenarios rendered identically in 2 runs under different task "
                              "start orders\n")


def test_grade_passes_the_reference_and_fails_the_wrong_module(steps):
    code, out = steps["grade"]
    assert code == 0, out
    rows = {line.split(",")[0]: line.split(",") for line in
            (steps["clone"].root / "grades.csv").read_text(encoding="utf-8").splitlines()[1:]}
    # A point per section (the catalogue gives no weights), in proportion to its scenarios passed.
    assert rows["ana"][1:6] == ["pass", "3", "3", "2.0", "2.0"]
    assert rows["ben"][1:6] == ["fail", "1", "3", "1.0", "2.0"]


def test_the_gate_skips_the_chapter_without_a_gallery(steps):
    code, out = steps["mutants"]
    assert (code, out) == (0, "Chapter 10 — Shouting: skipped, no gallery of known mistakes "
                              "(chapters/ch10_shouting/judge/gallery.py); add one to have its tests held to them\n\n")


def test_pytest_k_ch07_is_unaffected_by_a_chapter_without_gallery_or_hints(steps):
    before, after = steps["ch07 before"], steps["ch07 after"]
    assert before[0] == 0 and after[0] == 0, after[1]
    assert passed_count(after[1]) == passed_count(before[1]) > 20
