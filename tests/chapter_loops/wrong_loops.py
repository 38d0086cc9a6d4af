"""Realistic wrong chapter 07 loops: each is one of the loops written from the chapter text with one of the
chapter's sentences broken, as a student might break it. The fixed tests must fail each, and among their
failures must be the test that holds the student to that sentence."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).parent


@dataclass(frozen=True)
class WrongLoop:
    name: str
    base: str
    """The chapter loop it is made from (a file of this folder)."""
    find: str
    replace: str
    sentence: str
    """The chapter's sentence the mistake breaks (a short quote)."""
    caught_by: tuple[str, ...]
    """The fixed tests that hold a loop to that sentence: each must fail."""

    def source(self, reference: str = "") -> str:
        """The loop's text (`reference` is ignored: the mutation gate's variants are made from the reference)."""
        base = (HERE / self.base).read_text(encoding="utf-8")
        if base.count(self.find) != 1:
            raise ValueError(f"{self.name}: {self.find!r} occurs {base.count(self.find)} times in {self.base}")
        return base.replace(self.find, self.replace)


WRONG_LOOPS = [
    # as_completed hands each result over as its tool finishes: appending it there is the natural slip.
    WrongLoop("appends-in-completion-order", "as_completed_loop.py",
              "    results = [None] * len(calls)\n"
              "    for finished in asyncio.as_completed([_execute(options, i, call) for i, call in enumerate(calls)]):\n"
              "        index, result = await finished\n"
              "        results[index] = result\n",
              "    results = []\n"
              "    for finished in asyncio.as_completed([_execute(options, i, call) for i, call in enumerate(calls)]):\n"
              "        index, result = await finished\n"
              "        results.append(result)\n",
              "Promise.all() 返回的数组仍按输入 Promise 排列。整批结束后，loop 按这个数组的顺序 写入消息列表",
              ("TestConcurrentTools::test_fast_finishes_first_results_stay_in_call_order",)),
    # length read as "the model was cut off, but the calls are there": run them like toolUse.
    WrongLoop("executes-length-calls", "taskgroup_loop.py",
              'if stop_reason == "toolUse":',
              'if stop_reason == "toolUse" or (stop_reason == "length" and calls):',
              "length 表示模型输出因长度上限而结束，工具参数可能还不完整。……executor 调用次数 0",
              ("TestNonExecutingTerminals::test_terminal_row[length]",
               "TestNonExecutingTerminals::test_length_with_two_calls_starts_neither")),
    # Only the loop head checks the signal: an abort during the last allowed step ends as maxSteps.
    WrongLoop("abort-checked-only-at-the-head", "gather_loop.py",
              '        messages.extend(results)\n'
              '        if options.signal is not None and options.signal.aborted:\n'
              '            return finish("aborted", steps)\n',
              '        messages.extend(results)\n',
              "第二个检查点位于一批工具全部结束、结果已经追加之后。……返回 aborted；下一次 model.stream() 不会开始",
              ("TestAbortAndMaxSteps::test_abort_during_the_last_step_ends_aborted",)),
]
