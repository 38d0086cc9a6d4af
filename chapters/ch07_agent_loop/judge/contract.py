"""Chapter 07's citations (the sentences of the chapter text its checks enforce) and its hardening
promises (what the project adds beyond the chapter). Headings and line numbers are those of the chapter
07 text (the manifest's `text`); `tests/test_contracts.py` checks every quote against it."""

from course.judge.contracts import Cite, Promise

TWO_CALLS = "一次请求为什么需要两次模型调用"
FIRST_STREAM = "第一次 model.stream() 追加 assistant 消息"
PURE_STOP = "没有工具的 stop 直接结束"
ROUND_TRIP = "call-1 的结果进入第二次模型请求"
EVENTS = "LoopEvent 展示过程，messages 保存事实"
LENGTH = "length：工具不启动，调用仍然闭合"
CONCURRENT = "多个工具同时运行，结果仍按工具调用顺序追加"
ABORT = "取消与 maxSteps 阻止新的模型请求"
LENGTH_CHECK = "完成正常实现后检查 length 分支"

CITES: dict[str, Cite] = {
    "round-trip": Cite(TWO_CALLS, 49, "它发起第一次 model.stream()，执行 call-1，把结果追加进消息列表，然后用更新后的列表发起第二次 model.stream()。"),
    "deep-copy": Cite(FIRST_STREAM, 65, "runAgentLoop() 收到的 context.messages 属于调用者。运行开始时，它创建一份深拷贝："),
    "caller-keeps-its-messages": Cite(FIRST_STREAM, 74, "后续 assistant 和 tool result 只进入局部 messages。"),
    "request": Cite(FIRST_STREAM, 76, "第一次请求使用这份局部消息，同时带上 system prompt 和本次 Registry 生成的工具定义："),
    "stale-tools": Cite(FIRST_STREAM, 87, "context.tools 中可能有旧值，loop 不会转发它。"),
    "events-then-result": Cite(FIRST_STREAM, 89, "模型流中的事件先交给观察者，最终消息再从 result() 取得："),
    "appended-once": Cite(FIRST_STREAM, 106, "流结束后，它只把完整的 firstAnswer 追加一次。"),
    "pure-stop": Cite(PURE_STOP, 110, "局部消息从 [user] 变成 [user, assistant]，模型调用次数和 steps 都是 1。"),
    "turn-end": Cite(PURE_STOP, 118, "turn_end 是整次运行的结束事件。"),
    "calls-from-content": Cite(ROUND_TRIP, 126, "loop 从 assistant content 中取出所有工具调用："),
    "tool-start-then-executor": Cite(ROUND_TRIP, 132, "loop 先发出 tool_start，再把 call、signal 和进度回调交给 executor。"),
    "injected-executor": Cite(ROUND_TRIP, 139, "测试也可以通过 options.executeToolCall 注入遵守同一签名的 probe。"),
    "progress-call-id": Cite(ROUND_TRIP, 155, "如果工具报告进度，loop 会补上 callId: \"call-1\"；UI 因而能把进度放到正确的工具项下。"),
    "second-request": Cite(ROUND_TRIP, 162, "循环继续，第二次 model.stream() 读取追加后的三条消息。它还会再次收到同一个 system prompt 和 Registry definitions。"),
    "turn-end-once": Cite(EVENTS, 196, "turn_end 只出现一次。"),
    "length-not-run": Cite(LENGTH, 202, "loop 先保存这条 assistant，再进入非执行分支。"),
    "length-events": Cite(LENGTH, 210, "实际事件顺序是 assistant_message → tool_skipped → turn_end，整个过程没有 tool_start 或 tool_end。"),
    "pairing": Cite(LENGTH, 225, "只要其中已经出现工具调用，loop 就会在结束或再次 请求模型前，为每个调用写入具有相同 toolCallId 的工具结果。"),
    "other-terminals": Cite(LENGTH, 229, "error、aborted 和内容中带工具调用的 stop 都复用与 length 相同的 skipped 结果结构， 只改变原因和说明文字；每条 skipped 工具结果都会伴随一个 tool_skipped 事件。"),
    "incomplete-batch": Cite(LENGTH, 229, "表中最后 两行没有形成可继续执行的完整工具批次，因此 loop 以 error 结束。"),
    "batch-together": Cite(CONCURRENT, 237, "loop 会先为两者发出 tool_start，再用 Promise.all() 同时等待两个 executor Promise："),
    "completion-order": Cite(CONCURRENT, 247, "fast 可以先完成，所以 tool_end 反映实际完成顺序："),
    "call-order": Cite(CONCURRENT, 251, "整批结束后，loop 按这个数组的顺序 写入消息列表："),
    "rejection": Cite(CONCURRENT, 257, "每个工具调用对应的异步函数分别用 try/catch 把 rejection 转换成具有相同 toolCallId 和 toolName 的错误结果；其中一项失败不会让同批其他 Promise 提前丢失。"),
    "error-message": Cite(CONCURRENT, 257, "错误结果保留 error.message，不写入 stack。"),
    "steps-count": Cite(ABORT, 265, "因此请求开始前有一个稳定关系：已经完成的模型请求数是 steps - 1。"),
    "abort-before-start": Cite(ABORT, 278, "运行开始前已经取消时，循环刚进入 steps = 1，此前完成的请求数自然是 1 - 1 = 0， 所以返回 steps: 0。"),
    "abort-during-batch": Cite(ABORT, 280, "loop 会等待当前 executor 返回，保留 readResult，然后返回 aborted；下一次 model.stream() 不会开始。"),
    "signal-handed-over": Cite(ABORT, 282, "signal 已经交给 provider 与工具，但它们需要主动观察 signal 才会及时停止；"),
    "max-steps": Cite(ABORT, 284, "maxSteps 限制可以发起的模型请求数，默认上限是 32。"),
    "max-steps-one": Cite(ABORT, 284, "若设置 maxSteps: 1，第一轮 模型仍可提出 readCall，工具也会执行并产生 readResult。"),
    "length-check": Cite(LENGTH_CHECK, 302, "正确  executionCount = 0，产生两条 tool_skipped"),
}

PROMISES: dict[str, Promise] = {promise.name: promise for promise in (
    Promise("max-steps-checked", "a max_steps that is not a positive integer (0, -1, 1.5) is a ValueError before any "
                                 "model request"),
    Promise("guarded-model", "a model that raises, or whose stream breaks the stream contract (fails mid-way, yields "
                             "something that is not an event, a result() that is no message), becomes an error answer "
                             "naming what failed: the run ends error, its calls paired"),
    Promise("checked-executor", "an injected executor's answer that is not a well-formed tool result for its own call "
                                "(another call's id or tool's name, another role, no content, an isError that is not a "
                                "bool, not a dict, not JSON) becomes an error result for the call"),
    Promise("observer-errors", "an observer that raises ends the run with its exception, which carries what formed "
                               "so far as exc.transcript; tools still running are cancelled, not waited for"),
    Promise("cancellation", "the caller cancelling the task that runs the loop ends it with CancelledError carrying "
                            "exc.transcript; running tools are cancelled with it, and the model's answer is not read "
                            "again"),
    Promise("late-progress", "progress a tool reports through its callback after its call ended (or from another "
                             "run) is not emitted"),
    Promise("exception-named", "an executor's exception with an empty message becomes an error result naming the "
                               "exception's type"),
    Promise("abort-anywhere", "an abort at a moment the chapter does not name (while the model streams, once a "
                              "terminal answer is complete, at a skipped call) changes nothing but what the loop's two "
                              "abort checks decide"),
)}
