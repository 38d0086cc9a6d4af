"""Chapter 06: executing one tool call. Every failure is an error result, never an exception.

Each test names what it holds the student to: the chapter's sentences (`cites`, names of
`chapters/ch06_tool_execution/judge/contract.py`'s CITES), or, in the section 加固 (the hardening track,
beyond the chapter), the project's own promise (`hardening`, a name of its PROMISES).

Each test compares its snapshot first: a wrong executor is shown (and diagnosed by) the first line that
differs; the assertions after it hold the snapshot itself to the chapter.
"""

import asyncio
import json

import pytest

from course.recorder.generated import generated_scenarios
from course.recorder.harness import load_checkpoint, raised
from course.recorder.record import jsonable
from chapters.ch06_tool_execution.scenarios import result_record
from course.runtime import readme_example as readme
from course.runtime.messages import text, tool_call
from course.runtime.tools import Registry, Tool, ToolExecutionContext


@pytest.fixture
def ch06():
    return load_checkpoint("ch06_tool_execution")


def tool(name, execute, parameters=None):
    return Tool(name=name, description=f"the {name} tool", execute=execute,
                parameters=parameters or {"type": "object", "properties": {}})


@pytest.mark.section("工具执行")
class TestExecuteToolCall:
    @pytest.mark.cites("result-answers-call", "three-fields")
    async def test_success(self, ch06, snapshot):
        """a valid call returns the tool's content as a toolResult with the call's id."""
        call = readme.read_call()
        result = await ch06.execute_tool_call(call, Registry([readme.memory_read_tool()]), ToolExecutionContext())
        assert result_record(result) == snapshot
        assert (result["toolCallId"], result["isError"], result["content"]) == ("call-1", False, [text(readme.README)])

    @pytest.mark.cites("unknown-tool", "error-result-shape", "failure-is-result")
    async def test_unknown_tool(self, ch06, snapshot):
        """an unknown tool name becomes the error result 'Tool <name> not found'."""
        result = await ch06.execute_tool_call(tool_call("call-1", "write", {}), Registry(), ToolExecutionContext())
        assert result_record(result) == snapshot
        assert result["content"] == [text("Tool write not found")] and result["isError"] is True

    @pytest.mark.cites("best-match", "where", "invalid-arguments-text")
    async def test_invalid_arguments(self, ch06, snapshot):
        """arguments that fail the tool's JSON Schema become an error result naming the tool."""
        registry = Registry([readme.memory_read_tool()])
        result = await ch06.execute_tool_call(tool_call("call-1", "read", {"path": 7}), registry, ToolExecutionContext())
        assert result_record(result) == snapshot
        assert result["isError"] is True and "read" in result["content"][0]["text"]

    @pytest.mark.cites("where", "not-run-when-refused")
    async def test_missing_required_argument(self, ch06, snapshot):
        """a missing required argument becomes an error result; the tool does not run."""
        registry = Registry([readme.memory_read_tool()])
        result = await ch06.execute_tool_call(tool_call("call-1", "read", {}), registry, ToolExecutionContext())
        assert result_record(result) == snapshot
        assert result["isError"] is True

    @pytest.mark.cites("no-coercion", "not-run-when-refused")
    async def test_a_number_in_a_string_is_not_an_integer(self, ch06, snapshot):
        """arguments are validated as the model sent them: "7" for an integer is invalid arguments, never coerced to 7."""
        runs = []

        async def head(arguments, context):
            runs.append(jsonable(arguments))
            return {"content": [text(f"got {json.dumps(arguments)}")]}

        lines = {"type": "object", "properties": {"lines": {"type": "integer"}}, "required": ["lines"]}
        result = await ch06.execute_tool_call(tool_call("call-1", "head", {"lines": "7"}),
                                              Registry([tool("head", head, lines)]), ToolExecutionContext())
        assert result_record(result) == snapshot
        assert result["isError"] is True and runs == []

    @pytest.mark.cites("exception-message", "failure-is-result")
    async def test_raising_tool(self, ch06, snapshot):
        """a tool that raises becomes an error result with its message, no traceback."""
        async def explode(arguments, context):
            raise OSError("disk on fire")

        result = await ch06.execute_tool_call(tool_call("call-1", "boom", {}), Registry([tool("boom", explode)]),
                                              ToolExecutionContext())
        assert result_record(result) == snapshot
        assert result["content"] == [text("disk on fire")]

    @pytest.mark.cites("exception-empty")
    async def test_raising_tool_with_empty_message_names_the_type(self, ch06, snapshot):
        """a tool raising an exception without a message gets the exception's type name as text."""
        async def explode(arguments, context):
            raise KeyError()

        result = await ch06.execute_tool_call(tool_call("call-1", "boom", {}), Registry([tool("boom", explode)]),
                                              ToolExecutionContext())
        assert result_record(result) == snapshot
        assert result["content"] == [text("KeyError")] and result["isError"] is True

    @pytest.mark.cites("cancellation-raised-by-tool", "catch-exception-only", "no-shield")
    async def test_cancellation_propagates(self, ch06, snapshot):
        """cancellation reaching a running tool propagates; it never becomes an error result."""
        # Cancellation reaching a running tool is not the tool failing: it must not become an error result.
        async def cancelled(arguments, context):
            raise asyncio.CancelledError()

        try:
            result = await ch06.execute_tool_call(tool_call("call-1", "wait", {}), Registry([tool("wait", cancelled)]),
                                                  ToolExecutionContext())
            outcome = result_record(result)
        except asyncio.CancelledError:
            outcome = {"kind": "tool-execution", "raised": {"type": "CancelledError", "message": ""}}
        assert outcome == snapshot

    @pytest.mark.cites("tool-error-kept", "details-rule")
    async def test_tool_reported_error_and_details(self, ch06, snapshot):
        """a tool's own isError and details are kept in the result."""
        async def grep(arguments, context):
            return {"content": [text("no match")], "details": {"matches": 0}, "isError": True}

        result = await ch06.execute_tool_call(tool_call("call-1", "grep", {}), Registry([tool("grep", grep)]),
                                              ToolExecutionContext())
        assert result_record(result) == snapshot
        assert (result["isError"], result["details"]) == (True, {"matches": 0})

    @pytest.mark.cites("arguments-copy", "context-as-is")
    async def test_tool_cannot_change_the_calls_arguments(self, ch06, snapshot):
        """the tool gets a copy of the arguments: the call in the transcript stays as it was."""
        caller = ToolExecutionContext()
        runs = []

        async def meddle(arguments, context):
            runs.append({"tool": "meddle", "received": jsonable(arguments), "callersSignal": context.signal is caller.signal})
            arguments["path"] = "/etc/passwd"
            return {"content": [text("ok")]}

        call = tool_call("call-1", "meddle", {"path": "README.md"})
        result = await ch06.execute_tool_call(call, Registry([tool("meddle", meddle)]), caller)
        unchanged = call == tool_call("call-1", "meddle", {"path": "README.md"})
        assert {**result_record(result), "runs": runs, "callUnchanged": unchanged, "callAfter": jsonable(call)} == snapshot
        assert call["arguments"] == {"path": "README.md"}


