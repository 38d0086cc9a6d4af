"""`pytest -k ch07` collects chapter 07's folder alone (course/recorder/selection.py), and nothing else changes."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from course.manifest import ROOT, find_chapter
from course.recorder.selection import chapter_folders, left_out

FOLDER = {number: ROOT / find_chapter(number).folder for number in ("06", "07", "08", "09")}


@pytest.mark.parametrize(("keyword", "numbers"), [
    ("ch07", ["07"]),
    ("CH07", ["07"]),
    ("ch07_agent", ["07"]),
    ("ch07 and round_trip", ["07"]),
    ("ch07 and not (generated or abort)", ["07"]),
    ("(ch07 or ch08) and generated", ["07", "08"]),
    ("ch09 or ch06", ["06", "09"]),
])
def test_a_keyword_every_selection_of_which_names_a_chapter_collects_those_chapters(keyword, numbers):
    assert chapter_folders(keyword, ROOT) == [FOLDER[number] for number in numbers]


@pytest.mark.parametrize("keyword", [
    "", "providers", "not ch07", "ch07 or hints", "ch0", "agent_loop", "单工具往返", "ch07 and", "ch42",
    "ch07 or a or b or c or d or e or f or g or h or i",  # (too many other words to try every way)
])
def test_any_other_keyword_collects_everything(keyword):
    assert chapter_folders(keyword, ROOT) is None


def test_a_root_reached_through_a_symbolic_link_names_the_same_folders(tmp_path):
    """pytest's root may be a path through a link; the paths it collects are compared resolved."""
    (tmp_path / "course").symlink_to(ROOT)
    folders = chapter_folders("ch07", tmp_path / "course")
    assert folders == [FOLDER["07"]]
    assert not left_out(tmp_path / "course" / "chapters" / FOLDER["07"].name / "test_ch07_agent_loop.py", folders)


def test_what_is_left_out_is_everything_but_the_folders_and_the_way_to_them():
    folders = [FOLDER["07"]]
    assert not left_out(ROOT / "chapters", folders)
    assert not left_out(FOLDER["07"] / "test_ch07_agent_loop.py", folders)
    assert left_out(FOLDER["08"], folders) and left_out(ROOT / "tests", folders)
    assert left_out(ROOT / "tests" / "test_shrinking.py", folders)


def collected(*args: str, root: Path = ROOT) -> list[str]:
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only", *args],
                          cwd=root, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_pytest_k_ch07_collects_its_folder_alone_and_a_path_given_is_collected_as_ever():
    ids = collected("-k", "ch07")
    assert ids and all(i.startswith("chapters/ch07_agent_loop/") for i in ids), ids
    # With a path, -k selects among what the path holds, as pytest always does.
    assert collected("tests/test_shrinking.py", "-k", "ch07")


def test_in_a_copy_of_the_course_pytest_k_ch07_collects_the_copys_folder(tmp_path):
    """The course installed from one checkout, its tests run in another (as the command tests do)."""
    copy = tmp_path / "copy"
    shutil.copytree(FOLDER["07"], copy / "chapters" / FOLDER["07"].name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "conftest.py"):
        shutil.copy(ROOT / name, copy)
    ids = collected("-k", "ch07", root=copy)
    assert ids and all(i.startswith("chapters/ch07_agent_loop/") for i in ids), ids
