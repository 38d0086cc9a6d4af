"""OpenAI-compatible Chat Completions, streaming: OpenAI itself, and the local servers that speak
the same protocol (llama.cpp, Ollama, vLLM, LM Studio)."""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

from course.runtime.messages import Message
from course.runtime.providers.streaming import NAMELESS, Draft, SDKModel, as_text, check_base_url, expect, sdk
from course.runtime.stream import ModelEvent, ModelRequest

# finish_reason -> stopReason; `content_filter` and anything unknown end the answer as an error.
FINISH_REASONS = {"stop": "stop", "length": "length", "tool_calls": "toolUse", "function_call": "toolUse"}


def chat_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The transcript as Chat Completions messages, the system prompt first."""
    messages: list[dict[str, Any]] = []
    if request["systemPrompt"]:
        messages.append({"role": "system", "content": request["systemPrompt"]})
    for message in request["messages"]:
        entry = chat_message(message)
        if entry is not None:
            messages.append(entry)
    return messages


def chat_message(message: Message) -> dict[str, Any] | None:
    """One transcript message as a Chat Completions message (None for an assistant message with nothing in it)."""
    if message["role"] == "user":
        content = message["content"]
        if isinstance(content, str):
            return {"role": "user", "content": content}
        return {"role": "user", "content": [{"type": "text", "text": block["text"]} for block in content]}
    if message["role"] == "toolResult":
        # Chat Completions has no error flag on tool messages: an error result's text says what went wrong.
        return {"role": "tool", "tool_call_id": message["toolCallId"],
                "content": "".join(block["text"] for block in message["content"])}
    text = "".join(block["text"] for block in message["content"] if block["type"] == "text")
    calls = [
        {"id": block["id"], "type": "function",
         "function": {"name": block["name"] or NAMELESS, "arguments": call_arguments_text(block)}}
        for block in message["content"] if block["type"] == "toolCall"
    ]
    if not text and not calls:
        return None  # e.g. an error answer that streamed nothing; the API refuses an empty assistant message
    entry: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        entry["tool_calls"] = calls
    return entry


def call_arguments_text(call: dict[str, Any]) -> str:
    """A call's arguments as Chat Completions carries them: JSON text, or what the model wrote when that
    was not a JSON object (`argumentsText`), so the model sees its own mistake beside the error result."""
    if "argumentsText" in call:
        return call["argumentsText"]
    return json.dumps(call["arguments"], ensure_ascii=False)


def chat_tools(definitions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": {"name": d["name"], "description": d["description"],
                                          "parameters": d["parameters"]}}
        for d in definitions
    ]


def chat_request(model: str, request: ModelRequest, max_tokens: int | None = None) -> dict[str, Any]:
    """The body of one streaming Chat Completions request."""
    body: dict[str, Any] = {"model": model, "messages": chat_messages(request), "stream": True}
    if request["tools"]:  # some servers reject an empty list
        body["tools"] = chat_tools(request["tools"])
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    return body


class ChunkReader:
    """Turns Chat Completions chunks into model events on a draft, and the finish into its end."""

    def __init__(self, draft: Draft) -> None:
        self.draft = draft
        self.finish_reason: str | None = None
        self.refusal = ""
        # Calls by the `index` and the `id` their pieces carry: some servers interleave the pieces of
        # several calls, reuse an index, or send no index at all.
        self._by_index: dict[int, int] = {}
        self._by_id: dict[str, int] = {}
        self._last_key: int | None = None
        self._calls = 0

    def read(self, chunk: dict[str, Any]) -> list[ModelEvent]:
        choices = expect(chunk.get("choices"), list, "choices")  # the usage chunk at the end has none
        if not choices:
            return []
        choice = expect(choices[0], dict, "choices[0]") or {}
        delta = expect(choice.get("delta"), dict, "delta") or {}
        events: list[ModelEvent] = []
        # `reasoning_content`, which some local servers add, has no block in the course's messages.
        if content := expect(delta.get("content"), str, "delta.content"):
            events += self.draft.text(content)
        self.refusal += expect(delta.get("refusal"), str, "delta.refusal") or ""
        for n, piece in enumerate(expect(delta.get("tool_calls"), list, "delta.tool_calls") or []):
            where = f"delta.tool_calls[{n}]"
            piece = expect(piece, dict, where) or {}
            function = expect(piece.get("function"), dict, f"{where}.function") or {}
            arguments = function.get("arguments")
            if isinstance(arguments, dict):  # a few servers send the object itself rather than its JSON text
                arguments = json.dumps(arguments, ensure_ascii=False)
            arguments = expect(arguments, str, f"{where}.function.arguments")
            call_id = as_text(piece.get("id"))
            key = self._call_key(expect(piece.get("index"), int, f"{where}.index"), call_id)
            events += self.draft.tool_call(key, id=call_id, name=function.get("name"), arguments=arguments)
        if finish := expect(choice.get("finish_reason"), str, "finish_reason"):
            self.finish_reason = finish
        return events

    def _call_key(self, index: int | None, call_id: str | None) -> int:
        """Which call a piece continues (its key in the draft), or a new key for a piece that starts one.

        A piece with an id no earlier piece of its index had starts a call (one index reused for two calls);
        without an id, a piece continues the call of its index, even after pieces of other calls came
        between, or, without an index either, the call before it.
        """
        if call_id:
            key = self._by_id.get(call_id)
            if index is not None and self._by_index.get(index) != key:
                key = None
        elif index is not None:
            key = self._by_index.get(index)
        else:
            key = self._last_key
        if key is None:
            self._calls += 1
            key = self._calls
        if index is not None:
            self._by_index[index] = key
        if call_id:
            self._by_id[call_id] = key
        self._last_key = key
        return key

    def end(self) -> list[ModelEvent]:
        draft = self.draft
        if self.finish_reason is None:
            return [draft.failed("error", "The stream ended without a finish_reason")]
        if self.refusal:
            return draft.refused(f"The model refused: {self.refusal}")
        events = draft.end_block()
        reason = FINISH_REASONS.get(self.finish_reason)
        if reason is None:
            return events + draft.refused(f"The response ended with finish_reason {self.finish_reason!r}")
        if reason == "stop" and any(block["type"] == "toolCall" for block in draft.content):
            reason = "toolUse"  # some OpenAI-compatible servers end a tool-calling answer with "stop"
        return events + draft.done(reason, f"finish_reason {self.finish_reason!r}")


@dataclass
class OpenAIChatModel(SDKModel):
    """A model behind an OpenAI-compatible Chat Completions endpoint, streamed through the `openai` SDK.

    Also takes the keyword settings of `SDKModel`: timeout, max_retries, http_client, record_requests.
    """

    model: str
    """The model name the server knows, e.g. "gpt-4o-mini" or "qwen2.5:7b"."""
    base_url: str | None = None
    """The API root, e.g. "http://127.0.0.1:8080/v1"; default $OPENAI_BASE_URL, else OpenAI's."""
    api_key: str | None = None
    """Default $OPENAI_API_KEY; a local server needs none, so a placeholder is sent without it."""
    max_tokens: int | None = None
    """Sent as `max_tokens` when set; otherwise the server's own limit applies."""

    def __post_init__(self) -> None:
        if self.base_url is not None:
            check_base_url(self.base_url, "")
        else:  # the SDK's own default
            check_base_url(os.environ.get("OPENAI_BASE_URL"), "OPENAI_BASE_URL")
        self.client = sdk("openai").AsyncOpenAI(
            base_url=self.base_url,
            api_key=self.api_key or os.environ.get("OPENAI_API_KEY") or "no-key",
            **self._http_settings(),
        )

    def _open(self, request: ModelRequest) -> Awaitable[Any]:
        return self.client.chat.completions.create(**chat_request(self.model, request, self.max_tokens))

    def _reader(self, draft: Draft) -> ChunkReader:
        return ChunkReader(draft)
