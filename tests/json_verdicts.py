"""Generated values, JSON and not: `check_json` must give `strict_json`'s verdict and error on each,
and `json_copy` must make what `copy.deepcopy` makes.

A module of its own because it imports Hypothesis, which test_costs.py imports only when the test runs.
"""

from __future__ import annotations

import copy
import enum
import uuid

from hypothesis import example, given, settings
from hypothesis import strategies as st

from course.runtime.messages import MAX_DEPTH, check_json, json_copy, strict_json


class Colour(enum.Enum):
    RED = 1


class Text(str):
    pass


class Mapping(dict):
    pass


def nested(depth: int, inner: object) -> object:
    for _ in range(depth - 1):
        inner = [inner]
    return inner


KEYS = st.sampled_from(["a", "path", "é", "项目", "\ud800", ""]) | st.text(max_size=3)
ODD_KEYS = st.sampled_from([1, 2.5, True, None, (1,), Text("t")])
SCALARS = (st.none() | st.booleans() | st.integers() | st.integers(-2**70, 2**70)
           | st.sampled_from([2**63 - 1, 2**63, -2**63]) | st.just(5000).map(lambda n: 10**n)  # past json's 4,300 digits
           | st.floats() | st.sampled_from([float("nan"), float("inf"), -float("inf"), 0.5]) | st.text(max_size=4) | st.sampled_from(["\ud800", "a\udfffb", "😀", "é"]))
ODD = st.sampled_from([{1, 2}, b"x", Colour.RED, uuid.UUID(int=1), Text("t"), 1j, object()])
VALUES = st.recursive(
    SCALARS | ODD,
    lambda inner: (st.lists(inner, max_size=4) | st.tuples(inner, inner) | st.dictionaries(KEYS, inner, max_size=4)
                   | st.dictionaries(ODD_KEYS, inner, max_size=2) | st.builds(Mapping, st.dictionaries(KEYS, inner, max_size=2))
                   | st.builds(nested, st.sampled_from([MAX_DEPTH - 2, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1]), inner)),
    max_leaves=10,
)


def outcome(check, value):
    try:
        check(value)
    except (TypeError, ValueError) as error:
        return type(error), str(error)
    return None


# Each place a value may break the rules, in a dict and in a list, besides whatever Hypothesis draws.
EDGES = [bad for breaking in ("\ud800", "a\udfffb", float("nan"), float("-inf"), 2**63, -2**63, 10**5000 // 7,
                              {1, 2}, b"x", Colour.RED, Text("t"), (1,))
         for bad in ({"a": breaking}, [breaking], {"a": [1, {"b": breaking}]}, ["s", 1, breaking])]
EDGES += [{"\ud800": 1}, {1: 1}, {"a": 1, 2: 1}, nested(MAX_DEPTH, 1), nested(MAX_DEPTH + 1, 1),
          nested(MAX_DEPTH, {}), nested(MAX_DEPTH + 1, {}), nested(MAX_DEPTH - 1, {"a": []}), Mapping(a=1)]


@settings(max_examples=300, derandomize=True, deadline=None, database=None)
@given(VALUES)
def check_json_agrees_with_strict_json(value):
    assert outcome(check_json, value) == outcome(strict_json, value)


def check_json_agrees_on_every_edge():
    for value in EDGES:
        assert outcome(check_json, value) == outcome(strict_json, value), value


PLAIN = st.recursive(SCALARS.filter(lambda v: v == v), lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(KEYS, inner, max_size=4), max_leaves=12)


@settings(max_examples=150, derandomize=True, deadline=None, database=None)
@given(PLAIN)
def json_copy_makes_what_deepcopy_makes(value):
    copied = json_copy(value)
    assert copied == copy.deepcopy(value) and type(copied) is type(value)
    if isinstance(value, (dict, list)):
        assert copied is not value
        stack = [(value, copied)]
        while stack:  # no container is shared with the original, at any depth
            original, made = stack.pop()
            items = original.values() if isinstance(original, dict) else original
            made_items = made.values() if isinstance(made, dict) else made
            for a, b in zip(items, made_items):
                if isinstance(a, (dict, list)):
                    assert a is not b
                    stack.append((a, b))


# Assistant messages, well-formed and broken in every field: assistant_problem's one-pass check must
# give the verdict and the words of the full check.
TEXT = st.text(max_size=3) | st.sampled_from(["项目", "\ud800", "ok"])
BLOCK = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": TEXT | SCALARS}),
    st.fixed_dictionaries({"type": st.just("toolCall"), "id": TEXT | SCALARS, "name": TEXT,
                           "arguments": st.dictionaries(KEYS, VALUES, max_size=2) | VALUES},
                          optional={"argumentsError": TEXT | SCALARS, "argumentsText": TEXT, "extra": VALUES}),
    st.fixed_dictionaries({"type": st.sampled_from(["image", None, 1])}),
    VALUES,
)
MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["assistant", "assistant", "user", Text("assistant")]),
     "content": st.lists(BLOCK, max_size=3) | st.tuples(BLOCK) | VALUES,
     "stopReason": st.sampled_from(["stop", "toolUse", "length", "error", "aborted", "oops", None])},
    optional={"timestamp": SCALARS, "errorMessage": TEXT | SCALARS, "usage": VALUES, 7: SCALARS},
) | st.builds(Mapping, role=st.just("assistant"), content=st.just([]), stopReason=st.just("stop")) | VALUES


@settings(max_examples=400, derandomize=True, deadline=None, database=None)
@given(MESSAGE)
def assistant_problem_agrees_with_the_full_check(message):
    from course.runtime.stream import _assistant_problem_in_full, assistant_problem

    assert assistant_problem(message) == _assistant_problem_in_full(message)


def _edge_messages():
    base = {"role": "assistant", "stopReason": "toolUse", "timestamp": 5,
            "content": [{"type": "text", "text": "ok"}, {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"p": 1}}]}
    bads = ["\ud800", "项目", float("nan"), 2**63, {1, 2}, Text("x"), 5, None, Mapping(a=1), (1,), {1: 2},
            *(nested(depth, 1) for depth in range(MAX_DEPTH - 4, MAX_DEPTH + 3)), [float("inf")]]

    def at(path, value):
        message = copy.deepcopy(base)
        target = message
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value
        return message

    places = [("timestamp",), ("errorMessage",), ("usage",), ("content", 0, "text"), ("content", 0, "extra"),
              ("content", 1, "id"), ("content", 1, "name"), ("content", 1, "arguments", "p"),
              ("content", 1, "arguments"), ("content", 1, "argumentsError"), ("content", 1, "argumentsText"),
              ("content", 1, "extra")]
    messages = [at(place, bad) for place in places for bad in bads]
    messages += [at(("content", 1, "arguments"), {bad: 1}) for bad in ("\ud800", 1, "é")]
    messages += [{**base, "\ud800": 1}, {**base, 1: 1}, {**base, "é": 1}, Mapping(base), {**base, "role": Text("assistant")},
                 {**base, "content": tuple(base["content"])}, at(("content", 0), Mapping(type="text", text="ok")),
                 at(("content", 1), Mapping(base["content"][1])), {**base, "stopReason": Text("stop")}]
    return messages


EDGE_MESSAGES = _edge_messages()


def assistant_problem_agrees_on_every_edge():
    from course.runtime.stream import _assistant_problem_in_full, assistant_problem

    for message in EDGE_MESSAGES:
        assert assistant_problem(message) == _assistant_problem_in_full(message), message
