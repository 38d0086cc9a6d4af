"""The invariant checker itself: it passes two hand-made good runs and catches each broken promise.

Every case below breaks one promise in a copy of a good run and names the exact report the
checker must give, so a checker that stopped catching it (or started blaming the wrong index)
fails here.
"""

import copy
import math

import pytest

from course.judge.invariants import check_pairing, check_run
from course.runtime.messages import assistant_message, text, tool_call, tool_result, user_message

SYSTEM = "You are tiny-pi."
DEFINITIONS = [{"name": "read", "description": "Read a file.", "parameters": {"type": "object"}}]


def round_trip() -> dict:
    """A good two-step run: two read calls (c2 finishes first), then a stop."""
    c1, c2 = tool_call("c1", "read", {"path": "A"}), tool_call("c2", "read", {"path": "B"})
    user = user_message("read A and B", timestamp=1)
    ask = assistant_message([text("reading"), c1, c2], "toolUse", timestamp=2)
    r1 = tool_result(c1, [text("a")], timestamp=4)
    r2 = tool_result(c2, [text("b")], timestamp=3)
    answer = assistant_message([text("done")], "stop", timestamp=5)
    messages = [user, ask, r1, r2, answer]
    events = [
        {"type": "model_event", "event": {"type": "start"}},
        {"type": "model_event", "event": {"type": "done", "reason": "toolUse", "message": ask}},
        {"type": "assistant_message", "message": ask},
        {"type": "tool_start", "call": c1},
        {"type": "tool_start", "call": c2},
        {"type": "tool_progress", "callId": "c2", "content": [text("half")]},
        {"type": "tool_end", "result": r2},
        {"type": "tool_end", "result": r1},
        {"type": "model_event", "event": {"type": "start"}},
        {"type": "model_event", "event": {"type": "done", "reason": "stop", "message": answer}},
        {"type": "assistant_message", "message": answer},
        {"type": "turn_end", "reason": "stop", "steps": 2},
    ]
    requests = [
        {"systemPrompt": SYSTEM, "messages": [user], "tools": DEFINITIONS},
        {"systemPrompt": SYSTEM, "messages": [user, ask, r1, r2], "tools": DEFINITIONS},
    ]
    return {"input_messages": [user], "messages": messages, "events": events, "requests": requests,
            "reason": "stop", "steps": 2, "caller_messages_after": [copy.deepcopy(user)],
            "system_prompt": SYSTEM, "definitions": DEFINITIONS, "max_steps": 32}


def truncated() -> dict:
    """A good one-step run: a `length` answer whose call is skipped."""
    c1 = tool_call("c1", "read", {"path": "A"})
    user = user_message("read A", timestamp=1)
    cut = assistant_message([c1], "length", timestamp=2)
    skipped = tool_result(c1, [text("not executed")], is_error=True, details={"skipped": True, "reason": "length"},
                          timestamp=3)
    events = [
        {"type": "model_event", "event": {"type": "done", "reason": "length", "message": cut}},
        {"type": "assistant_message", "message": cut},
        {"type": "tool_skipped", "result": skipped},
        {"type": "turn_end", "reason": "length", "steps": 1},
    ]
    return {"input_messages": [user], "messages": [user, cut, skipped], "events": events,
            "requests": [{"systemPrompt": SYSTEM, "messages": [user], "tools": DEFINITIONS}],
            "reason": "length", "steps": 1, "max_steps": 32}


def broken(run, change):
    """What the checker reports on a changed copy of `run`. The copy keeps an event's message and
    the transcript's the same object, as the loop's are: changing one changes both."""
    run = copy.deepcopy(run)
    change(run)
    return check_run(**run)


def test_the_good_runs_keep_every_promise():
    assert check_run(**round_trip()) == []
    assert check_run(**truncated()) == []


def test_abort_before_the_first_request_is_a_good_run():
    user = user_message("hi", timestamp=1)
    assert check_run(input_messages=[user], messages=[user], requests=[], reason="aborted", steps=0,
                     events=[{"type": "turn_end", "reason": "aborted", "steps": 0}]) == []


def set_item(path, value):
    """A change that sets run[path[0]][path[1]]... to value."""
    def change(run):
        target = run
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return change


def delete_item(path):
    def change(run):
        target = run
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]
    return change


def together(*changes):
    def change(run):
        for one in changes:
            one(run)
    return change


def replace_in_event(index, field, **changes):
    """A change giving event `index` a changed copy of its message or result (the transcript keeps the original)."""
    def change(run):
        event = run["events"][index]
        event[field] = {**event[field], **changes}
    return change


