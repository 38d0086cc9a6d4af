"""A fixed scenario in masked form: what `course grade --seed` runs instead of the published inputs.

A grade with a secret hands the recording child one key per chapter (HMAC of the secret, never the
secret: `course.judge.secret.derive(secret, "mask", module)`), in the plans file. Each fixed scenario
then runs under a `Mask` of its own (HMAC of that key with the scenario's published name): at the
harness's edge (`run_loop`, and chapter 06's `execute_tool_call` through `load_checkpoint`), what the
scenario hands the code under test has its ids (tool call ids), texts (the system prompt, user
prompts, scripted answers, tool outputs and progress, error messages a test's tool raises) and tool
names (and descriptions) replaced letter by letter through a substitution keyed by the scenario's
mask, and its clock starts and steps where the mask says. What the code under test hands back to the
test (calls, events, requests, results) is unmasked, so the test's own callbacks and assertions see
the published scenario; the snapshot it records is the masked run, which the judge compares with the
reference's run of the same masked scenario.

The substitution keeps everything a loop may look at besides the letters: lengths (in characters and
in UTF-8 bytes), whitespace, punctuation, empty strings, and which strings are equal; tool call
arguments and details are not masked (a tool reads them). It is no cipher against a program that
knows the published inputs and learns the substitution from the masked ones: it stops answers
replayed from the published records, not a program built to translate them.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import hmac
import inspect
import random
import string
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from course.manifest import CHAPTERS, Chapter
from course.recorder import workspace_mask
from course.runtime.clock import StepClock, use_clock
from course.runtime.tools import Registry, Tool, ToolExecutionContext

# Characters substituted, each within its own class (so that a UTF-8 length never changes):
# ASCII letters and digits (1 byte), Latin-1 letters (2 bytes), CJK unified ideographs (3 bytes).
_CLASSES: tuple[str, ...] = (
    string.ascii_lowercase, string.ascii_uppercase, string.digits,
    "".join(chr(c) for c in range(0xC0, 0x100) if c not in (0xD7, 0xF7)),
    "".join(chr(c) for c in range(0x4E00, 0xA000)),
)
CLOCK_START = 1_700_000_000_000
"""Where a masked clock starts at the least (a millisecond timestamp of 2023, as a real clock would give)."""


@dataclass(frozen=True)
class MaskedClock:
    """The injected clock's start and step in a masked scenario."""

    start: int
    step: int


def scenario_key(chapter_key: bytes, scenario: str) -> bytes:
    """The key of one fixed scenario's mask: HMAC-SHA256 of the chapter's mask key with its published name."""
    return hmac.new(chapter_key, scenario.encode("utf-8", "surrogateescape"), hashlib.sha256).digest()


