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


# A transcript is JSON: this raises TypeError or ValueError (NaN, Infinity, a cycle) for what is not.
# Built once; json.dumps(..., allow_nan=False) builds a new encoder on every call.
strict_json = encoding_function(json.JSONEncoder(allow_nan=False))


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
