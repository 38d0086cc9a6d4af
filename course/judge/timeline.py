"""A finished run in the chapter's own notation, and where two such texts first differ.

The text has sections (`## observations`, `## timeline`, `## transcript`, `## requests`,
`## messages`); snapshots store it, the demo prints it, and `first_divergence` names the first
line where an actual run departs from the expected one.
"""

from __future__ import annotations

import json
import re
import reprlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from course.runtime.messages import utf8_text

SECTION_PREFIX = "## "


def _quote(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


# JSON objects are unordered: every dict is shown with these keys first, in this order (the order the
# chapters write them in), then any others sorted, so two runs differing only in key order show the same.
KEY_ORDER = {key: rank for rank, key in enumerate([
    "role", "toolCallId", "toolName", "type", "id", "name", "text", "data", "mimeType", "arguments",
    "argumentsError", "argumentsText", "content", "stopReason", "isError", "timestamp", "errorMessage", "details",
    "skipped", "reason", "error", "path", "startLine", "endLine", "truncated", "nextOffset",
])}


def in_key_order(value: Any, depth: int = 0) -> Any:
    """`value` with every dict's keys in KEY_ORDER, then sorted; anything else as it is (never raises)."""
    if depth > 200:  # deeper than any transcript may be: shown as it is
        return value
    if isinstance(value, list):
        return [in_key_order(item, depth + 1) for item in value]
    if not isinstance(value, dict):
        return value
    ranked = sorted(value.items(), key=lambda item: (KEY_ORDER.get(item[0], len(KEY_ORDER)), str(item[0])))
    return {key: in_key_order(item, depth + 1) for key, item in ranked}


def json_text(value: Any, **options: Any) -> str:
    """`value` as indented JSON, dicts in key order (see KEY_ORDER); json.dumps's errors as it raises them."""
    return json.dumps(in_key_order(value), ensure_ascii=False, indent=2, **options)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = [block.get("text", "") for block in content if isinstance(block, dict) and block.get("type") == "text"]
    return " ".join(parts)


def _short(s: str, limit: int = 100) -> str:
    first, _, rest = s.partition("\n")
    if rest or len(first) > limit:
        return first[:limit] + " ..."
    return first


def _call_summary(call: dict) -> str:
    if "argumentsText" in call:  # arguments that were not a JSON object, as the model wrote them
        return f"{call['name']}({call['id']}, invalid JSON {_quote(_short(call['argumentsText']))})"
    values = [v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for v in call["arguments"].values()]
    return f"{call['name']}({', '.join([call['id'], *values])})"


_reprs = reprlib.Repr()
_reprs.maxlevel, _reprs.maxstring, _reprs.maxother = 3, 60, 60


def _line_or_what_it_holds(render: Callable[[Any], str], item: Any) -> str:
    """`render(item)`; for an item that is not what the notation expects, `? <a bounded repr of it>`.

    A broken loop may hand the renderer anything (missing keys, other types, values nested thousands
    deep); the renderer shows it instead of raising.
    """
    try:
        return render(item)
    except Exception:  # KeyError, TypeError, AttributeError, RecursionError, ...
        return "? " + _reprs.repr(item)


def event_line(event: dict) -> str:
    """One loop event, e.g. `model_event(text_delta "…")`, `tool_start(call-1)`, `turn_end(stop)`."""
    kind = event["type"]
    if kind == "model_event":
        inner = event["event"]
        name = inner.get("type")
        if name == "text_delta":
            return f"model_event(text_delta {_quote(inner['delta'])})"
        if name == "toolcall_delta":
            return f"model_event(toolcall_delta '{inner['delta']}')"
        if name == "toolcall_end":
            return f"model_event(toolcall_end {inner['toolCall']['id']})"
        if name == "done":
            return f"model_event(done: {inner['reason']})"
        if name == "error":
            return f"model_event(error: {inner['reason']} {_quote(inner['error'].get('errorMessage', ''))})"
        return f"model_event({name})"
    if kind == "assistant_message":
        return f"assistant_message({event['message']['stopReason']})"
    if kind == "tool_start":
        return f"tool_start({event['call']['id']})"
    if kind == "tool_progress":
        return f"tool_progress({event['callId']} {_quote(_text_of(event['content']))})"
    if kind in ("tool_end", "tool_skipped"):
        result = event["result"]
        flag = " error" if result.get("isError") and kind == "tool_end" else ""
        return f"{kind}({result['toolCallId']}{flag})"
    if kind == "turn_end":
        return f"turn_end({event['reason']})"
    return f"{kind}(?)"


def message_row(message: dict) -> str:
    """One transcript row, like the chapter's `assistant     我先读取项目说明。 + read(call-1, README.md)`."""
    role = message["role"]
    if role == "user":
        summary = _text_of(message["content"])
    elif role == "assistant":
        parts = []
        texts = _text_of(message["content"])
        if texts:
            parts.append(texts)
        parts += [_call_summary(b) for b in message["content"] if b.get("type") == "toolCall"]
        summary = f"[{message['stopReason']}] " + " + ".join(parts)
        if "errorMessage" in message:
            summary += f" (errorMessage: {message['errorMessage']})"
    else:
        arrow = "✗" if message.get("isError") else "→"
        summary = f"{message['toolCallId']} {arrow} {_short(_text_of(message['content']))}"
    return f"{role:<12}{summary}".rstrip()


def request_row(request: dict) -> str:
    roles = " → ".join(m["role"] for m in request["messages"])
    tools = ", ".join(t["name"] for t in request["tools"]) or "none"
    return f"system {_quote(request['systemPrompt'])} | tools {tools} | messages {roles}"


def _numbered(lines: list[str]) -> list[str]:
    width = len(str(len(lines)))
    return [f"{i:>{width}}  {line}" for i, line in enumerate(lines, 1)]


def render_run(
    *,
    events: list[dict],
    messages: list[dict],
    requests: list[dict] | None,
    observations: dict[str, Any],
    include_messages_json: bool = True,
) -> str:
    """The whole run as the snapshot text (and the demo's output)."""
    out = [SECTION_PREFIX + "observations"]
    width = max((len(k) for k in observations), default=0)
    out += [f"{k:<{width}}  {v}" for k, v in observations.items()]
    out += ["", SECTION_PREFIX + "timeline", *_numbered([_line_or_what_it_holds(event_line, e) for e in events])]
    out += ["", SECTION_PREFIX + "transcript", *_numbered([_line_or_what_it_holds(message_row, m) for m in messages])]
    if requests is not None:
        out += ["", SECTION_PREFIX + "requests", *_numbered([_line_or_what_it_holds(request_row, r) for r in requests])]
    if include_messages_json:
        try:
            shown = json_text(messages)
        except (TypeError, ValueError, RecursionError) as error:
            shown = f"(not JSON: {type(error).__name__}: {_reprs.repr(str(error))})"
        out += ["", SECTION_PREFIX + "messages", shown]
    # Whatever a run held, the text is UTF-8 any terminal or file takes: a lone surrogate shows as its escape.
    return utf8_text("\n".join(out) + "\n")


def sections(text: str) -> list[tuple[str, list[str]]]:
    """Split a rendered run into (section name, lines)."""
    found: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith(SECTION_PREFIX):
            found.append((line[len(SECTION_PREFIX):], []))
        elif found:
            found[-1][1].append(line)
        else:
            found.append(("", [line]))
    return found


@dataclass
class Divergence:
    """The first line where the actual run departs from the expected one."""

    section: str
    index: int  # 1-based line number within the section
    expected: str | None  # None: the actual run has an extra line here
    actual: str | None  # None: the actual run stopped early

    def as_dict(self) -> dict:
        """As JSON results and records carry it."""
        return {"section": self.section, "index": self.index, "expected": self.expected, "got": self.actual}

    def describe(self) -> str:
        expected = "(nothing)" if self.expected is None else self.expected
        actual = "(nothing)" if self.actual is None else self.actual
        return f"first divergence {where(self.section, self.index)}:\n  expected: {expected}\n  got:      {actual}"


# The order in which divergences are reported: the event stream first, since it is where a loop
# goes wrong first; the JSON last, since it only adds detail.
_PRIORITY = ["timeline", "transcript", "observations", "requests", "messages"]


_NUMBER = re.compile(r"^\s*\d+  ")


def where(section: str, index: int) -> str:
    """Where a divergence is, in words: "in timeline, line 6" (a record without sections: "at line 1")."""
    return f"in {section}, line {index}" if section else f"at line {index}"


def first_divergence(expected: str, actual: str) -> Divergence | None:
    # A heading may say more of its section ("transcript (exc.transcript)": the run raised): sections are
    # matched by the name before the parenthesis, and when such headings differ, so did how the runs
    # ended, which the observations say first.
    expected_sections = {_base(name): (name, lines) for name, lines in sections(expected)}
    actual_sections = {_base(name): (name, lines) for name, lines in sections(actual)}
    headings_differ = any(expected_sections[name][0] != actual_sections[name][0]
                          for name in expected_sections.keys() & actual_sections.keys())
    priority = ["observations", *_PRIORITY] if headings_differ else _PRIORITY
    names = sorted(dict.fromkeys([*expected_sections, *actual_sections]),  # in the order they are shown
                   key=lambda n: priority.index(n) if n in priority else len(priority))
    for name in names:
        # Compare without the line numbers: their width changes with the number of lines.
        want = [_NUMBER.sub("", line) for line in expected_sections.get(name, ("", []))[1] if line.strip()]
        got = [_NUMBER.sub("", line) for line in actual_sections.get(name, ("", []))[1] if line.strip()]
        only_a_comma = None  # JSON's comma after a line says only that another follows: show the line that differs
        for i in range(max(len(want), len(got))):
            w = want[i] if i < len(want) else None
            g = got[i] if i < len(got) else None
            if w != g:
                if w is not None and g is not None and w.rstrip(",") == g.rstrip(","):
                    only_a_comma = only_a_comma or Divergence(section=name, index=i + 1, expected=w, actual=g)
                    continue
                return Divergence(section=name, index=i + 1, expected=w, actual=g)
        if only_a_comma is not None:
            return only_a_comma
    return None


def _base(heading: str) -> str:
    return heading.split(" (", 1)[0]
