"""Chapter 06's generated plans (see `course.recorder.scenarios.ch06_tool_execution` for their shape)
and the chapter's notation of an execution.

Four sections execute one call against a registry of one to three tools, the called one with a
generated JSON Schema (required and optional properties, additionalProperties absent, true, false or
a schema, nested objects and arrays, every JSON type, enum, minimum, minLength):
- `arguments`: arguments that fit it, or that break it in exactly one place (a wrong type at any
  depth, a missing required property, an extra property, a value out of the enum or below the
  minimum, an empty string), so that the one error the result names is the same whichever of
  jsonschema's ways to find errors an implementation uses; calls to names the registry lacks (the
  name is told first, even when the arguments are not JSON as well); arguments that are not JSON
  (the text cut short or not an object, with `argumentsError`; NaN, an infinity, a lone surrogate or
  a set inside the object).
- `outputs`: the tool returns a well-formed output (a non-bool isError, falsy or missing details,
  extra keys, which may hold anything, JSON or not; texts of 60,000 characters), a malformed one (not
  a dict, no content, content not a list), or one holding values JSON cannot hold.
- `failures`: the tool raises (builtin and own exception types, one with its own `__str__`; with
  and without a message, several arguments, a message of several KB; chained with `from` or raised
  while handling another, with notes, or an ExceptionGroup), raises CancelledError, or waits until the
  task executing it is cancelled (half of those with the caller's signal aborted already).
- `context`: the tool reports progress and changes what it received at any depth, during its run or
  after it ended; the caller's signal may be aborted already.
`in_the_loop`: chapter 07's plans that run their tools through a registry (from chapter 07's own
strategies), run by the reference loop with the chapter 06 under test as its executor.

Drawn plans reach a rare kind only by luck, so `PINNED` holds one plan of each kind a wrong executor
was found to pass (every malformed output, every wrong value against every type, extra keys holding
what JSON cannot, a megabyte of text, every shape of exception): they run first, in every profile.
"""

from __future__ import annotations

import copy
import json
import random
import re
from typing import Any

from hypothesis import strategies as st

from course.judge.scenarios import ch07_agent_loop as ch07
from course.judge.timeline import json_text
from course.recorder.scenarios.ch06_tool_execution import long_text

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
# The details of a plan come from a random.Random seeded by Hypothesis: a Hypothesis r costs ~50 µs,
# and Hypothesis repeats the later choices of a long sequence so often that 80 plans would hold a
# handful of exceptions and schemas. Hypothesis draws the plan's kind (and shrinks it); the seed, the rest.


def pick(r: random.Random, options: list) -> Any:
    return options[r.randrange(len(options))]


def up_to(r: random.Random, n: int) -> int:
    return r.randint(0, n)


def schema(r: random.Random, depth: int) -> dict:
    kind = up_to(r, 3) if depth > 0 else 0
    if kind <= 1:
        return pick(r, LEAVES)
    if kind == 2:
        return {"type": "array", "items": schema(r, depth - 1)}
    return object_schema(r, depth - 1)


def object_schema(r: random.Random, depth: int, *, top: bool = False) -> dict:
    keys = [key for key in KEYS if up_to(r, 2) == 0]
    built: dict[str, Any] = {"type": "object", "properties": {key: schema(r, depth) for key in keys}}
    required = [key for key in keys if r.random() < 0.5]
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


def fitting(r: random.Random, schema: dict) -> Any:
    """A value `schema` accepts."""
    if "enum" in schema:
        return pick(r, schema["enum"])
    kind = schema["type"]
    if kind == "string":
        return pick(r, STRINGS[: 2] if schema.get("minLength") else STRINGS)
    if kind == "integer":
        number = pick(r, [3, 0, 11, 2] if "minimum" in schema else [3, -4, 0, 11])
        return float(number) if up_to(r, 5) == 0 else number  # 3.0 is an integer too
    if kind == "number":
        return pick(r, [1, 0.5, -2.25, 1000.0, -3])
    if kind == "boolean":
        return r.random() < 0.5
    if kind == "null":
        return None
    if kind == "array":
        return [fitting(r, schema["items"]) for _ in range(up_to(r, 3))]
    value = {}
    for key, inner in schema["properties"].items():
        if key in schema.get("required", []) or r.random() < 0.5:
            value[key] = fitting(r, inner)
    additional = schema.get("additionalProperties", True)
    if additional is not False and up_to(r, 3) == 0:
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


