"""What a chapter 07 loop may check before anything happens (beyond the chapter: the hardening track).

`check_loop_options(options)` raises one TypeError or ValueError naming the field at fault, so a
caller's mistake never shows up later as a KeyError or a RecursionError from inside the loop, or
as an exception of the loop's own hiding the real one.
"""

from __future__ import annotations

from typing import Any

from course.runtime.messages import strict_json
from course.runtime.tools import Registry, schema_problem

_STOP_REASONS = ("stop", "toolUse", "length", "error", "aborted")
_FIELDS = ("model", "context", "tools", "signal", "max_steps", "execute_tool_call", "on_event")


def check_loop_options(options: Any) -> None:
    """Raise TypeError / ValueError naming the first field of `options` the loop cannot run with.

    Checked: the options object itself; `context` (a dict with a `systemPrompt` string and `messages`,
    a list of message dicts the providers can send: see `message_problem`, and JSON a transcript may
    hold: see `strict_json`); `model` (has a callable `stream`); `tools` (a Registry whose tools still
    have the valid schemas it was made with); `signal` (None or has `aborted`); `execute_tool_call` and
    `on_event` (None or callable); `max_steps` (a positive int, not a bool).
    """
    missing = [name for name in _FIELDS if not hasattr(options, name)]
    if missing:
        raise TypeError(f"options must be an AgentLoopOptions, got {type(options).__name__} "
                        f"(it has no {', '.join(missing)})")
    context = options.context
    if not isinstance(context, dict):
        raise TypeError(f"context must be a dict with 'systemPrompt' and 'messages', got {type(context).__name__}")
    for key in ("systemPrompt", "messages"):
        if key not in context:
            raise ValueError(f"context has no {key!r}: it needs 'systemPrompt' (a string) and 'messages' (a list)")
    if not isinstance(context["systemPrompt"], str):
        raise TypeError(f"context['systemPrompt'] must be a string, got {type(context['systemPrompt']).__name__}")
    messages = context["messages"]
    if not isinstance(messages, list):
        raise TypeError(f"context['messages'] must be a list of message dicts, got {type(messages).__name__}")
    for index, message in enumerate(messages):
        problem = message_problem(message)
        if problem is not None:
            raise TypeError(f"context['messages'][{index}] {problem}")
    try:
        strict_json([context["systemPrompt"], messages])
    except (TypeError, ValueError) as error:
        where = _first_not_json(context["systemPrompt"], messages)
        raise ValueError(f"{where} cannot be sent to a model: {error}") from None

    stream = getattr(options.model, "stream", None)
    if not callable(stream):
        raise TypeError(f"model must have a stream(request, *, signal) method; {type(options.model).__name__} has none")
    if not isinstance(options.tools, Registry):
        raise TypeError(f"tools must be a Registry, got {type(options.tools).__name__}")
    _check_tools(options.tools)
    if options.signal is not None and not isinstance(getattr(options.signal, "aborted", None), bool):
        raise TypeError(f"signal must be an AbortSignal or None, got {type(options.signal).__name__}")
    for name in ("execute_tool_call", "on_event"):
        value = getattr(options, name)
        if value is not None and not callable(value):
            raise TypeError(f"{name} must be callable or None, got {type(value).__name__}")
    max_steps = options.max_steps
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(f"max_steps must be a positive integer, got {max_steps!r}")


def message_problem(message: Any) -> str | None:
    """What keeps `message` from being a transcript message the loop and the providers can read, or None."""
    if not isinstance(message, dict):
        return f"is {type(message).__name__}, not a message dict"
    role = message.get("role")
    if role == "user":
        content = message.get("content")
        if isinstance(content, str) or _all_text(content):
            return None
        return "(a user message) must have 'content': a string or a list of text blocks"
    if role == "assistant":
        if message.get("stopReason") not in _STOP_REASONS:
            return f"(an assistant message) has stopReason {message.get('stopReason')!r}, not one of {_STOP_REASONS}"
        content = message.get("content")
        if not isinstance(content, list):
            return "(an assistant message) must have 'content', a list of text and toolCall blocks"
        for position, block in enumerate(content):
            if _is_text(block):
                continue
            if isinstance(block, dict) and block.get("type") == "toolCall" and isinstance(block.get("id"), str) \
                    and isinstance(block.get("name"), str) and isinstance(block.get("arguments"), dict) \
                    and all(isinstance(block.get(key, ""), str) for key in ("argumentsError", "argumentsText")):
                continue
            return (f"(an assistant message) has content[{position}] that is neither a text block nor a toolCall "
                    f"block with a string id, a string name and arguments as a dict")
        return None
    if role == "toolResult":
        for key, kind in (("toolCallId", str), ("toolName", str), ("isError", bool)):
            if not isinstance(message.get(key), kind):
                return f"(a toolResult message) must have {key!r} as {kind.__name__}"
        if not _all_text(message.get("content")):
            return "(a toolResult message) must have 'content', a list of text blocks"
        return None
    return f"has role {role!r}; a message's role is 'user', 'assistant' or 'toolResult'"


def _is_text(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)


def _all_text(content: Any) -> bool:
    return isinstance(content, list) and all(_is_text(block) for block in content)


def _first_not_json(system_prompt: str, messages: list) -> str:
    try:
        strict_json(system_prompt)
    except (TypeError, ValueError):
        return "context['systemPrompt']"
    for index, message in enumerate(messages):
        try:
            strict_json(message)
        except (TypeError, ValueError):
            return f"context['messages'][{index}]"
    return "context['messages']"


def _check_tools(registry: Registry) -> None:
    """Each tool's schema is checked where it is used, not only when the Tool was made: it must still
    be a valid schema, and the one the tool validates with and the registry tells the model about."""
    for tool, definition in zip(registry, registry.definitions()):
        problem = schema_problem(tool.parameters)
        if problem is not None:
            raise ValueError(f"tools: tool {tool.name} has an invalid parameters schema: {problem}")
        validator_schema = getattr(getattr(tool, "validator", None), "schema", tool.parameters)
        if validator_schema is not tool.parameters or _text(definition.get("parameters")) != _text(tool.parameters):
            raise ValueError(f"tools: the parameters schema of tool {tool.name} changed after the Tool and its "
                             f"Registry were made; make them again")


def _text(value: Any) -> str | None:
    try:
        return strict_json(value)
    except (TypeError, ValueError):
        return None