class Mask:
    """One scenario's substitution (`text`, `untext`) and clock, and the field-aware masking of the data
    a scenario hands the code under test (`message`, `block`, `content`, ...; `forward=False` unmasks)."""

    def __init__(self, key: bytes) -> None:
        draw = random.Random(key)  # (a keyed stream: the child's Python draws the reference's masks too)
        self.forward: dict[int, str] = {}
        for alphabet in _CLASSES:
            shuffled = list(alphabet)
            draw.shuffle(shuffled)
            self.forward.update({ord(a): b for a, b in zip(alphabet, shuffled)})
        self.backward = {ord(b): chr(a) for a, b in self.forward.items()}
        self.clock = MaskedClock(CLOCK_START + draw.randrange(10**11), draw.randrange(1, 1000))
        self.workspaces: dict[str, Any] = {}
        """Chapters 08 and 09: each root a tool was made on, masked while the tool works (course.recorder.workspace_mask)."""
        self.records_views = False
        """Whether the records the scenario's test builds hold its unmasked view of the answers (masked again when
        written: `recorded`): chapters 08 and 09, whose tests build their records from the tool's answers."""

    def text(self, value: str) -> str:
        return value.translate(self.forward)

    def untext(self, value: str) -> str:
        return value.translate(self.backward)

    def _f(self, forward: bool) -> Callable[[str], str]:
        return self.text if forward else self.untext

    def content(self, content: Any, forward: bool = True) -> Any:
        """A message's content (a text, or a list of blocks) or a tool's output content."""
        if isinstance(content, str):
            return self._f(forward)(content)
        if not isinstance(content, list):
            return copy.deepcopy(content)
        return [self.block(block, forward) for block in content]

    def block(self, block: Any, forward: bool = True) -> Any:
        """A content block: a text's text, a tool call's id and name (never its arguments)."""
        block = copy.deepcopy(block)
        if not isinstance(block, dict):
            return block
        f = self._f(forward)
        keys = ("text",) if block.get("type") == "text" else ("id", "name") if block.get("type") == "toolCall" else ()
        for key in keys:
            if isinstance(block.get(key), str):
                block[key] = f(block[key])
        return block

    def message(self, message: Any, forward: bool = True) -> Any:
        """A message: its content; an assistant's errorMessage; a tool result's call id and tool name."""
        if not isinstance(message, dict):
            return copy.deepcopy(message)
        masked = {key: copy.deepcopy(value) for key, value in message.items() if key != "content"}
        if "content" in message:
            masked["content"] = self.content(message["content"], forward)
        for key in ("errorMessage", "toolCallId", "toolName"):
            if isinstance(masked.get(key), str):
                masked[key] = self._f(forward)(masked[key])
        return masked

    def output(self, output: Any) -> Any:
        """A tool's output ({content, details, isError}): its content's texts."""
        if not isinstance(output, dict) or "content" not in output:
            return output
        return {**output, "content": self.content(output["content"])}

    def definition(self, definition: Any, forward: bool = True) -> Any:
        """A tool definition (a request's, or a context's stale one): its name and description."""
        if not isinstance(definition, dict):
            return copy.deepcopy(definition)
        masked = copy.deepcopy(definition)
        for key in ("name", "description"):
            if isinstance(masked.get(key), str):
                masked[key] = self._f(forward)(masked[key])
        return masked

    def request(self, request: Any, forward: bool = True) -> Any:
        """A model request: system prompt, messages, tool definitions."""
        if not isinstance(request, dict):
            return copy.deepcopy(request)
        masked = dict(request)
        if isinstance(request.get("systemPrompt"), str):
            masked["systemPrompt"] = self._f(forward)(request["systemPrompt"])
        for key, one in (("messages", self.message), ("tools", self.definition)):
            if isinstance(request.get(key), list):
                masked[key] = [one(item, forward) for item in request[key]]
        return masked

    def event(self, event: Any, forward: bool = True) -> Any:
        """A loop event (or a model event inside one), as an observer sees it."""
        if not isinstance(event, dict):
            return copy.deepcopy(event)
        masked = {}
        for key, value in event.items():
            if key in ("message", "result", "error", "partial"):
                masked[key] = self.message(value, forward)
            elif key in ("call", "toolCall"):
                masked[key] = self.block(value, forward)
            elif key == "event":
                masked[key] = self.event(value, forward)
            elif key == "content":
                masked[key] = self.content(value, forward)
            elif isinstance(value, str) and (key == "callId" or (key == "delta" and event.get("type") == "text_delta")):
                masked[key] = self._f(forward)(value)
            else:
                masked[key] = copy.deepcopy(value)
        return masked

    def raised(self, error: Exception) -> Exception:
        """An exception a test's tool or executor raised, its message masked (the same object, re-raised)."""
        with contextlib.suppress(Exception):
            error.args = tuple(self.text(arg) if isinstance(arg, str) else arg for arg in error.args)
        return error

    def progress(self, report: Callable[[Any], None], forward: bool = True) -> Callable[[Any], None]:
        """A progress callback, handed content the other way masked (or unmasked)."""
        return lambda content: report(self.content(content, forward))

    def tool(self, tool: Tool) -> Tool:
        """A tool under its masked name and description: the loop's calls reach it as they were, and its
        output and progress reach the loop masked."""
        async def execute(arguments: dict, context: Any) -> Any:
            seen = ToolExecutionContext(signal=getattr(context, "signal", None),
                                        report_progress=self.progress(context.report_progress))
            try:
                return self.output(await tool.execute(arguments, seen))
            except Exception as error:
                raise self.raised(error) from None

        masked = copy.copy(tool)  # not dataclasses.replace: that would check the tool's schema again
        masked.name, masked.description, masked.execute = self.text(tool.name), self.text(tool.description), execute
        return masked

    def registry(self, registry: Registry) -> Registry:
        return Registry(self.tool(tool) for tool in registry)

    def executor(self, execute_tool_call: Callable) -> Callable:
        """An injected executor (`execute_tool_call(call, context)`): it gets the call as the test wrote it,
        and its result (or what it raised) reaches the loop masked."""
        async def execute(call: Any, context: Any) -> Any:
            seen = ToolExecutionContext(signal=getattr(context, "signal", None),
                                        report_progress=self.progress(context.report_progress))
            try:
                return self.message(await execute_tool_call(self.block(call, forward=False), seen))
            except Exception as error:
                raise self.raised(error) from None
        return execute

    def observer(self, on_event: Callable | None) -> Callable | None:
        return None if on_event is None else (lambda event: on_event(self.event(event, forward=False)))

    async def execute_directly(self, execute: Callable, call: Any, registry: Any, context: Any) -> Any:
        """Chapter 06's `execute_tool_call(call, registry, context)` on the masked call and tools; its result
        stays masked (the test records it). Whatever the executor did to the call reaches the test's call."""
        masked_call = self.block(call)
        caller = ToolExecutionContext(signal=getattr(context, "signal", None),
                                      report_progress=self.progress(context.report_progress, forward=False))
        try:
            return await execute(masked_call, self.registry(registry) if isinstance(registry, Registry) else registry,
                                 caller)
        finally:
            seen = self.block(masked_call, forward=False)
            if isinstance(call, dict) and seen != call:
                call.clear()
                call.update(seen)

    def context(self, context: dict) -> dict:
        """A loop's context: its system prompt, messages and any (stale) tool definitions."""
        masked = dict(context)
        if isinstance(context.get("systemPrompt"), str):
            masked["systemPrompt"] = self.text(context["systemPrompt"])
        if isinstance(context.get("messages"), list):
            masked["messages"] = [self.message(message) for message in context["messages"]]
        if isinstance(context.get("tools"), list):
            masked["tools"] = [self.definition(definition) for definition in context["tools"]]
        return masked

    def response(self, response: Any, seen: list, count: Callable[[], None]) -> Callable:
        """A scripted model's response, answering the masked request: the test's response (a message, or a
        function of the request as the test wrote it) gets the request unmasked, and the loop its answer
        masked. `seen` collects the unmasked requests (the test's model's `requests`)."""
        async def respond(request: Any) -> Any:
            unmasked = self.request(request, forward=False)
            seen.append(copy.deepcopy(unmasked))
            count()
            answer = response(unmasked) if callable(response) else response
            if inspect.isawaitable(answer):
                answer = await answer
            return self.message(answer)
        return respond


