"""Chapter 06: execute one tool call — a read call becomes a toolResult message.

Read it beside the chapter, top to bottom: the registry finds the tool by name (Registry 按名字找到工具),
the arguments are checked before the tool runs, first by argumentsProblem and then by the tool's JSON
Schema (参数在运行工具之前按 JSON Schema 检查), the tool gets a copy of the arguments and the context as
it is (工具拿到参数副本), its output's three fields become the result (工具的返回值变成 toolResult), and
an exception it raises becomes an error result keeping its message (工具抛出异常时). Every failure is
an error result for the call, with its toolCallId and toolName; cancellation alone propagates (取消不是
工具失败).

Lines marked `加固` opt into the runtime's hardening (course/runtime/hardening.py): a promise beyond the
chapter, for tools that return something that is no ToolOutput. They change nothing for a tool that
keeps to the chapter.
"""

from __future__ import annotations

from jsonschema.exceptions import best_match

from course.runtime.messages import ToolCall, ToolResultMessage, arguments_problem, json_copy, tool_result
from course.runtime.tools import Registry, ToolExecutionContext, error_result
from course.runtime.hardening import output_problem  # 加固


async def execute_tool_call(call: ToolCall, registry: Registry, context: ToolExecutionContext) -> ToolResultMessage:
    """The toolResult answering `call`: the tool's output, or an error result saying why there is none."""
    tool = registry.get(call["name"])
    if tool is None:
        return error_result(call, f"Tool {call['name']} not found")

    problem = arguments_problem(call)  # not a JSON object (argumentsError), or values JSON cannot hold
    if problem is not None:
        return error_result(call, problem)
    error = best_match(tool.validator.iter_errors(call["arguments"]))
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path) or "arguments"
        return error_result(call, f"Invalid arguments for tool {call['name']} at {where}: {error.message}")

    try:
        # A copy: the arguments also live in the transcript's assistant message.
        output = await tool.execute(json_copy(call["arguments"]), context)
    except Exception as exc:  # not BaseException: a CancelledError goes on to the caller
        return error_result(call, str(exc) or type(exc).__name__)

    problem = output_problem(call, output)  # 加固: an output that is no ToolOutput, or not JSON
    if problem is not None:  # 加固
        return error_result(call, problem)  # 加固
    return tool_result(
        call,
        output["content"],
        is_error=bool(output.get("isError", False)),
        details=output.get("details"),
    )
