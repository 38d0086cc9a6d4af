"""A tool's argument validator: jsonschema's verdict and messages, most calls decided by a compiled check.

Chapter 06 validates each call with `best_match(tool.validator.iter_errors(arguments))` and shows the
model jsonschema's message; students see those messages in the chapter's snapshots, so they come
from jsonschema, always. What costs is the common case, valid arguments: jsonschema walks the
schema in Python on every call (4 µs for an empty object, 15 µs for the chapter's `read` schema).
When `jsonschema-rs` is installed (the `fast` extra), `ArgumentValidator` first asks a validator it
compiled once for the tool; arguments it accepts have no errors, and only arguments it refuses are
walked by jsonschema, which gives the errors (and the final verdict).

That shortcut is only taken where the two are known to agree: schemas made of the keywords in
AGREED_KEYWORDS (no `$schema`, `$ref`, `pattern` or `multipleOf`: regular-expression dialects and
float division differ) and arguments that are plain JSON (exact dict, list, str, bool, None, ints
within 2**53, finite floats; jsonschema-rs reads a tuple as an array and an int past 2**53 as a
float). Anything else goes to jsonschema alone. tests/test_costs.py holds the two to the same verdict.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from jsonschema import ValidationError, validators

try:
    import jsonschema_rs
except ImportError:  # the `fast` extra is not installed: jsonschema decides every call
    jsonschema_rs = None

# Keywords whose subschemas are checked too, by shape.
_SUBSCHEMA = frozenset({"additionalProperties", "items", "not", "contains", "propertyNames"})
_SUBSCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf"})
_SUBSCHEMA_MAPS = frozenset({"properties"})
_VALUES = frozenset({"enum", "const", "default", "examples"})
AGREED_KEYWORDS = _SUBSCHEMA | _SUBSCHEMA_LISTS | _SUBSCHEMA_MAPS | _VALUES | frozenset({
    "type", "required", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "minLength", "maxLength", "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties",
    "title", "description", "format", "deprecated", "readOnly", "writeOnly", "$comment",
})

_EXACT_INT = 2**53  # past this jsonschema-rs compares as floats
_NO_ERRORS: Iterator[ValidationError] = iter(())  # exhausted for ever: one for every valid call
_MAX_DEPTH = 64


class ArgumentValidator:
    """jsonschema's validator for `schema`, with a compiled check first where one agrees with it.

    `iter_errors`, `is_valid` and everything else behave as jsonschema's validator does.
    """

    def __init__(self, schema: Any, *, compiled: bool = True) -> None:
        self.reference = validators.validator_for(schema)(schema)
        self.compiled = _compile(schema) if compiled else None
        """The jsonschema-rs validator, or None when it is not installed or the schema is not one it agrees on."""

    def iter_errors(self, instance: Any) -> Iterator[ValidationError]:
        if self.compiled is not None and plain_json(instance) and self.compiled.is_valid(instance):
            return _NO_ERRORS
        return self.reference.iter_errors(instance)

    def is_valid(self, instance: Any) -> bool:
        return next(self.iter_errors(instance), None) is None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.reference, name)


def _compile(schema: Any) -> Any:
    if jsonschema_rs is None or not agreed(schema):
        return None
    try:
        return jsonschema_rs.validator_for(schema)
    except Exception:  # a schema it refuses: jsonschema decides alone
        return None


def agreed(schema: Any, depth: int = 0) -> bool:
    """Whether `schema` uses only keywords on which jsonschema-rs and jsonschema agree (and plain JSON values)."""
    if type(schema) is bool:
        return True
    if type(schema) is not dict or depth > _MAX_DEPTH or not plain_json(schema):
        return False
    for keyword, value in schema.items():
        if keyword not in AGREED_KEYWORDS:
            return False
        if keyword in _SUBSCHEMA and not agreed(value, depth + 1):
            return False
        if keyword in _SUBSCHEMA_LISTS and not (type(value) is list and all(agreed(s, depth + 1) for s in value)):
            return False
        if keyword in _SUBSCHEMA_MAPS and not (type(value) is dict
                                               and all(agreed(s, depth + 1) for s in value.values())):
            return False
    return True


def plain_json(value: Any, depth: int = 0) -> bool:
    """Whether `value` is JSON as jsonschema-rs and jsonschema both read it (see the module's docstring)."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return -_EXACT_INT <= value <= _EXACT_INT
    if kind is float:
        return math.isfinite(value)
    if depth >= _MAX_DEPTH:
        return False
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or not plain_json(item, depth + 1):
                return False
        return True
    if kind is list:
        for item in value:
            if not plain_json(item, depth + 1):
                return False
        return True
    return False
