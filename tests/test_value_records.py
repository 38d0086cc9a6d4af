"""Snapshot records of any JSON value render without a renderer of their own, and the same in plain
pytest (the syrupy extension, in the test's process) as in `course check` (the judge, from the record
line the recorder wrote)."""

import json

import pytest

from course.judge.index import Expected
from course.judge.render import render_record
from course.judge.session import judge_snapshots
from course.judge.snapshot import RunSnapshotExtension
from course.recorder.harness import Run
from course.recorder.record import jsonable

VALUES = ["", "two\nlines", "café ☕", 0, -1.5, True, None, [], [1, "a", None], {},
          {"path": "a.txt", "content": [{"type": "text", "text": "hi"}], "details": {"diff": "@@ -1 +1 @@"}},
          {"kind": "not one the harness renders", "x": 1}, {"kind": ["a list"]}, [[[["deep"]]]]]


def judged(value):
    """What the judge renders of a value a test snapshotted under `course check`: the record line the
    recorder writes (JSON), read back and rendered."""
    line = json.dumps(jsonable({"scenario": "TestX::test_y", "snapshot": 0, "record": value}), ensure_ascii=False)
    return render_record(json.loads(line)["record"])


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_any_json_value_renders_the_same_in_plain_pytest_and_in_course_check(value):
    stored = RunSnapshotExtension().serialize(value)
    assert stored == judged(value)
    assert stored.startswith("## value\n") and json.loads(stored.removeprefix("## value\n")) == value


def test_a_value_that_is_not_json_renders_as_the_recorder_writes_it():
    # A tuple or a set is no JSON value: both sides show what it was, the same way.
    for value in [(1, 2), {1, 2}, {"key": (3,)}, float("nan")]:
        stored = RunSnapshotExtension().serialize(value)
        assert stored == judged(value) and "<not JSON: " in stored


def test_a_judged_scenario_of_plain_values_passes_on_its_own_snapshots_and_fails_on_another_value(tmp_path):
    snapshots = []
    for n, value in enumerate(["hello", ["a", "b"], {"lines": 2}]):
        path = tmp_path / f"TestX.test_y.{n}.txt"
        path.write_text(RunSnapshotExtension().serialize(value), encoding="utf-8")
        snapshots.append(path)
    expected = Expected("TestX::test_y", "basics", "three values", snapshots)
    assert judge_snapshots(expected, ["hello", ["a", "b"], {"lines": 2}], None).passed
    wrong = judge_snapshots(expected, ["hello", ["a", "c"], {"lines": 2}], None)
    assert wrong.status == "failed"
    assert wrong.divergence == {"section": "value", "index": 3, "expected": '  "b"', "got": '  "c"'}


def test_a_text_is_never_taken_for_the_rendering_it_holds():
    # A submission that writes a published snapshot's text as its record renders that text quoted, under its
    # own heading: nothing like the snapshot.
    run = Run(reason="stop", steps=1, messages=[], events=[], requests=[], executions=[])
    published = RunSnapshotExtension().serialize(run)
    assert published.startswith("## observations") and render_record(published) != published
    assert render_record(published) == f"## value\n{json.dumps(published, ensure_ascii=False)}\n"
