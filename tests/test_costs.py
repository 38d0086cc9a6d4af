"""What a run does not pay for: costs that are not the chapter's own work.

No test here times anything (speed is what `python -m benchmarks` reports); each checks the
behaviour that keeps a cost away.
"""

import pytest

from checkpoints.ch07_agent_loop import AgentLoopOptions, run_agent_loop
from course.recorder.harness import load_checkpoint, run_loop
from course.runtime import readme_example as readme
from course.runtime.scripted import ScriptedModel
from course.runtime.tools import Registry


def readme_options() -> AgentLoopOptions:
    return AgentLoopOptions(model=ScriptedModel([readme.first_answer(), readme.final_answer()]),
                            context=readme.context(), tools=Registry([readme.memory_read_tool()]))


# asyncio.run() formats the repr of its task's result when the task finishes (Python 3.11), and
# pytest prints the repr of whatever a failing assertion names: neither may cost a whole transcript.

@pytest.mark.asyncio
async def test_a_loop_results_repr_leaves_the_transcript_out():
    result = await run_agent_loop(readme_options())
    assert repr(result) == "AgentLoopResult(reason='stop', steps=2)"


@pytest.mark.asyncio
async def test_a_harness_runs_repr_leaves_the_transcript_and_events_out():
    run = await run_loop(load_checkpoint("ch07_agent_loop"), model=ScriptedModel([readme.first_answer(),
                         readme.final_answer()]), context=readme.context(), tools=Registry([readme.memory_read_tool()]))
    assert repr(run) == "Run(reason='stop', steps=2, executions=['read'])"


# --- argument validation: jsonschema's verdict and messages, most calls decided by a compiled check ---

READ_INVALID = {  # the chapter's invalid-arguments scenarios, and what the model is told
    "missing_path": ({}, "Invalid arguments for tool read at arguments: 'path' is a required property"),
    "path_not_a_string": ({"path": 7}, "Invalid arguments for tool read at path: 7 is not of type 'string'"),
    "unknown_property": ({"path": "README.md", "mode": "rw"},
                         "Invalid arguments for tool read at arguments: Additional properties are not allowed "
                         "('mode' was unexpected)"),
    "offset_below_one": ({"path": "README.md", "offset": 0},  # chapter 08's read tool only
                         "Invalid arguments for tool read at offset: 0 is less than the minimum of 1"),
}


def workspace_read_tool():
    from checkpoints.ch08_workspace_read import create_read_tool
    return create_read_tool(".")


def compiled_validation_installed() -> bool:
    from course.runtime import validation
    return validation.jsonschema_rs is not None


@pytest.mark.parametrize("tool, scenario", [("memory", name) for name in list(READ_INVALID)[:3]]
                         + [("workspace", name) for name in READ_INVALID])
@pytest.mark.asyncio
async def test_invalid_arguments_are_answered_with_jsonschemas_message_with_or_without_the_compiled_check(
        tool, scenario):
    from checkpoints.ch06_tool_execution import execute_tool_call
    from course.runtime.messages import text, tool_call
    from course.runtime.tools import ToolExecutionContext
    from course.runtime.validation import ArgumentValidator

    read = readme.memory_read_tool() if tool == "memory" else workspace_read_tool()
    arguments, says = READ_INVALID[scenario]
    for compiled in (True, False):
        read.validator = ArgumentValidator(read.parameters, compiled=compiled)
        result = await execute_tool_call(tool_call("call-1", "read", arguments), Registry([read]), ToolExecutionContext())
        assert (result["isError"], result["content"]) == (True, [text(says)])


needs_compiled = pytest.mark.skipif(not compiled_validation_installed(), reason="jsonschema-rs (the fast extra) is not installed")


@needs_compiled
def test_the_courses_tools_are_validated_by_the_compiled_check():
    from benchmarks.workloads import noop_tool
    for tool in (readme.memory_read_tool(), workspace_read_tool(), noop_tool([0])):
        assert tool.validator.compiled is not None, tool.name


