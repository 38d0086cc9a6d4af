"""Chapter 06's generated plans: what each section draws, in two tracks.

The chapter track (sections `arguments`, `outputs`, `failures`, `context`, `in_the_loop`) draws only
inputs inside the chapter's contract: every tool returns a ToolOutput (a dict with a content list,
JSON inside; any other keys may hold anything), raises, or is cancelled — the chapter teaches
cancellation. Four sections execute one call against a registry of one to three tools, the called one
with a generated JSON Schema (required and optional properties, additionalProperties absent, true,
false or a schema, nested objects and arrays, every JSON type, enum, minimum, minLength):

- `arguments`: arguments that fit it, or that break it in exactly one place (a wrong type at any
  depth, a missing required property, an extra property, a value out of the enum or below the
  minimum, an empty string), so that the one error the result names is the same whichever of
  jsonschema's ways to find errors an implementation uses; calls to names the registry lacks (the
  name is told first, even when the arguments are not JSON as well); arguments that are not JSON
  (the text cut short or not an object, with `argumentsError`; NaN, an infinity, a lone surrogate or
  a set inside the object).
- `outputs`: the tool returns a well-formed output (text and image blocks, a non-bool isError, falsy
  or missing details, extra keys, which may hold anything, JSON or not; texts of 60,000 characters).
- `failures`: the tool raises (builtin and own exception types, one with its own `__str__`; with
  and without a message, several arguments, a message of several KB; chained with `from` or raised
  while handling another, with notes, or an ExceptionGroup), raises CancelledError, or waits until the
  task executing it is cancelled (half of those with the caller's signal aborted already).
- `context`: the tool reports progress, or changes what it received at any depth, during its run or
  after it ended; the caller's signal may be aborted already.
- `in_the_loop`: chapter 07's chapter-track plans whose calls go to the chapter 06 executor (a registry
  of tools that succeed, report their own error, raise with or without a message, are unknown or get
  bad arguments, report progress, watch the signal), run by the reference loop with the chapter 06
  under test as its executor.

Each plan carries its `kind`, and each kind the sentences of the chapter it holds the executor to
(`KINDS`); `cites_of(plan)` adds those of what else the plan does (progress, a meddling tool, an
aborted signal).

The hardening track (sections `hardening_outputs` and `hardening_in_the_loop`, named 加固) draws what
goes beyond the contract: tools returning something that is no ToolOutput (malformed, or not JSON),
and chapter 07's plans with every freedom of the loop's collaborators (a raising model, raising
observers, the caller's cancellation, ...). `beyond_the_chapter(plan)` names the promises a plan leans on.

Drawn plans reach a rare kind only by luck, so `PINNED` holds one plan of each kind a wrong executor
was found to pass (every wrong value against every type, extra keys holding what JSON cannot, a
megabyte of text, every shape of exception, every malformed output): they run first, in every profile.
A plan's shape is `chapters.ch06_tool_execution.scenarios`'s (`ExecutionPlan`, `LoopRunPlan`).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from chapters.ch07_agent_loop.judge import ch07_plans
from course.judge.drawing import Draw, plans
from course.manifest import HARDENING
from chapters.ch06_tool_execution.scenarios import (
    Change, Does, ExceptionSpec, ExecutionPlan, LoopRunPlan, Outcome, ToolSpec, decode,
)
from course.runtime.hardening import output_problem

LEAVES = [
    {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}, {"type": "null"},
    {"type": "integer", "minimum": 0}, {"type": "string", "minLength": 1}, {"enum": ["fast", "slow"]},
]
KEYS = ["path", "limit", "mode", "opts", "tags", "depth"]
EXTRA_KEY = "note"
TOOL_NAMES = ["read", "grep", "write", "ls"]
WRONG = ["7", 7, 2.5, True, None, [], {}]
"""Replacements for a value of the wrong type: each schema type accepts some of these, never all."""

LONG_TEXT = {"$repeat": ["long line ", 6_000]}
"""60,000 characters (the recorder's `$repeat` marker): more than any cut an executor might think harmless."""
TEXTS = ["done", "完成", "line one\nline two", "", LONG_TEXT]
IMAGE = {"type": "image", "data": "aGk=", "mimeType": "image/png"}
DETAILS = ["absent", None, 0, "", [], {}, False, {"matches": 2}, {"nested": {"list": [1, 2.5, None]}}, "plain"]
FLAGS = ["absent", True, False, "yes", 1, 0, None, "", "false"]
EXTRAS = [{}, {}, {"note": "extra"},
          {"role": "toolResult", "toolCallId": "someone-else", "toolName": "other", "timestamp": 99},
          {"note": {"$set": [1]}}, {"handle": {"$object": "connection"}}, {"score": {"$float": "nan"}},
          {"raw": {"$bytes": "x"}}]
"""Keys besides content, details and isError: the output is still well-formed, whatever they hold."""
MALFORMED = [
    "done", None, 7, True, [{"type": "text", "text": "done"}], {"$tuple": [{"type": "text", "text": "done"}]},
    {"$set": [1]}, {}, {"details": {"a": 1}}, {"isError": True}, {"Content": [{"type": "text", "text": "done"}]},
    {"content": "done"}, {"content": None}, {"content": {"type": "text", "text": "done"}}, {"content": 3},
    {"content": {"$tuple": [{"type": "text", "text": "done"}]}}, {"content": {"$set": ["done"]}},
]
NOT_JSON = [{"$set": [1, 2]}, {"$bytes": "raw"}, {"$float": "nan"}, {"$float": "inf"}, {"$float": "-inf"},
            {"$object": "handle"}, {"$cycle": None}, "\ud800", {"$deep": 120}]
RAISES = ["OSError", "FileNotFoundError", "PermissionError", "ValueError", "KeyError", "RuntimeError",
          "TypeError", "TimeoutError", "ZeroDivisionError", "Exception", "ToolFailure", "ToolRefusal"]
LONG_MESSAGE = {"$repeat": ["the disk is on fire; ", 250]}
"""5,250 characters: a message is the exception's whole text, however long."""
RAISE_ARGS = [[], ["disk on fire"], [""], ["line one\nline two"], ["first", "second"],
              [2, "No such file or directory"], ["  "], ["path"], [LONG_MESSAGE]]
NOTES = [["see the log"], ["retry later", "or not"]]



# --- schemas and the arguments that fit or break them -------------------------------------------
# Every choice of a plan is a Hypothesis draw (`course.judge.drawing`): a failing plan shrinks towards the
# first option of each, so the simplest comes first (a leaf schema, no extra key, a plain exception).


def pick(r: Draw, options: list) -> Any:
    return r.sampled_from(options)


def up_to(r: Draw, n: int) -> int:
    return r.integers(0, n)


def schema(r: Draw, depth: int) -> dict:
    kind = up_to(r, 3) if depth > 0 else 0
    if kind <= 1:
        return pick(r, LEAVES)
    if kind == 2:
        return {"type": "array", "items": schema(r, depth - 1)}
    return object_schema(r, depth - 1)


def object_schema(r: Draw, depth: int, *, top: bool = False) -> dict:
    keys = [key for key in KEYS if r.one_in(3)]
    built: dict[str, Any] = {"type": "object", "properties": {key: schema(r, depth) for key in keys}}
    required = [key for key in keys if r.booleans()]
    if required:
        built["required"] = required
    additional = pick(r, ["absent", True, False, False, {"type": "integer"}] + [False] * 3 * top)
    if additional != "absent":
        built["additionalProperties"] = additional
    return built


def fits(value: Any, kind: str) -> bool:
    """Whether JSON Schema's `type: kind` accepts `value` (booleans are not numbers; 3.0 is an integer)."""
    if kind == "integer":
        return type(value) is int or (type(value) is float and value.is_integer())
    if kind == "number":
        return type(value) in (int, float)
    return type(value) is {"string": str, "boolean": bool, "null": type(None), "array": list, "object": dict}[kind]


STRINGS = ["a", "b/é", "", "a b", "ééé"]


def fitting(r: Draw, schema: dict) -> Any:
    """A value `schema` accepts."""
    if "enum" in schema:
        return pick(r, schema["enum"])
    kind = schema["type"]
    if kind == "string":
        return pick(r, STRINGS[: 2] if schema.get("minLength") else STRINGS)
    if kind == "integer":
        number = pick(r, [3, 0, 11, 2] if "minimum" in schema else [3, -4, 0, 11])
        return float(number) if r.one_in(6) else number  # 3.0 is an integer too
    if kind == "number":
        return pick(r, [1, 0.5, -2.25, 1000.0, -3])
    if kind == "boolean":
        return r.booleans()
    if kind == "null":
        return None
    if kind == "array":
        return [fitting(r, schema["items"]) for _ in range(up_to(r, 3))]
    value = {}
    for key, inner in schema["properties"].items():
        if key in schema.get("required", []) or r.booleans():
            value[key] = fitting(r, inner)
    additional = schema.get("additionalProperties", True)
    if additional is not False and r.one_in(4):
        value[EXTRA_KEY] = 4 if isinstance(additional, dict) else "extra"
    return value


def breaks(value: Any, schema: dict, path: tuple = ()) -> list[tuple]:
    """Every way to break `value` (which fits `schema`) in exactly one place: (what, path, key)."""
    if "enum" in schema:
        return [("a value out of the enum", path, None)]
    found: list[tuple] = [("a wrong type", path, None)]
    if "minimum" in schema:
        found.append(("a value below the minimum", path, None))
    if "minLength" in schema:
        found.append(("an empty string", path, None))
    if schema["type"] == "array":
        for index, item in enumerate(value):
            found += breaks(item, schema["items"], path + (index,))
    if schema["type"] == "object":
        found += [("a missing required property", path, key) for key in schema.get("required", [])]
        additional = schema.get("additionalProperties", True)
        if additional is False:
            found.append(("an extra property", path, None))
        elif isinstance(additional, dict):
            found.append(("an extra property of the wrong type", path, None))
        for key, inner in schema["properties"].items():
            if key in value:
                found += breaks(value[key], inner, path + (key,))
    return found


def broken(r: Draw, value: Any, schema: dict) -> tuple[Any, str]:
    """`value` broken in exactly one place, and where, in words."""
    candidates = breaks(value, schema)
    chosen = pick(r, sorted({what for what, _, _ in candidates}))  # each kind of break as often, wherever it fits
    where = [candidate for candidate in candidates if candidate[0] == chosen]
    deepest = max(len(path) for _, path, _ in where)
    anywhere = pick(r, [True, True, False, False, False])  # (else as deep as it goes)
    what, path, key = pick(r, where if anywhere else [c for c in where if len(c[1]) == deepest])
    value = copy.deepcopy(value)
    inner_schema = schema
    for step in path:
        inner_schema = inner_schema["items"] if isinstance(step, int) else inner_schema["properties"][step]
    target = value
    for step in path if what in ("a missing required property", "an extra property",
                                 "an extra property of the wrong type") else path[:-1]:
        target = target[step]
    if what == "a missing required property":
        del target[key]
        return value, f"{what} at {_path(path)} ({key})"
    if what.startswith("an extra property"):
        target[EXTRA_KEY + "2"] = "unexpected" if what.endswith("wrong type") else 1
        return value, f"{what} at {_path(path)}"
    replacement = {"a value out of the enum": "medium", "a value below the minimum": -1, "an empty string": ""}.get(
        what) if what != "a wrong type" else pick(r, [w for w in WRONG if not fits(w, inner_schema["type"])])
    if not path:
        return replacement, f"{what} at arguments"
    target[path[-1]] = replacement
    return value, f"{what} at {_path(path)}"


# What a provider leaves when the model's arguments text was not a complete JSON object: the text, and why.
CUT_SHORT = [('{"path": READ', "Expecting value at character 10"),
             ('["README.md"]', "a JSON array, not an object"),
             ('{"path":"README.md","limit":1', "the text ends before the object does")]
NOT_JSON_VALUES = [{"$float": "nan"}, {"$float": "inf"}, "\ud800", {"$set": [1]}]
"""Values a parsed object may still hold that no transcript may (markers as in the recorder's `decode`)."""


def arguments_not_json(r: Draw, arguments: dict) -> tuple[dict, dict]:
    """How a call's arguments are not JSON, as (what the call carries, what the plan says of it): the text
    was cut short or was no object (`argumentsError`, the arguments left `{}`), or the object holds a
    value JSON cannot (NaN, a lone surrogate, a set; `argumentsEncoded`: markers the recorder decodes)."""
    if r.booleans():
        text, why = pick(r, CUT_SHORT)
        return {"arguments": {}, "argumentsError": why, "argumentsText": text}, {"notJson": f"cut short: {why}"}
    value = pick(r, NOT_JSON_VALUES)
    key = pick(r, sorted(arguments) or ["extra"])
    return {"arguments": {**arguments, key: value}}, {"notJson": f"{key} holds {_compact(value)}",
                                                     "argumentsEncoded": True}


def _path(path: tuple) -> str:
    return "/".join(str(step) for step in path) or "arguments"


def containers(value: Any, path: tuple = ()) -> list[tuple[tuple, Any]]:
    found = [(path, value)] if isinstance(value, (dict, list)) else []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else []
    for key, item in items:
        found += containers(item, path + (key,))
    return found


def meddling(r: Draw, arguments: Any, count: int) -> list[dict]:
    """How the tool changes what it received: `count` changes at any depth."""
    changes = []
    places = containers(arguments)
    for _ in range(count if places else 0):
        path, target = pick(r, places)
        if isinstance(target, dict):
            op = pick(r, ["set", "delete", "clear"] if target else ["set"])
            if op == "clear":
                changes.append({"at": list(path), "op": op})
            else:
                key = pick(r, list(target)) if op == "delete" else pick(r, [*target, "added"])
                changes.append({"at": list(path), "op": op, "key": key})
        else:
            changes.append({"at": list(path), "op": pick(r, ["append", "clear"])})
    return changes


# --- what the tool does -------------------------------------------------------------------------

def text(s: str) -> dict:
    return {"type": "text", "text": s}


def well_formed(r: Draw) -> dict:
    output: dict[str, Any] = {"content": [pick(r, [text(pick(r, TEXTS)), IMAGE]) for _ in range(up_to(r, 3))]}
    details = pick(r, DETAILS)
    if details != "absent":
        output["details"] = details
    flag = pick(r, FLAGS)
    if flag != "absent":
        output["isError"] = flag
    output.update(pick(r, EXTRAS))
    return output


def not_json(r: Draw) -> dict:
    bad = pick(r, NOT_JSON)
    where = pick(r, ["content item", "content text", "details", "details deep"])
    output: dict[str, Any] = {"content": [text("ok")]}
    if where == "content item":
        output["content"].append(bad)
    elif where == "content text":
        output["content"].append({"type": "text", "text": bad})
    elif where == "details":
        output["details"] = bad
    else:
        output["details"] = {"found": [1, {"inner": bad}]}
    if r.booleans():
        output["isError"] = pick(r, [True, False, "yes"])
    return output


def exception(r: Draw, depth: int = 0) -> dict:
    """An exception a tool raises: a plain one, or (not inside another) chained, noted or a group."""
    spec: dict[str, Any] = {"type": pick(r, RAISES), "args": pick(r, RAISE_ARGS)}
    shape = up_to(r, 8) if depth == 0 else 0  # (0 to 4: a plain one, the simplest)
    if shape == 5:
        spec["cause"] = exception(r, 1)
    elif shape == 6:
        spec["context"] = exception(r, 1)
    elif shape == 7:
        spec["notes"] = pick(r, NOTES)
    elif shape == 8:
        spec = {"type": "ExceptionGroup", "args": [pick(r, ["several things failed", ""])],
                "group": [exception(r, 1) for _ in range(r.integers(1, 3))]}
    return spec



# --- kinds of plan, and what each holds the executor to -----------------------------------------

CHAPTER_SECTIONS = ("arguments", "outputs", "failures", "context", "in_the_loop")
HARDENING_SECTIONS = {"hardening_outputs": "outputs", "hardening_in_the_loop": "in_the_loop"}
"""Each hardening section and the chapter section whose plans it drew before the tracks were split."""
SEED_KEYS = {"hardening_in_the_loop": "in_the_loop"}
"""The hardening loop plans draw from the seed they had before the split: the same plans as then."""
EXAMPLES = {"arguments": 60, "outputs": 40, "failures": 40, "context": 40, "in_the_loop": 20,
            "hardening_outputs": 30, "hardening_in_the_loop": 20}


@dataclass(frozen=True)
class PlanKind:
    """A kind of plan: the section it exercises and what it holds the executor to (names of the contract's
    CITES for the chapter track, of its PROMISES for the hardening track)."""

    section: str
    cites: tuple[str, ...]

    @property
    def track(self) -> str:
        return HARDENING if self.section in HARDENING_SECTIONS else "chapter"


KINDS: dict[str, PlanKind] = {
    "arguments-fit": PlanKind("arguments", ("runs-when-valid", "arguments-copy")),
    "arguments-broken": PlanKind("arguments", ("best-match", "where", "invalid-arguments-text", "not-run-when-refused")),
    "wrong-value": PlanKind("arguments", ("no-coercion", "where", "invalid-arguments-text")),
    "unknown-name": PlanKind("arguments", ("unknown-tool", "exact-name", "error-result-shape")),
    "unknown-first": PlanKind("arguments", ("unknown-first", "unknown-tool")),
    "arguments-not-json": PlanKind("arguments", ("arguments-problem", "arguments-problem-text", "not-run-when-refused")),
    "output-kept": PlanKind("outputs", ("three-fields", "output-kept", "is-error-bool", "details-rule", "extra-keys")),
    "extra-keys": PlanKind("outputs", ("extra-keys", "three-fields")),
    "megabyte": PlanKind("outputs", ("output-kept",)),
    "tool-raises": PlanKind("failures", ("exception-message", "exception-empty", "catch-exception-only")),
    "tool-raises-cancelled": PlanKind("failures", ("cancellation-raised-by-tool", "catch-exception-only")),
    "cancelled-while-running": PlanKind("failures", ("cancellation", "no-shield")),
    "progress": PlanKind("context", ("context-as-is",)),
    "changes-during": PlanKind("context", ("arguments-copy",)),
    "changes-after": PlanKind("context", ("copy-after-return",)),
    "signal-aborted": PlanKind("context", ("signal-not-checked", "context-as-is")),
    "in-the-loop": PlanKind("in_the_loop", ("in-the-loop", "result-answers-call", "failure-is-result")),
    "malformed-output": PlanKind("hardening_outputs", ("tool-output-checked",)),
    "output-not-json": PlanKind("hardening_outputs", ("tool-output-json",)),
}

IN_THE_LOOP_CITES = {"succeed": "three-fields", "report_error": "tool-error-kept", "raise": "exception-message",
                     "raise_empty": "exception-empty", "unknown_tool": "unknown-tool",
                     "bad_arguments": "invalid-arguments-text", "watch": "context-as-is"}
"""What a chapter 07 plan's registry tool holds the executor to, by what it does."""


def _also(plan: ExecutionPlan) -> list[str]:
    """The sentences an execution plan leans on besides its kind's: what else its tool does."""
    does = plan["does"]
    also = ["context-as-is"] if does["progress"] else []
    if does["meddle"]:  # (what a tool changes after it returned is its copy too: the deep copy keeps the call)
        also += ["arguments-copy"] if does["meddleWhen"] == "during" else ["arguments-copy", "copy-after-return"]
    if plan.get("signalAborted"):
        also.append("signal-not-checked")
    return also


def _loop_cites(loop_plan: dict) -> list[str]:
    calls = [call for step in loop_plan["steps"] for call in step["calls"]]
    cites = [IN_THE_LOOP_CITES[call["does"]] for call in calls if call["does"] in IN_THE_LOOP_CITES]
    if any(call["before"] or call["during"] for call in calls):
        cites.append("context-as-is")
    return cites


def cites_of(plan: dict) -> tuple[str, ...]:
    """What a plan holds the executor to: its kind's sentences of the chapter and those of what else it does
    (chapter track), or the hardening promises it leans on (hardening track)."""
    kind = KINDS.get(plan.get("kind"))
    if kind is None:
        return tuple(beyond_the_chapter(plan))
    if kind.track == HARDENING:
        return kind.cites
    also = _loop_cites(plan["loopPlan"]) if "loopPlan" in plan else _also(plan)
    return tuple(dict.fromkeys((*kind.cites, *also)))


def beyond_the_chapter(plan: dict) -> list[str]:
    """The hardening promises (names of the contract's PROMISES) a plan leans on: none for a plan inside the
    chapter's contract."""
    if "loopPlan" in plan:
        return _loop_beyond(plan["loopPlan"])
    returned = plan["does"]["outcome"].get("returns") if "returns" in plan["does"]["outcome"] else {"content": []}
    problem = output_problem({"name": "x"}, decode(returned)) or ""
    return ["tool-output-checked"] if "not a dict with a content list" in problem else \
        ["tool-output-json"] if "not JSON" in problem else []


def _loop_beyond(loop_plan: dict) -> list[str]:
    found = []
    on_the_registry = loop_plan["executor"] == "chapter06"
    does = {call["does"] for step in loop_plan["steps"] for call in step["calls"]}
    if on_the_registry and "garbage" in does:
        found.append("tool-output-checked")
    if on_the_registry and "not_json" in does:
        found.append("tool-output-json")
    loops = set(ch07_plans.beyond_the_chapter(loop_plan))
    if on_the_registry:
        loops.discard("exception-named")  # a registry tool's empty exception: this executor names it (the chapter's)
    if loops:
        found.append("loop-hardening")
    return found


# --- execution plans ----------------------------------------------------------------------------

def outcome(r: Draw, kind: str) -> Outcome:
    """What the called tool ends with, for a plan of `kind`."""
    if kind == "output-kept":
        return {"returns": well_formed(r)}
    if kind == "malformed-output":
        return {"returns": pick(r, MALFORMED)}
    if kind == "output-not-json":
        return {"returns": not_json(r)}
    if kind == "tool-raises":
        return {"raises": exception(r)}
    if kind == "tool-raises-cancelled":
        return {"cancelled": "raised"}
    if kind == "cancelled-while-running":
        return {"cancelled": "from outside"}
    return {"returns": {"content": [text("done")]}}


PROGRESS = [[text("step 1")], [text("step 2")], [text("half"), IMAGE], []]
DRAWN = {
    "arguments": ["arguments-fit"] * 2 + ["arguments-broken"] * 5 + ["unknown-name"] * 2 + ["unknown-first"]
    + ["arguments-not-json"] * 2,
    "outputs": ["output-kept"],
    "failures": ["tool-raises", "tool-raises", "tool-raises-cancelled", "cancelled-while-running"],
    "context": ["progress", "changes-during", "changes-after", "signal-aborted"],
    "hardening_outputs": ["malformed-output", "output-not-json"],
}
"""The kinds a section draws its plans from (a kind listed twice, twice as often)."""


def _registry(r: Draw) -> tuple[list[ToolSpec], dict]:
    """One to three tools; the first, the one called, with a generated schema (returned too)."""
    names = r.permutations(TOOL_NAMES)[: r.integers(1, 3)]
    parameters = object_schema(r, 2, top=True)
    tools: list[ToolSpec] = [{"name": name, "parameters": parameters if n == 0 else {"type": "object", "properties": {}}}
                             for n, name in enumerate(names)]
    return tools, parameters


def _call(r: Draw, plan: dict, kind: str, parameters: dict) -> None:
    """The plan's call (and what the plan says of its arguments), for a plan of `kind`."""
    arguments = fitting(r, parameters)
    name = plan["tools"][0]["name"]
    if kind in ("unknown-name", "unknown-first"):
        name = pick(r, ["nope", name.capitalize(), name + " ", ""])
    elif kind == "arguments-broken":
        arguments, plan["brokenBy"] = broken(r, arguments, parameters)
    plan["call"] = {"id": pick(r, ["call-1", "toolu_01", "c 2"]), "name": name, "arguments": arguments}
    if kind in ("arguments-not-json", "unknown-first"):  # an unknown name is told first, whatever the arguments
        carried, said = arguments_not_json(r, arguments)
        plan["call"].update(carried)
        plan.update(said)


def _does(r: Draw, kind: str, section: str, arguments: Any) -> Does:
    """What the called tool does: a context plan's own kind for sure, and now and then more of the same."""
    if section == "context":
        progress = pick(r, [1, 2]) if kind == "progress" else pick(r, [0, 0, 1])
        changes = pick(r, [1, 1, 2]) if kind.startswith("changes-") else pick(r, [0, 0, 1])
    else:
        progress, changes = (pick(r, [0, 1]) if section == "failures" else 0), 0
    when = {"changes-during": "during", "changes-after": "after"}.get(kind) or pick(r, ["during", "after"])
    return {"progress": [pick(r, PROGRESS) for _ in range(progress)], "meddle": meddling(r, arguments, changes),
            "meddleWhen": when, "outcome": outcome(r, kind)}


def execution_plan(r: Draw, section: str) -> ExecutionPlan:
    """A plan of one section: its kind, the registry, the call, what the tool does."""
    kind = pick(r, DRAWN[section])
    tools, parameters = _registry(r)
    plan: dict[str, Any] = {"kind": kind, "tools": tools}
    _call(r, plan, kind, parameters)
    plan["signalAborted"] = kind == "signal-aborted" or (section == "context" and r.one_in(6))
    plan["does"] = _does(r, kind, section, plan["call"]["arguments"])
    if kind == "cancelled-while-running" and r.booleans():
        plan["signalAborted"] = True  # an aborted signal is no reason to turn a cancellation into a result
    return plan  # type: ignore[return-value]


# --- chapter 07 plans run with this chapter's executor -------------------------------------------

LOOP_SECTIONS = ("round_trip", "terminals", "concurrent", "abort")
"""Chapter 07's sections whose plans call tools (a pure stop calls none)."""
INSIDE = {"garbage": "raise_empty", "not_json": "report_error"}
"""A chapter 07 chapter-track plan's registry tools that return no ToolOutput, and what they do instead here."""


def _calls(loop_plan: dict) -> list[dict]:
    return [call for step in loop_plan["steps"] for call in step["calls"]]


def loop_plan(r: Draw) -> LoopRunPlan:
    """A chapter 07 chapter-track plan whose calls go to the chapter 06 executor through a registry, its
    tools inside the chapter's contract."""
    plan = ch07_plans.chapter_plans(r, pick(r, LOOP_SECTIONS), through_the_registry=True)
    for call in _calls(plan):
        call["does"] = INSIDE.get(call["does"], call["does"])
    return {"kind": "in-the-loop", "loopPlan": plan}


def _uses_the_registry(plan: dict) -> bool:
    return plan.get("registry") is True


def _without_late_progress(plan: dict) -> dict:
    """The plan with no tool reporting progress after it returned: whether such a report comes before the
    executor has returned too (and is shown) is the executor's schedule; that a loop shows none after it
    is chapter 07's promise, judged there."""
    return {**plan, "steps": [{**step, "calls": [{**call, "late": False} for call in step["calls"]]}
                              for step in plan["steps"]]}


any_loop_plans = st.one_of(*[strategy.filter(_uses_the_registry) for strategy in ch07_plans.ANY_STRATEGIES.values()]
                           ).map(lambda plan: {"loopPlan": _without_late_progress(plan)})
"""Every freedom of chapter 07's collaborators (what `in_the_loop` drew before the tracks were split)."""


# --- pinned plans: one of each kind that drawn plans reach only by luck ----------------------------

def _one_call(kind: str, outcome: Outcome, *, parameters: dict | None = None, arguments: dict | None = None,
              broken_by: str | None = None) -> ExecutionPlan:
    """A plan of `kind` calling the only tool of the registry, `read`, which does nothing but `outcome`."""
    plan: dict[str, Any] = {"kind": kind, "tools": [{"name": "read", "parameters": parameters or {"type": "object", "properties": {}}}]}
    if broken_by:
        plan["brokenBy"] = broken_by
    plan["call"] = {"id": "call-1", "name": "read", "arguments": arguments or {}}
    plan["signalAborted"] = False
    plan["does"] = {"progress": [], "meddle": [], "meddleWhen": "during", "outcome": outcome}
    return plan  # type: ignore[return-value]


def _wrong_values() -> list[dict]:
    """Every wrong value against every type that refuses it (an integer given "7" included: no coercion),
    at the top and nested in an object and an array."""
    pinned = []
    types = sorted({leaf["type"] for leaf in LEAVES if "type" in leaf})
    for kind in types:
        for wrong in WRONG:
            if fits(wrong, kind):
                continue
            parameters = {"type": "object", "properties": {"limit": {"type": kind}}, "required": ["limit"],
                          "additionalProperties": False}
            pinned.append({"why": f"{_compact(wrong)} for a property of type {kind} is invalid arguments, never "
                                  "coerced or let through",
                           "plan": _one_call("wrong-value", {"returns": {"content": [text("done")]}}, parameters=parameters,
                                             arguments={"limit": wrong}, broken_by="a wrong type at limit")})
    nested = {"type": "object", "properties": {"opts": {"type": "object", "properties": {"depth": {"type": "integer"}}},
                                               "tags": {"type": "array", "items": {"type": "integer"}}}}
    for arguments, where in (({"opts": {"depth": "7"}}, "opts/depth"), ({"tags": [1, "7"]}, "tags/1")):
        pinned.append({"why": f'"7" for an integer at {where} is invalid arguments, never coerced',
                       "plan": _one_call("wrong-value", {"returns": {"content": [text("done")]}}, parameters=nested,
                                         arguments=arguments, broken_by=f"a wrong type at {where}")})
    return pinned


MEGABYTE = {"$repeat": ["0123456789abcdef", 65_537]}
"""1,048,592 characters: the chapter promises a megabyte of output arrives whole."""

PINNED_EXCEPTIONS = [
    ("an ExceptionGroup's text is its own str(), not its first sub-exception's",
     {"type": "ExceptionGroup", "args": ["several things failed"],
      "group": [{"type": "ValueError", "args": ["bad value"]}, {"type": "KeyError", "args": ["R"]}]}),
    ("an ExceptionGroup with an empty message is still its own str()",
     {"type": "ExceptionGroup", "args": [""], "group": [{"type": "OSError", "args": ["disk on fire"]}]}),
    ("an exception raised from another is its own text: no '(caused by …)'",
     {"type": "RuntimeError", "args": ["the read failed"], "cause": {"type": "OSError", "args": ["disk on fire"]}}),
    ("an exception without a message raised from another is its type name, not its cause's text",
     {"type": "RuntimeError", "args": [], "cause": {"type": "OSError", "args": ["disk on fire"]}}),
    ("an exception raised while another was handled is its own text, not its context's",
     {"type": "ValueError", "args": ["no such mode"], "context": {"type": "KeyError", "args": ["mode"]}}),
    ("an exception's notes are not part of its text",
     {"type": "ValueError", "args": ["bad value"], "notes": ["see the log", "retry later"]}),
    ("a message of several KB is the whole text, uncut",
     {"type": "RuntimeError", "args": [LONG_MESSAGE]}),
    ("several arguments: str() shows them all, as a tuple",
     {"type": "ValueError", "args": ["a", "b"]}),
    ("KeyError('R'): str() gives \"'R'\", quotes included",
     {"type": "KeyError", "args": ["R"]}),
    ("an empty message is the type name",
     {"type": "RuntimeError", "args": [""]}),
    ("an exception class with its own __str__: that is its text, not its arguments",
     {"type": "ToolRefusal", "args": ["not allowed", "twice"]}),
]


def pinned() -> dict[str, list[dict]]:
    """{section: [{"why", "plan"}]}: run first, in every profile and with any seed (see the module docstring)."""
    outputs = [{"why": f"an extra key holding {_compact(extra)} leaves the output well-formed: only content and "
                       "details reach the transcript",
                "plan": _one_call("extra-keys", {"returns": {"content": [text("done")], **extra}})}
               for extra in EXTRAS if any(isinstance(value, dict) for value in extra.values())]
    outputs.append({"why": "a megabyte of text arrives whole",
                    "plan": _one_call("megabyte", {"returns": {"content": [text(MEGABYTE)],
                                                               "details": {"size": 1_048_592}}})})
    malformed = [{"why": f"a malformed output ({_compact(bad)}) is an error result naming its type",
                  "plan": _one_call("malformed-output", {"returns": bad})} for bad in MALFORMED]
    failures = [{"why": why, "plan": _one_call("tool-raises", {"raises": spec})} for why, spec in PINNED_EXCEPTIONS]
    return {"arguments": _wrong_values(), "outputs": outputs, "failures": failures, "hardening_outputs": malformed}


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


PINNED = pinned()

STRATEGIES = {
    **{section: plans(execution_plan, section)
       for section in ("arguments", "outputs", "failures", "context", "hardening_outputs")},
    # (a chapter 07 plan calls no tool now and then: an abort before the start, a terminal answer without calls)
    "in_the_loop": plans(loop_plan).filter(lambda plan: bool(_calls(plan["loopPlan"]))),
    "hardening_in_the_loop": any_loop_plans,
}