def broken(r: random.Random, value: Any, schema: dict) -> tuple[Any, str]:
    """`value` broken in exactly one place, and where, in words."""
    candidates = breaks(value, schema)
    chosen = pick(r, sorted({what for what, _, _ in candidates}))  # each kind of break as often, wherever it fits
    where = [candidate for candidate in candidates if candidate[0] == chosen]
    deepest = max(len(path) for _, path, _ in where)
    what, path, key = pick(r, where if r.random() < 0.4 else [c for c in where if len(c[1]) == deepest])
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


def arguments_not_json(r: random.Random, arguments: dict) -> tuple[dict, dict]:
    """How a call's arguments are not JSON, as (what the call carries, what the plan says of it): the text
    was cut short or was no object (`argumentsError`, the arguments left `{}`), or the object holds a
    value JSON cannot (NaN, a lone surrogate, a set; `argumentsEncoded`: markers the recorder decodes)."""
    if r.random() < 0.5:
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


def meddling(r: random.Random, arguments: Any, count: int) -> list[dict]:
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


def well_formed(r: random.Random) -> dict:
    output: dict[str, Any] = {"content": [pick(r, [text(pick(r, TEXTS)), IMAGE]) for _ in range(up_to(r, 3))]}
    details = pick(r, DETAILS)
    if details != "absent":
        output["details"] = details
    flag = pick(r, FLAGS)
    if flag != "absent":
        output["isError"] = flag
    output.update(pick(r, EXTRAS))
    return output


def not_json(r: random.Random) -> dict:
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
    if r.random() < 0.5:
        output["isError"] = pick(r, [True, False, "yes"])
    return output


def exception(r: random.Random, depth: int = 0) -> dict:
    """An exception a tool raises: a plain one, or (not inside another) chained, noted or a group."""
    spec: dict[str, Any] = {"type": pick(r, RAISES), "args": pick(r, RAISE_ARGS)}
    shape = up_to(r, 8) if depth == 0 else 8
    if shape == 0:
        spec["cause"] = exception(r, 1)
    elif shape == 1:
        spec["context"] = exception(r, 1)
    elif shape == 2:
        spec["notes"] = pick(r, NOTES)
    elif shape == 3:
        spec = {"type": "ExceptionGroup", "args": [pick(r, ["several things failed", ""])],
                "group": [exception(r, 1) for _ in range(r.randint(1, 3))]}
    return spec


def outcome(r: random.Random, kind: int) -> dict:
    if kind < 0:
        return {"returns": {"content": [text("done")]}}
    if kind <= 1:
        return {"returns": well_formed(r)}
    if kind == 2:
        return {"returns": pick(r, MALFORMED)}
    if kind == 3:
        return {"returns": not_json(r)}
    if kind <= 5:
        return {"raises": exception(r)}
    return pick(r, [{"cancelled": "raised"}, {"cancelled": "from outside"}])


PROGRESS = [[text("step 1")], [text("step 2")], [text("half"), IMAGE], []]


