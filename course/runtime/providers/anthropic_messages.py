"""Anthropic Messages, streaming, through the `anthropic` SDK."""

from __future__ import annotations

import os
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

from course.runtime.messages import Message
from course.runtime.providers.streaming import (
    LOCAL_KEY, NAMELESS, Draft, SDKModel, check_base_url, expect, on_loopback, sdk,
)
from course.runtime.stream import ModelEvent, ModelRequest

# stop_reason -> stopReason; `refusal` and anything unknown end the answer as an error.
STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "toolUse",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
}


def anthropic_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """The transcript as Messages API turns.

    Tool results become `tool_result` blocks of a user turn; consecutive user-side messages share
    one turn, as the API wants every result of an assistant turn in the user turn right after it.
    """
    turns: list[dict[str, Any]] = []
    for message in messages:
        role = "assistant" if message["role"] == "assistant" else "user"
        blocks = anthropic_blocks(message)
        if not blocks:
            continue  # e.g. an error answer that streamed nothing; the API refuses an empty turn
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return turns


def anthropic_blocks(message: Message) -> list[dict[str, Any]]:
    """One transcript message's content blocks (empty text is dropped: the API refuses it)."""
    if message["role"] == "user":
        content = message["content"]
        texts = [content] if isinstance(content, str) else [block["text"] for block in content]
        return [{"type": "text", "text": t} for t in texts if t]
    if message["role"] == "toolResult":
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message["toolCallId"],
                                  "is_error": message["isError"]}
        texts = [{"type": "text", "text": block["text"]} for block in message["content"] if block["text"]]
        if texts:
            result["content"] = texts
        return [result]
    blocks: list[dict[str, Any]] = []
    for block in message["content"]:
        if block["type"] == "text" and block["text"]:
            blocks.append({"type": "text", "text": block["text"]})
        elif block["type"] == "toolCall":
            blocks.append({"type": "tool_use", "id": block["id"], "name": block["name"] or NAMELESS,
                           "input": tool_input(block)})
    return blocks


INVALID_INPUT_KEY = "invalid_json"


def tool_input(call: dict[str, Any]) -> dict[str, Any]:
    """A call's `input`. The Messages API takes only an object there, so arguments the model wrote that were
    not a JSON object (`argumentsText`) go back as `{"invalid_json": "<what it wrote>"}`: its own text,
    beside the error result that says why, never an empty `{}`."""
    if "argumentsText" in call:
        return {INVALID_INPUT_KEY: call["argumentsText"]}
    return call["arguments"]


def anthropic_tools(definitions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"name": d["name"], "description": d["description"], "input_schema": d["parameters"]}
            for d in definitions]


def anthropic_request(model: str, request: ModelRequest, max_tokens: int) -> dict[str, Any]:
    """The body of one streaming Messages request."""
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens,
                            "messages": anthropic_messages(request["messages"]), "stream": True}
    if request["systemPrompt"]:
        body["system"] = request["systemPrompt"]
    if request["tools"]:
        body["tools"] = anthropic_tools(request["tools"])
    return body


class EventReader:
    """Turns Messages stream events into model events on a draft, and the stop into its end."""

    def __init__(self, draft: Draft) -> None:
        self.draft = draft
        self.stop_reason: str | None = None
        self.stopped = False
        self._kinds: dict[int, str] = {}  # the API's block index -> block type

    def read(self, event: dict[str, Any]) -> list[ModelEvent]:
        kind = event.get("type")
        if kind == "content_block_start":
            index = expect(event.get("index"), int, "index")
            block = expect(event.get("content_block"), dict, "content_block") or {}
            self._kinds[index] = block.get("type")
            if block.get("type") == "tool_use":
                # `input` is `{}` when deltas follow; a server that gives it whole sends none.
                return self.draft.tool_call(index, id=block.get("id"), name=block.get("name"), whole=block.get("input"))
            # Thinking and server-tool blocks have no counterpart in the course's messages.
            return self.draft.end_block() if block.get("type") == "text" else []
        if kind == "content_block_delta":
            index = expect(event.get("index"), int, "index")
            delta = expect(event.get("delta"), dict, "delta") or {}
            if delta.get("type") == "text_delta" and self._kinds.get(index) == "text":
                return self.draft.text(expect(delta.get("text"), str, "delta.text") or "")
            if delta.get("type") == "input_json_delta" and self._kinds.get(index) == "tool_use":
                arguments = expect(delta.get("partial_json"), str, "delta.partial_json")
                return self.draft.tool_call(index, arguments=arguments)
            return []
        if kind == "content_block_stop":
            index = expect(event.get("index"), int, "index")
            return self.draft.end_block() if self._kinds.get(index) in ("text", "tool_use") else []
        if kind == "message_delta":
            delta = expect(event.get("delta"), dict, "delta") or {}
            self.stop_reason = expect(delta.get("stop_reason"), str, "delta.stop_reason") or self.stop_reason
        elif kind == "message_stop":
            self.stopped = True
        return []

    def end(self) -> list[ModelEvent]:
        draft = self.draft
        if not self.stopped:
            return [draft.failed("error", "The stream ended before message_stop")]
        reason = STOP_REASONS.get(self.stop_reason)
        if reason is None:
            return draft.refused(f"The response ended with stop_reason {self.stop_reason!r}")
        return draft.done(reason, f"stop_reason {self.stop_reason!r}")


@dataclass
class AnthropicModel(SDKModel):
    """A model behind the Anthropic Messages API, streamed through the `anthropic` SDK.

    Also takes the keyword settings of `SDKModel`: timeout, max_retries, http_client, record_requests.
    """

    model: str
    """The model name, e.g. "claude-sonnet-4-5"."""
    base_url: str | None = None
    """The API root; default $ANTHROPIC_BASE_URL, else Anthropic's."""
    api_key: str | None = None
    """Default $ANTHROPIC_API_KEY (else the SDK's own credential lookup); a base URL on the loopback
    interface needs none (a placeholder is sent)."""
    max_tokens: int = 4096
    """The answer's token limit, which the Messages API requires."""

    def __post_init__(self) -> None:
        base_url = self.base_url
        check_base_url(base_url, "")
        if base_url is None:
            base_url = os.environ.get("ANTHROPIC_BASE_URL") or None
            check_base_url(base_url, "ANTHROPIC_BASE_URL")
        key = self.api_key or os.environ.get("ANTHROPIC_API_KEY") or None
        if key is None and on_loopback(base_url):
            key = LOCAL_KEY  # without one the SDK refuses to send; a local server checks none
        self.client = sdk("anthropic").AsyncAnthropic(
            base_url=base_url,
            api_key=key,
            **self._http_settings(),
        )

    def _open(self, request: ModelRequest) -> Awaitable[Any]:
        return self.client.messages.create(**anthropic_request(self.model, request, self.max_tokens))

    def _reader(self, draft: Draft) -> EventReader:
        return EventReader(draft)
