"""Chapter 06's citations (the sentences of the chapter text its checks enforce) and its hardening
promises (what the project adds beyond the chapter). Headings and line numbers are those of
`chapters/ch06_tool_execution/text.txt` (the manifest's `text`); `tests/test_contracts.py` checks every
quote against it. `chapters/ch06_tool_execution/judge/tracks.md` maps each check to its entry here."""

from course.judge.contracts import Cite, Promise

CALL_TO_RESULT = "模型只写下调用，执行器给出结果"
REGISTRY = "Registry 按名字找到工具"
ARGUMENTS = "参数在运行工具之前按 JSON Schema 检查"
CONTEXT = "工具拿到参数副本、signal 与 reportProgress"
OUTPUT = "工具的返回值变成 toolResult"
RAISING = "工具抛出异常时，错误结果保留它的消息"
CANCELLED = "取消不是工具失败"

CITES: dict[str, Cite] = {
    "result-answers-call": Cite(CALL_TO_RESULT, 32, "toolCallId 取自 readCall.id，toolName 取自 readCall.name。"),
    "in-the-loop": Cite(CALL_TO_RESULT, 32, "第 07 章的 loop 正是把这条消息追加进 transcript，第二次模型请求才读到 README 内容。"),
    "failure-is-result": Cite(CALL_TO_RESULT, 43, "每一步失败都不会让执行器抛出异常，而是返回一条 isError: true 的结果，"
                                                  "它的 toolCallId 与 toolName 仍然取自这次调用。"),
    "runtime-refuses-bad-tools": Cite(REGISTRY, 74, "Tool 在创建时检查 parameters 本身是否是合法的 JSON Schema，不合法就抛出 "
                                                    "ValueError（消息含 \"invalid parameters schema\"）；Registry 拒绝两个同名工具"
                                                    "（ValueError，消息含 \"registered twice\"）。"),
    "unknown-tool": Cite(REGISTRY, 80, "return errorResult(call, `Tool ${call.name} not found`);"),
    "error-result-shape": Cite(REGISTRY, 88, "errorResult(call, message) 构造的就是这样一条结果：toolCallId、toolName 来自 "
                                             "call，content 是一个 text 块，isError 为 true，timestamp 取自运行时时钟，没有 "
                                             "details 字段。"),
    "exact-name": Cite(REGISTRY, 88, "名字的比较是精确的：Read、\"read \" 和空字符串都不是 read。"),
    "unknown-first": Cite(REGISTRY, 88, "名字查找排在一切参数检查之前，所以一个未知工具的调用即使参数也有问题，结果仍然只说 "
                                        "not found。"),
    "not-run-when-refused": Cite(ARGUMENTS, 94, "找到工具以后，参数先经过两道检查，任何一道不通过，工具都不会运行。"),
    "arguments-problem": Cite(ARGUMENTS, 96, "argumentsProblem 对这两种情况返回一段说明文字，对正常参数返回 undefined："),
    "arguments-problem-text": Cite(ARGUMENTS, 103, "括号中是具体原因；执行器原样使用它。"),
    "best-match": Cite(ARGUMENTS, 115, "执行器只报告一条：jsonschema 的 bestMatch 从 validator 给出的全部错误中挑出的那一条。"),
    "where": Cite(ARGUMENTS, 115, "位置是这条错误的 absolutePath 各段用 / 连接（例如 opts/depth、tags/1），为空时写 "
                                  "arguments；说明是错误自带的 message："),
    "invalid-arguments-text": Cite(ARGUMENTS, 121, "`Invalid arguments for tool ${call.name} at ${where}: ${error.message}`"),
    "no-coercion": Cite(ARGUMENTS, 124, "参数按模型发来的原样检查，执行器不做类型转换，也不填默认值。"),
    "runs-when-valid": Cite(CONTEXT, 136, "参数通过检查后，执行器调用工具："),
    "arguments-copy": Cite(CONTEXT, 140, "工具得到的是参数的深拷贝。"),
    "copy-after-return": Cite(CONTEXT, 147, "工具在返回以后才修改它保留的那份对象，call 同样不受影响"),
    "context-as-is": Cite(CONTEXT, 149, "第二个参数 ctx 原样交给工具：同一个 signal，同一个 reportProgress。"),
    "signal-not-checked": Cite(CONTEXT, 149, "执行器自己不检查 signal：即使 signal 已经 aborted，工具照样被调用"),
    "three-fields": Cite(OUTPUT, 163, "执行器只取这三个字段，用运行时的 toolResult 包装成消息："),
    "tool-error-kept": Cite(OUTPUT, 174, "执行器保留工具自己的判断："),
    "output-kept": Cite(OUTPUT, 186, "content 与 details 原样进入结果，不截断、不改写；"),
    "is-error-bool": Cite(OUTPUT, 186, "isError 缺省为 false，其他值按真假转换成布尔值；"),
    "details-rule": Cite(OUTPUT, 186, "details 为 null 或缺省时，结果中没有 details 字段，其他值（包括 0、空字符串、空列表和 "
                                      "false）都保留。"),
    "extra-keys": Cite(OUTPUT, 186, "输出中的其他键不会进入结果，toolCallId 与 toolName 永远来自 call。"),
    "exception-message": Cite(RAISING, 208, "结果的文字就是异常自己的消息，在 Python 中是 str(exc)：不加类型名前缀，不附 "
                                            "traceback，也不附它的 cause 或 notes。"),
    "exception-empty": Cite(RAISING, 208, "消息为空时改用异常的类型名，例如 raise KeyError() 得到的文字是 KeyError。"),
    "catch-exception-only": Cite(RAISING, 208, "在 Python 中只捕获 Exception；下一节的 CancelledError 不属于它。"),
    "cancellation": Cite(CANCELLED, 216, "执行器不捕获它，让它继续向外传播："),
    "cancellation-raised-by-tool": Cite(CANCELLED, 223, "工具自己抛出 CancelledError 时也一样。"),
    "no-shield": Cite(CANCELLED, 223, "不要为了“什么都不抛出”改用 except BaseException，也不要用 shield 把工具和取消隔开。"),
}

PROMISES: dict[str, Promise] = {promise.name: promise for promise in (
    Promise("tool-output-checked", "a tool's output that is not a dict with a content list (a string, None, a number, "
                                   "a list, a tuple, a set, {}, no content, content not a list) becomes the error result "
                                   "'Tool <name> returned <type>, not a dict with a content list'"),
    Promise("tool-output-json", "a tool's content or details holding what a transcript cannot (a set, bytes, NaN or an "
                                "infinity, an arbitrary object, a cycle, a lone surrogate, nesting deeper than 100 "
                                "levels) becomes the error result 'Tool <name> returned output that is not JSON: …'"),
    Promise("loop-hardening", "chapter 07's hardening promises, kept by the reference loop running this executor: a "
                              "model that raises or breaks its stream, an observer that raises, the caller cancelling "
                              "the run, progress after a call ended (chapters/ch07_agent_loop/judge/contract.py)"),
)}
