"""Chapter 08's known mistakes: each patches checkpoints/ch08_workspace_read.py where the mistake lives
(one line where one line makes it; `also` where the mistake is several lines that belong together).

Left out: opening the file without O_NONBLOCK. Only the FIFO swapped in mid-read would catch it, and
only by blocking until the test's 5-second watchdog opens the FIFO's other end, on every gate run."""

from course.judge.mutants import Mutant

MUTANTS = [
    # 越界: paths and links that lead out of the workspace
    Mutant("parent-traversal-allowed", "越界",
           'refuse a path with a ".." component before opening anything: it may climb out of the workspace',
           'if ".." in parts:',
           'if False:'),
    Mutant("links-followed", "越界",
           "your tool lets the OS follow symbolic links (stat and open without O_NOFOLLOW), so a link inside "
           "the workspace reads a file outside it: meet each link yourself and check where it leads",
           'info = os.stat(name, dir_fd=here, follow_symlinks=False)',
           'info = os.stat(name, dir_fd=here, follow_symlinks=True)',
           also=(('os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC', 'os.O_DIRECTORY | os.O_CLOEXEC'),
                 ('os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK', 'os.O_RDONLY | os.O_NONBLOCK'))),
    Mutant("relative-link-targets-trusted", "越界",
           'your tool checks only absolute link targets: a relative target\'s ".." can climb out of the '
           "workspace too, and the walk must never go above the root",
           '                    elif escapes(target_parts, len(stack) - 1):\n'
           '                        raise link_outside(shown, inside)\n',
           '',
           also=(('if len(stack) == 1:', 'if len(stack) == 0:'),)),
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
    Mutant("type-unchecked-after-open", "越界",
           "check the type of what you opened (fstat on the fd): the file may have been swapped for a FIFO "
           "or a device between your check and your open",
           'check_file_type(os.fstat(fd).st_mode, shown)',
           'pass'),

    # 拒绝: refused reads are error results
    Mutant("refusal-raised", "拒绝",
           "a refused read is the tool's own answer: return an error result with details.error, "
           "do not let the refusal escape as an exception",
           '        except Refusal as refusal:\n'
           '            return {"content": [text(str(refusal))], "details": {"error": refusal.code}, "isError": True}\n',
           ''),
    Mutant("type-checked-only-after-open", "拒绝",
           "check the file's type before opening it: a FIFO, device or socket is refused without being opened",
           'check_file_type(info.st_mode, shown)',
           'pass'),
    Mutant("binary-not-detected", "拒绝",
           "a file with NUL bytes is binary: refuse it as binary, even where its bytes happen to decode",
           'if b"\\0" in chunk:',
           'if False:'),

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
           'if kept_bytes + separator + current_bytes > max_bytes:',
           'if False:'),
    Mutant("limit-ignored", "截断",
           "a call's limit narrows the window below max_lines",
           'capped_by = "limit" if limit is not None and limit < max_lines else "max_lines"',
           'capped_by = "max_lines"'),
    Mutant("offset-counted-from-zero", "截断",
           "offset is 1-based: offset=1 is the file's first line",
           'if line_no + 1 < start:',
           'if line_no < start:'),
    Mutant("long-line-cut-by-characters", "截断",
           "cut an over-long line at max_bytes bytes (on a character boundary), not max_bytes characters",
           'return line.encode("utf-8")[:max_bytes].decode("utf-8", "ignore")',
           'return line[:max_bytes]'),

    # 中止: large reads can be stopped
    Mutant("abort-ignored", "中止",
           "check the abort signal between chunks: an aborted run's read stops with an aborted error result",
           'if context.signal is not None and context.signal.aborted:',
           'if False:'),
    Mutant("progress-never-reported", "中止",
           "report progress while a long read skips to a far offset, so it can be watched and stopped",
           'context.report_progress([text(f"read {position} bytes of {shown}")])',
           'pass'),
]
