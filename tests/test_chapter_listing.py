"""The chapter 07 text's own listing of the README round trip, reproduced by the project.

The chapter prints `readResult` with `timestamp: 3` and the four messages of the transcript in
order; the scripted answers are built before the run, so they must not read the clock then (the
model stamps them when it streams them), or the tool result would be 5.
"""

import json

from course.judge import cli
from course.runtime import readme_example as readme
from course.runtime.clock import StepClock, use_clock
from course.runtime.scripted import UNSTAMPED, answer

# The chapter's readResult, field for field (chapter 07, section 「一次请求为什么需要两次模型调用」).
CHAPTER_READ_RESULT = {
    "role": "toolResult",
    "toolCallId": "call-1",
    "toolName": "read",
    "content": [{"type": "text", "text": "# tiny-pi\nA small agent runtime."}],
    "isError": False,
    "timestamp": 3,
}


def test_scripted_answers_built_before_the_run_do_not_read_the_clock():
    """Building the round trip's answers leaves the clock where it was."""
    with use_clock(StepClock()) as clock:
        first, final = readme.first_answer(), readme.final_answer()
        assert clock() == 1
    assert first["timestamp"] == final["timestamp"] == UNSTAMPED
    assert answer([], "stop", error_message="x")["errorMessage"] == "x"


def test_the_demo_transcript_is_the_chapters(capsys):
    """`course demo --json`: user 1, first answer 2, readResult 3 (as the chapter prints it), final answer 4."""
    assert cli.main(["demo", "--json"]) == 0
    out = capsys.readouterr().out
    messages = json.loads(out[out.index("\n[\n") + 1:])
    assert [m["timestamp"] for m in messages] == [1, 2, 3, 4]
    assert [m["role"] for m in messages] == ["user", "assistant", "toolResult", "assistant"]
    assert messages[2] == CHAPTER_READ_RESULT
    assert list(messages[2]) == list(CHAPTER_READ_RESULT)  # the chapter's field order too
    assert messages[1]["content"] == [{"type": "text", "text": "我先读取项目说明。"}, readme.read_call()]
    assert messages[3]["content"] == [{"type": "text", "text": "项目名是 tiny-pi。"}]
    assert (messages[1]["stopReason"], messages[3]["stopReason"]) == ("toolUse", "stop")
