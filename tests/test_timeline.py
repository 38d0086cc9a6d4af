"""The harness's own notation: rendering, and the first divergence a failing snapshot reports."""

from course.judge.snapshot import RunSnapshotExtension
from course.judge.timeline import event_line, first_divergence, render_run

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