def execution_plan(seed: int, focus: str) -> dict:
    """The plan of one seed, in one section (`focus`): which call, what the tool does, every detail."""
    r = random.Random(seed)
    call_kind = pick(r, ["runs"] * 2 + ["breaks the schema"] * 5 + ["unknown"] * 3 + ["not JSON"] * 2) \
        if focus == "arguments" else "runs"
    names = r.sample(TOOL_NAMES, r.randint(1, 3))
    parameters = object_schema(r, 2, top=True)
    tools = [{"name": name, "parameters": parameters if n == 0 else {"type": "object", "properties": {}}}
             for n, name in enumerate(names)]
    arguments = fitting(r, parameters)
    plan: dict[str, Any] = {"tools": tools}
    name = names[0]
    if call_kind == "unknown":
        name = pick(r, ["nope", name.capitalize(), name + " ", ""])
    elif call_kind == "breaks the schema":
        arguments, plan["brokenBy"] = broken(r, arguments, parameters)
    plan["call"] = {"id": pick(r, ["call-1", "toolu_01", "c 2"]), "name": name, "arguments": arguments}
    # An unknown name is told first, whatever the arguments: one unknown call in three also carries bad JSON.
    if call_kind == "not JSON" or (call_kind == "unknown" and up_to(r, 2) == 0):
        carried, said = arguments_not_json(r, arguments)
        plan["call"].update(carried)
        plan.update(said)
    plan["signalAborted"] = focus == "context" and up_to(r, 3) == 0
    progress = pick(r, [0, 0, 1, 2]) if focus == "context" else pick(r, [0, 1]) if focus == "failures" else 0
    changes = pick(r, [0, 1, 1, 2]) if focus == "context" else 0
    kind = {"arguments": [-1], "outputs": [0, 1, 2, 3], "failures": [4, 5, 6, 6], "context": [-1]}[focus]
    plan["does"] = {"progress": [pick(r, PROGRESS) for _ in range(progress)], "meddle": meddling(r, arguments, changes),
                    "meddleWhen": pick(r, ["during", "after"]), "outcome": outcome(r, pick(r, kind))}
    if "cancelled" in plan["does"]["outcome"] and r.random() < 0.5:
        plan["signalAborted"] = True  # an aborted signal is no reason to turn a cancellation into a result
    return plan


def arguments_plan(seed: int) -> dict:
    return execution_plan(seed, "arguments")


def outputs_plan(seed: int) -> dict:
    return execution_plan(seed, "outputs")


def failures_plan(seed: int) -> dict:
    return execution_plan(seed, "failures")


def context_plan(seed: int) -> dict:
    return execution_plan(seed, "context")


# --- pinned plans: one of each kind that drawn plans reach only by luck ----------------------------

