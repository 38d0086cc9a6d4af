"""Chapter 06: execute one tool call against a registry.

Every failure becomes an error result for the call, with the call's toolCallId and toolName;
nothing raises out of the executor except cancellation.
"""

from __future__ import annotations

from jsonschema.exceptions import best_match

from course.runtime.messages import (
    ToolCall, ToolResultMessage, arguments_problem, check_json, json_copy, tool_result,
)
from course.runtime.tools import Registry, ToolExecutionContext, error_result


async def execute_tool_call(call: ToolCall, registry: Registry, context: ToolExecutionContext) -> ToolResultMessage:
    tool = registry.get(call["name"])
    if tool is None:
        return error_result(call, f"Tool {call['name']} not found")
    # Text that was not a JSON object (argumentsError) is the model's to fix: it never becomes {}.
    problem = arguments_problem(call)
    if problem is not None:
        return error_result(call, problem)

    error = best_match(tool.validator.iter_errors(call["arguments"]))
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path) or "arguments"
        return error_result(call, f"Invalid arguments for tool {call['name']} at {where}: {error.message}")

    try:
        # The tool gets its own copy: the arguments also live in the transcript's assistant message.
        output = await tool.execute(json_copy(call["arguments"]), context)
    except Exception as exc:
        return error_result(call, str(exc) or type(exc).__name__)

    if not isinstance(output, dict) or not isinstance(output.get("content"), list):
        return error_result(call, f"Tool {call['name']} returned {type(output).__name__}, not a dict with a content list")
    try:
        check_json([output["content"], output.get("details")])  # a transcript is JSON
    except (TypeError, ValueError) as error:
        return error_result(call, f"Tool {call['name']} returned output that is not JSON: {error}")
    return tool_result(
        call,
        output["content"],
        is_error=bool(output.get("isError", False)),
        details=output.get("details"),
    )
