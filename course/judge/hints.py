"""`course hint NN [SCENARIO]`: help for a failing scenario, one step at a time (like rustlings' hint).

  step 1  what the scenario's section promises, and what this scenario checks;
  step 2  where the chapter text says so: the sentences the scenario cites (heading, line, quote), then the
          section's title and the lines it rests on; a hardening scenario (加固) says it is beyond the
          chapter and names the project's promise instead;
  step 3  the specific broken promise: each line the invariant checker reported, with what that
          kind of promise asks and the lines of the chapter about it; without a broken promise,
          the first divergence from the snapshot (or the exception your code raised).

Hints are written per section and per kind of broken promise, never per test name: a new scenario
in a section, or a new wrong implementation, gets the same help. The invariant checker's report
lines (course/judge/invariants.py) are sorted into kinds by their wording (`KINDS`); a line no
kind matches still shows, word for word, with no guess about what it means.

Line numbers are those of the chapter 07 text the course is written from (the manifest's `text`,
`CHAPTER_TEXT` its title); the quotes come from `course.judge.contracts`, stored, so they print where the
text is not at hand. Chapters without a table point at their section and their description in docs/students.md.

The API the other commands use: `hint_steps(chapter, section, broken_promises, divergence,
purpose=..., problem=...)` (the steps as text), `broken_promises_in(renders)` (the report lines
in a rendered run), `classify(line)` (the kind of one report line), `hint_command(chapter,
scenario)` (the command a report can offer).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from course.judge import check, contracts, report
from course.judge.timeline import where
from course.judge.terminal import paint, printable
from course.manifest import HARDENING, find_chapter
from course.judge.session import Verdict as Scenario
from course.judge.testrun import course_root, default_implementation, shown

STEPS = 3

CHAPTER_TEXT = {"06": "工具执行：一次 read 调用怎样变成一条 toolResult",
                "07": "Agent Loop：一次 README 往返怎样调用模型两次"}
"""The chapter texts the line numbers below refer to (by their first line, the title)."""


@dataclass(frozen=True)
class Passage:
    """Lines of a chapter text: its section title and the line range."""

    chapter: str
    title: str
    first: int
    last: int

    def __str__(self) -> str:
        lines = f"line {self.first}" if self.first == self.last else f"lines {self.first}-{self.last}"
        return f"chapter {self.chapter}, section 「{self.title}」, {lines}"


def cite(passages: tuple[Passage, ...]) -> str:
    """Passages as one citation, those of one section together:
    `chapter 07, section 「…」, lines 210-221 and 229; chapter 07, section 「…」, line 162`."""
    grouped: dict[tuple[str, str], list[Passage]] = {}
    for passage in passages:
        grouped.setdefault((passage.chapter, passage.title), []).append(passage)
    parts = []
    for (chapter, title), found in grouped.items():
        ranges = [str(p.first) if p.first == p.last else f"{p.first}-{p.last}" for p in found]
        word = "line" if len(found) == 1 and found[0].first == found[0].last else "lines"
        parts.append(f"chapter {chapter}, section 「{title}」, {word} {' and '.join(ranges)}")
    return "; ".join(parts)


def _p07(title: str, first: int, last: int) -> Passage:
    return Passage("07", title, first, last)


# The chapter 07 text's sections.
TWO_CALLS = "一次请求为什么需要两次模型调用"
FIRST_STREAM = "第一次 model.stream() 追加 assistant 消息"
PURE_STOP = "没有工具的 stop 直接结束"
ROUND_TRIP = "call-1 的结果进入第二次模型请求"
EVENTS = "LoopEvent 展示过程，messages 保存事实"
LENGTH = "length：工具不启动，调用仍然闭合"
CONCURRENT = "多个工具同时运行，结果仍按工具调用顺序追加"
ABORT = "取消与 maxSteps 阻止新的模型请求"
LENGTH_CHECK = "完成正常实现后检查 length 分支"


@dataclass(frozen=True)
class Section:
    """What a section of a chapter promises (step 1) and where the text says it (step 2)."""

    promise: str
    passages: tuple[Passage, ...] = ()
    look_for: str = ""
    """What to look for in those lines."""
    elsewhere: str = ""
    """For a chapter whose text is not here: where the promise is described instead."""


BEYOND_THE_CHAPTER = Section(
    promise="This scenario is in the hardening track (加固): beyond the chapter. It holds your code to what the "
            "project adds to the chapter's text (a model that raises, an executor's malformed answers, an observer "
            "that raises, the caller's cancellation, ...), never to whether the chapter passes.",
    elsewhere="the promise named below (the chapter text does not make it; the reference checkpoint and "
              "course/runtime/ show one way to keep it)",
)
"""Every chapter's 加固 section."""

