"""Messages and content blocks: JSON-shaped dicts with pi-ai's camelCase field names."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal, NotRequired, TypedDict

from course.runtime.clock import now

StopReason = Literal["stop", "toolUse", "length", "error", "aborted"]


class TextContent(TypedDict):
    type: Literal["text"]
    text: str


class ToolCall(TypedDict):
    type: Literal["toolCall"]
    id: str
    name: str
    arguments: dict[str, Any]
    argumentsError: NotRequired[str]
    """Only on a call whose arguments were not a complete JSON object: why (its `arguments` is then `{}`
    and means nothing; the call is answered by an error result and its tool never runs)."""
    argumentsText: NotRequired[str]
    """Only beside `argumentsError`: the arguments as the model wrote them, sent back to it as written."""


class UserMessage(TypedDict):
    role: Literal["user"]
    content: str | list[TextContent]
    timestamp: int


class AssistantMessage(TypedDict):
    role: Literal["assistant"]
    content: list[TextContent | ToolCall]
    stopReason: StopReason
    timestamp: int
    errorMessage: NotRequired[str]


class ToolResultMessage(TypedDict):
    role: Literal["toolResult"]
    toolCallId: str
    toolName: str
    content: list[TextContent]
    isError: bool
    details: NotRequired[Any]
    timestamp: int


Message = UserMessage | AssistantMessage | ToolResultMessage


def encoding_function(encoder: json.JSONEncoder) -> Callable[[Any], str]:
    """`encoder.encode`, without its per-call cost: it builds a new C encoder on every call (about
    three times the cost of encoding a tool result's content). The C encoder here is built once,
    without the cycle check's markers (reused markers would be left stale by a failed encoding);
    a cycle, or a value nested too deep, exhausts the recursion limit instead, and is then encoded
    again by `encoder.encode`, which raises what it always raises."""
    if json.encoder.c_make_encoder is None or encoder.indent is not None:
        return encoder.encode
    chunks = json.encoder.c_make_encoder(
        None, encoder.default,
        json.encoder.encode_basestring_ascii if encoder.ensure_ascii else json.encoder.encode_basestring,
        None, encoder.key_separator, encoder.item_separator, encoder.sort_keys, encoder.skipkeys, encoder.allow_nan)

    def encode(value: Any) -> str:
        try:
            return "".join(chunks(value, 0))
        except RecursionError:
            return encoder.encode(value)

    return encode


MAX_DEPTH = 100
"""How deeply a value in a transcript may nest lists and objects (a top-level list or object is level 1)."""

# Built once, C encoder included (see encoding_function): json.dumps(...) builds a new one on every call.
_encode = encoding_function(json.JSONEncoder(allow_nan=False, ensure_ascii=False))


def strict_json(value: Any) -> str:
    """`value` as JSON text, if a transcript may hold it; else TypeError or ValueError saying why.

    A transcript is JSON that every provider and terminal accepts: no sets, bytes, NaN or Infinity
    (TypeError / ValueError from the encoder), no string that is not UTF-8 (a lone surrogate such as
    "\\ud800"), and nothing nested deeper than MAX_DEPTH. Never raises RecursionError.
    """
    try:
        encoded = _encode(value)
    except RecursionError:
        raise ValueError(f"it is nested deeper than {MAX_DEPTH} levels") from None
    try:
        encoded.encode("utf-8")
    except UnicodeEncodeError as error:
        bad = encoded[error.start:error.end].encode("utf-8", "backslashreplace").decode("ascii")
        raise ValueError(f"it holds {bad}, a lone surrogate, which is not UTF-8 text") from None
    # Nesting n levels takes 2n characters at least, so only a longer text needs the walk.
    if len(encoded) > 2 * MAX_DEPTH and nested_deeper_than(value, MAX_DEPTH):
        raise ValueError(f"it is nested deeper than {MAX_DEPTH} levels")
    return encoded


def nested_deeper_than(value: Any, limit: int) -> bool:
    """Whether `value` nests lists, tuples or dicts more than `limit` levels deep (without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, (dict, list, tuple)):
            continue
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list, tuple)))
    return False


def arguments_problem(call: ToolCall) -> str | None:
    """Why `call`'s arguments must not reach its tool whatever its schema says, or None.

    The model's text was not a complete JSON object (the call carries `argumentsError`), or the
    arguments are not a value a transcript may hold (see `strict_json`).
    """
    why = call.get("argumentsError")
    if why is None:
        try:
            strict_json(call["arguments"])
        except (TypeError, ValueError) as error:
            why = str(error)
    if why is None:
        return None
    return f"Invalid arguments for tool {call['name']}: the arguments are not valid JSON ({why})"


def utf8_text(s: str) -> str:
    """`s`, with anything that is not UTF-8 text (a lone surrogate) written as its escape, e.g. `\\ud800`."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "backslashreplace").decode("utf-8")


def text(s: str) -> TextContent:
    return {"type": "text", "text": s}


def tool_call(id: str, name: str, arguments: dict[str, Any]) -> ToolCall:
    return {"type": "toolCall", "id": id, "name": name, "arguments": arguments}


def user_message(content: str | list[TextContent], *, timestamp: int | None = None) -> UserMessage:
    return {"role": "user", "content": content, "timestamp": now() if timestamp is None else timestamp}


def assistant_message(
    content: list[TextContent | ToolCall],
    stop_reason: StopReason,
    *,
    error_message: str | None = None,
    timestamp: int | None = None,
) -> AssistantMessage:
    message: AssistantMessage = {
        "role": "assistant",
        "content": content,
        "stopReason": stop_reason,
        "timestamp": now() if timestamp is None else timestamp,
    }
    if error_message is not None:
        message["errorMessage"] = error_message
    return message


def tool_result(
    call: ToolCall,
    content: list[TextContent],
    *,
    is_error: bool = False,
    details: Any = None,
    timestamp: int | None = None,
) -> ToolResultMessage:
    """The result message answering `call`: same toolCallId and toolName."""
    message: ToolResultMessage = {
        "role": "toolResult",
        "toolCallId": call["id"],
        "toolName": call["name"],
        "content": content,
        "isError": is_error,
        "timestamp": now() if timestamp is None else timestamp,
    }
    if details is not None:
        message["details"] = details
    return message


def tool_calls(message: AssistantMessage) -> list[ToolCall]:
    """The tool calls of an assistant message, in content order."""
    return [block for block in message["content"] if block["type"] == "toolCall"]