def swap_results(run):
    run["messages"][2], run["messages"][3] = run["messages"][3], run["messages"][2]
    run["requests"][1]["messages"] = run["messages"][:4]


# case -> (the change that breaks one promise of round_trip(), exactly what the checker must report)
ROUND_TRIP_VIOLATIONS = {
    "caller_messages_changed": (
        lambda run: run["caller_messages_after"].append(user_message("extra", timestamp=9)),
        ["the caller's context['messages'] was changed"]),
    "transcript_lost_the_input": (
        together(set_item(["input_messages"], [user_message("something else", timestamp=0)]),
             set_item(["caller_messages_after"], [user_message("something else", timestamp=0)])),
        ["the transcript does not start with the input messages"]),
    "result_not_json": (
        set_item(["messages", 2, "details"], {"seen": {1, 2}}),
        ["message 3 is not JSON: Object of type set is not JSON serializable"]),
    "results_out_of_call_order": (
        swap_results,
        ["message 3 is the result for read(c2), expected read(c1) next, in call order",
         "message 4 is the result for read(c1), expected read(c2) next, in call order",
         "event 7 tool_end carries a different result from message 4",
         "event 8 tool_end carries a different result from message 3"]),
    "result_with_the_wrong_tool_name": (
        set_item(["messages", 2, "toolName"], "write"),
        ["message 3 is the result for write(c1), expected read(c1) next, in call order"]),
    "result_missing_before_the_next_request": (
        together(delete_item(["messages", 3]),
             lambda run: run["requests"][1].update(messages=run["messages"][:3]),
             delete_item(["events", 6]), delete_item(["events", 4]), delete_item(["events", 4])),
        ["tool call read(c2) of message 2 has no result before message 4",
         "tool call read(c2) of message 2 never got a tool_start"]),
    "result_answered_twice": (
        lambda run: run["messages"].insert(4, copy.deepcopy(run["messages"][3])) or
        run["requests"][1].update(messages=run["messages"][:5]),
        ["message 5 answers c2 again (message 4 already did)"]),
    "result_for_no_call": (
        lambda run: run["messages"].insert(4, tool_result(tool_call("c9", "read", {}), [text("?")], timestamp=9)) or
        run["requests"][1].update(messages=run["messages"][:5]),
        ["message 5 answers c9, which no open tool call has"]),
    "steps_miscounted": (
        together(set_item(["steps"], 3), set_item(["events", 11, "steps"], 3)),
        ["steps is 3, but 2 assistant messages were appended (one per request)",
         "steps is 3, but 2 model requests were made"]),
    "more_steps_than_max_steps": (
        set_item(["max_steps"], 1),
        ["steps is 2, more than max_steps 1"]),
    "wrong_reason_for_the_last_message": (
        together(set_item(["reason"], "length"), set_item(["events", 11, "reason"], "length")),
        ["the run finished length, but its last assistant message (message 5, stopReason stop, 0 tool calls) "
         "finishes stop"]),
    "terminal_message_then_another_request": (
        set_item(["messages", 1, "stopReason"], "length"),  # the events and request 2 carry the same dict
        ["message 2 (stopReason length, 2 tool calls) ends the run, but the model was asked again",
         'message 3 answers a call of message 2 (stopReason length), so it must be a skipped error result with '
         'details {"skipped": true, "reason": "length"}',
         'message 4 answers a call of message 2 (stopReason length), so it must be a skipped error result with '
         'details {"skipped": true, "reason": "length"}',
         "event 4 tool_start for c1, but the latest assistant message (stopReason length) does not run its calls",
         "event 5 tool_start for c2, but the latest assistant message (stopReason length) does not run its calls",
         "event 6 tool_progress names 'c2', which is not running",
         "event 7 tool_end for c2, which is not running",
         "event 8 tool_end for c1, which is not running",
         "tool call read(c1) of message 2 has no tool_skipped event",
         "tool call read(c2) of message 2 has no tool_skipped event"]),
    "turn_end_missing": (
        delete_item(["events", 11]),
        ["turn_end was emitted 0 times, expected once"]),
    "turn_end_twice": (
        lambda run: run["events"].append(copy.deepcopy(run["events"][11])),
        ["turn_end was emitted 2 times, expected once"]),
    "turn_end_not_last": (
        lambda run: run["events"].append({"type": "model_event", "event": {"type": "start"}}),
        ["turn_end is event 12, but 1 events follow it"]),
    "turn_end_disagrees_with_the_result": (
        set_item(["events", 11, "steps"], 1),
        ["event 12 turn_end says (stop, 1), the result says (stop, 2)"]),
    "assistant_message_event_missing": (
        delete_item(["events", 10]),
        ["2 assistant messages were appended, but only 1 assistant_message events were emitted"]),
    "assistant_message_event_for_no_message": (
        lambda run: run["events"].insert(11, copy.deepcopy(run["events"][10])),
        ["event 12 assistant_message has no assistant message in the transcript"]),
    "assistant_message_event_carries_another_message": (
        replace_in_event(10, "message", content=[text("something else")]),
        ["event 11 assistant_message does not carry message 5, the assistant message appended",
         "event 11 assistant_message does not follow the done/error model event that carries it"]),
    "assistant_message_before_the_stream_ended": (
        lambda run: run["events"].insert(10, run["events"].pop(9)),
        ["event 10 assistant_message does not follow the done/error model event that carries it"]),
    "tool_start_missing": (
        delete_item(["events", 3]),
        ["event 4 tool_start for c2, expected c1 next, in call order",
         "event 7 tool_end for c1, which is not running",
         "tool call read(c1) of message 2 never got a tool_start"]),
    "tool_starts_out_of_call_order": (
        lambda run: run["events"].insert(3, run["events"].pop(4)),
        ["event 4 tool_start for c2, expected c1 next, in call order"]),
    "tool_started_twice": (
        lambda run: run["events"].insert(5, copy.deepcopy(run["events"][4])),
        ["event 6 tool_start for c2, which is no call of message 2 still waiting for one"]),
    "tool_end_missing": (
        delete_item(["events", 7]),
        ["event 8 starts the next model request while c1 is still running",
         "tool c1 started (event 4) but never ended"]),
    "tool_end_after_the_next_request_began": (
        lambda run: run["events"].insert(8, run["events"].pop(7)),
        ["event 8 starts the next model request while c1 is still running"]),
    "tool_end_carries_another_result": (
        replace_in_event(6, "result", content=[text("something else")]),
        ["event 7 tool_end carries a different result from message 4"]),
    "tool_skipped_in_an_executed_batch": (
        set_item(["events", 6, "type"], "tool_skipped"),
        ["event 7 tool_skipped for c2, but the latest assistant message (stopReason toolUse) does not skip its calls",
         "event 9 starts the next model request while c2 is still running",
         "tool c2 started (event 5) but never ended"]),
    "progress_after_the_tool_ended": (
        lambda run: run["events"].insert(7, run["events"].pop(5)),
        ["event 8 tool_progress names 'c2', which is not running"]),
    "unknown_event": (
        lambda run: run["events"].insert(0, {"type": "model_delta"}),
        ["event 1 has an unknown type 'model_delta'"]),
    "turn_end_with_the_transcript": (
        lambda run: run["events"][11].update(messages=run["messages"]),
        ["event 12 turn_end has an extra field 'messages': the chapter's turn_end has exactly reason, steps, type"]),
    "tool_end_without_its_result": (
        lambda run: run["events"][6].update(result=None) or run["events"][6].pop("result"),
        ["event 7 tool_end has no 'result': the chapter's tool_end has exactly result, type",
         "event 7 tool_end for None, which is not running",
         "event 9 starts the next model request while c2 is still running", "tool c2 started (event 5) but never ended"]),
    "progress_content_as_a_string": (
        set_item(["events", 5, "content"], "half"),
        ["event 6 tool_progress's content is str, not a list"]),
    "tool_start_with_a_call_of_its_own": (
        set_item(["events", 3, "call"], {"type": "toolCall", "id": "c1", "name": "read"}),
        ["event 4 tool_start does not carry call c1 as the assistant message holds it"]),
    "fewer_requests_than_steps": (
        delete_item(["requests", 1]),
        ["steps is 2, but 1 model requests were made"]),
    "request_without_the_results": (
        lambda run: run["requests"][1].update(messages=run["messages"][:2]),
        ["request 2 saw 2 messages, not the 4 messages before its answer (message 5)"]),
    "request_with_a_message_changed_later": (
        lambda run: run["requests"][1].update(messages=[run["messages"][0], {**run["messages"][1], "timestamp": 9},
                                                        *run["messages"][2:4]]),
        ["request 2 saw message 2 other than the transcript holds it (of the 4 messages before its answer, message 5): "
         "the request did not carry this run's messages, or the message changed after it was sent"]),
    "request_with_another_system_prompt": (
        set_item(["requests", 1, "systemPrompt"], "You are someone else."),
        ["request 2 has a different system prompt"]),
    "request_with_stale_tools": (
        set_item(["requests", 0, "tools"], [{"name": "stale"}]),
        ["request 1 does not carry the registry's tool definitions"]),
    "request_spreading_the_context": (
        set_item(["requests", 1, "notes"], {"kept": "by the caller"}),
        ["request 2 carries 'notes' besides the chapter's systemPrompt, messages and tools: the caller's context "
         "is not the request"]),
}