SECTIONS: dict[str, dict[str, Section]] = {
    "06": {
        "工具执行": Section(
            promise="execute_tool_call(call, registry, context) turns one tool call into one toolResult message "
                    "with the call's id and name, and never raises for a failure: an unknown tool, arguments that "
                    "are not JSON or fail the tool's JSON Schema, a tool that raises each become an error result "
                    "(isError true) saying why, without a traceback; only cancellation propagates. The tool gets a "
                    "copy of the arguments and the context as it is; its output's content, details and isError "
                    "make the result.",
            passages=tuple(Passage("06", title, first, last) for title, first, last in (
                ("模型只写下调用，执行器给出结果", 32, 43), ("Registry 按名字找到工具", 76, 88),
                ("参数在运行工具之前按 JSON Schema 检查", 94, 130), ("工具拿到参数副本、signal 与 reportProgress", 136, 149),
                ("工具的返回值变成 toolResult", 163, 186), ("工具抛出异常时，错误结果保留它的消息", 199, 208),
                ("取消不是工具失败", 216, 223))),
            look_for="which failure becomes which error text, and that the result always answers the call's id",
        ),
    },
    "07": {
        "纯文本 stop": Section(
            promise="A stop answer without tool calls ends the run after one model request: the transcript is "
                    "[user, assistant], steps is 1, and turn_end(stop) is the run's last event, once.",
            passages=(_p07(PURE_STOP, 108, 118), _p07(FIRST_STREAM, 89, 106)),
            look_for="the returned {reason, messages, steps} and the difference between the model's done and turn_end",
        ),
        "单工具往返": Section(
            promise="A toolUse answer runs its calls: tool_start, then the executor (with the run's signal and a "
                    "progress callback whose events carry the call id), then tool_end with the result; the result "
                    "is appended, and the next model request sees every message so far, the same system prompt "
                    "and the Registry's definitions (never context.tools). The caller's messages are never "
                    "changed: the loop works on a copy.",
            passages=(_p07(TWO_CALLS, 3, 61), _p07(FIRST_STREAM, 63, 106), _p07(ROUND_TRIP, 124, 176),
                      _p07(EVENTS, 178, 198)),
            look_for="the request the loop builds (lines 76-87), the order tool_start → executor → tool_end "
                     "(lines 132-155) and what is appended before the second request (lines 157-162)",
        ),
        "非执行终态": Section(
            promise="An assistant message that is not a complete toolUse batch (stopReason length, error or "
                    "aborted; stop with calls; toolUse without calls) starts no tool. Every call it has still "
                    "gets a result with its id: a skipped error result (details {skipped: true, reason: "
                    "<stopReason>}) and a tool_skipped event; then the run ends with the reason the table gives "
                    "(length, error, aborted; error for the last two rows).",
            passages=(_p07(LENGTH, 200, 233), _p07(LENGTH_CHECK, 298, 303)),
            look_for="the event order assistant_message → tool_skipped → turn_end (line 210), the skipped "
                     "result (lines 212-221) and the pairing rule (lines 223-225)",
        ),
        "并发工具": Section(
            promise="The calls of one message run together: tool_start for each, then all executors awaited at "
                    "once; tool_end follows the finishing order, but the results are appended in call order "
                    "once the whole batch has ended. An executor that raises becomes that call's error result "
                    "(its message, no stack) and never loses a sibling's result.",
            passages=(_p07(CONCURRENT, 235, 261),),
            look_for="Promise.all's role (lines 237-245), the two orders (lines 247-255) and rejections (line 257)",
        ),
        "取消与上限": Section(
            promise="An abort or the step bound stops new model requests, never what already formed: aborted "
                    "before the start ends (aborted, 0); an abort during a batch waits for it, keeps its results "
                    "and ends aborted with the current steps; a stream aborted with calls pairs them with "
                    "skipped results; every tool gets the run's signal. max_steps (default 32) bounds the model "
                    "requests; reaching it after a batch ends maxSteps.",
            passages=(_p07(ABORT, 263, 296),),
            look_for="what steps counts at the loop's head (lines 265-276) and the two abort checks (lines 278-282)",
        ),
    },
    "08": {
        "真实往返": Section(
            promise="The chapter 07 README round trip works with the real read tool bound to a workspace: the "
                    "answer follows the file on disk, a refused path is an error result the model reads, and a "
                    "model following the truncation notice's offset reads a long file page by page.",
            elsewhere="docs/students.md's section \"Chapter 08: the workspace read tool\" (its first paragraph)",
            look_for="create_read_tool(root, ...) returning a Tool whose arguments are path, offset, limit",
        ),
        "越界": Section(
            promise="Nothing outside the workspace root is ever opened: `..`, absolute paths outside, symbolic "
                    "links at any depth that lead outside, link loops, and a file or a directory on the way "
                    "swapped for a link (or the file for a FIFO) between the tool's check and its open are error "
                    "results with the reason in details.error; links that stay inside read their target.",
            elsewhere="docs/students.md's section \"Chapter 08: the workspace read tool\" (\"Model arguments are "
                      "treated as untrusted\" and the openat / O_NOFOLLOW walk)",
            look_for="walking the path one component at a time from a descriptor of the root, every step "
                     "opened with O_NOFOLLOW, and fstat on the opened file's descriptor",
        ),
        "拒绝": Section(
            promise="Directories, missing files, FIFOs, devices, sockets, binary or non-UTF-8 files, over-long "
                    "paths and NUL bytes are error results with the MESSAGES text and the reason in "
                    "details.error, never an exception; special files are refused before they are opened; an "
                    "OS error (EACCES, EIO, the workspace gone) is an os_error result. A name is its bytes (no "
                    "Unicode normalisation, no case-insensitive match, dotfiles are files), no file is refused "
                    "for its size, and what the read takes from the file is all that is judged.",
            elsewhere="docs/students.md's section \"Chapter 08: the workspace read tool\" (the list of refusals)",
            look_for="which check refuses which kind of path, that the type is checked before opening, and "
                     "that a read stops with the chunk where its window ends",
        ),
        "截断": Section(
            promise="A read returns at most max_lines lines and max_bytes bytes (a long line cut on a character "
                    "boundary); a read that does not reach the end ends with a notice naming the next offset, "
                    "and details.nextOffset says the same; following it reads every line once.",
            elsewhere="docs/students.md's section \"Chapter 08: the workspace read tool\" (the truncation notice and "
                      "details.nextOffset)",
            look_for="offset is 1-based; the notice's offset is the first line not returned",
        ),
        "中止": Section(
            promise="An aborted signal stops a read: it is checked before every chunk, the first one included "
                    "(an empty file or a one-line window is aborted too), and the tool yields to the event loop "
                    "after every chunk and reports progress each MiB; the result is an aborted error result, in "
                    "the loop no further request follows, and a cancelled read ends with CancelledError and "
                    "closes its file.",
            elsewhere="docs/students.md's section \"Chapter 08: the workspace read tool\" (\"an aborted signal stops a "
                      "long read between chunks\")",
            look_for="checking the signal before each read call, yielding after each, closing the file in a finally",
        ),
    },
    "09": {  # docs/chapters/ch09_edit_tool.txt: each section's lines, and what to look for in them
        "编辑往返": Section("create_edit_tool(root) makes the tool edit (path, oldText, newText, all required "
                        "strings); in the loop its one replacement reaches the disk.", (Passage("09", "编辑往返：模型改动一个真实文件", 3, 48),),
                        "the result's text and details (lines 16-27) and the schema (lines 33-44)"),
        "唯一匹配": Section("oldText must match exactly one place, overlapping matches counted; empty, unchanged, "
                        "missing or ambiguous oldText is refused, the file unchanged.", (Passage("09", "oldText 必须恰好出现一次", 50, 83),),
                        "matchesOf (lines 61-67) and the ambiguous text's line numbers (line 74)"),
        "差异": Section("details.diff is difflib.unified_diff of the lines before and after (split at \\n), a/ to b/, "
                      "3 lines of context.", (Passage("09", "details.diff：改了什么，一眼看得见", 85, 103),),
                      "unified_diff's arguments (line 97) and its direction (line 99)"),
        "编码与换行": Section("The file's BOM and line ending (its first break's) are kept; matching is on text with "
                         "\\r\\n made \\n; NUL bytes and non-UTF-8 are refused.", (Passage("09", "保留文件的编码与换行", 105, 129),),
                         "the three steps (lines 111-113) and their reverse before writing (line 115)"),
        "原子写入": Section("A temporary file beside the real path, given its mode, replaces it with os.replace; a "
                        "failure is write_failed, nothing changed or left behind.", (Passage("09", "原子写入：读者永远看不到半个文件", 131, 158),),
                        "mkstemp(dir=...), chmod, os.replace and the unlink on failure (lines 135-144)"),
        "越界": Section("The path goes through chapter 08's Workspace: its refusals are the edit's, nothing outside "
                      "is touched; the arguments are checked first.", (Passage("09", "沿用第 08 章的工作区边界", 160, 178),),
                      "relative_parts and open_file from chapter 08 (lines 164-168) and the order (line 176)"),
    },
}


