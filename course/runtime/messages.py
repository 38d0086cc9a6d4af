"""Messages and content blocks: JSON-shaped dicts with pi-ai's camelCase field names."""

from __future__ import annotations

import copy
import json
import math
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
        encoded.isascii() or encoded.encode("utf-8")
    except UnicodeEncodeError as error:
        bad = encoded[error.start:error.end].encode("utf-8", "backslashreplace").decode("ascii")
        raise ValueError(f"it holds {bad}, a lone surrogate, which is not UTF-8 text") from None
    # Nesting n levels takes 2n characters at least, so only a longer text needs the walk.
    if len(encoded) > 2 * MAX_DEPTH and nested_deeper_than(value, MAX_DEPTH):
        raise ValueError(f"it is nested deeper than {MAX_DEPTH} levels")
    return encoded


def check_json(value: Any) -> None:
    """Raise what `strict_json` raises if a transcript may not hold `value`; else return (no text is made).

    Most values are plain: exact dicts with string keys, lists, UTF-8 strings, booleans, None, modest ints
    and finite floats, nested no deeper than MAX_DEPTH. Walking them is cheaper than encoding them (a
    model's message: 1 µs instead of 1.4, or 1.3 instead of 5.8 with non-ASCII text); anything else is
    encoded by `strict_json`, which decides and says why.
    """
    if not certainly_json(value):
        strict_json(value)


_EXACT_INT = 2**63  # past this an int goes to strict_json (json refuses ints of more than 4,300 digits)


def certainly_json(value: Any, depth: int = 1) -> bool:
    """True if `value` is certainly JSON a transcript may hold; False if only encoding it can tell.
    `depth` is the nesting level `value` itself is at (a top-level list or object is level 1).

    The scalars inside a dict or list are checked in its loop, not by a call each: most of a message is
    strings and ints, and a call per value would cost more than the check."""
    kind = type(value)
    if kind is dict:
        for key in value:
            if type(key) is not str or not (key.isascii() or _utf8(key)):
                return False
        items = value.values()
    elif kind is list:
        items = value
    elif kind is str:
        return value.isascii() or _utf8(value)
    elif kind is int:
        return -_EXACT_INT < value < _EXACT_INT
    elif kind is float:
        return math.isfinite(value)
    else:
        return kind is bool or value is None
    if depth > MAX_DEPTH:
        return False
    for item in items:
        kind = type(item)
        if kind is str:
            if not (item.isascii() or _utf8(item)):
                return False
        elif kind is int:
            if not -_EXACT_INT < item < _EXACT_INT:
                return False
        elif not (kind is bool or item is None or certainly_json(item, depth + 1)):
            return False
    return True


def _utf8(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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


_IMMUTABLE = frozenset({str, int, float, bool, type(None)})


def json_copy(value: Any) -> Any:
    """A deep copy of a JSON value, equal to what `copy.deepcopy` makes, at a fraction of its cost: dicts and
    lists are copied all the way down; strings, numbers, booleans and None are shared (they cannot change);
    anything else is left to `copy.deepcopy`."""
    kind = type(value)
    if kind is dict:
        return {key: item if type(item) in _IMMUTABLE else json_copy(item) for key, item in value.items()}
    if kind is list:
        return [item if type(item) in _IMMUTABLE else json_copy(item) for item in value]
    if kind in _IMMUTABLE:
        return value
    return copy.deepcopy(value)


def arguments_problem(call: ToolCall) -> str | None:
    """Why `call`'s arguments must not reach its tool whatever its schema says, or None.

    The model's text was not a complete JSON object (the call carries `argumentsError`), or the
    arguments are not a value a transcript may hold (see `strict_json`).
    """
    why = call.get("argumentsError")
    if why is None:
        try:
            check_json(call["arguments"])
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
