"""A chapter 06 executor written from the chapter text alone, in another style: the checks before the
tool runs are functions that raise a `Refused` holding the error text, caught in one place; the result
is built from a `ToolOutput` read field by field.

A student's `ch06_tool_execution.py`, with nothing the chapter does not teach.
"""

from __future__ import annotations

from dataclasses import dataclass

import jsonschema.exceptions

from course.runtime import messages
from course.runtime.tools import Registry, Tool, ToolExecutionContext, error_result


@dataclass
class Refused(Exception):
    """Why the tool of a call does not run: the text of the error result."""

    text: str


def find_tool(call: dict, registry: Registry) -> Tool:
    tool = registry.get(call["name"])  # exact: "Read" and "read " are not "read"
    if tool is None:
        raise Refused(f"Tool {call['name']} not found")
    return tool


def check_arguments(call: dict, tool: Tool) -> None:
    problem = messages.arguments_problem(call)
    if problem is not None:
        raise Refused(problem)
    best = jsonschema.exceptions.best_match(tool.validator.iter_errors(call["arguments"]))
    if best is None:
        return
    path = [str(step) for step in best.absolute_path]
    where = "/".join(path) if path else "arguments"
    raise Refused(f"Invalid arguments for tool {call['name']} at {where}: {best.message}")


async def execute_tool_call(call: dict, registry: Registry, context: ToolExecutionContext) -> dict:
    try:
        tool = find_tool(call, registry)
        check_arguments(call, tool)
    except Refused as refused:
        return error_result(call, refused.text)

    arguments = messages.json_copy(call["arguments"])  # the call stays as the model wrote it
    try:
        output = await tool.execute(arguments, context)
    except Exception as failure:  # a CancelledError is no Exception: it goes on
        message = str(failure)
        return error_result(call, message if message else type(failure).__name__)

    content = output["content"]
    is_error = True if output.get("isError") else False
    details = output.get("details")
    return messages.tool_result(call, content, is_error=is_error, details=details)