@dataclass(frozen=True)
class Kind:
    """A kind of broken promise: the report lines it covers (regular expressions over their wording),
    what the promise asks, and the chapter 07 lines about it."""

    name: str
    patterns: tuple[str, ...]
    asks: str
    passages: tuple[Passage, ...] = ()


KINDS: tuple[Kind, ...] = (
    Kind("not-a-dict", (r"^(message|event) \d+ is \w+, not an? (message|event) dict$",
                        r"^request \d+ is \w+, not a request dict$"),
         "Messages, events and requests are plain dicts with the chapter's fields; something else was put "
         "in the transcript, the events or a request.",
         (_p07(TWO_CALLS, 18, 45),)),
    Kind("caller-messages-changed", (r"^the caller's context\['messages'\] was changed$",),
         "The loop works on its own copy of context['messages'] (a deep copy made at the start); appending to "
         "(or editing) the caller's list is what broke.",
         (_p07(FIRST_STREAM, 65, 74),)),
    Kind("input-lost", (r"^the transcript does not start with the input messages$",),
         "The returned messages start with the caller's messages, unchanged, followed by what the run added.",
         (_p07(FIRST_STREAM, 65, 74),)),
    Kind("result-missing", (r"^tool call .+ of message \d+ has no result before ",),
         "Every tool call in an assistant message gets a result with its toolCallId before the next request "
         "and before the run ends, whether the tool ran or was skipped.",
         (_p07(LENGTH, 223, 225),)),
    Kind("result-unexpected", (r"^message \d+ answers .+ again \(message \d+ already did\)$",
                               r"^message \d+ answers .+, which no open tool call has$"),
         "Each call is answered exactly once, right after its assistant message: a result was appended twice, "
         "or for a call that no message made.",
         (_p07(LENGTH, 223, 225),)),
    Kind("result-order", (r"^message \d+ is the result for .+, expected .+ next, in call order$",),
         "Results are appended in the order of the calls in the assistant message, whatever order the tools "
         "finished in.",
         (_p07(CONCURRENT, 251, 255),)),
    Kind("not-json", (r"^message \d+ is not JSON: ", r"^the transcript is not JSON: "),
         "The transcript is JSON data: what a tool returns that is not JSON must become an error result "
         "instead of entering the messages.",
         (_p07(EVENTS, 196, 198),)),
    Kind("asked-again-after-end", (r"^message \d+ \(stopReason .+\) ends the run, but the model was asked again$",),
         "Only a toolUse message with calls continues the loop; any other assistant message ends the run "
         "(after pairing its calls), with no further model request.",
         (_p07(PURE_STOP, 108, 118), _p07(LENGTH, 227, 229))),
    Kind("wrong-reason", (r"^the run finished .+, but its last assistant message ",
                          r"^no assistant message was appended, so only \(aborted, 0\) can end the run"),
         "The run's reason is the one its last assistant message calls for (stop; length, error, aborted as "
         "given; error for stop with calls and toolUse without calls), or aborted / maxSteps after a batch.",
         (_p07(LENGTH, 227, 229), _p07(ABORT, 278, 291))),
    Kind("steps", (r"^steps is .+, but \d+ assistant messages were appended",
                   r"^steps is .+, more than max_steps ", r"^the run finished maxSteps after ",
                   r"^steps is .+, but \d+ model requests were made$"),
         "steps is the number of model requests made (one assistant message appended each), never more than "
         "max_steps; at the loop's head steps - 1 requests have been completed.",
         (_p07(ABORT, 265, 276), _p07(ABORT, 284, 291))),
    Kind("skipped-result", (r"^message \d+ answers a call of message \d+ \(stopReason .+\), so it must be a skipped",),
         "A call of a message that is not toolUse is answered by a skipped error result: isError true, "
         "details {skipped: true, reason: <the message's stopReason>}.",
         (_p07(LENGTH, 210, 221), _p07(LENGTH, 229, 229))),
    Kind("turn-end", (r"^turn_end was emitted \d+ times, expected once$", r"^turn_end is event \d+, but \d+ events follow it$",
                      r"^event \d+ turn_end says "),
         "turn_end is emitted exactly once, as the last event, with the same reason and steps as the result.",
         (_p07(PURE_STOP, 110, 118), _p07(EVENTS, 196, 196))),
    Kind("assistant-event", (r"^event \d+ assistant_message ", r"^\d+ assistant messages were appended, but only \d+ "
                                                                  r"assistant_message events"),
         "After the model's stream ends (done or error), the loop takes the message from result(), appends it "
         "once and emits one assistant_message event carrying that same message.",
         (_p07(FIRST_STREAM, 89, 106),)),
    Kind("tools-on-a-terminal-message", (r"^event \d+ tool_\w+ for .+, but the latest assistant message ",),
         "Whether a message's calls run or are skipped depends on its stopReason: only toolUse starts tools "
         "(tool_start); every other message gets tool_skipped events and no tool_start.",
         (_p07(LENGTH, 202, 210),)),
    Kind("tool-event-order", (r"^event \d+ tool_\w+ for .+, expected .+ next, in call order$",
                              r"^event \d+ tool_\w+ for .+, which is no call of message \d+ still waiting"),
         "tool_start (or tool_skipped) comes once per call, in the order of the calls, before any of them "
         "finishes.",
         (_p07(ROUND_TRIP, 132, 153), _p07(CONCURRENT, 237, 245))),
    Kind("tool-event-missing", (r"^tool call .+ of message \d+ never got a tool_start$",
                                r"^tool call .+ of message \d+ has no tool_skipped event$",
                                r"^tool .+ started \(event \d+\) but never ended$"),
         "Each executed call has one tool_start and one tool_end; each skipped call one tool_skipped event.",
         (_p07(ROUND_TRIP, 132, 155), _p07(LENGTH, 229, 229))),
    Kind("tool-event-result", (r"^event \d+ tool_\w+ carries a result for .+ that is not in the transcript$",
                               r"^event \d+ tool_\w+ carries a different result from message \d+$"),
         "tool_end (and tool_skipped) carry the very result that is appended to the messages for that call.",
         (_p07(ROUND_TRIP, 153, 160),)),
    Kind("tool-end-not-running", (r"^event \d+ tool_end for .+, which is not running$",),
         "tool_end comes once per started call, after its tool_start.",
         (_p07(ROUND_TRIP, 132, 155),)),
    Kind("progress", (r"^event \d+ tool_progress names .+, which is not running$",),
         "tool_progress comes only while its call runs, and carries that call's id (callId), which the loop "
         "adds to what the tool reports.",
         (_p07(ROUND_TRIP, 143, 155),)),
    Kind("request-during-batch", (r"^event \d+ starts the next model request while .+ is still running$",),
         "The next model request starts only after the whole batch has ended and its results are appended.",
         (_p07(CONCURRENT, 237, 251), _p07(ROUND_TRIP, 157, 162))),
    Kind("model-signal", (r"^request .+'s model\.stream\(\) was not handed the run's own signal \(options\.signal\)$",),
         "Hand the run's signal to every model.stream() call (signal=options.signal): an abort must stop the "
         "answer being streamed, not only the next request.",
         (_p07(FIRST_STREAM, 75, 86), _p07(ABORT, 282, 282))),
    Kind("event-fields", (r"^event \d+ \w+ has .+: the chapter's \w+ has exactly ",
                          r"^event \d+ \w+'s \w+ is \w+, not a \w+$",
                          r"^event \d+ tool_start does not carry call .+ as the assistant message holds it$"),
         "Each LoopEvent has exactly the chapter's fields: tool_start carries the call as the assistant message "
         "holds it, tool_progress the content list the tool reported (with callId), turn_end only reason and "
         "steps; nothing more (an observer must not be handed the transcript or other state of the loop).",
         (_p07(EVENTS, 180, 196), _p07(ROUND_TRIP, 132, 155))),
    Kind("unknown-event", (r"^event \d+ has an unknown type ",),
         "The loop emits only model_event, assistant_message, tool_start, tool_progress, tool_end, "
         "tool_skipped and turn_end.",
         (_p07(EVENTS, 180, 196),)),
    Kind("request-messages", (r"^request \d+ saw .+, not the \d+ messages before its answer",
                              r"^request \d+ saw message \d+ other than the transcript holds it "),
         "Request n sees exactly the messages so far (the caller's, then every assistant message and result "
         "appended), not the caller's original list and not a list changed afterwards.",
         (_p07(TWO_CALLS, 51, 57), _p07(ROUND_TRIP, 157, 162))),
    Kind("system-prompt", (r"^request \d+ has a different system prompt$",),
         "Every request, not only the first, carries context['systemPrompt'].",
         (_p07(FIRST_STREAM, 76, 85), _p07(ROUND_TRIP, 162, 162))),
    Kind("tool-definitions", (r"^request \d+ does not carry the registry's tool definitions$",),
         "Every request carries the Registry's definitions() (never context.tools, which may hold stale ones).",
         (_p07(FIRST_STREAM, 76, 87), _p07(ROUND_TRIP, 162, 162))),
    Kind("request-keys", (r"^request \d+ carries .+ besides the chapter's systemPrompt, messages and tools",),
         "A request is built from three things only: context['systemPrompt'], this run's messages and the "
         "Registry's definitions(); the caller's context is not spread into it.",
         (_p07(FIRST_STREAM, 76, 87),)),
    Kind("options-changed", (r"^the run changed its options \(",),
         "The loop reads its options and never assigns to them (not even options.context): a caller may run "
         "the same options again.",
         (_p07(FIRST_STREAM, 65, 74),)),
    Kind("shared-objects", (r"^the transcript holds the same list or object in \d+ places",),
         "Every message the run adds is an object of its own, with lists and objects of its own (a skipped "
         "result's content and details too): one shared between two messages, or kept for the next run, "
         "changes with the other when the caller changes either.",
         (_p07(FIRST_STREAM, 65, 74), _p07(LENGTH, 223, 225))),
)

