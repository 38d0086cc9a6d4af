"""Chapter 09: the edit tool. One class per section; `pytest -k <section>` selects it.

Most scenarios are plans run as the generated ones are (chapters.ch09_edit_tool.scenarios): a
workspace beside chapter 08's secret, edits through the chapter 06 executor, and what they left on disk,
in the chapter's notation. The README round trips run in the chapter 07 loop.
"""

import os
from pathlib import Path

import pytest

from course.recorder.generated import generated_scenarios
from course.recorder.harness import load_checkpoint, load_prerequisite, run_loop
from course.recorder.record import jsonable
from chapters.ch09_edit_tool.scenarios import run_plan
from course.runtime import readme_example as readme
from course.runtime.messages import assistant_message, text, tool_call, user_message
from course.runtime.scripted import ScriptedModel
from course.runtime.tools import Registry

README = "# tiny-pi\nA small agent runtime.\n"
LINKS = [{"path": "docs/readme", "type": "link", "target": "../README.md"},
         {"path": "out", "type": "link", "target": "{tmp}/secret.txt"}]


@pytest.fixture
def ch09():
    return load_checkpoint("ch09_edit_tool")


@pytest.fixture
def ch07():
    return load_prerequisite("ch07_agent_loop")


def plan(content: str | bytes, *edits: tuple, mode: int | None = None, fail: bool = False) -> dict:
    """README.md holding `content` (and LINKS), and edits of (path, oldText, newText) or (arguments dict)."""
    data = content if isinstance(content, bytes) else content.encode()
    entry = {"path": "README.md", "type": "file", "hex": data.hex(), **({"mode": mode} if mode else {})}
    calls = [{"arguments": e if isinstance(e, dict) else dict(zip(("path", "oldText", "newText"), e)),
              **({"failWrite": True} if fail else {})} for e in edits]
    return {"entries": [entry, *LINKS], "edits": calls}


async def edited(ch09, content, *edits, **options) -> dict:
    return await run_plan(plan(content, *edits, **options), lambda module: ch09)


def first_result(record: dict) -> dict:
    """The first edit's result, or {} when there is none (the tool was not made, the edit raised)."""
    edits = record.get("edits") or [{}]
    return edits[0].get("result") or {}


def file_after(record: dict, path: str) -> str:
    """A file after the edits as the record shows it ("0644 <hex>", "-> target"), or "" when it is not there."""
    return record.get("files", {}).get("{tmp}/ws/" + path, "")


def edit_call(call_id: str, old: str, new: str, path: str = "README.md") -> dict:
    return tool_call(call_id, "edit", {"path": path, "oldText": old, "newText": new})


@pytest.mark.section("编辑往返")
class TestEditRoundTrip:
    @pytest.mark.cites("round-trip", "file-changed")
    async def test_readme_edit_round_trip(self, ch07, ch09, tmp_path, snapshot):
        """The model edits README.md in the chapter 07 loop: the result carries the diff, the file changes."""
        (tmp_path / "README.md").write_text(README)
        model = ScriptedModel([assistant_message([edit_call("call-1", "# tiny-pi", "# pi-mono")], "toolUse"),
                               assistant_message([text("已把项目名改成 pi-mono。")], "stop")])
        context = {"systemPrompt": readme.SYSTEM_PROMPT, "messages": [user_message("把 README.md 里的项目名改成 pi-mono。")]}
        run = await run_loop(ch07, model=model, context=context, tools=Registry([ch09.create_edit_tool(tmp_path)]))
        assert (tmp_path / "README.md").read_text() == "# pi-mono\nA small agent runtime.\n"
        assert run == snapshot

    @pytest.mark.cites("ambiguous", "round-trip")
    async def test_an_ambiguous_edit_is_retried_with_more_context(self, ch07, ch09, tmp_path, snapshot):
        """The model's first oldText matches twice; it reads the refusal and sends the line around it instead."""
        (tmp_path / "README.md").write_text("name = tiny\nkind = tiny\n")
        answers = [assistant_message([edit_call("call-1", "tiny", "pi")], "toolUse"),
                   assistant_message([edit_call("call-2", "kind = tiny", "kind = pi")], "toolUse"),
                   assistant_message([text("改好了。")], "stop")]
        run = await run_loop(ch07, model=ScriptedModel(answers), context=readme.context(),
                             tools=Registry([ch09.create_edit_tool(tmp_path)]))
        assert (tmp_path / "README.md").read_text() == "name = tiny\nkind = pi\n"
        assert run == snapshot

    @pytest.mark.cites("root-not-directory")
    def test_a_root_that_is_not_a_directory_is_refused_when_the_tool_is_made(self, ch09, tmp_path, snapshot):
        """create_edit_tool on a file raises ValueError at once."""
        (tmp_path / "file").write_text("")
        with pytest.raises(ValueError) as raised:
            ch09.create_edit_tool(tmp_path / "file")
        message = str(raised.value).replace(str(tmp_path), "{tmp}")
        assert "is not a directory" in message
        assert {"kind": "raised", "raised": type(raised.value).__name__, "message": message, "about": "a file as root"} \
            == snapshot

    @pytest.mark.cites("schema")
    @pytest.mark.parametrize("arguments", [{"path": "README.md", "oldText": "tiny"},
                                           {"path": "README.md", "oldText": 1, "newText": "x"},
                                           {"path": "README.md", "oldText": "a", "newText": "b", "all": True}],
                             ids=["no_new_text", "number", "extra"])
    async def test_bad_arguments_are_stopped_by_the_schema(self, ch09, arguments, snapshot):
        """Arguments outside the schema never reach the tool, and the file stays as it was."""
        record = await edited(ch09, README, arguments)
        assert first_result(record).get("isError") is True
        assert record == snapshot