@pytest.mark.parametrize("case", list(ROUND_TRIP_VIOLATIONS))
def test_round_trip_violation_is_reported(case):
    change, expected = ROUND_TRIP_VIOLATIONS[case]
    assert broken(round_trip(), change) == expected


TRUNCATED_VIOLATIONS = {
    "skipped_result_without_skipped_details": (
        delete_item(["messages", 2, "details"]),  # the event carries the same dict, as the loop's do
        ['message 3 answers a call of message 2 (stopReason length), so it must be a skipped error result with '
         'details {"skipped": true, "reason": "length"}']),
    "skipped_result_that_is_not_an_error": (
        set_item(["messages", 2, "isError"], False),
        ['message 3 answers a call of message 2 (stopReason length), so it must be a skipped error result with '
         'details {"skipped": true, "reason": "length"}']),
    "tool_skipped_missing": (
        delete_item(["events", 2]),
        ["tool call read(c1) of message 2 has no tool_skipped event"]),
    "tool_skipped_carries_another_result": (
        replace_in_event(2, "result", content=[text("something else")]),
        ["event 3 tool_skipped carries a different result from message 3"]),
    "skipped_call_started": (
        lambda run: run["events"].insert(2, {"type": "tool_start", "call": run["messages"][1]["content"][0]}),
        ["event 3 tool_start for c1, but the latest assistant message (stopReason length) does not run its calls"]),
    "length_reported_as_stop": (
        together(set_item(["reason"], "stop"), set_item(["events", 3, "reason"], "stop")),
        ["the run finished stop, but its last assistant message (message 2, stopReason length, 1 tool calls) "
         "finishes length"]),
}


