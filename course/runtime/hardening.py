"""What a chapter's code may opt into beyond the chapter: the promises of the hardening track (加固).

Chapter 06's executor trusts its tools to return a ToolOutput (a dict with a content list, JSON inside);
`output_problem(call, output)` says why an output is not one, for the executor to turn into an error result.

Chapter 07's loop trusts its collaborators: the model keeps the stream contract, an injected executor
answers its call with a tool result, the observer returns, nobody cancels the run. The hardening track
holds a loop to more, and these helpers (all importable from here) give it, without changing what the
loop does when its collaborators keep to the chapter:

- `check_loop_options(options)` (from `course.runtime.loop_inputs`): options the loop cannot run with are
  one clear TypeError or ValueError before anything happens.
- `guard_stream` (from `course.runtime.stream`): a model that raises or breaks the stream contract
  becomes an `error` answer.
- `checked(execute)`: an injected executor's answer that is not a result for its call becomes an
  error result for it.
- `RunGuard`: progress a tool reports after its call ended is dropped; an observer failing at a
  tool's progress reaches the caller (it is not the tool's failure); when an exception leaves the
  run, the tools still running are cancelled and awaited, and the exception carries the transcript
  formed so far (`exc.transcript`, with the results of a batch cut short, in call order).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from course.runtime.loop_inputs import check_loop_options  # noqa: F401  (a loop opts in from here)
from course.runtime.messages import ToolCall, ToolResultMessage, check_json
from course.runtime.stream import guard_stream  # noqa: F401  (a loop opts in from here)
from course.runtime.tools import ToolExecutionContext, error_result

ToolExecutor = Callable[[ToolCall, ToolExecutionContext], Awaitable[ToolResultMessage]]


def output_problem(call: ToolCall, output: object) -> str | None:
    """Why a tool's `output` cannot become the result of `call` (it is no dict with a content list, or what
    reaches the transcript, content and details, is not JSON), or None."""
    if not isinstance(output, dict) or not isinstance(output.get("content"), list):
        return f"Tool {call['name']} returned {type(output).__name__}, not a dict with a content list"
    try:
        check_json([output["content"], output.get("details")])  # a transcript is JSON
    except (TypeError, ValueError) as error:
        return f"Tool {call['name']} returned output that is not JSON: {error}"
    return None


def checked(execute: ToolExecutor) -> ToolExecutor:
    """`execute`, with whatever it answers that cannot stand in the transcript replaced by an error result."""
    async def execute_checked(call: ToolCall, context: ToolExecutionContext) -> ToolResultMessage:
        result = await execute(call, context)
        problem = result_problem(call, result)
        return result if problem is None else error_result(call, problem)

    return execute_checked


def result_problem(call: ToolCall, result: object) -> str | None:
    """Why `result` cannot stand in the transcript as the answer to `call`, or None."""
    if not isinstance(result, dict) or result.get("role") != "toolResult":
        return f"Executor returned {type(result).__name__} instead of a tool result for call {call['id']}"
    if result.get("toolCallId") != call["id"] or result.get("toolName") != call["name"]:
        return (f"Executor returned a result for {result.get('toolName')!r} call {result.get('toolCallId')!r} "
                f"instead of {call['name']!r} call {call['id']!r}")
    if not isinstance(result.get("content"), list) or not isinstance(result.get("isError"), bool):
        return f"Executor returned a malformed tool result for call {call['id']}"
    try:
        check_json(result)  # a transcript is JSON
    except (TypeError, ValueError) as error:
        return f"Executor returned a result for call {call['id']} that is not JSON: {error}"
    return None


class _ObserverFailed(BaseException):
    """Carries an observer's exception raised at a tool's progress past the loop's `except Exception`
    (which turns a tool's failure into an error result); `RunGuard` unwraps it on the way out."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(error)
        self.error = error


class RunGuard:
    """One run's hardening: `async with RunGuard(messages) as guard:` around the loop, `guard.note(event)`
    for every event the loop emits, and `guard.watch(execute)` around its tool executor.

    `messages` is the run's own transcript (the list the loop appends to): an exception leaving the
    `async with` gets `exc.transcript`, a copy of it plus the results a cut batch had announced.
    """

    def __init__(self, messages: list) -> None:
        self.messages = messages
        self._batch_ids: list[str] = []
        self._ended: list[ToolResultMessage] = []
        self._running: set[asyncio.Task] = set()

    def note(self, event: Any) -> None:
        """See an event before the observer does: which calls the current batch holds, which have ended."""
        kind = event["type"]
        if kind == "assistant_message":  # a new step: its batch, if any, follows
            self._batch_ids, self._ended = [], []
        elif kind == "tool_start":
            self._batch_ids.append(event["call"]["id"])
        elif kind == "tool_end":
            self._ended.append(event["result"])

    def watch(self, execute: ToolExecutor) -> ToolExecutor:
        """`execute`, with its progress forwarded only while its call runs, an observer's failure at that
        progress raised past the loop, and its task known to the guard (to cancel if the run fails)."""
        async def execute_watched(call: ToolCall, context: ToolExecutionContext) -> ToolResultMessage:
            running = True
            observer_errors: list[BaseException] = []

            def report_progress(content):
                if running:  # progress reported after the call ended belongs to no tool item
                    try:
                        context.report_progress(content)
                    except BaseException as exc:
                        observer_errors.append(exc)  # the observer failed, not the tool: it must reach the caller
                        raise

            task = asyncio.current_task()
            self._running.add(task)
            try:
                result = await execute(call, ToolExecutionContext(signal=context.signal,
                                                                  report_progress=report_progress))
            except Exception:
                if not observer_errors:
                    raise
            finally:
                running = False  # also when the call was cancelled: nothing it reports later is emitted
                self._running.discard(task)
            if observer_errors:
                raise _ObserverFailed(observer_errors[0])
            return result

        return execute_watched

    async def __aenter__(self) -> RunGuard:
        return self

    async def __aexit__(self, kind, error, traceback) -> bool:
        if error is None:
            return False
        original = error.error if isinstance(error, _ObserverFailed) else error
        await self._cancel_running()
        try:
            original.transcript = list(self.messages) + self._finished_results()
        except Exception:
            pass  # `original` is on its way to the caller: nothing raised here may replace it
        if original is not error:
            raise original from None
        return False

    def _finished_results(self) -> list[ToolResultMessage]:
        """The results the current batch announced (tool_end) that the transcript does not hold yet, in call order."""
        ids = self._batch_ids
        finished = [result for result in self._ended if all(result is not message for message in self.messages)]
        return sorted(finished, key=lambda result: ids.index(result["toolCallId"])
                      if result.get("toolCallId") in ids else len(ids))

    async def _cancel_running(self) -> None:
        """Cancel the tools still running and wait for them: none may be left running after the run."""
        me = asyncio.current_task()
        while pending := [task for task in self._running if task is not me and not task.done()]:
            for task in pending:
                task.cancel()
            try:
                await asyncio.wait(pending)
            except asyncio.CancelledError:
                pass  # the run is failing already: its own exception goes to the caller once the tools stopped
