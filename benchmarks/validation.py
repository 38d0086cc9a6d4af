"""Argument validation per call, with each validator installed, and whether its messages are jsonschema's.

The chapter's snapshots show jsonschema's messages for invalid arguments; a validator whose own
messages differ could only decide the valid case (as jsonschema-rs does in course.runtime.validation).
"""

from __future__ import annotations

import importlib.util
import timeit
from collections.abc import Callable
from dataclasses import dataclass

from jsonschema import validators
from jsonschema.exceptions import best_match

from benchmarks.workloads import NO_ARGUMENTS
from checkpoints.ch08_workspace_read import create_read_tool
from course.runtime.validation import ArgumentValidator

READ = create_read_tool(".").parameters
"""Chapter 08's read tool: path, offset and limit."""
VALID = {"empty": (NO_ARGUMENTS, {}), "read": (READ, {"path": "README.md", "offset": 2})}
INVALID = [{}, {"path": 7}, {"path": "README.md", "mode": "rw"}, {"path": "README.md", "offset": 0}]
"""The chapters' invalid-arguments scenarios, against READ."""


@dataclass
class ValidatorTiming:
    name: str
    """The validator, as the report names it."""
    empty: float
    """Seconds per call: the no-argument schema, `{}`."""
    read: float
    """Seconds per call: the read schema, a path and an offset."""
    same_messages: str
    """"yes" when its messages for INVALID are jsonschema's, else an example of the first that differs."""


def _jsonschema(schema) -> Callable[[object], list[str]]:
    validator = validators.validator_for(schema)(schema)

    def check(instance):
        error = best_match(validator.iter_errors(instance))
        return [] if error is None else [error.message]
    return check


def _course(schema) -> Callable[[object], list[str]]:
    validator = ArgumentValidator(schema)

    def check(instance):
        error = best_match(validator.iter_errors(instance))
        return [] if error is None else [error.message]
    return check


def _jsonschema_rs(schema) -> Callable[[object], list[str]]:
    import jsonschema_rs
    validator = jsonschema_rs.validator_for(schema)

    def check(instance):
        if validator.is_valid(instance):
            return []
        return [next(iter(validator.iter_errors(instance))).message]
    return check


def _fastjsonschema(schema) -> Callable[[object], list[str]]:
    import fastjsonschema
    validate = fastjsonschema.compile(schema)

    def check(instance):
        try:
            validate(instance)
        except fastjsonschema.JsonSchemaValueException as error:
            return [error.message]
        return []
    return check


CANDIDATES: list[tuple[str, str | None, Callable]] = [
    ("jsonschema (best_match of iter_errors)", None, _jsonschema),
    ("fastjsonschema", "fastjsonschema", _fastjsonschema),
    ("jsonschema-rs (is_valid, then iter_errors)", "jsonschema_rs", _jsonschema_rs),
    ("course.runtime.validation (the loop's)", None, _course),
]


def per_call(check: Callable[[object], list[str]], instance: object, number: int = 2000) -> float:
    return min(timeit.repeat(lambda: check(instance), number=number, repeat=5)) / number


def time_validators(number: int = 2000) -> list[ValidatorTiming]:
    reference = _jsonschema(READ)
    expected = [reference(instance) for instance in INVALID]
    timings = []
    for name, module, make in CANDIDATES:
        if module is not None and importlib.util.find_spec(module) is None:
            continue
        seconds = {}
        for label, (schema, instance) in VALID.items():
            check = make(schema)
            if check(instance):
                raise AssertionError(f"{name} refused valid arguments {instance!r}")
            seconds[label] = per_call(check, instance, number)
        check = make(READ)
        differs = [(got, want) for got, want in zip((check(i) for i in INVALID), expected) if got != want]
        same = "yes" if not differs else f"no: {differs[0][0][0]!r} for {differs[0][1][0]!r}"
        timings.append(ValidatorTiming(name, seconds["empty"], seconds["read"], same))
    return timings