_COMPILED = [(kind, [re.compile(p) for p in kind.patterns]) for kind in KINDS]


def classify(line: str) -> Kind | None:
    """The kind of one of the invariant checker's report lines; None for a line no kind describes."""
    for kind, patterns in _COMPILED:
        if any(p.search(line) for p in patterns):
            return kind
    return None


_BROKEN = re.compile(r"^\s+broken (\d+)\s+(.*)$")


def broken_promises_in(renders: list[str]) -> list[str]:
    """The broken promises a rendered run lists in its observations (`  broken 1  ...`), in order,
    from the first render that has any."""
    for text in renders:
        found, in_observations = [], False
        for line in str(text).splitlines():
            if line.startswith("## "):
                in_observations = line == "## observations"
            elif in_observations and (match := _BROKEN.match(line)):
                found.append(match.group(2))
        if found:
            return found
    return []


# Step 3 without a broken promise: what a divergence in each part of the chapter's notation means.
DIVERGENCE_MEANS = {
    "observations": "the counts or the end differ (model requests, tool executions, steps, reason): compare "
                    "how many requests your loop made and how it finished",
    "timeline": "your code emitted a different event here (or in another order); the lines before it agree",
    "transcript": "a different message was appended here (another role, text, call or result)",
    "requests": "the model was asked with a different request here (system prompt, tools or messages)",
    "messages": "the messages agree row by row but differ in a field (a text, details, isError, a timestamp: "
                "read the clock once per message, when the message is created)",
}