def _one_call(outcome: dict, *, parameters: dict | None = None, arguments: dict | None = None,
              broken_by: str | None = None) -> dict:
    """A plan calling the only tool of the registry, `read`, which does nothing but `outcome`."""
    plan: dict[str, Any] = {"tools": [{"name": "read", "parameters": parameters or {"type": "object", "properties": {}}}]}
    if broken_by:
        plan["brokenBy"] = broken_by
    plan["call"] = {"id": "call-1", "name": "read", "arguments": arguments or {}}
    plan["signalAborted"] = False
    plan["does"] = {"progress": [], "meddle": [], "meddleWhen": "during", "outcome": outcome}
    return plan


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
                           "plan": _one_call({"returns": {"content": [text("done")]}}, parameters=parameters,
                                             arguments={"limit": wrong}, broken_by="a wrong type at limit")})
    nested = {"type": "object", "properties": {"opts": {"type": "object", "properties": {"depth": {"type": "integer"}}},
                                               "tags": {"type": "array", "items": {"type": "integer"}}}}
    for arguments, where in (({"opts": {"depth": "7"}}, "opts/depth"), ({"tags": [1, "7"]}, "tags/1")):
        pinned.append({"why": f'"7" for an integer at {where} is invalid arguments, never coerced',
                       "plan": _one_call({"returns": {"content": [text("done")]}}, parameters=nested,
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
    outputs = [{"why": f"a malformed output ({_compact(bad)}) is an error result naming its type",
                "plan": _one_call({"returns": bad})} for bad in MALFORMED]
    outputs += [{"why": f"an extra key holding {_compact(extra)} leaves the output well-formed: only content and "
                        "details reach the transcript",
                 "plan": _one_call({"returns": {"content": [text("done")], **extra}})}
                for extra in EXTRAS if any(isinstance(value, dict) for value in extra.values())]
    outputs.append({"why": "a megabyte of text arrives whole",
                    "plan": _one_call({"returns": {"content": [text(MEGABYTE)], "details": {"size": 1_048_592}}})})
    failures = [{"why": why, "plan": _one_call({"raises": spec})} for why, spec in PINNED_EXCEPTIONS]
    return {"arguments": _wrong_values(), "outputs": outputs, "failures": failures}



def _uses_the_registry(plan: dict) -> bool:
    return plan.get("registry") is True


def _without_late_progress(plan: dict) -> dict:
    """The plan with no tool reporting progress after it returned: whether such a report comes before the
    executor has returned too (and is shown) is the executor's schedule; that a loop shows none after it
    is chapter 07's promise, judged there."""
    return {**plan, "steps": [{**step, "calls": [{**call, "late": False} for call in step["calls"]]}
                              for step in plan["steps"]]}


loop_plans = st.one_of(*[strategy.filter(_uses_the_registry) for strategy in ch07.ANY_STRATEGIES.values()]).map(
    lambda plan: {"loopPlan": _without_late_progress(plan)})

SEEDS = st.integers(0, 2**32 - 1)
STRATEGIES = {"arguments": SEEDS.map(arguments_plan), "outputs": SEEDS.map(outputs_plan),
              "failures": SEEDS.map(failures_plan), "context": SEEDS.map(context_plan), "in_the_loop": loop_plans}
EXAMPLES = {"arguments": 60, "outputs": 50, "failures": 40, "context": 40, "in_the_loop": 20}


# --- the chapter's notation ---------------------------------------------------------------------

NOT_JSON_ERROR = re.compile(r"^(Tool .* returned output that is not JSON): .*\Z", re.DOTALL)


SHOWN_WHOLE = 2_000
"""Longer texts are shown by their ends, length and digest: still exact, and a cut shows in the length."""


def _shown(result: Any) -> Any:
    """The result as the chapter promises it: the text after "...is not JSON:" is json's own wording, not
    compared; a text over SHOWN_WHOLE is shown in short (`long_text`, as the recorder keeps any over KEPT_WHOLE)."""
    if not isinstance(result, dict) or not isinstance(result.get("content"), list):
        return result
    content = []
    for block in result["content"]:
        if isinstance(block, dict) and isinstance(block.get("text"), str) and NOT_JSON_ERROR.match(block["text"]):
            block = {**block, "text": NOT_JSON_ERROR.sub(r"\1: …", block["text"])}
        if isinstance(block, dict) and isinstance(block.get("text"), str) and len(block["text"]) > SHOWN_WHOLE:
            block = {**block, "text": long_text(block["text"])}
        content.append(block)
    return {**result, "content": content}


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _listed(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def render_execution(record: dict) -> str:
    """The result as JSON (all a fixed snapshot of a result holds), or what was raised instead; for a
    whole execution, under `## result`, followed by what else the execution did."""
    out = ["## result\n"] if "runs" in record else []
    if "result" in record:
        out.append(json_text(_shown(record["result"])) + "\n")
    raised = record.get("raised")
    if raised is not None:
        kind, message = (raised.get("type"), raised.get("message")) if isinstance(raised, dict) else (raised, None)
        out.append(f"raised {kind}" + (f": {message}" if message else "") + "\n")
    if "neverEnded" in record:
        out.append(f"never ended: {record['neverEnded']}\n")
    if "runs" in record:
        lines = [f"{run.get('tool')} got {_compact(run.get('received'))}"
                 + ("" if run.get("callersSignal") else " and not the caller's signal")
                 if isinstance(run, dict) else _compact(run) for run in _listed(record["runs"])]
        out.append("## tools that ran\n" + "".join(f"{line}\n" for line in lines or ["none"]))
    if "progress" in record:
        lines = [f"{n}. {_compact(content)}" for n, content in enumerate(_listed(record["progress"]), 1)]
        out.append("## progress the caller saw\n" + "".join(f"{line}\n" for line in lines or ["none"]))
    if "toolWhenTheExecutorEnded" in record:
        out.append(f"## the waiting tool, when the executor ended\n{record['toolWhenTheExecutorEnded']}\n")
    if "callUnchanged" in record:
        after = "unchanged" if record["callUnchanged"] is True else f"changed: {_compact(record.get('callAfter'))}"
        out.append(f"## the call afterwards\n{after}\n")
    return "".join(out)


# --- a chapter 07 run with this chapter's executor ----------------------------------------------
# The calls of a batch run at the same time, so when each of them reaches a point depends on how many
# turns of the event loop its executor takes: a correct executor may yield before it runs the tool,
# run the tool in a task of its own, or validate in a thread. What the chapter 06 executor decides
# is each call's own story: its result, its progress, whether its tool ran and with what, whether it
# was cancelled with the run. So a batch's events are compared call by call (each call's in its own
# order, the calls in call order), its results' timestamps as the batch's set of them, and when an
# observer raised, or the caller cancelled the run, while a batch of several calls ran, which of them
# had ended by then not at all (that no task is left running still is).

_BATCH_EVENTS = ("tool_start", "tool_progress", "tool_end")


def _event_call(event: Any) -> Any:
    if not isinstance(event, dict):
        return None
    if event.get("type") == "tool_start":
        return event["call"].get("id") if isinstance(event.get("call"), dict) else None
    if event.get("type") == "tool_progress":
        return event.get("callId")
    if event.get("type") == "tool_end":
        return event["result"].get("toolCallId") if isinstance(event.get("result"), dict) else None
    return None


def _windows(events: list) -> list[tuple[int, int]]:
    """(start, end) of each batch's events: a tool_start and the tool events that follow it."""
    found, n = [], 0
    while n < len(events):
        if isinstance(events[n], dict) and events[n].get("type") == "tool_start":
            start = n
            while n < len(events) and isinstance(events[n], dict) and events[n].get("type") in _BATCH_EVENTS:
                n += 1
            found.append((start, n))
        else:
            n += 1
    return found


def _call_by_call(window: list) -> list:
    """A batch's events: its tool_start events as they came, then each call's other events, in call order."""
    starts = [e for e in window if e.get("type") == "tool_start"]
    order = [_event_call(e) for e in starts]
    rest = [e for e in window if e.get("type") != "tool_start"]
    place = {call_id: n for n, call_id in reversed(list(enumerate(order)))}
    return starts + sorted(rest, key=lambda e: place.get(_event_call(e), len(order)))


def _same_times(transcript: list, events: list | None) -> None:
    """Each run of consecutive tool results (a batch's) gets its timestamps in sorted order, in place; the
    tool_end events carrying those results get the same."""
    n, renamed = 0, {}
    while n < len(transcript):
        end = n
        while end < len(transcript) and isinstance(transcript[end], dict) and transcript[end].get("role") == "toolResult":
            end += 1
        if end - n > 1:
            stamps = [m.get("timestamp") for m in transcript[n:end]]
            if all(isinstance(t, int) and not isinstance(t, bool) for t in stamps):
                for message, stamp in zip(transcript[n:end], sorted(stamps)):
                    renamed[(message.get("toolCallId"), message["timestamp"])] = stamp
                    message["timestamp"] = stamp
        n = max(end, n + 1)
    for event in events or []:
        result = event.get("result") if isinstance(event, dict) and event.get("type") == "tool_end" else None
        if isinstance(result, dict) and (result.get("toolCallId"), result.get("timestamp")) in renamed:
            result["timestamp"] = renamed[(result["toolCallId"], result["timestamp"])]


def scheduling_free(record: dict) -> dict:
    """A chapter 07 run with the executor under test, less what its executor's schedule decides (above)."""
    record = copy.deepcopy(record)
    events = record.get("events")
    transcript = record.get("transcript")
    if isinstance(events, list) and all(isinstance(e, dict) for e in events):
        windows = _windows(events)
        message = record.get("message")
        cut_short = record.get("raised") == "CancelledError" or (
            isinstance(message, str) and re.fullmatch(r"observer broke at (tool_end|tool_progress) \d+", message))
        if record.get("outcome") == "raised" and cut_short and windows and windows[-1][1] == len(events):
            start, end = windows[-1]
            cut = {_event_call(e) for e in events[start:end] if e.get("type") == "tool_start"}
            if len(cut) > 1:  # which calls of the batch ended before the raise or the cancel: their schedule
                events[start:end] = [e for e in events[start:end] if e.get("type") == "tool_start"]
                if isinstance(transcript, list):
                    record["transcript"] = transcript = [
                        m for m in transcript if not (isinstance(m, dict) and m.get("role") == "toolResult"
                                                      and m.get("toolCallId") in cut)]
                if isinstance(record.get("executions"), list):
                    record["executions"] = [c for c in record["executions"] if c not in cut]
                if isinstance(record.get("withoutTheRunsSignal"), list):
                    record["withoutTheRunsSignal"] = [c for c in record["withoutTheRunsSignal"] if c not in cut]
        for start, end in _windows(events):
            events[start:end] = _call_by_call(events[start:end])
    if isinstance(transcript, list):
        _same_times(transcript, events if isinstance(events, list) else None)
    return record


def render_loop_run(record: dict) -> str:
    try:
        record = scheduling_free(record)
    except Exception:  # a record this cannot read is shown as chapter 07 shows it
        pass
    return ch07.render_plan_run({**record, "kind": "ch07-plan-run"})


RENDERERS = {"tool-execution": render_execution, "ch06-loop-run": render_loop_run}


# --- the plan in words --------------------------------------------------------------------------

def _exception_words(spec: dict) -> str:
    if "group" in spec:
        inner = ", ".join(_exception_words(one) for one in spec["group"])
        words = f"ExceptionGroup({', '.join(_compact(a) for a in spec['args'])}, [{inner}])"
    else:
        words = f"{spec['type']}({', '.join(_compact(a) for a in spec['args'])})"
    if spec.get("notes"):
        words += f" with notes {_compact(spec['notes'])}"
    if "cause" in spec:
        words += f" from {_exception_words(spec['cause'])}"
    if "context" in spec:
        words += f" while handling {_exception_words(spec['context'])}"
    return words


def describe(plan: dict) -> str:
    if "loopPlan" in plan:
        return "the reference chapter 07 loop with your execute_tool_call: " + ch07.describe(plan["loopPlan"])
    tools = ", ".join(f"{tool['name']} {_compact(tool['parameters'])}" for tool in plan["tools"])
    call = plan["call"]
    parts = [f"call {call['id']!r} to {call['name']!r} with {_compact(call['arguments'])}"]
    if plan.get("brokenBy"):
        parts.append(f"the arguments break the schema: {plan['brokenBy']}")
    if plan.get("notJson"):
        parts.append(f"the arguments are not valid JSON ({plan['notJson']}): the tool must not run")
    if plan.get("signalAborted"):
        parts.append("the caller's signal is already aborted")
    does = plan["does"]
    doing = []
    if does["progress"]:
        doing.append("reports progress " + ", ".join(_compact(content) for content in does["progress"]))
    if does["meddle"]:
        changes = ", ".join(f"{change['op']} {change.get('key', '')} at {_path(tuple(change['at']))}".replace("  ", " ")
                            for change in does["meddle"])
        doing.append(f"changes its arguments ({changes}) " + ("during its run" if does["meddleWhen"] == "during"
                                                               else "after the executor returned"))
    outcome = does["outcome"]
    if "returns" in outcome:
        doing.append(f"returns {_compact(outcome['returns'])}")
    elif "raises" in outcome:
        doing.append(f"raises {_exception_words(outcome['raises'])}")
    elif outcome.get("cancelled") == "raised":
        doing.append("raises asyncio.CancelledError")
    else:
        doing.append("waits until the task executing it is cancelled")
    parts.append("the called tool " + ", then ".join(doing))
    return " | ".join(parts + [f"registry: {tools}"])


PINNED = pinned()
