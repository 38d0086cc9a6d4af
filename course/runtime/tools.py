"""Tools and the registry the loop draws tool definitions and executors from."""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

from jsonschema import exceptions as schema_errors
from jsonschema import validators

from course.runtime.abort import AbortSignal
from course.runtime.messages import TextContent, ToolCall, ToolResultMessage, text, tool_result
from course.runtime.validation import ArgumentValidator


class ToolOutput(TypedDict):
    content: list[TextContent]
    details: NotRequired[Any]
    isError: NotRequired[bool]


@dataclass(slots=True)  # made once per call: slots make that a third cheaper
class ToolExecutionContext:
    """What a running tool gets besides its arguments."""

    signal: AbortSignal | None = None
    """The run's abort signal; a long tool should watch it."""
    report_progress: Callable[[list[TextContent]], None] = lambda content: None
    """Report partial output; the loop forwards it as a tool_progress event with the call's id."""


@dataclass
class Tool:
    """A tool the model may call: a JSON Schema for its arguments and an async `execute`."""

    name: str
    description: str
    parameters: dict[str, Any]
    execute: Callable[[dict[str, Any], ToolExecutionContext], Awaitable[ToolOutput]]
    validator: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        problem = schema_problem(self.parameters)
        if problem is not None:
            raise ValueError(f"Tool {self.name} has an invalid parameters schema: {problem}")
        self.validator = ArgumentValidator(self.parameters)  # once per tool, not per call

    def definition(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": copy.deepcopy(self.parameters)}


def schema_problem(schema: Any) -> str | None:
    """Why `schema` is not a valid JSON Schema, or None.

    Checking a schema against its metaschema costs more than a millisecond, and a course makes the
    same few tools over and over (each test, each run): the answer is kept per schema text.
    """
    try:
        text = json.dumps(schema, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        return _schema_problem_of(schema)
    return _schema_problem_of_text(text)


@functools.lru_cache(maxsize=1024)
def _schema_problem_of_text(text: str) -> str | None:
    return _schema_problem_of(json.loads(text))


def _schema_problem_of(schema: Any) -> str | None:
    try:
        validators.validator_for(schema).check_schema(schema)
    except schema_errors.SchemaError as error:
        return error.message
    return None


class Registry:
    """The tools of one run, by name."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ValueError(f"Tool {tool.name} is registered twice")
            self._tools[tool.name] = tool
        # Built once, like each tool's validator: the loop asks for them on every model request.
        self._definitions = [tool.definition() for tool in self._tools.values()]

    def definitions(self) -> list[dict[str, Any]]:
        """What the model is told it may call: name, description and parameters of each tool.

        A new list each time, of the same definitions: requests, like their messages, are read-only to a model.
        """
        return list(self._definitions)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __iter__(self):
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)


def error_result(call: ToolCall, message: str, *, details: Any = None) -> ToolResultMessage:
    """An error result answering `call`: the model reads `message`, never a traceback."""
    return tool_result(call, [text(message)], is_error=True, details=details)