@pytest.mark.parametrize("case", list(TRUNCATED_VIOLATIONS))
def test_truncated_violation_is_reported(case):
    change, expected = TRUNCATED_VIOLATIONS[case]
    assert broken(truncated(), change) == expected


def test_nan_in_a_result_is_reported():
    problems = broken(round_trip(), set_item(["messages", 2, "details"], math.nan))
    assert len(problems) == 1 and problems[0].startswith("message 3 is not JSON: Out of range float values")


@pytest.mark.parametrize("where, report", [("messages", "message 2 is str, not a message dict"),
                                           ("events", "event 2 is str, not an event dict")])
def test_items_that_are_not_dicts_are_reported_without_crashing(where, report):
    assert broken(round_trip(), lambda run: run[where].insert(1, "oops")) == [report]


def test_max_steps_finish_before_the_bound_is_reported():
    c1 = tool_call("c1", "read", {})
    user = user_message("go", timestamp=1)
    ask = assistant_message([c1], "toolUse", timestamp=2)
    done = tool_result(c1, [text("ok")], timestamp=3)
    events = [{"type": "model_event", "event": {"type": "done", "reason": "toolUse", "message": ask}},
              {"type": "assistant_message", "message": ask}, {"type": "tool_start", "call": c1},
              {"type": "tool_end", "result": done}, {"type": "turn_end", "reason": "maxSteps", "steps": 1}]
    run = {"input_messages": [user], "messages": [user, ask, done], "events": events, "requests": None,
           "reason": "maxSteps", "steps": 1}
    assert check_run(**run, max_steps=1) == []
    assert check_run(**run, max_steps=3) == ["the run finished maxSteps after 1 steps, but max_steps is 3"]


def test_no_assistant_message_only_fits_an_abort_before_the_first_request():
    user = user_message("hi", timestamp=1)
    assert check_run(input_messages=[user], messages=[user], requests=None, reason="stop", steps=0,
                     events=[{"type": "turn_end", "reason": "stop", "steps": 0}]) == [
        "no assistant message was appended, so only (aborted, 0) can end the run, not (stop, 0)"]


def test_pairing_counts_input_messages_but_does_not_judge_them():
    # An input transcript may end with an open call (the caller's business); the run's own part may not.
    old_call = tool_call("old", "read", {})
    history = [user_message("hi", timestamp=1), assistant_message([old_call], "toolUse", timestamp=2)]
    assert check_pairing(history, first=2) == []
    assert check_pairing(history) == ["tool call read(old) of message 2 has no result before the end of the run"]


def test_a_model_request_made_without_the_runs_signal_is_reported():
    run = round_trip()
    assert check_run(**run) == []
    assert check_run(**run, requests_without_signal=[2]) == [
        "request 2's model.stream() was not handed the run's own signal (options.signal)"]