@pytest.mark.section("唯一匹配")
class TestOneMatch:
    CASES = {
        "one": (README, "tiny-pi", "pi-mono"),
        "second_line": (README, "small", "tiny"),
        "empty": (README, "", "x"),
        "no_change": (README, "tiny", "tiny"),
        "no_match": (README, "tiny-py", "pi"),
        "spaces_matter": ("    indented\n", "  indented ", "x"),
        "twice": ("a = 1\nb = 1\nc = 2\nd = 1\n", " = 1", " = 3"),
        "twice_on_one_line": ("x x\ny\n", "x", "z"),
        "overlapping": ("aaa\n", "aa", "X"),
        "new_text_holds_old": ("one\ntwo\n", "one", "one one"),
    }

    @pytest.mark.cites(one=("one-place-only", "edited-line"), second_line=("edited-line",),
                       empty=("empty-old-text", "arguments-first"), no_change=("no-change", "arguments-first"),
                       no_match=("no-match",), spaces_matter=("no-match",), twice=("ambiguous", "ambiguous-lines"),
                       twice_on_one_line=("ambiguous-lines",), overlapping=("count-overlapping",),
                       new_text_holds_old=("one-place-only",))
    @pytest.mark.parametrize("case", list(CASES))
    async def test_exactly_one_match_is_replaced(self, ch09, case, snapshot):
        """One match is replaced, and only it; none or several are refused saying how to fix oldText."""
        content, old, new = self.CASES[case]
        record = await edited(ch09, content, ("README.md", old, new))
        assert record == snapshot


@pytest.mark.section("差异")
class TestDiff:
    LONG = "".join(f"line {n}\n" for n in range(1, 13))
    CASES = {
        "middle": (LONG, "line 6\nline 7\n", "line six\n"),
        "first_line": (LONG, "line 1\n", "first\nline 1\n"),
        "last_line_without_newline": ("a\nb\nc", "c", "the end"),
        "crlf": ("one\r\ntwo\r\nthree\r\n", "two", "2"),
    }

    @pytest.mark.cites("diff-how", "diff-direction", crlf=("diff-normalised",))
    @pytest.mark.parametrize("case", list(CASES))
    async def test_the_diff_goes_from_old_to_new(self, ch09, case, snapshot):
        """details.diff is difflib's unified diff of the lines before and after, a/ to b/, 3 lines of context."""
        record = await edited(ch09, self.CASES[case][0], ("README.md", *self.CASES[case][1:]))
        assert record == snapshot
        diff = str((first_result(record).get("details") or {}).get("diff"))  # (in a masked grade: masked names)
        assert diff.startswith("--- a/README.md\n+++ b/README.md\n@@ ") and "\r" not in diff


@pytest.mark.section("编码与换行")
class TestEncodingAndLineEndings:
    CASES = {
        "crlf": (b"one\r\ntwo\r\n", "one\ntwo", "1\n2"),
        "crlf_spelled_by_the_model": (b"one\ntwo\n", "one\r\ntwo", "1\r\n2"),
        "bom": ("\ufeff# tiny-pi\n".encode(), "# tiny-pi", "# pi"),
        "bom_and_crlf": ("\ufeffa\r\nb\r\n".encode(), "b", "c\nd"),
        "lone_cr": (b"a\rb\nc\n", "b\nc", "B\nC"),
        "mixed_crlf_first": (b"a\r\nb\nc\n", "c", "C"),
        "mixed_lf_first": (b"a\nb\r\nc\n", "c", "C"),
        "binary": (b"TOP\0SECRET", "TOP", "x"),
        "latin1": ("café au lait\n".encode("latin-1"), "au", "x"),
    }

    @pytest.mark.cites(crlf=("line-ending", "normalise", "restore"), crlf_spelled_by_the_model=("normalise",),
                       bom=("bom", "restore"), bom_and_crlf=("bom", "line-ending", "restore"), lone_cr=("lone-cr",),
                       mixed_crlf_first=("mixed",), mixed_lf_first=("mixed",), binary=("utf8-only",),
                       latin1=("utf8-only",))
    @pytest.mark.parametrize("case", list(CASES))
    async def test_the_file_keeps_its_bom_and_line_endings(self, ch09, case, snapshot):
        """The edit matches on text with \\n breaks and no BOM, and writes the file back as it was spelled."""
        content, old, new = self.CASES[case]
        assert await edited(ch09, content, ("README.md", old, new)) == snapshot


