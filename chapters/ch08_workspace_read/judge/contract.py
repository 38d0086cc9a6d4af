"""Chapter 08's citations (the sentences of the chapter text its checks enforce) and its hardening
promises (what the project adds beyond the chapter). Headings and line numbers are those of the chapter
08 text (the manifest's `text`, chapters/ch08_workspace_read/text.txt); `tests/test_contracts.py` checks
every quote against it. chapters/ch08_workspace_read/judge/tracks.md maps each check to its names."""

from course.judge.contracts import Cite, Promise

ROUND_TRIP = "README 往返换上真实的 read"
REFUSAL = "拒绝也是一条模型读得懂的结果"
TEXT_CHECK = "路径先按文字检查"
WALK = "逐段走过路径，自己跟随符号链接"
FILES = "只读普通的 UTF-8 文本文件"
WINDOW = "窗口：offset、limit、maxLines 与 maxBytes"
CHUNKS = "分块读取，只读到窗口需要的地方"
ABORT = "中止：每读一块之前检查 signal"

CITES: dict[str, Cite] = {
    "real-file": Cite(ROUND_TRIP, 20, '这一次工具打开真实文件，返回：'),
    "content-lines": Cite(ROUND_TRIP, 32, 'content 是文件的第 1、2 行，行与行之间用 \\n 连接，最后一行的换行符不保留。'),
    "follows-disk": Cite(ROUND_TRIP, 32, '不改模型脚本，最终回答就变成“项目名是 pi-mono。”：运行结果真正依赖这个文件。'),
    "root-not-directory": Cite(ROUND_TRIP, 34, 'root 不是目录时立即抛出错误（Python 中是 ValueError，消息含 "is not a directory"）'),
    "root-absolute": Cite(ROUND_TRIP, 34, '创建时把 root 变成绝对路径（Python 的 os.path.abspath），以后进程切换当前目录也不影响它；'),
    "schema": Cite(ROUND_TRIP, 47, '{ path: 7 }、{ offset: 0 }、{ limit: -1 }、多出来的 mode 或缺少 path 都由第 06 章的执行器按这份 Schema 拦下，工具不会运行。'),
    "os-calls": Cite(ROUND_TRIP, 49, '文件系统调用用 os 模块的底层函数'),
    "refusal-is-result": Cite(REFUSAL, 61, '工具没有抛出异常，loop 照常继续，模型读到的是一句能照着改正的话。'),
    "refusal-shape": Cite(REFUSAL, 71, 'refusal.message 是 MESSAGES 中对应条目填入字段后的文字，refusal.code 是条目的键在第一个 / 之前的部分'),
    "no-secret": Cite(REFUSAL, 71, '拒绝的文字里只出现模型给出的路径或工作区内的相对路径，绝不出现工作区在磁盘上的位置，更不出现 secret 的内容或 traceback。'),
    "fields": Cite(REFUSAL, 73, '{quoted} 是模型给出的原始路径按 JSON 字符串写出'),
    "split-only-slash": Cite(TEXT_CHECK, 79, 'path 只按 / 切分成若干段，丢掉空段和 . 段'),
    "no-special": Cite(TEXT_CHECK, 79, '~ 不展开，%2e%2e 不解码，反斜杠和 file:// 都只是名字里的普通字符，这些路径最后都是 not_found。'),
    "names-bytes": Cite(TEXT_CHECK, 79, '名字就是它的字节：不做 Unicode 规范化（NFC 与 NFD 写法的 café.txt 是两个文件），不忽略大小写（readme.md 不是 README.md），以点开头的 .env 也是普通文件。'),
    "check-order": Cite(TEXT_CHECK, 81, '检查按下表的顺序进行，第一条命中的规则给出拒绝：'),
    "empty": Cite(TEXT_CHECK, 83, 'invalid_path/empty   Path is empty: give a file path relative to the workspace root.'),
    "nul": Cite(TEXT_CHECK, 84, 'invalid_path/nul     Path "README.md\\u0000" contains a NUL byte.'),
    "unicode": Cite(TEXT_CHECK, 85, 'invalid_path/unicode  Path {quoted} is not valid Unicode text.'),
    "too-long-path": Cite(TEXT_CHECK, 86, 'UTF-8 字节数超过 4096'),
    "too-long-name": Cite(TEXT_CHECK, 87, '某一段的 UTF-8 字节数超过 255'),
    "parent": Cite(TEXT_CHECK, 88, 'parent_traversal     Path "../secret.txt" contains "..": paths may not climb out of the workspace.'),
    "outside": Cite(TEXT_CHECK, 89, '以 / 开头，但不在 root 之下         outside_workspace    Absolute paths outside the workspace are refused'),
    "parent-before-absolute": Cite(TEXT_CHECK, 91, '.. 的检查在绝对路径之前，所以 /tmp/demo/ws/../secret.txt 是 parent_traversal。'),
    "absolute-by-components": Cite(TEXT_CHECK, 91, '按段而不是按字符串前缀比较，/tmp/demo/ws-evil/secret.txt 才不会被当成 ws 里的文件；/proc/self/root/tmp/demo/... 也不以 root 的各段开头，同样拒绝。'),
    "absolute-inside": Cite(TEXT_CHECK, 91, '/tmp/demo/ws/./docs//guide.md 读到的是 docs/guide.md，details.path 也写作 docs/guide.md。'),
    "walk": Cite(WALK, 97, '工具因此从不把整条路径交给操作系统去解析，而是从 root 出发一段一段地走，每一段都用 lstat 查看，遇到链接时读出目标，自己决定能否跟随。'),
    "link-through-example": Cite(WALK, 101, 'result  outdir/secret.txt leads outside the workspace: outdir is a symbolic link that points out of it.'),
    "not-found": Cite(WALK, 150, 'lstat 报告不存在（Python 的 FileNotFoundError）时是 not_found'),
    "os-error": Cite(WALK, 150, '路上遇到的其他 OSError，以及打开文件时的 OSError（例如 Permission denied），都由 execute 变成 os_error'),
    "root-opened": Cite(WALK, 150, '每次读取都先打开 root 目录本身，所以工作区被移走以后，读 README.md 得到 Cannot read "README.md": No such file or directory'),
    "absolute-target": Cite(WALK, 152, '链接的绝对目标必须以 root 或 realRoot 的各段开头，此时回到 root，从剩下的段继续走；'),
    "climbs": Cite(WALK, 152, '这些段里若有 .. 让路径退到 root 之上，拒绝为 symlink_outside/climbs。'),
    "relative-target": Cite(WALK, 152, '相对目标从链接所在的目录出发：climbsAboveRoot 从当前深度 dirs.length 开始，按目标的各段逐个计算，.. 减一，其他段加一，只要某一步小于 0 就拒绝。'),
    "link-message": Cite(WALK, 152, '拒绝链接时，linkOutside 看链接本身是不是整条路径'),
    "symlink-limit": Cite(WALK, 154, '一次读取最多跟随 MAX_SYMLINKS = 40 个符号链接，整次读取共用一个计数，遇到第 41 个时拒绝'),
    "inside-links": Cite(WALK, 154, '指向工作区内目标的链接照常跟随，包括绝对目标 /tmp/demo/ws/docs/guide.md 和链接到目录的链接；'),
    "root-link": Cite(WALK, 154, 'root 本身也可以是一个符号链接，这正是要同时接受 root 与 realRoot 两种写法的原因。'),
    "ends-at-directory": Cite(WALK, 156, '路径走完时如果没有剩下文件名（路径就是 root 本身，或者最后一段是指向目录的链接），结果是 directory。'),
    "opens-nothing-outside": Cite(WALK, 156, '整个过程只打开 root 和最后那个普通文件，工作区外的东西一样也不打开。'),
    "type-before-open": Cite(FILES, 162, 'FIFO 在打开时可能一直阻塞，设备文件在打开时可能产生动作，所以它们在打开之前就被拒绝。'),
    "directory": Cite(FILES, 164, 'docs is a directory, not a file: read takes a file path.'),
    "root-directory": Cite(FILES, 165, '. is a directory, not a file: read takes a file path.'),
    "not-found-file": Cite(FILES, 166, 'No such file in the workspace: nope.md'),
    "not-found-directory": Cite(FILES, 167, 'No such file in the workspace: nope/x.md'),
    "not-a-directory": Cite(FILES, 168, 'README.md/x: README.md is not a directory.'),
    "fifo": Cite(FILES, 169, 'pipe is a FIFO, not a regular file: only regular text files are read.'),
    "device": Cite(FILES, 170, 'null is a character device, not a regular file: only regular text files are read.'),
    "socket": Cite(FILES, 171, 'agent.sock is a socket, not a regular file: only regular text files are read.'),
    "binary": Cite(FILES, 172, 'logo.png looks like a binary file (it contains NUL bytes): only UTF-8 text is read.'),
    "not-utf8": Cite(FILES, 173, 'latin1.txt is not UTF-8 text (the bytes at offset 3 do not decode).'),
    "loop": Cite(FILES, 174, 'loop1: more than 40 symbolic links (a loop?).'),
    "bytes-judged": Cite(FILES, 178, '内容的判断针对读到的每一个字节：其中有 NUL 字节，文件是 binary；有不能按 UTF-8 解码的字节序列（包括被文件末尾截断的字符），文件是 not_utf8'),
    "bom": Cite(FILES, 178, '开头的 BOM 作为字符 \\ufeff 保留，不被去掉。'),
    "no-size-refusal": Cite(FILES, 180, '文件不会因为大小被拒绝。'),
    "window-example": Cite(WINDOW, 190, 'details   { path: "long.txt", startLine: 1, endLine: 10, truncated: true, nextOffset: 11 }'),
    "last-page": Cite(WINDOW, 192, '后面没有更多内容，于是没有提示，details 是 { path: "long.txt", startLine: 21, endLine: 30, truncated: false }。'),
    "reassemble": Cite(WINDOW, 192, '从 offset=1 开始，每次沿用 nextOffset，拼起来正好是整个文件，每行只出现一次。'),
    "lines": Cite(WINDOW, 194, '每行以 \\n 结束，最后一行可以没有 \\n；文件以 \\n 结尾时不会多出一个空行，空文件有 0 行。'),
    "only-newline": Cite(WINDOW, 194, '只按 \\n 分行，\\r 留在行内'),
    "cap-limit": Cite(WINDOW, 198, 'limit 给出且小于 maxLines，已收满 limit 行，后面还有行'),
    "cap-max-lines": Cite(WINDOW, 199, '已收满 maxLines 行（limit 缺省或不小于 maxLines），后面还有行'),
    "cap-max-bytes": Cite(WINDOW, 200, '再收下一行，正文的 UTF-8 字节数就会超过 maxBytes'),
    "long-line": Cite(WINDOW, 201, '第一行本身就超过 maxBytes'),
    "body": Cite(WINDOW, 204, '正文是收入的各行用 \\n 连接的文字；行数上限先于字节上限判断。'),
    "long-line-cut": Cite(WINDOW, 204, '超长的第一行只显示它的前 maxBytes 个字节，并且在字符边界截断'),
    "notice-format": Cite(WINDOW, 204, '被截断时，content 是正文、一个空行和提示'),
    "details": Cite(WINDOW, 204, 'details 的字段依次是 path、startLine、endLine、truncated，截断时最后是 nextOffset'),
    "defaults": Cite(WINDOW, 206, '默认上限是 DEFAULT_MAX_LINES = 2000 行和 DEFAULT_MAX_BYTES = 51200 字节。'),
    "empty-file": Cite(WINDOW, 208, '空文件读出空字符串，details 是 { path, startLine: 1, endLine: 0, truncated: false }，不是错误。'),
    "offset-beyond": Cite(WINDOW, 208, 'offset 超过文件的行数（空文件按 1 行算）时拒绝，details.error 是 offset_beyond_end'),
    "chunks": Cite(CHUNKS, 219, '一旦知道窗口已经完整——最后一行已经读完，并且知道后面还有没有内容——就停止读取。'),
    "judged-when-read": Cite(CHUNKS, 219, '窗口之后很远的坏字节不会让这次读取失败，读到它的那次读取才失败。'),
    "eof-flush": Cite(CHUNKS, 239, '读到空块表示文件结束，这时告诉解码器输入已经结束，末尾被截断的字符才会被发现。'),
    "incremental": Cite(CHUNKS, 239, '一个字符可能被两块的边界切开，增量解码器会把前半个字符留到下一块；不要对每一块单独解码。'),
    "abort-before-chunk": Cite(ABORT, 245, '上面的循环在每一块之前检查 ctx.signal（signal 可能不存在），第一块也不例外'),
    "aborted-even-small": Cite(ABORT, 245, '即使文件是空的、窗口一块就能读完，结果也是拒绝 Reading README.md was aborted.'),
    "yield": Cite(ABORT, 247, '每读完一块，工具让出一次事件循环，中止、取消和同批的其他工具才有机会插进来；'),
    "progress": Cite(ABORT, 247, '每累计读满 1 MiB，它报告一次进度，文字来自 PROGRESS：read 1 MiB of README.md。'),
    "abort-in-loop": Cite(ABORT, 255, 'transcript 停在 toolResult call-1 ✗ Reading README.md was aborted.，模型只被请求了一次。'),
    "unaborted-progress": Cite(ABORT, 255, '同一次读取如果不中止，会报告多次进度，最后返回第 40000 行。'),
    "cancel-closes": Cite(ABORT, 257, 'CancelledError 从让出事件循环的地方抛出，工具不捕获它，finally 关闭文件：无论读取怎样结束，文件描述符都不会遗留。'),
}

PROMISES: dict[str, Promise] = {promise.name: promise for promise in (
    Promise("file-swap", "the file named by the path, replaced right after the tool's check by a symbolic link out "
                         "of the workspace or by a FIFO, is neither followed nor read, and the read does not block "
                         "(the chapter leaves such a race out, line 156)"),
    Promise("directory-swap", "a directory on the path, replaced right after its check by a link to a directory "
                              "outside, is not followed: every step of the walk opens relative to the directory "
                              "before it, never following a link"),
    Promise("fstat-after-open", "what was opened is checked again on its open descriptor: a FIFO swapped in for "
                                "the open and put back afterwards is refused as not_regular, not served as an "
                                "empty file"),
)}