NOT_AGREED_SCHEMAS = [
    {"type": "string", "pattern": "^a$"},  # Python's re and jsonschema-rs's regex dialect differ
    {"type": "number", "multipleOf": 0.1},  # 0.3: jsonschema divides floats, jsonschema-rs does not
    {"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s"},
    {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"},
    {"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}},  # nested too
    {"type": "object", "properties": {"a": {"enum": [(1, 2)]}}},  # a value that is not plain JSON
]


@pytest.mark.parametrize("schema", NOT_AGREED_SCHEMAS)
def test_a_schema_outside_the_agreed_keywords_is_left_to_jsonschema(schema):
    from course.runtime.validation import ArgumentValidator
    assert ArgumentValidator(schema).compiled is None


# jsonschema-rs accepts each of these (a tuple as an array, an infinity as no number, 2**53 + 1 as
# the float 2**53); jsonschema refuses them, and its verdict is the one that holds.
NOT_PLAIN_JSON = [
    ({"type": "array"}, (1, 2)),
    ({"type": "object", "properties": {"a": {"maximum": 5}}}, {"a": float("inf")}),
    ({"minimum": 0}, float("-inf")),
    ({"maximum": 2**53}, 2**53 + 1),
]


@pytest.mark.parametrize("schema, instance", NOT_PLAIN_JSON)
def test_arguments_that_are_not_plain_json_get_jsonschemas_verdict(schema, instance):
    from course.runtime.validation import ArgumentValidator
    validator = ArgumentValidator(schema)
    assert not validator.is_valid(instance)
    assert [e.message for e in validator.iter_errors(instance)] == \
        [e.message for e in validator.reference.iter_errors(instance)]


@needs_compiled
def test_the_compiled_check_and_jsonschema_agree_on_every_generated_schema_and_plain_json_value():
    from test_properties import import_hypothesis_without_assert_rewriting
    import_hypothesis_without_assert_rewriting()
    from validation_verdicts import compiled_and_jsonschema_agree

    compiled_and_jsonschema_agree()


# --- JSON checks and copies: the encoder's verdict and deepcopy's result, without their cost ---

def test_check_json_gives_strict_jsons_verdict_and_error_on_every_generated_value():
    from test_properties import import_hypothesis_without_assert_rewriting
    import_hypothesis_without_assert_rewriting()
    from json_verdicts import check_json_agrees_on_every_edge, check_json_agrees_with_strict_json

    check_json_agrees_on_every_edge()
    check_json_agrees_with_strict_json()


def test_assistant_problem_in_one_pass_gives_the_full_checks_verdict_and_words():
    from test_properties import import_hypothesis_without_assert_rewriting
    import_hypothesis_without_assert_rewriting()
    from json_verdicts import assistant_problem_agrees_on_every_edge, assistant_problem_agrees_with_the_full_check

    assistant_problem_agrees_on_every_edge()
    assistant_problem_agrees_with_the_full_check()


def test_json_copy_makes_what_deepcopy_makes_sharing_no_container():
    from test_properties import import_hypothesis_without_assert_rewriting
    import_hypothesis_without_assert_rewriting()
    from json_verdicts import json_copy_makes_what_deepcopy_makes

    json_copy_makes_what_deepcopy_makes()


# --- JSON text: the same text and the same errors as the encoder, without building it per call ---

def _cycle():
    items = []
    items.append(items)
    return items


def _nested(depth):
    value = []
    for _ in range(depth):
        value = [value]
    return value


ENCODED = [{"a": [1, 2.5, None, True, "é"]}, {1: 2}, (1, 2), "s", 2**100, {"x": {1, 2}}, float("nan"),
           float("-inf"), {(1,): 2}, _cycle(), _nested(5000), {"b": {"c": [_cycle()]}}]


@pytest.mark.parametrize("value", ENCODED, ids=range(len(ENCODED)))
@pytest.mark.parametrize("settings", [{"allow_nan": False}, {"ensure_ascii": False, "separators": (",", ":")}])
def test_an_encoding_function_answers_as_its_encoder_does(value, settings):
    import json
    from course.runtime.messages import encoding_function

    def outcome(encode):
        try:
            return encode(value)
        except (TypeError, ValueError, RecursionError) as error:
            return type(error), str(error)

    encoder = json.JSONEncoder(**settings)
    assert outcome(encoding_function(encoder)) == outcome(encoder.encode)