async def making(make):
    make()


@pytest.mark.section("工具执行")
@pytest.mark.cites("runtime-refuses-bad-tools")
@pytest.mark.parametrize("case", ["unknown_type", "unknown_type_again", "nan"])
async def test_invalid_schema_is_refused_when_the_tool_is_made(case, snapshot):
    """a tool with an invalid parameters schema is refused when it is made ({case})."""
    async def execute(arguments, context):
        return {"content": []}

    if case == "nan":  # not JSON text: checked without the per-schema-text cache
        make, about = (lambda: tool("bad", execute, parameters={"type": "object", "minProperties": float("nan")}),
                       "invalid parameters schema: nan is not of type 'integer'")
    else:
        make, about = (lambda: tool("bad", execute, parameters={"type": "no-such-type"}),
                       "invalid parameters schema: 'no-such-type' is not valid")
    if case == "unknown_type_again":  # the check's answer is kept per schema, refusals included
        with pytest.raises(ValueError):
            make()
    assert await raised(making(make), about=about) == snapshot


@pytest.mark.section("工具执行")
@pytest.mark.cites("runtime-refuses-bad-tools")
async def test_duplicate_tool_names_are_refused(snapshot):
    """a registry refuses two tools with the same name."""
    twice = lambda: Registry([readme.memory_read_tool(), readme.memory_read_tool()])  # noqa: E731
    assert await raised(making(twice), about="registered twice") == snapshot


@pytest.mark.section("加固")
class TestHardening:
    """What the project promises beyond the chapter: never part of the chapter's verdict (`--hardening`)."""

    @pytest.mark.hardening("tool-output-checked")
    async def test_tool_returning_garbage(self, ch06, snapshot):
        """a tool returning something that is not {content: [...]} becomes an error result."""
        async def garbage(arguments, context):
            return "not a result"

        result = await ch06.execute_tool_call(tool_call("call-1", "garbage", {}), Registry([tool("garbage", garbage)]),
                                              ToolExecutionContext())
        assert result_record(result) == snapshot
        assert result["isError"] is True

    @pytest.mark.hardening("tool-output-json")
    async def test_tool_returning_output_that_is_not_json(self, ch06, snapshot):
        """a tool whose details hold what JSON cannot (a set) becomes an error result saying so."""
        async def handle(arguments, context):
            return {"content": [text("ok")], "details": {"seen": {1, 2}}}

        result = await ch06.execute_tool_call(tool_call("call-1", "handle", {}), Registry([tool("handle", handle)]),
                                              ToolExecutionContext())
        assert result_record(result) == snapshot
        assert result["isError"] is True and "details" not in result
        assert result["content"][0]["text"].startswith("Tool handle returned output that is not JSON: ")


test_generated = generated_scenarios("ch06_tool_execution")
