"""Chapter 09's citations: the sentences of chapters/ch09_edit_tool/text.txt its checks enforce (heading, line,
a quote of that line); `tests/test_contracts.py` checks every quote against the text."""

from course.judge.contracts import Cite

ROUND_TRIP = "编辑往返：模型改动一个真实文件"
ONE_MATCH = "oldText 必须恰好出现一次"
DIFF = "details.diff：改了什么，一眼看得见"
ENCODING = "保留文件的编码与换行"
ATOMIC = "原子写入：读者永远看不到半个文件"
BOUNDARY = "沿用第 08 章的工作区边界"

CITES: dict[str, Cite] = {
    "round-trip": Cite(ROUND_TRIP, 14, "工具在文件中找到 oldText 唯一的一处，换成 newText，写回磁盘"),
    "file-changed": Cite(ROUND_TRIP, 29, "transcript 记下了改动，文件也真的变了。"),
    "root-not-directory": Cite(ROUND_TRIP, 31, "不是目录时立即抛出 ValueError（消息含 \"is not a directory\"）"),
    "schema": Cite(ROUND_TRIP, 44, "都由第 06 章的执行器按这份 Schema 拦下，工具不会运行。"),
    "arguments-first": Cite(ONE_MATCH, 54, "工具先只看参数，不打开任何文件："),
    "empty-old-text": Cite(ONE_MATCH, 56, "empty_old_text   oldText is empty"),
    "no-change": Cite(ONE_MATCH, 57, "no_change        oldText and newText are the same"),
    "count-overlapping": Cite(ONE_MATCH, 59, "每一个起点都算一次，重叠的也算"),
    "no-match": Cite(ONE_MATCH, 71, "no_match    oldText was not found in notes.md"),
    "ambiguous": Cite(ONE_MATCH, 72, "ambiguous   oldText matches 3 places in notes.md (on lines 2, 5)"),
    "ambiguous-lines": Cite(ONE_MATCH, 74, "同一行上的几处只写一次行号，只有一行时写作 on line 2"),
    "one-place-only": Cite(ONE_MATCH, 81, "newText 里即使含有 oldText，也不会被再换一次；文件中其他地方的文字一个字节也不变。"),
    "edited-line": Cite(ONE_MATCH, 81, "{line} 是被换掉的那一处起始的行号"),
    "diff-how": Cite(DIFF, 97, "改动前后的文字都按 \\n 切分成行（split(\"\\n\")，不用 splitlines）"),
    "diff-direction": Cite(DIFF, 99, "方向是从旧到新：被换掉的行以 - 开头，换上的行以 + 开头，先 - 后 +。"),
    "diff-normalised": Cite(DIFF, 101, "所以 CRLF 文件的 diff 里也没有 \\r"),
    "utf8-only": Cite(ENCODING, 111, "含 NUL 字节是 binary，不能按 UTF-8 解码是 not_utf8"),
    "bom": Cite(ENCODING, 111, "去掉它并记下 bom = true"),
    "line-ending": Cite(ENCODING, 112, "文字中第一个 \\n 的前一个字符是 \\r 时，文件的换行是 CRLF"),
    "normalise": Cite(ENCODING, 113, "把文字中的每个 \\r\\n 换成 \\n；oldText 和 newText 也同样规范化。"),
    "restore": Cite(ENCODING, 115, "写回之前反过来：换行是 CRLF 时把每个 \\n 换成 \\r\\n，bom 为 true 时在开头加回 \\ufeff"),
    "lone-cr": Cite(ENCODING, 127, "后面没有 \\n 的 \\r 不是换行，原样保留。"),
    "mixed": Cite(ENCODING, 127, "换行混用的文件按第一个换行决定：写回时每个换行都是这一种。"),
    "temp-then-rename": Cite(ATOMIC, 146, "任何时刻 target 要么是完整的旧文件，要么是完整的新文件。"),
    "same-directory": Cite(ATOMIC, 148, "临时文件必须在 target 所在的目录里"),
    "mode": Cite(ATOMIC, 150, "一个 0755 的脚本改完仍可执行。"),
    "through-links": Cite(ATOMIC, 152, "改的是它指向的 README.md，docs/readme 本身仍是那个链接。"),
    "write-failed": Cite(ATOMIC, 154, "文件保持原样，临时文件被删除，结果是一条错误结果"),
    "batch-of-edits": Cite(ATOMIC, 156, "同一批中两个 edit 改同一个文件时，后运行的那个读到的是先运行的那个写完的文件，两处改动都在。"),
    "workspace-reused": Cite(BOUNDARY, 162, "本章不重写这些规则，而是 import 第 08 章的 Workspace"),
    "refusals-reused": Cite(BOUNDARY, 170, "第 08 章的每一种拒绝原样成为 edit 的错误结果，文字和 details.error 都不变"),
    "nothing-outside": Cite(BOUNDARY, 172, "工作区外的文件既不被读，也不被写，工作区外也不会出现临时文件。"),
    "no-create": Cite(BOUNDARY, 174, "edit 只改已有的文件，不创建新文件：不存在的路径是 not_found。"),
    "check-order": Cite(BOUNDARY, 176, "整个 edit 的检查顺序是"),
}
