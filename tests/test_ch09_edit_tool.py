"""Chapter 09: The edit tool. Each scenario compares what the chapter's module returns with its snapshot.

A value is shown in the course's notation (course.judge.render): a record of a kind with a renderer
as that kind is shown, any other JSON value as indented JSON. `course snapshots update 09` writes
the snapshots from the reference; `course check 09` judges a student's module with the same tests.
Written by `course new 09`: replace these scenarios with the chapter's own.
"""

import pytest

from course.recorder.harness import load_checkpoint


@pytest.fixture
def ch09():
    return load_checkpoint("ch09_edit_tool")


@pytest.mark.section("basics")
class TestExample:
    def test_two_words(self, ch09, snapshot):
        """two words are counted as two."""
        assert ch09.example("hello world") == snapshot

    def test_empty_text(self, ch09, snapshot):
        """an empty text has no words."""
        assert ch09.example("") == snapshot
