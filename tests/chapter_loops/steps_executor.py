"""A chapter 06 executor written from the chapter text alone: the four steps in the order the chapter
draws them, each failure returned as soon as it is found.

A student's `ch06_tool_execution.py`: the registry lookup, argumentsProblem, the tool's JSON Schema
(bestMatch), the tool run with a copy of the arguments inside try/except Exception, and the three fields
of its output wrapped by the runtime's toolResult. Nothing the chapter does not teach: a tool's output
is trusted to be a ToolOutput.
"""

from __future__ import annotations

from jsonschema.exceptions import best_match

from course.runtime.messages import arguments_problem, json_copy, tool_result
from course.runtime.tools import error_result


async def execute_tool_call(call, registry, context):
    tool = registry.get(call["name"])
    if tool is None:
        return error_result(call, f"Tool {call['name']} not found")

    problem = arguments_problem(call)
    if problem is not None:
        return error_result(call, problem)

    error = best_match(tool.validator.iter_errors(call["arguments"]))
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path) or "arguments"
        return error_result(call, f"Invalid arguments for tool {call['name']} at {where}: {error.message}")

    try:
        output = await tool.execute(json_copy(call["arguments"]), context)
    except Exception as exc:
        return error_result(call, str(exc) or type(exc).__name__)

    return tool_result(call, output["content"], is_error=bool(output.get("isError")), details=output.get("details"))
