"""What a scenario leaves behind, as JSON data the judge can read without running anything.

A student's code can hand the harness anything (sets, bytes, NaN, objects, cycles, lists nested ten
thousand deep); `jsonable` turns any of it into JSON data that still shows what it was, and never
raises, so a record can always be written and always differs from the reference's where the run did.
"""

from __future__ import annotations

import math
from typing import Any

MAX_DEPTH = 200
"""Deeper values are cut off with a marker: no run the chapter promises comes near it."""


def not_json(value: Any) -> str:
    """The marker that stands for a value JSON cannot hold."""
    try:
        shown = repr(value)
    except Exception as error:  # a student's __repr__ may raise
        shown = f"<repr failed: {type(error).__name__}>"
    return f"<not JSON: {type(value).__name__} {shown[:200]}>"


def jsonable(value: Any, depth: int = 0, _seen: frozenset[int] = frozenset()) -> Any:
    """`value` as JSON data: JSON values as they are, anything else as a `<not JSON: ...>` string."""
    if depth > MAX_DEPTH:
        return "<nested too deep>"
    if value is None or isinstance(value, (bool, str)):
        return _text(value) if isinstance(value, str) else value
    if isinstance(value, int):
        return value if type(value) is int else not_json(value)
    if isinstance(value, float):
        return value if math.isfinite(value) and type(value) is float else not_json(value)
    if id(value) in _seen:
        return "<cycle>"
    if type(value) is list:
        seen = _seen | {id(value)}
        return [jsonable(item, depth + 1, seen) for item in value]
    if type(value) is dict:
        seen = _seen | {id(value)}
        if all(type(key) is str for key in value):
            return {_text(key): jsonable(item, depth + 1, seen) for key, item in value.items()}
        return not_json(value)
    return not_json(value)


def _text(s: str) -> str:
    """A string that UTF-8 can carry: a lone surrogate is shown, not passed on to crash a writer."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "backslashreplace").decode("utf-8") + " <not UTF-8>"
