"""The shapes of the record lines a chapter's test process writes (`session.RECORD_LINES`): each kind
the recorder writes is accepted, and a line of another shape is refused in words that say what is wrong."""

import pytest

from course.judge.session import RECORD_LINES, malformed

WRITTEN = [  # one of each kind, as course.recorder.pytest_plugin writes it
    {"scenario": "TestPureStop::test_pure_stop", "event": "start"},
    {"scenario": "TestPureStop::test_pure_stop", "snapshot": 0, "record": {"kind": "loop-run"}},
    {"scenario": "test_generated[abort]", "plan": 3, "event": "start"},
    {"scenario": "test_generated[abort]", "plan": 3, "record": {"outcome": "returned"}},
    {"scenario": "TestPureStop::test_pure_stop", "event": "end", "outcome": "failed", "phase": "call",
     "problem": "AssertionError", "where": "chapters/ch07_agent_loop/test_ch07_agent_loop.py:12", "output": ["a", "b"], "outputLines": 2},
    {"scenario": "TestPureStop::test_pure_stop", "event": "end", "outcome": "passed", "problem": None, "where": None},
    {"importError": {"module": "ch07_agent_loop", "file": "/s/ch07_agent_loop.py", "line": 3,
                     "problem": "SyntaxError: invalid syntax", "text": "def f(:", "missing": ["AgentLoopOptions"]}},
    {"importError": {"module": "ch07_agent_loop", "file": None, "line": None, "problem": "ends while importing"}},
    {"collectionError": {"where": "chapters/ch07_agent_loop/test_ch07_agent_loop.py", "problem": "ImportError"}},
    {"flag": "tried to import course.judge"},
    {"event": "importing", "module": "ch07_agent_loop"},
    {"event": "imported", "module": "ch07_agent_loop"},
    {"event": "finished"},
]


@pytest.mark.parametrize("line", WRITTEN, ids=lambda line: next(iter(line)) + "-" + str(line.get("event", "")))
def test_every_kind_of_line_the_recorder_writes_is_accepted(line):
    assert malformed(line) is None


def test_every_kind_of_line_has_an_accepted_example():
    kinds = {"start", "snapshot", "plan", "end", "importError", "collectionError", "flag", "importing", "imported",
             "finished"}
    assert set(RECORD_LINES) == kinds


@pytest.mark.parametrize(("line", "said"), [
    ({"scenario": 3, "event": "start"}, "a start line's 'scenario' is 3, not a name"),
    ({"scenario": "s", "snapshot": -1, "record": {}}, "a snapshot line's 'snapshot' is -1, not a count"),
    ({"scenario": "s", "snapshot": 1.0, "record": {}}, "a snapshot line's 'snapshot' is 1.0, not a count"),
    ({"scenario": "s", "snapshot": True, "record": {}}, "a snapshot line's 'snapshot' is true, not a count"),
    ({"scenario": "s", "snapshot": 0}, "a snapshot line has no 'record'"),
    ({"scenario": "s", "plan": 0}, "a plan line has no 'record'"),
    ({"scenario": "s", "plan": 0, "event": "end"}, "a plan line's 'event' is 'end', not 'start'"),
    ({"scenario": "s", "plan": "0", "record": {}}, "a plan line's 'plan' is '0', not a count"),
    ({"scenario": "s", "event": "end", "outcome": "won"},
     "an end line's 'outcome' is 'won', not passed, failed or skipped"),
    ({"scenario": "s", "event": "end"}, "an end line has no 'outcome'"),
    ({"scenario": "s", "event": "end", "outcome": "passed", "output": ["a", 7]},
     "an end line's 'output' holds 7, not only texts"),
    ({"scenario": "s", "event": "end", "outcome": "passed", "output": "a"},
     "an end line's 'output' is 'a', not a list of texts"),
    ({"scenario": "s", "event": "end", "outcome": "passed", "where": ["x"]},
     "an end line's 'where' is a list, not a path and line"),
    ({"scenario": "s", "event": "other"}, "a scenario line that is no start, snapshot, plan or end"),
    ({"importError": "boom"}, "importError is 'boom', not an object"),
    ({"importError": {"problem": "p"}}, "importError has no 'module'"),
    ({"importError": {"module": "m", "problem": "p", "line": "3"}}, "importError's 'line' is '3', not a line number"),
    ({"importError": {"module": "m", "problem": "p", "missing": [{}]}},
     "importError's 'missing' holds an object, not only texts"),
    ({"collectionError": {"where": "w"}}, "collectionError has no 'problem'"),
    ({"flag": 1}, "a flag line's 'flag' is 1, not a text"),
    ({"event": "importing"}, "an importing line has no 'module'"),
    ({"event": "imported", "module": None}, "an imported line's 'module' is null, not a module name"),
    ({}, "an empty object, no kind of line"),
    ({"points": 10, "status": "pass"}, "an object with 'points', 'status', no kind of line"),
])
def test_a_line_of_another_shape_is_refused_in_words(line, said):
    assert malformed(line) == said
