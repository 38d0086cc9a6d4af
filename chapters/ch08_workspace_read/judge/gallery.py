"""Chapter 08's known mistakes: each patches chapters/ch08_workspace_read/ch08_workspace_read.py where the mistake lives
(one line where one line makes it; `also` where the mistake is several lines that belong together).

What goes beyond the chapter (a file or directory swapped between the tool's check and its open, which the
reference's opt-in course/runtime/held_walk.py guards against) is `track=HARDENING`: the chapter track must
pass such a variant, the hardening track (section 加固) must fail it.

Left out: opening the file without O_NONBLOCK. Only the FIFO swapped in mid-read would catch it, and
only by blocking until the test's watchdog opens the FIFO's other end, on every gate run."""

from course.judge.mutants import Mutant
from course.manifest import HARDENING

MUTANTS = [
    # 越界: paths and links that lead out of the workspace
    Mutant("parent-traversal-allowed", "越界",
           'refuse a path with a ".." component before opening anything: it may climb out of the workspace',
           'if ".." in parts:',
           'if False:'),
    Mutant("links-followed", "越界",
           "your tool lets the OS follow symbolic links (os.stat, not lstat), so a link inside the workspace "
           "reads a file outside it: meet each link yourself and check where it leads",
           'info = at.lstat(dirs, name)',
           'info = os.stat(os.path.join(root, *dirs, name))'),
    Mutant("relative-link-targets-trusted", "越界",
           'your tool checks only absolute link targets: a relative target\'s ".." can climb out of the '
           "workspace too, and the walk must never go above the root",
           '                elif climbs_above_root(target_parts, len(dirs)):\n'
           '                    raise link_outside(shown, inside)\n',
           '',
           also=(('                if not dirs:\n'
                  '                    raise Refusal("symlink_outside/climbs", path=shown)\n'
                  '                dirs.pop()\n',
                  '                if dirs:\n'
                  '                    dirs.pop()\n'),)),
    Mutant("root-prefix-without-separator", "越界",
           "an absolute path is inside the workspace only if it continues the root's components: "
           "a string prefix check lets /work/ws-evil pass for /work/ws",
           'if parts[:len(prefix)] == prefix:\n            return parts[len(prefix):]',
           'joined = "/" + "/".join(parts)\nif joined.startswith(root):\n    return components(joined[len(root):])'),
    Mutant("path-length-unchecked", "越界",
           "refuse a path longer than MAX_PATH_BYTES (4096 bytes) before walking it",
           'if size > MAX_PATH_BYTES:',
           'if False:'),
    Mutant("name-length-unchecked", "越界",
           "refuse a path component longer than MAX_NAME_BYTES (255 bytes) with a clear too_long refusal, "
           "before the OS fails on it",
           'if any(len(part.encode("utf-8")) > MAX_NAME_BYTES for part in parts):',
           'if False:'),
    Mutant("type-unchecked-after-open", "加固",
           "check the type of what you opened (fstat on the fd): the file may have been swapped for a FIFO "
           "or a device between your check and your open",
           'return at.open_file(dirs, name, lambda mode: check_file_type(mode, shown))',
           'return at.open_file(dirs, name, lambda mode: None)',
           track=HARDENING),
    Mutant("root-link-not-opened", "越界",
           "the workspace root may itself be a symbolic link: walk from it as it is (only the path below the "
           "root is walked link by link)",
           'real_root = os.path.realpath(root)',
           'real_root = os.path.realpath(root)\nif os.path.islink(root.rstrip("/")):\n'
           '    return Tool(name="read", description="", parameters={"type": "object"}, execute=None)'),
    Mutant("absolute-path-only-through-real-root", "越界",
           "when the root is a link, an absolute path spelled through the root as given is inside it too: "
           "accept both the root as given and its real path",
           'below = under_root(parts, root, real_root)',
           'below = under_root(parts, real_root)'),
    Mutant("absolute-path-only-through-given-root", "越界",
           "when the root is a link, an absolute path spelled through its real directory is inside it too: "
           "accept both the root as given and its real path",
           'below = under_root(parts, root, real_root)',
           'below = under_root(parts, root)'),
    Mutant("link-loop-unbounded", "越界",
           "count the symbolic links a walk follows and refuse past MAX_SYMLINKS (40): a link loop is "
           "otherwise followed for ever",
           'if links > MAX_SYMLINKS:',
           'if False:'),
    Mutant("link-bound-one-over", "越界",
           "at most MAX_SYMLINKS (40) links are followed in one walk, as the kernel allows; the 41st is refused",
           'if links > MAX_SYMLINKS:',
           'if links > MAX_SYMLINKS + 1:'),
    Mutant("name-length-in-characters", "越界",
           "NAME_MAX counts bytes, not characters: 86 Chinese characters are 258 bytes, too long for one name",
           'if any(len(part.encode("utf-8")) > MAX_NAME_BYTES for part in parts):',
           'if any(len(part) > MAX_NAME_BYTES for part in parts):'),
    Mutant("walk-descriptors-leaked", "越界",
           "close what the walk opened (the root's descriptor and the directories'): each read otherwise leaves "
           "them open",
           'with HeldWalk(root) as at:',
           'at = HeldWalk(root)\nif True:'),
    Mutant("directory-opened-following-links", "加固",
           "open each directory on the path with O_NOFOLLOW too, not only the file: a directory swapped for a link "
           "to one outside after you looked at it is otherwise followed out of the workspace",
           'return at.open_file(dirs, name, lambda mode: check_file_type(mode, shown))',
           'fd = os.open(os.path.join(root, *dirs, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)\n'
           'check_file_type(os.fstat(fd).st_mode, shown)\n'
           'return fd',
           also=(('info = at.lstat(dirs, name)', 'info = os.lstat(os.path.join(root, *dirs, name))'),),
           track=HARDENING),
    Mutant("type-rechecked-by-name", "加固",
           "check the type of what you opened with fstat on its descriptor: a stat by name after the open sees "
           "whatever is at that name by then (the file put back), not the FIFO you opened",
           'return at.open_file(dirs, name, lambda mode: check_file_type(mode, shown))',
           'return at.open_file(dirs, name, lambda mode: check_file_type(at.lstat(dirs, name).st_mode, shown))',
           track=HARDENING),

    # 拒绝: refused reads are error results
    Mutant("refusal-raised", "拒绝",
           "a refused read is the tool's own answer: return an error result with details.error, "
           "do not let the refusal escape as an exception",
           '        except Refusal as refusal:\n'
           '            return refused(refusal)\n',
           ''),
    Mutant("type-checked-only-after-open", "拒绝",
           "check the file's type before opening it: a FIFO, device or socket is refused without being opened",
           'check_file_type(info.st_mode, shown)',
           'pass'),
    Mutant("binary-not-detected", "拒绝",
           "a file with NUL bytes is binary: refuse it as binary, even where its bytes happen to decode",
           'if b"\\0" in chunk:',
           'if False:'),
    Mutant("binary-checked-in-first-kilobyte", "拒绝",
           "a NUL byte anywhere in what the tool reads makes the file binary, not only in its first 1024 bytes",
           'if b"\\0" in chunk:',
           'if b"\\0" in chunk[:1024]:'),
    Mutant("invalid-utf8-replaced", "拒绝",
           "bytes that are not UTF-8 make the file refused as not_utf8; do not decode them to U+FFFD",
           'decoder = codecs.getincrementaldecoder("utf-8")("strict")',
           'decoder = codecs.getincrementaldecoder("utf-8")("replace")'),
    Mutant("file-descriptor-leaked-on-refusal", "拒绝",
           "close the file in a finally: a read refused after the open (binary, not UTF-8, aborted) "
           "otherwise leaves its descriptor open",
           '            try:\n'
           '                await read_window(fd, shown, window, context)\n'
           '            finally:  # however the read ends (a refusal, a cancellation), its file is closed\n'
           '                os.close(fd)\n',
           '            await read_window(fd, shown, window, context)\n'
           '            os.close(fd)\n'),
    Mutant("offset-minimum-missing", "拒绝",
           "the schema says offset and limit are integers of at least 1, so that 0 and negative values are "
           "refused before the tool runs",
           '"offset": {"type": "integer", "minimum": 1,',
           '"offset": {"type": "integer",'),
    Mutant("offset-one-past-the-end-accepted", "拒绝",
           "an offset past the file's last line is refused (offset_beyond_end), one past it too; only an "
           "empty file may be read at offset 1",
           'self.start > max(self.total_lines, 1)',
           'self.start > self.total_lines + 1'),
    Mutant("empty-file-refused-at-offset-one", "拒绝",
           "an empty file read at offset 1 is an empty result, not offset_beyond_end",
           'self.start > max(self.total_lines, 1)',
           'self.start > self.total_lines'),
    Mutant("os-error-without-details", "拒绝",
           "an OS error (the workspace gone, EACCES, EIO) is still an answer with its reason in details.error "
           "(os_error), and its message names the path the model gave, not the workspace's place on the disk",
           'return refused(Refusal("os_error", quoted=quote(path), reason=error.strerror))',
           'said = f"Cannot read {os.path.join(root, path)}: {error}"\n'
           'return {"content": [text(said)], "details": None, "isError": True}'),
    Mutant("path-normalised-to-nfc", "拒绝",
           "a name is its bytes: do not normalise the path's Unicode (café.txt in NFC and in NFD are two files)",
           'parts = components(path)\n    if any(',
           'parts = components(unicodedata.normalize("NFC", path))\nif any(',
           also=(("import stat\n", "import stat\nimport unicodedata\n"),)),
    Mutant("case-insensitive-fallback", "拒绝",
           "names are case-sensitive: a missing name is not_found, even when another differs from it only in case "
           "(readme.md is not README.md)",
           '            except FileNotFoundError:\n'
           '                raise Refusal("not_found", path=shown) from None\n',
           '            except FileNotFoundError:\n'
           '                other = [n for n in os.listdir(at.directory(dirs)) if n.lower() == name.lower()]\n'
           '                if not other:\n'
           '                    raise Refusal("not_found", path=shown) from None\n'
           '                name = other[0]\n'
           '                info = at.lstat(dirs, name)\n'),
    Mutant("dotfiles-hidden", "拒绝",
           "a name starting with a dot is a file like any other: .env or docs/.notes.md is read, not refused",
           'inside = display("/".join([*dirs, name]))',
           'inside = display("/".join([*dirs, name]))\nif name.startswith("."):\n    raise Refusal("not_found", path=shown)'),
    Mutant("root-not-made-absolute", "拒绝",
           "make the root absolute when the tool is made: a relative root otherwise follows the process's current "
           "directory wherever it goes later",
           'root = os.path.abspath(root)  # a later change of the current directory changes nothing',
           'root = os.fspath(root)'),
    Mutant("large-files-refused", "拒绝",
           "a large file is read like any other, only as far as its window needs: nothing promises a size limit",
           '    position = 0  # bytes read so far\n',
           '    position = 0  # bytes read so far\n'
           '    if os.fstat(fd).st_size > 10 * MIB:\n'
           '        raise Refusal("too_long/path", size=os.fstat(fd).st_size, limit=10 * MIB)\n'),

    # 截断: windows, caps and the notice that says how to read on
    Mutant("truncation-notice-missing", "截断",
           "a truncated read ends with a notice that says the file goes on and which offset reads on",
           'return {"content": [text(f"{body}\\n\\n{notice}")], "details": details}',
           'return {"content": [text(body)], "details": details}'),
    Mutant("next-offset-off-by-one", "截断",
           "nextOffset is the first line not shown (endLine + 1), or the model reads a line twice",
           'details["nextOffset"] = end + 1',
           'details["nextOffset"] = end'),
    Mutant("byte-cap-ignored", "截断",
           "stop before the text passes max_bytes, even when fewer than max_lines lines were read",
           'return self.kept_bytes + (1 if self.lines else 0) + len(line.encode("utf-8")) > self.max_bytes',
           'return False'),
    Mutant("limit-ignored", "截断",
           "a call's limit narrows the window below max_lines",
           'return len(self.lines) == min(self.limit or self.max_lines, self.max_lines)',
           'return len(self.lines) == self.max_lines',
           also=(('self.ended_by = "limit" if self.limit is not None and self.limit < self.max_lines else "max_lines"',
                  'self.ended_by = "max_lines"'),)),
    Mutant("offset-counted-from-zero", "截断",
           "offset is 1-based: offset=1 is the file's first line",
           'if self.line_no + 1 < self.start:  # before the window',
           'if self.line_no < self.start:'),
    Mutant("long-line-cut-by-characters", "截断",
           "cut an over-long line at max_bytes bytes (on a character boundary), not max_bytes characters",
           'self.lines.append(line.encode("utf-8")[:self.max_bytes].decode("utf-8", "ignore"))',
           'self.lines.append(line[:self.max_bytes])'),
    Mutant("byte-cap-counts-characters", "截断",
           "max_bytes counts UTF-8 bytes, not characters: é is 2 bytes, 汉 3, 😀 4",
           'return self.kept_bytes + (1 if self.lines else 0) + len(line.encode("utf-8")) > self.max_bytes',
           'return self.kept_bytes + (1 if self.lines else 0) + len(line) > self.max_bytes',
           also=(('self.kept_bytes += (1 if self.lines else 0) + len(line.encode("utf-8"))',
                  'self.kept_bytes += (1 if self.lines else 0) + len(line)'),)),
    Mutant("byte-cap-counts-a-newline-per-line", "截断",
           "max_bytes bounds the text shown: the lines and the newlines between them, not a newline after the last",
           'return self.kept_bytes + (1 if self.lines else 0) + len(line.encode("utf-8")) > self.max_bytes',
           'return self.kept_bytes + 1 + len(line.encode("utf-8")) > self.max_bytes'),
    Mutant("byte-cap-one-short", "截断",
           "a window of exactly max_bytes bytes fits: stop only when the next line would go past it",
           'return self.kept_bytes + (1 if self.lines else 0) + len(line.encode("utf-8")) > self.max_bytes',
           'return self.kept_bytes + (1 if self.lines else 0) + len(line.encode("utf-8")) >= self.max_bytes'),
    Mutant("long-line-cut-with-replacement", "截断",
           "cut an over-long line on a character boundary: a character cut in two is left out, not shown as U+FFFD",
           'self.lines.append(line.encode("utf-8")[:self.max_bytes].decode("utf-8", "ignore"))',
           'self.lines.append(line.encode("utf-8")[:self.max_bytes].decode("utf-8", "replace"))'),
    Mutant("long-line-notice-counts-characters", "截断",
           "the notice of an over-long line says how many bytes it shows, not characters",
           'shown=len(body.encode("utf-8")),',
           'shown=len(body),'),
    Mutant("limit-may-exceed-max-lines", "截断",
           "a call's limit narrows the window; it never widens it past max_lines",
           'return len(self.lines) == min(self.limit or self.max_lines, self.max_lines)',
           'return len(self.lines) == (self.limit or self.max_lines)'),
    Mutant("truncated-at-the-exact-end", "截断",
           "say the file goes on only when a line follows the window: a file that ends right after it is not truncated",
           '        for line in complete:\n'
           '            if self.take(line):\n'
           '                return True\n',
           '        for line in complete:\n'
           '            if self.take(line):\n'
           '                return True\n'
           '        if self.full() and self.line_no + 1 > self.start:\n'
           '            return self.take("")\n'),
    Mutant("crlf-translated", "截断",
           "lines end at \\n only and the text comes back as the file holds it: a \\r stays (no universal newlines)",
           '*complete, self.partial = (self.partial + piece).split("\\n")',
           '*complete, self.partial = (self.partial + piece.replace("\\r\\n", "\\n")).split("\\n")'),
    Mutant("cr-ends-a-line", "截断",
           "lines end at \\n only: a lone \\r is part of a line, and the \\r of \\r\\n stays at the end of it",
           '*complete, self.partial = (self.partial + piece).split("\\n")',
           '*complete, self.partial = re.split(r"\\r\\n|\\r|\\n", self.partial + piece)',
           also=(("import stat\n", "import re\nimport stat\n"),)),
    Mutant("bom-stripped", "截断",
           "the text comes back exactly as the file holds it, a byte order mark included",
           'decoder = codecs.getincrementaldecoder("utf-8")("strict")',
           'decoder = codecs.getincrementaldecoder("utf-8-sig")("strict")'),
    Mutant("long-line-read-to-its-end", "截断",
           "stop reading a line once it passes max_bytes: a read goes only as far as its window needs, not to the "
           "end of an over-long line (whose bytes further on may not even be text)",
           '(self.full() or self.too_big(self.partial))',
           'self.full()'),

    # 中止: large reads can be stopped
    Mutant("abort-ignored", "中止",
           "check the abort signal between chunks: an aborted run's read stops with an aborted error result",
           'if context.signal is not None and context.signal.aborted:',
           'if False:'),
    Mutant("progress-never-reported", "中止",
           "report progress while a long read skips to a far offset, so it can be watched and stopped",
           'context.report_progress([text(PROGRESS.format(mib=position // MIB, path=shown))])',
           'pass'),
    Mutant("abort-checked-only-at-start", "中止",
           "check the abort signal between every two chunks, not only before the first",
           'if context.signal is not None and context.signal.aborted:',
           'if context.signal is not None and context.signal.aborted and position == 0:'),
    Mutant("never-yields-between-chunks", "中止",
           "yield to the event loop between chunks (await asyncio.sleep(0)): an abort can only arrive then",
           'await asyncio.sleep(0)  # an abort, a cancellation or another tool of the batch gets in here',
           'pass'),
    Mutant("signal-assumed-present", "中止",
           "a tool may be called without a signal (context.signal is None): check it before asking whether it aborted",
           'if context.signal is not None and context.signal.aborted:',
           'if context.signal.aborted:'),
    Mutant("abort-checked-after-each-chunk", "中止",
           "check the abort signal before each chunk is read, the first one included: a read that one chunk "
           "answers (an empty file, a window of one line) must stop too when its signal is already aborted",
           '        if context.signal is not None and context.signal.aborted:  # before every chunk, the first included\n'
           '            raise Refusal("aborted", path=shown)\n',
           '',
           also=(('        await asyncio.sleep(0)  # an abort, a cancellation or another tool of the batch gets in here',
                  '        if context.signal is not None and context.signal.aborted:\n'
                  '            raise Refusal("aborted", path=shown)\n'
                  '        await asyncio.sleep(0)'),)),
    Mutant("empty-file-fast-path", "中止",
           "an empty file is read like any other: an aborted signal stops its read too",
           '    position = 0  # bytes read so far\n',
           '    position = 0  # bytes read so far\n'
           '    if os.fstat(fd).st_size == 0:\n'
           '        window.total_lines = 0\n'
           '        return window\n'),
    Mutant("abort-checked-every-16-chunks", "中止",
           "check the abort signal before every chunk, not every 16th: once it is aborted, a read reads no more",
           'if context.signal is not None and context.signal.aborted:',
           'if context.signal is not None and context.signal.aborted and position % (16 * CHUNK_BYTES) == 0:'),
    Mutant("yields-every-16-chunks", "中止",
           "yield to the event loop after every chunk, not every 16th: an abort, a cancellation or another tool "
           "gets in only when you yield",
           '        await asyncio.sleep(0)  # an abort, a cancellation or another tool of the batch gets in here',
           '        if position % (16 * CHUNK_BYTES) == 0:\n'
           '            await asyncio.sleep(0)'),
    Mutant("file-descriptor-leaked-on-cancel", "中止",
           "close the file in a finally, not in an except Exception: a cancelled read (CancelledError is no "
           "Exception) otherwise leaves its descriptor open",
           '            try:\n'
           '                await read_window(fd, shown, window, context)\n'
           '            finally:  # however the read ends (a refusal, a cancellation), its file is closed\n'
           '                os.close(fd)\n',
           '            try:\n'
           '                await read_window(fd, shown, window, context)\n'
           '            except Exception:\n'
           '                os.close(fd)\n'
           '                raise\n'
           '            os.close(fd)\n'),
]