def _divergence_lines(divergence: dict) -> list[str]:
    section, index = divergence.get("section"), divergence.get("index")
    expected = divergence.get("expected")
    got = divergence.get("got")
    lines = [f"first divergence {where(section, index)}:",
             f"  expected: {'(nothing)' if expected is None else expected}",
             f"  got:      {'(nothing)' if got is None else got}"]
    means = DIVERGENCE_MEANS.get(str(section))
    if means:
        lines.append(f"this means: {means}.")
    if isinstance(expected, str) and isinstance(got, str):
        if expected.startswith("tool_skipped(") and got.startswith("tool_start("):
            lines.append("a tool started where the chapter skips the call: look at how your loop decides "
                         "whether a message's calls run (its stopReason).")
        elif expected.startswith("tool_start(") and got.startswith("tool_end("):
            lines.append("a tool ended before every call of its batch had started: start them all, then wait.")
    return lines


def hint_steps(
    chapter: str,
    section: str | None,
    broken_promises: list[str],
    divergence: dict | None,
    *,
    purpose: str | None = None,
    problem: str | None = None,
    where: str | None = None,
    enforces: list[str] = (),
) -> list[str]:
    """The three hints for a failing scenario of `chapter` in `section`, each a block of text:
    what the section promises, where the chapter says so (first the sentences the scenario enforces,
    `enforces`), and what exactly broke."""
    about = BEYOND_THE_CHAPTER if section == HARDENING else SECTIONS.get(chapter, {}).get(section or "")
    return [_promise_step(chapter, section, about, purpose), _where_step(chapter, section, about, enforces),
            _what_broke_step(broken_promises, divergence, problem, where)]