@pytest.mark.section("原子写入")
class TestAtomicWrite:
    @pytest.mark.cites("write-failed")
    async def test_a_failed_rename_leaves_the_file_and_no_temporary_file(self, ch09, snapshot):
        """os.replace fails: the result is write_failed, README.md is unchanged, no temporary file is left."""
        record = await edited(ch09, README, ("README.md", "tiny-pi", "pi-mono"), fail=True)
        assert first_result(record).get("details") == {"error": "write_failed"}
        assert record == snapshot

    @pytest.mark.cites("temp-then-rename", "same-directory")
    async def test_a_reader_sees_the_whole_old_file_until_the_rename(self, ch09, tmp_path, monkeypatch, snapshot):
        """At the moment of the rename, README.md still holds the whole old text, and the file renamed over it,
        in the same directory, the whole new text."""
        (tmp_path / "README.md").write_text(README)
        seen, real = [], os.replace

        def replace(src, dst, *args, **kwargs):
            seen.append({"target": Path(dst).read_text(), "renamed": Path(src).read_text(),
                         "sameDirectory": os.path.dirname(os.path.abspath(src)) == str(tmp_path)})
            return real(src, dst, *args, **kwargs)

        monkeypatch.setattr(os, "replace", replace)
        monkeypatch.setattr(os, "rename", replace)
        tool = ch09.create_edit_tool(tmp_path)
        result = await tool.execute({"path": "README.md", "oldText": "tiny-pi", "newText": "pi-mono"}, None)
        monkeypatch.undo()
        assert seen == [{"target": README, "renamed": README.replace("tiny-pi", "pi-mono"), "sameDirectory": True}]
        assert sorted(os.listdir(tmp_path)) == ["README.md"]
        assert jsonable({"kind": "facts", "facts": {"renames": seen, "isError": result.get("isError", False)}}) == snapshot

    @pytest.mark.cites("mode")
    @pytest.mark.parametrize("mode", [0o755, 0o600], ids=["script", "private"])
    async def test_the_file_keeps_its_permission_bits(self, ch09, mode, snapshot):
        """An executable script stays executable, a private file private."""
        record = await edited(ch09, "#!/bin/sh\necho hi\n", ("README.md", "hi", "hello"), mode=mode)
        assert file_after(record, "README.md").startswith(f"{mode:04o} ")
        assert record == snapshot

    @pytest.mark.cites("through-links")
    async def test_an_edit_through_a_link_changes_its_target_and_keeps_the_link(self, ch09, snapshot):
        """docs/readme -> ../README.md: the edit changes README.md, and docs/readme is still the link."""
        record = await edited(ch09, README, ("docs/readme", "tiny-pi", "pi-mono"))
        assert file_after(record, "docs/readme") == "-> ../README.md"
        assert record == snapshot

    @pytest.mark.cites("batch-of-edits")
    async def test_two_edits_of_one_file_in_one_batch_both_land(self, ch07, ch09, tmp_path, snapshot):
        """Two calls of one assistant message edit README.md: whichever runs second reads what the first wrote.
        (Which one runs first is the loop's business: the snapshot holds nothing that depends on it.)"""
        (tmp_path / "README.md").write_text(README)
        calls = [edit_call("call-1", "tiny-pi", "pi-mono"), edit_call("call-2", "small", "tiny")]
        model = ScriptedModel([assistant_message(calls, "toolUse"), assistant_message([text("done")], "stop")])
        run = await run_loop(ch07, model=model, context=readme.context(), tools=Registry([ch09.create_edit_tool(tmp_path)]))
        results = [{"isError": m["isError"], "content": m["content"]} for m in run.messages if m["role"] == "toolResult"]
        after = (tmp_path / "README.md").read_text()
        assert after == "# pi-mono\nA tiny agent runtime.\n"
        assert jsonable({"kind": "facts", "facts": {"results": results, "README.md after": after}}) == snapshot


@pytest.mark.section("越界")
class TestWorkspaceBoundary:
    ESCAPES = {"parent": "../secret.txt", "absolute_outside": "{tmp}/secret.txt", "link_outside": "out",
               "directory": "docs", "missing": "nope.md", "absolute_inside": "{root}/README.md"}

    @pytest.mark.cites("refusals-reused", "nothing-outside", "workspace-reused", missing=("no-create",))
    @pytest.mark.parametrize("case", list(ESCAPES))
    async def test_chapter_08_s_boundary_holds_for_edits(self, ch09, case, snapshot):
        """Chapter 08's refusals are the edit's; nothing outside the workspace is changed, nothing is created."""
        record = await edited(ch09, "TOP SECRET\n", (self.ESCAPES[case], "TOP", "x"))
        assert [path for path in record.get("files", {}) if not path.startswith("{tmp}/ws/")] == []
        assert record == snapshot

    @pytest.mark.cites("check-order")
    async def test_the_arguments_are_checked_before_the_path(self, ch09, snapshot):
        """An empty oldText for a path outside is refused as empty_old_text: the arguments come first."""
        record = await edited(ch09, README, ("../secret.txt", "", "x"))
        assert first_result(record).get("details") == {"error": "empty_old_text"}
        assert record == snapshot


test_generated = generated_scenarios("ch09_edit_tool")
