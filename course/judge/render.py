"""Records in the chapter's notation: what snapshots hold and what every comparison compares.

A record is JSON data written by the recorder beside student code (`course.recorder`); this module
only reads it, and renders every record: a JSON object of a kind with a renderer as that kind is
shown, any other JSON value as itself (indented JSON), never a text given as it is. Whatever a
broken or hostile implementation put in a record, rendering answers with text, never an exception:
a record that cannot be shown as a run is shown as what it is.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from course.judge.invariants import check_run
from course.judge.timeline import SECTION_PREFIX, json_text, render_run
from course.runtime.messages import utf8_text


def loop_run_problems(record: dict) -> list[str]:
    """The loop's promises a `loop-run` record breaks, in words."""
    return check_run(
        input_messages=record.get("inputMessages") or [],
        messages=record.get("messages"),
        events=record.get("events"),
        requests=record.get("requests"),
        reason=record.get("reason"),
        steps=record.get("steps"),
        caller_messages_after=record.get("callerMessagesAfter"),
        system_prompt=record.get("systemPrompt"),
        definitions=record.get("definitions") or [],
        max_steps=record.get("maxSteps"),
        requests_without_signal=record.get("requestsWithoutTheRunsSignal") or [],
    )


def observations(record: dict, problems: list[str]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    if record.get("requests") is not None:
        seen["model requests"] = _count(record["requests"])
    seen["tool executions"] = _count(record.get("executions"))
    seen["steps"] = record.get("steps")
    seen["reason"] = record.get("reason")
    seen["invariants"] = "hold" if not problems else f"{len(problems)} broken"
    for n, problem in enumerate(problems, 1):
        seen[f"  broken {n}"] = problem
    return seen


def _count(value: Any) -> Any:
    return len(value) if isinstance(value, list) else value


def render_loop_run(record: dict) -> str:
    problems = loop_run_problems(record)
    return render_run(events=record.get("events"), messages=record.get("messages"), requests=record.get("requests"),
                      observations=observations(record, problems),
                      include_messages_json=record.get("messagesJson", True))


def render_raised(record: dict) -> str:
    """An expected exception: its type, and whether its message names what it is about."""
    about = record.get("about")
    message = str(record.get("message"))
    if about and about in message:
        return f"raises {record.get('raised')} naming {about}\n"
    return f"raises {record.get('raised')}: {message}\n"


def render_stopped(record: dict) -> str:
    """A plan whose run crashed the recorder or ran past its time limit."""
    where = f" at {record['where']}" if record.get("where") else ""
    if record.get("kind") == "timed out":
        return f"## record\ntimed out: {record.get('message')}{where}\n"
    return f"## record\nthe run crashed: {record.get('raised')}: {record.get('message')}{where}\n"


RENDERERS = {"loop-run": render_loop_run, "raised": render_raised, "timed out": render_stopped,
             "crashed": render_stopped}


def _shown(value: Any) -> str:
    """A JSON value as JSON, cut at 500 characters (a value nested too deep to show says so)."""
    try:
        return json.dumps(value, ensure_ascii=False)[:500]
    except (ValueError, RecursionError):
        return f"a {type(value).__name__} nested too deep to show"


VALUE_SECTION = "value"
"""The heading of a record no renderer is written for: the value itself, as indented JSON."""


def render_value(value: Any) -> str:
    """Any JSON value in the course's notation: one `## value` section holding it as indented JSON
    (objects' keys in the transcript's order, then sorted), so that a chapter's tests can snapshot
    whatever their function returns without a renderer of their own. A string is JSON too (quoted,
    escaped): no record renders as a text given as it is."""
    try:
        shown = json_text(value)
    except (TypeError, ValueError, RecursionError) as error:
        shown = f"(not JSON: {type(error).__name__}: {_shown(str(error))})"
    return utf8_text(f"{SECTION_PREFIX}{VALUE_SECTION}\n{shown}\n")


def _renderer(record: Any) -> Callable[[dict], str] | None:
    """The renderer written for the record's kind (this module's, or a chapter's scenarios'), if any."""
    kind = record.get("kind") if isinstance(record, dict) else None
    if not isinstance(kind, str):  # (no kind, or a list or an object: no key to look up)
        return None
    render = RENDERERS.get(kind)
    if render is None:
        from course.judge import scenarios

        render = scenarios.renderer(kind)
    return render


def render_record(record: Any) -> str:
    """A record in the chapter's notation; never raises.

    A record of a kind with a renderer (a loop run, an expected exception, a chapter's own kinds) is
    shown as that renderer shows it; any other JSON value (a string, a number, a list, an object
    without such a kind) as itself (`render_value`). Plain pytest's snapshot extension renders
    through here too (course.judge.snapshot), so a test's snapshot and the judge's rendering of its
    record are the same text."""
    render = _renderer(record)
    if render is None:
        return render_value(record)
    try:
        return render(record)
    except Exception as error:  # a malformed record is a failed scenario, shown, never a crash of the judge
        return f"## record\n{record['kind']} record that cannot be rendered ({type(error).__name__}: {error})\n"