class _MaskedModule:
    """A chapter module as a masked scenario's test sees it: the functions the chapter's fixed scenarios call
    directly (its catalogue entry's `masked_calls`, an executor's `(call, registry, context)`) run on the
    masked call."""

    def __init__(self, module: ModuleType, mask: Mask, calls: tuple[str, ...]) -> None:
        self._module, self._mask, self._calls = module, mask, calls

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._module, name)
        if name not in self._calls:
            return found

        async def masked(call: Any, registry: Any, context: Any) -> Any:
            return await self._mask.execute_directly(found, call, registry, context)
        return masked


def _chapter_of(module: str | None) -> Chapter | None:
    """The catalogue's chapter whose module is `module` (None for a module that is no chapter's)."""
    return next((c for c in CHAPTERS if c.module == module), None)


def chapter_module(name: str, module: ModuleType) -> Any:
    """The chapter module `name` as the scenario running gets it: masked where the scenario is and the chapter
    is called directly (its catalogue entry's `masked_calls`), or makes tools working in a workspace
    (`masked_tools`)."""
    mask = current()
    chapter = _chapter_of(name)
    if mask is None or chapter is None:
        return module
    if chapter.masked_tools:
        return workspace_mask.MaskedToolModule(module, mask, chapter.masked_tools, chapter.masked_beside)
    if chapter.masked_calls:
        return _MaskedModule(module, mask, chapter.masked_calls)
    return module


def published_form(module: str | None) -> dict[str, str]:
    """The chapter's fixed scenarios that cannot run masked, and why (its catalogue entry's `published_form`)."""
    chapter = _chapter_of(module)
    return dict(chapter.published_form) if chapter is not None else {}


_current: Mask | None = None


def current() -> Mask | None:
    """The mask of the fixed scenario running, or None (plain pytest, `course check`, a grade without a secret)."""
    return _current


def recorded(value: Any) -> Any:
    """What the recorder writes of a snapshot value the test built: masked again where its test built it from
    its unmasked view of masked answers (chapters 08 and 09: course.recorder.workspace_mask)."""
    mask = current()
    if mask is None or not mask.records_views:
        return value
    return workspace_mask.recorded(mask, value)


def published_path(path: str) -> str:
    """A path the kernel names (an open file's), as the test knows it: unmasked while a workspace is masked."""
    mask = current()
    for workspace in mask.workspaces.values() if mask is not None else ():
        path = workspace.published_path(path)
    return path


@contextlib.contextmanager
def masking(mask: Mask | None) -> Iterator[Mask | None]:
    """Run the block (a scenario, its fixtures included) under `mask` (None: unmasked)."""
    global _current
    previous, _current = _current, mask
    try:
        yield mask
    finally:
        _current = previous


@contextlib.contextmanager
def masked_clock() -> Iterator[None]:
    """The masked clock of the scenario running, installed for the block (its test's body): nothing when unmasked."""
    mask = current()
    if mask is None:
        yield
        return
    with use_clock(StepClock(mask.clock.start, mask.clock.step)):
        yield
