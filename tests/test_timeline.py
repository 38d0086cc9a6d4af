"""The harness's own notation: rendering, and the first divergence a failing snapshot reports."""

import json

from course.judge.snapshot import RunSnapshotExtension
from course.judge.timeline import event_line, first_divergence, json_text, render_run

EXPECTED = render_run(
    events=[{"type": "tool_start", "call": {"id": "call-1"}}, {"type": "turn_end", "reason": "stop", "steps": 1}],
    messages=[{"role": "user", "content": "hi", "timestamp": 1}],
    requests=None,
    observations={"steps": 1},
)


def test_identical_runs_have_no_divergence():
    assert first_divergence(EXPECTED, EXPECTED) is None


def test_timeline_divergence_is_reported_before_later_sections_and_ignores_numbering():
    actual = EXPECTED.replace("tool_start(call-1)", "tool_skipped(call-1)").replace('"hi"', '"ho"')
    divergence = first_divergence(EXPECTED, actual)
    assert (divergence.section, divergence.index) == ("timeline", 1)
    assert (divergence.expected, divergence.actual) == ("tool_start(call-1)", "tool_skipped(call-1)")


def test_a_run_that_stops_early_shows_nothing_where_the_line_was_expected():
    actual = EXPECTED.replace("2  turn_end(stop)\n", "")
    divergence = first_divergence(EXPECTED, actual)
    assert (divergence.section, divergence.index, divergence.actual) == ("timeline", 2, None)
    assert "got:      (nothing)" in divergence.describe()


def test_snapshot_diff_starts_with_the_first_divergence():
    actual = EXPECTED.replace("tool_start", "tool_end")
    lines = list(RunSnapshotExtension().diff_lines(actual, EXPECTED))
    assert lines[:3] == ["first divergence in timeline, line 1:",
                         "  expected: tool_start(call-1)", "  got:      tool_end(call-1)"]


def test_event_lines_use_the_chapter_notation():
    assert event_line({"type": "model_event", "event": {"type": "done", "reason": "toolUse"}}) == "model_event(done: toolUse)"
    assert event_line({"type": "tool_progress", "callId": "call-1", "content": [{"type": "text", "text": "50%"}]}) \
        == 'tool_progress(call-1 "50%")'


def test_messages_that_differ_only_in_key_order_render_alike_in_the_chapters_order():
    written = {"role": "toolResult", "toolCallId": "c1", "toolName": "read", "content": [{"text": "no", "type": "text"}],
               "isError": True, "timestamp": 3, "details": {"skipped": True, "reason": "length"}}
    reordered = {"details": {"reason": "length", "skipped": True}, "timestamp": 3, "isError": True,
                 "content": [{"type": "text", "text": "no"}], "toolName": "read", "toolCallId": "c1", "role": "toolResult"}
    assert json_text([reordered]) == json_text([written])
    assert list(json.loads(json_text(reordered))) == ["role", "toolCallId", "toolName", "content", "isError",
                                                      "timestamp", "details"]
    assert list(json.loads(json_text({"zeta": 1, "alpha": 2, "role": "user"}))) == ["role", "alpha", "zeta"]


def test_a_line_that_differs_only_by_its_comma_points_at_the_line_after_it():
    expected = '## messages\n{\n  "timestamp": 1\n}\n'
    actual = '## messages\n{\n  "timestamp": 1,\n  "details": null\n}\n'
    divergence = first_divergence(expected, actual)
    assert (divergence.index, divergence.expected, divergence.actual) == (3, "}", '  "details": null')


def test_a_run_that_raised_against_one_that_returned_is_told_by_the_observations_first():
    returned = "## observations\nrun  returned stop\n\n## timeline\n1  turn_end(stop)\n\n## transcript\n1  user go\n"
    raised = ("## observations\nrun  raised RuntimeError: boom\n\n## timeline\n1  turn_end(stop)\n\n"
              "## transcript (exc.transcript)\n1  user go\n")
    divergence = first_divergence(returned, raised)
    assert (divergence.section, divergence.expected, divergence.actual) == (
        "observations", "run  returned stop", "run  raised RuntimeError: boom")


def test_a_record_without_sections_says_where_without_an_empty_section_name():
    divergence = first_divergence("raises ValueError naming max_steps\n", "raises None: nothing was raised\n")
    assert divergence.describe().splitlines()[0] == "first divergence at line 1:"