def _promise_step(chapter: str, section: str | None, about: Section | None, purpose: str | None) -> str:
    """Step 1: what the section promises."""
    if section == HARDENING:
        step = about.promise
    elif about is not None:
        step = f"Section {section} promises: {about.promise}"
    else:
        step = f"This scenario belongs to section {section or '(none)'} of chapter {chapter}."
    return step + (f"\nThis scenario: {purpose}" if purpose else "")


def _where_step(chapter: str, section: str | None, about: Section | None, enforces: list[str]) -> str:
    """Step 2: where the chapter says so."""
    quoted = "".join(f"\n  {line}" for line in enforces)
    if section == HARDENING:
        step = f"Beyond the chapter: the project's promise, not the chapter text's:{quoted}\nRead {about.elsewhere}."
    elif about is not None and about.passages:
        step = (f"This scenario enforces:{quoted}\n" if enforces else "") + "Read " + cite(about.passages) + "."
    elif about is not None and about.elsewhere:
        step = f"The chapter {chapter} text is not in this repository; read {about.elsewhere}."
    else:
        step = f"Read the section of chapter {chapter} that the scenario's section names ({section or '?'})."
    if about is not None and about.look_for:
        step += f"\nLook for: {about.look_for}."
    return step


def _what_broke_step(broken_promises: list[str], divergence: dict | None, problem: str | None,
                     where: str | None) -> str:
    """Step 3: what exactly broke (the broken promises, the first divergence, what the code raised)."""
    lines = _broken_promise_lines(broken_promises)
    # The observations' `invariants` line only counts the broken promises listed above: no news.
    counts_them = divergence and broken_promises and str(divergence.get("got") or "").startswith("invariants")
    if divergence and not counts_them:
        if broken_promises:
            lines.append("")
        lines += _divergence_lines(divergence)
    if problem:
        lines.append(f"Your code raised: {problem}" + (f" (at {where})" if where else ""))
        if "NotImplementedError" in problem:
            lines.append("That is the starter's body: this function is not written yet.")
    if not lines:
        lines.append("No broken promise or divergence was recorded for this scenario; rerun it with pytest "
                     "to see its full output.")
    return "\n".join(lines)


