"""Realistic wrong chapter 06 executors: each is one of the executors written from the chapter text with one
of the chapter's sentences broken, as a student might break it. The chapter track must fail each — the fixed
tests that cite that sentence, or the generated plans that do — and the first failing plan must quote it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).parent


@dataclass(frozen=True)
class WrongExecutor:
    name: str
    base: str
    """The executor it is made from (a file of this folder)."""
    find: str
    replace: str
    cite: str
    """The chapter's sentence the mistake breaks: a key of chapters/ch06_tool_execution/judge/contract.py's CITES."""
    caught_by: tuple[str, ...] = ()
    """The fixed tests that hold an executor to that sentence: each must fail (and no other fixed test)."""
    sections: tuple[str, ...] = ()
    """Generated sections whose first failing plan cites the sentence."""

    def source(self, reference: str = "") -> str:
        """The executor's text (`reference` is ignored: the mutation gate's variants are made from the reference)."""
        base = (HERE / self.base).read_text(encoding="utf-8")
        if base.count(self.find) != 1:
            raise ValueError(f"{self.name}: {self.find!r} occurs {base.count(self.find)} times in {self.base}")
        return base.replace(self.find, self.replace)


WRONG_EXECUTORS = [
    # The type name makes a clearer message, a student may think.
    WrongExecutor("exception-type-prefixed", "steps_executor.py",
                  "return error_result(call, str(exc) or type(exc).__name__)",
                  'return error_result(call, f"{type(exc).__name__}: {exc}")',
                  "exception-message", ("TestExecuteToolCall::test_raising_tool",
                                        "TestExecuteToolCall::test_raising_tool_with_empty_message_names_the_type"),
                  ("failures",)),
    # "Nothing may escape the executor", read too widely.
    WrongExecutor("catches-base-exception", "refusals_executor.py",
                  "    except Exception as failure:  # a CancelledError is no Exception: it goes on\n",
                  "    except BaseException as failure:  # nothing escapes\n",
                  "no-shield", ("TestExecuteToolCall::test_cancellation_propagates",), ("failures",)),
    # Checking the arguments first: both are "is this call any good?".
    WrongExecutor("arguments-before-the-name", "refusals_executor.py",
                  "        tool = find_tool(call, registry)\n        check_arguments(call, tool)\n",
                  "        problem = messages.arguments_problem(call)\n"
                  "        if problem is not None:\n"
                  "            raise Refused(problem)\n"
                  "        tool = find_tool(call, registry)\n"
                  "        check_arguments(call, tool)\n",
                  "unknown-first", (), ("arguments",)),
    # A copy, but not a deep one: the top-level keys are safe, nested lists and objects are shared.
    WrongExecutor("shallow-copy", "steps_executor.py",
                  'output = await tool.execute(json_copy(call["arguments"]), context)',
                  'output = await tool.execute(dict(call["arguments"]), context)',
                  "arguments-copy", (), ("context",)),
    # isError passed on as the tool gave it.
    WrongExecutor("is-error-as-given", "steps_executor.py",
                  'is_error=bool(output.get("isError"))',
                  'is_error=output.get("isError", False)',
                  "is-error-bool", (), ("outputs",)),
    # Empty details look like no details.
    WrongExecutor("falsy-details-dropped", "refusals_executor.py",
                  '    details = output.get("details")\n',
                  '    details = output.get("details") or None\n',
                  "details-rule", (), ("outputs",)),
    # An aborted run should not start a tool, a student may think: the loop's job, not the executor's.
    WrongExecutor("aborted-signal-refused", "steps_executor.py",
                  '    tool = registry.get(call["name"])\n',
                  '    if context.signal is not None and context.signal.aborted:\n'
                  '        return error_result(call, "Tool call was not executed because the run was aborted.")\n'
                  '    tool = registry.get(call["name"])\n',
                  "signal-not-checked", (), ("context",)),
]
