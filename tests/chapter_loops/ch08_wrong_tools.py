"""Realistic wrong chapter 08 read tools: each is one of the tools written from the chapter text with one of the
chapter's sentences broken, as a student might break it. The chapter track must fail each, and among what its
failing checks quote must be that sentence (`sentence`, a key of the chapter's CITES)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).parent


@dataclass(frozen=True)
class WrongTool:
    name: str
    base: str
    """The tool it is made from (a file of this folder)."""
    find: str
    replace: str
    sentence: str
    """The chapter's sentence the mistake breaks: a key of chapters/ch08_workspace_read/judge/contract.py's CITES."""
    caught_by: tuple[str, ...]
    """Fixed tests that hold a tool to that sentence: each must fail."""

    def source(self, reference: str = "") -> str:
        base = (HERE / self.base).read_text(encoding="utf-8")
        if base.count(self.find) != 1:
            raise ValueError(f"{self.name}: {self.find!r} occurs {base.count(self.find)} times in {self.base}")
        return base.replace(self.find, self.replace)


WRONG_TOOLS = [
    # The walk meets ".." from a link's target anyway, so a ".." in the path looks harmless to drop.
    WrongTool("parent-left-to-the-walk", "ch08_path_walk.py",
              '    if ".." in parts:\n        raise Refusal("parent_traversal", quoted=quoted(path))\n', "",
              "parent", ("TestNothingOutsideTheRootIsOpened::test_escape_attempt_is_refused[parent]",
                         "TestRefusals::test_refused_read[parent]")),
    # os.stat instead of os.lstat: the OS follows every link, the tool never sees one.
    WrongTool("links-followed-by-the-os", "ch08_walker.py",
              "info = os.lstat(place)", "info = os.stat(place)",
              "walk", ("TestNothingOutsideTheRootIsOpened::test_escape_attempt_is_refused[link_absolute]",
                       "TestNothingOutsideTheRootIsOpened::test_escape_attempt_is_refused[link_chain]")),
    # An absolute path compared with the root as a string: /tmp/demo/ws-evil passes for /tmp/demo/ws.
    WrongTool("root-compared-as-a-string", "ch08_path_walk.py",
              "    for base in (components(root), components(real_root)):\n"
              "        if parts[:len(base)] == base:\n"
              "            return parts[len(base):]\n",
              "    joined = \"/\" + \"/\".join(parts)\n"
              "    for base in (root, real_root):\n"
              "        if joined.startswith(base):\n"
              "            return components(joined[len(base):])\n",
              "absolute-by-components",
              ("TestNothingOutsideTheRootIsOpened::test_escape_attempt_is_refused[absolute_prefix_sibling]",)),
    # nextOffset = endLine: the model reads the last line of each page twice.
    WrongTool("next-offset-off-by-one", "ch08_path_walk.py",
              '        details["nextOffset"] = end + 1\n', '        details["nextOffset"] = end\n',
              "reassemble", ("TestTruncation::test_reading_on_reassembles_the_whole_file",
                             "TestTruncation::test_window[line_cap]")),
    # The notice glued to the text by one newline, not after a blank line.
    WrongTool("notice-without-a-blank-line", "ch08_walker.py",
              'return {"content": [text(f"{body}\\n\\n{notice}")], "details": details}',
              'return {"content": [text(f"{body}\\n{notice}")], "details": details}',
              "notice-format", ("TestTruncation::test_reading_on_reassembles_the_whole_file",)),
    # offset counted from 0: offset=1 skips the file's first line.
    WrongTool("offset-counted-from-zero", "ch08_walker.py",
              'if state["line"] + 1 < offset:', 'if state["line"] < offset:',
              "window-example", ("TestTruncation::test_window[line_cap]",)),
    # The signal checked after the chunk: a read that one chunk answers ignores an abort made before it.
    WrongTool("abort-checked-after-the-chunk", "ch08_walker.py",
              "        if ctx.signal is not None and ctx.signal.aborted:\n"
              "            raise Refused(\"aborted\", path=shown)\n"
              "        data = os.read(fd, CHUNK)\n",
              "        data = os.read(fd, CHUNK)\n"
              "        if data and ctx.signal is not None and ctx.signal.aborted:\n"
              "            raise Refused(\"aborted\", path=shown)\n",
              "aborted-even-small",
              ("TestAbort::test_an_aborted_signal_stops_a_read_of_one_chunk[empty_file]",)),
]