def _broken_promise_lines(broken_promises: list[str]) -> list[str]:
    """Each broken promise, numbered, with what its kind asks the student (once per kind) and where to read."""
    if not broken_promises:
        return []
    lines = [f"Your run broke {len(broken_promises)} promise{'s' if len(broken_promises) != 1 else ''} "
             f"(numbered as the snapshot's observations number them):"]
    explained: set[str] = set()
    for n, line in enumerate(broken_promises, 1):
        lines.append(f"  broken {n}: {line}")
        kind = classify(line)
        if kind is None:
            lines.append("    (no hint is written for this kind of report: the line above is what broke)")
        elif kind.name not in explained:
            explained.add(kind.name)
            lines.append(f"    {kind.asks}")
            if kind.passages:
                lines.append("    see " + cite(kind.passages))
    return lines


def hint_command(chapter: str, scenario: str) -> str:
    """The command that shows the next hint for `scenario` (what a report can offer)."""
    return shlex.join(["course", "hint", chapter, scenario])


# --- the command ------------------------------------------------------------------------------

STATE_ENV = "TINY_PI_HINT_STATE"


def state_file() -> Path:
    """Where the hints already shown are remembered (so `course hint` again shows the next one)."""
    if os.environ.get(STATE_ENV):
        return Path(os.environ[STATE_ENV])
    return course_root() / ".course" / "hints.json"


