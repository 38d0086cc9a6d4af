"""Generated schemas (of the keywords course.runtime.validation trusts jsonschema-rs with) and plain
JSON values: the compiled check and jsonschema must give the same verdict on every pair.

A module of its own because it imports Hypothesis, which test_costs.py imports only when the test runs.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from course.runtime.validation import ArgumentValidator, plain_json

NAMES = st.sampled_from(["a", "b", "path", "é", ""])
NUMBERS = (st.integers(-3, 3) | st.integers(-2**53, 2**53)
           | st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False) | st.sampled_from([0.5, 1.0, -0.0, 2.0**53]))
JSON = st.recursive(
    st.none() | st.booleans() | NUMBERS | st.text(max_size=4) | NAMES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(NAMES, inner, max_size=4),
    max_leaves=12,
)
TYPES = st.sampled_from(["null", "boolean", "integer", "number", "string", "array", "object"])
COUNTS = st.integers(0, 3)
LEAF_KEYWORDS = {
    "type": TYPES | st.lists(TYPES, min_size=1, max_size=3, unique=True),
    "minimum": NUMBERS, "maximum": NUMBERS, "exclusiveMinimum": NUMBERS, "exclusiveMaximum": NUMBERS,
    "minLength": COUNTS, "maxLength": COUNTS, "minItems": COUNTS, "maxItems": COUNTS,
    "minProperties": COUNTS, "maxProperties": COUNTS, "uniqueItems": st.booleans(),
    "required": st.lists(NAMES, max_size=3, unique=True),
    "enum": st.lists(JSON, min_size=1, max_size=3), "const": JSON,
    "format": st.sampled_from(["email", "date", "uri", "date-time"]), "description": st.text(max_size=3),
}


def schema_with(inner):
    return st.fixed_dictionaries({}, optional={
        **LEAF_KEYWORDS,
        "properties": st.dictionaries(NAMES, inner, max_size=3),
        "additionalProperties": inner, "items": inner, "not": inner, "contains": inner, "propertyNames": inner,
        "allOf": st.lists(inner, min_size=1, max_size=2), "anyOf": st.lists(inner, min_size=1, max_size=2),
        "oneOf": st.lists(inner, min_size=1, max_size=2),
    })


SCHEMAS = st.recursive(st.booleans() | st.fixed_dictionaries({}, optional=LEAF_KEYWORDS), schema_with, max_leaves=6)


def compiled_and_jsonschema_agree(max_examples: int = 100) -> None:
    @settings(max_examples=max_examples, derandomize=True, database=None, deadline=None)
    @given(schema=SCHEMAS, instances=st.lists(JSON, min_size=1, max_size=5))
    def agree(schema, instances):
        validator = ArgumentValidator(schema)  # every schema generated here is valid: no metaschema check
        assert validator.compiled is not None  # every keyword generated here is one it is trusted with
        for instance in instances:
            assert plain_json(instance)
            assert validator.compiled.is_valid(instance) == validator.reference.is_valid(instance), instance

    agree()
