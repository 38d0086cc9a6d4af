"""Chapter 06: executing one tool call. Every failure is an error result, never an exception."""

import asyncio
import json

import pytest

from course.runtime import readme_example as readme
from course.recorder.harness import load_checkpoint
from course.runtime.messages import text, tool_call
from course.runtime.tools import Registry, Tool, ToolExecutionContext

@pytest.fixture
def ch06():
    return load_checkpoint("ch06_tool_execution")


def as_text(result) -> str:
    return json.dumps(result, ensure_ascii=False, indent=2) + "\n"


def tool(name, execute, parameters=None):
    return Tool(name=name, description=f"the {name} tool", execute=execute,
                parameters=parameters or {"type": "object", "properties": {}})


@pytest.mark.asyncio
@pytest.mark.section("工具执行")
class TestExecuteToolCall:
    async def test_success(self, ch06, snapshot):
        """a valid call returns the tool's content as a toolResult with the call's id."""
        call = readme.read_call()
        result = await ch06.execute_tool_call(call, Registry([readme.memory_read_tool()]), ToolExecutionContext())
        assert (result["toolCallId"], result["isError"], result["content"]) == ("call-1", False, [text(readme.README)])
        assert as_text(result) == snapshot

    async def test_unknown_tool(self, ch06, snapshot):
        """an unknown tool name becomes the error result 'Tool <name> not found'."""
        result = await ch06.execute_tool_call(tool_call("call-1", "write", {}), Registry(), ToolExecutionContext())
        assert result["content"] == [text("Tool write not found")] and result["isError"] is True
        assert as_text(result) == snapshot

    async def test_invalid_arguments(self, ch06, snapshot):
        """arguments that fail the tool's JSON Schema become an error result naming the tool."""
        registry = Registry([readme.memory_read_tool()])
        result = await ch06.execute_tool_call(tool_call("call-1", "read", {"path": 7}), registry, ToolExecutionContext())
        assert result["isError"] is True and "read" in result["content"][0]["text"]
        assert as_text(result) == snapshot

    async def test_missing_required_argument(self, ch06, snapshot):
        """a missing required argument becomes an error result; the tool does not run."""
        registry = Registry([readme.memory_read_tool()])
        result = await ch06.execute_tool_call(tool_call("call-1", "read", {}), registry, ToolExecutionContext())
        assert result["isError"] is True
        assert as_text(result) == snapshot

    async def test_raising_tool(self, ch06, snapshot):
        """a tool that raises becomes an error result with its message, no traceback."""
        async def explode(arguments, context):
            raise OSError("disk on fire")

        result = await ch06.execute_tool_call(tool_call("call-1", "boom", {}), Registry([tool("boom", explode)]),
                                              ToolExecutionContext())
        assert result["content"] == [text("disk on fire")] and "Traceback" not in as_text(result)
        assert as_text(result) == snapshot

    async def test_raising_tool_with_empty_message_names_the_type(self, ch06):
        """a tool raising an exception without a message gets the exception's type name as text."""
        async def explode(arguments, context):
            raise KeyError()

        result = await ch06.execute_tool_call(tool_call("call-1", "boom", {}), Registry([tool("boom", explode)]),
                                              ToolExecutionContext())
        assert result["content"] == [text("KeyError")] and result["isError"] is True

    async def test_cancellation_propagates(self, ch06):
        """cancellation reaching a running tool propagates; it never becomes an error result."""
        # Cancellation reaching a running tool is not the tool failing: it must not become an error result.
        async def cancelled(arguments, context):
            raise asyncio.CancelledError()

        with pytest.raises(asyncio.CancelledError):
            await ch06.execute_tool_call(tool_call("call-1", "wait", {}), Registry([tool("wait", cancelled)]),
                                         ToolExecutionContext())

    async def test_tool_reported_error_and_details(self, ch06, snapshot):
        """a tool's own isError and details are kept in the result."""
        async def grep(arguments, context):
            return {"content": [text("no match")], "details": {"matches": 0}, "isError": True}

        result = await ch06.execute_tool_call(tool_call("call-1", "grep", {}), Registry([tool("grep", grep)]),
                                              ToolExecutionContext())
        assert (result["isError"], result["details"]) == (True, {"matches": 0})
        assert as_text(result) == snapshot

    async def test_tool_returning_garbage(self, ch06, snapshot):
        """a tool returning something that is not {content: [...]} becomes an error result."""
        async def garbage(arguments, context):
            return "not a result"

        result = await ch06.execute_tool_call(tool_call("call-1", "garbage", {}), Registry([tool("garbage", garbage)]),
                                              ToolExecutionContext())
        assert result["isError"] is True
        assert as_text(result) == snapshot

    async def test_tool_cannot_change_the_calls_arguments(self, ch06):
        """the tool gets a copy of the arguments: the call in the transcript stays as it was."""
        async def meddle(arguments, context):
            arguments["path"] = "/etc/passwd"
            return {"content": [text("ok")]}

        call = tool_call("call-1", "meddle", {"path": "README.md"})
        await ch06.execute_tool_call(call, Registry([tool("meddle", meddle)]), ToolExecutionContext())
        assert call["arguments"] == {"path": "README.md"}


@pytest.mark.section("工具执行")
def test_invalid_schema_is_refused_when_the_tool_is_made():
    """a tool with an invalid parameters schema is refused when it is made."""
    async def execute(arguments, context):
        return {"content": []}

    for _ in range(2):  # the second time too: the check's answer is kept per schema, refusals included
        with pytest.raises(ValueError, match="invalid parameters schema: 'no-such-type' is not valid"):
            tool("bad", execute, parameters={"type": "no-such-type"})
    with pytest.raises(ValueError, match="invalid parameters schema: nan is not of type 'integer'"):
        tool("bad", execute, parameters={"type": "object", "minProperties": float("nan")})  # not JSON text


@pytest.mark.section("工具执行")
def test_duplicate_tool_names_are_refused():
    """a registry refuses two tools with the same name."""
    with pytest.raises(ValueError, match="registered twice"):
        Registry([readme.memory_read_tool(), readme.memory_read_tool()])