def _load_state(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _save_state(path: Path, state: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(state, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    except OSError:  # a read-only clone still gets its hints, only not remembered
        pass


def find_scenario(scenarios: list[Scenario], wanted: str) -> list[Scenario]:
    """The scenarios `wanted` names: the node id (with or without the file), or the end of it
    (`test_terminal_row[length]`), or a part of it (`length`) when that is unique."""
    for match in (lambda s: wanted in (s.scenario, f"{s.file}::{s.scenario}"),
                  lambda s: s.scenario.endswith("::" + wanted) or s.scenario.split("::")[-1] == wanted,
                  lambda s: wanted in s.scenario):
        found = [s for s in scenarios if match(s)]
        if found:
            return found
    return []


def broken_promises_of(scenario: Scenario) -> list[str]:
    given = getattr(scenario, "broken", None)  # a report that records them directly
    if isinstance(given, list):
        return [str(line) for line in given]
    return broken_promises_in(scenario.renders)


def hint(args: argparse.Namespace) -> int:
    chapter = find_chapter(args.chapter)
    implementation = default_implementation(args.impl)
    run, _ = check.run_check(chapter, implementation, args.chain, quiet=True, timeout=args.timeout,
                             hardening=args.hardening)
    judged = shown(implementation) if implementation else "the reference checkpoints"
    failing = [s for s in run.verdicts if not s.passed]
    if args.scenario:
        named = find_scenario(run.verdicts, args.scenario)
        if not named:
            beyond = "" if args.hardening else f" of the chapter track (with --hardening, {contracts.BEYOND} too)"
            print(f"course hint: chapter {chapter.number} has no scenario {args.scenario!r}{beyond}", file=sys.stderr)
            return 2
        if len(named) > 1:
            print(f"course hint: {args.scenario!r} names {len(named)} scenarios; say which:", file=sys.stderr)
            for s in named:
                print(f"  {s.scenario}", file=sys.stderr)
            return 2
        scenario = named[0]
        if scenario.passed:
            print(f"{scenario.scenario} passes with {judged}: nothing to hint.")
            return 0
    elif failing:
        scenario = failing[0]
    elif run.passed:
        print(f"Every scenario of chapter {chapter.number} passes with {judged}: nothing to hint.")
        return 0
    elif not run.verdicts and not run.import_errors:
        print(check.nothing_to_judge(chapter))
        return 1
    else:
        print(f"Chapter {chapter.number} could not be judged; the test process said:")
        print("\n".join(printable(line) for line in run.output_tail.splitlines()))
        return 1

    steps = hint_steps(chapter.number, scenario.section, broken_promises_of(scenario), scenario.divergence,
                       purpose=scenario.purpose, problem=scenario.problem, where=scenario.where,
                       enforces=report.enforces(chapter, scenario))
    path = state_file()
    state = _load_state(path)
    key = f"{chapter.number} {judged} {scenario.file}::{scenario.scenario}"
    seen = state.get(key) if isinstance(state.get(key), int) else 0
    upto = max(1, min(args.step, STEPS)) if args.step is not None else min(seen + 1, STEPS)
    state[key] = max(upto, seen)
    _save_state(path, state)

    beyond = f"  [{contracts.BEYOND}]" if scenario.track == HARDENING else ""
    print(f"Chapter {chapter.number} — {chapter.title}: hints for {scenario.scenario}{beyond}")
    print(f"implementation: {judged}\n")
    titles = ["What the section promises", "Where the chapter says so", "What broke"]
    for n in range(upto):
        print(paint(f"hint {n + 1} of {STEPS} — {titles[n]}", "hint"))
        for line in steps[n].splitlines():  # (its problem and divergence are the submission's text)
            print(f"  {printable(line)}" if line else "")
        print()
    if upto < STEPS:
        print(paint(f"more: {hint_command(chapter.number, scenario.scenario)}  (or --step {upto + 1})", "dim"))
    else:
        print(paint(f"that is every hint; rerun it: course check {chapter.number}", "dim"))
    return 0


def register(commands) -> None:
    parser = commands.add_parser("hint", help="hints, one step at a time, for a failing scenario")
    parser.add_argument("chapter", metavar="NN", help="the chapter number, e.g. 07")
    parser.add_argument("scenario", nargs="?", default=None,
                        help="the scenario (e.g. 'test_terminal_row[length]'); default: the first failing one")
    parser.add_argument("--step", type=int, default=None, metavar="N",
                        help=f"show hints 1 to N (1-{STEPS}); without it, each call shows one more")
    check.implementation_options(parser)
    parser.add_argument("--timeout", type=float, default=None, metavar="S",
                        help="seconds one scenario may take before it is stopped (default 10)")
    check.hardening_option(parser)
    parser.set_defaults(handler=hint)
