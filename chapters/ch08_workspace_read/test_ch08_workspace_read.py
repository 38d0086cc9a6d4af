"""Chapter 08: the workspace read tool. One class per section; `pytest -k <section>` selects it.

Every read goes through the chapter 06 executor (or the chapter 07 loop), as a model's call would.
The workspace sits in a temporary directory beside a secret file; no test snapshots an absolute path.
"""

import asyncio
import builtins
import errno
import io
import os
import socket
import stat
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from course.runtime import readme_example as readme
from course.runtime.abort import AbortController
from course.recorder.generated import generated_scenarios
from course.recorder.harness import load_checkpoint, load_prerequisite, run_loop
from course.recorder.mask import published_path
from course.recorder.record import jsonable
from chapters.ch08_workspace_read.scenarios import TIME_BOUND, bounded, hide
from course.runtime.messages import assistant_message, text, tool_call, user_message
from course.runtime.scripted import ScriptedModel
from course.runtime.tools import Registry, ToolExecutionContext

SECRET = "TOP SECRET: the launch codes"


@pytest.fixture
def ch08():
    return load_checkpoint("ch08_workspace_read")


@pytest.fixture
def ch07():
    return load_prerequisite("ch07_agent_loop")


@pytest.fixture
def ch06():
    return load_prerequisite("ch06_tool_execution")


@pytest.fixture
def place(tmp_path):
    """A fresh workspace beside a secret, for tests that change it."""
    return build_place(tmp_path)


@pytest.fixture(scope="module")
def shared_place(tmp_path_factory):
    """One workspace for the escape table, which only reads it."""
    return build_place(tmp_path_factory.mktemp("escapes"))


def build_place(tmp):
    """tmp/ws is the workspace; beside it a secret, a directory and a FIFO outside it, and a sibling
    `ws-evil` whose name starts with the workspace's; inside it files, and links in and out."""
    root = tmp / "ws"
    (tmp / "secret.txt").write_text(SECRET)
    (tmp / "outside").mkdir()
    (tmp / "outside" / "secret.txt").write_text(SECRET)
    (tmp / "ws-evil").mkdir()
    (tmp / "ws-evil" / "secret.txt").write_text(SECRET)
    os.mkfifo(tmp / "fifo")
    (root / "docs").mkdir(parents=True)
    (root / "a" / "b" / "c").mkdir(parents=True)
    (root / "README.md").write_text(readme.README + "\n")
    (root / "docs" / "guide.md").write_text("# Guide\nRead the docs.\n")
    links = {
        "link_abs": f"{tmp}/secret.txt",
        "link_rel": "../secret.txt",
        "outdir": f"{tmp}/outside",
        "a/b/c/deep": "../../../../secret.txt",
        "chain1": "chain2",
        "chain2": f"{tmp}/secret.txt",
        "slash": "/",
        "docs/up2": "../..",
        "docs/inner": "../a/b",
        "prefix": f"{root}-evil/secret.txt",
        "fifolink": f"{tmp}/fifo",
        "abs_in_then_up": f"{root}/../secret.txt",
        "dotdot_in_middle": "docs/../../secret.txt",
        "loop1": "loop2",
        "loop2": "loop1",
        "docs/readme": "../README.md",  # inside: allowed
        "abs_inside": f"{root}/docs/guide.md",  # inside: allowed
    }
    for name, target in links.items():
        os.symlink(target, root / name)
    return SimpleNamespace(tmp=tmp, root=root)


def tool_context(signal=None, progress=None):
    return ToolExecutionContext(signal=signal, report_progress=progress or (lambda content: None))


async def read(ch06, tool, arguments, context=None):
    """One `read` call through the chapter 06 executor, as the loop would make it. A read still running
    after TIME_BOUND seconds (a link loop followed for ever, a blocking open) is interrupted, and its
    result says so."""
    outcome = await bounded(lambda: ch06.execute_tool_call(tool_call("call-1", "read", arguments), Registry([tool]),
                                                           context or tool_context()),
                            "fixed", {asyncio.current_task()})
    if "result" in outcome:
        return outcome["result"]
    what = f"did not finish within {TIME_BOUND} s" if outcome.get("timedOut") else f"raised {outcome.get('raised')}"
    return {"role": "toolResult", "toolCallId": "call-1", "toolName": "read", "isError": True,
            "content": [text(f"[the read {what}]")], "details": {"harness": what}}


def tool_result_record(result, place=None, **seen) -> dict:
    """A result as the fixed scenarios snapshot it, with what else the test saw; the temporary
    directory written as {tmp}."""
    record = jsonable({"kind": "tool-result", "result": result, **seen})
    return hide(record, str(place.tmp)) if place is not None else record


def reads_record(reads, place, **seen) -> dict:
    """Reads as the generated scenarios show them: [(arguments, result, paths opened outside)]."""
    record = {"kind": "workspace-reads", "caps": {}, "reads": [
        {"arguments": arguments, "result": result, "openedOutside": opened} for arguments, result, opened in reads],
        **seen}
    return hide(jsonable(record), str(place.tmp))


def raised_now(make, *, about: str) -> dict:
    """What calling `make()` raised, as a record (harness.raised, for a call that is not awaited)."""
    try:
        make()
    except Exception as error:
        return jsonable({"kind": "raised", "raised": type(error).__name__, "message": str(error), "about": about})
    return {"kind": "raised", "raised": None, "message": "nothing was raised", "about": about}


def blocked(fired: list, result) -> bool:
    """Whether a read waited on a FIFO: until the watchdog opened its other end, or until its time bound stopped
    it (which comes first depends on what ran before: a bound is shortened once a read ran out of time)."""
    return bool(fired) or "harness" in (result.get("details") or {})


def result_text(result) -> str:
    return "".join(block["text"] for block in result["content"])


def refusal_problem(result, code: str) -> str:
    """A failed refusal check in one line (the line a failure report shows): the code expected, what came."""
    try:
        said = repr(result_text(result)[:160])
    except (KeyError, TypeError):
        said = f"content {result.get('content')!r}"[:160]
    return (f"expected isError True and details {{'error': {code!r}}}; got isError {result.get('isError')!r} "
            f"and details {result.get('details')!r}: {said}")


def fd_path(fd: int) -> str:
    return published_path(os.readlink(f"/proc/self/fd/{fd}"))  # (masked names as the test knows them)


@pytest.fixture
def opened(monkeypatch):
    """Every path the code under test opens successfully (os.open, open, io.open), as the kernel names it."""
    paths: list[str] = []
    real_os_open, real_open = os.open, builtins.open

    def spy_os_open(*args, **kwargs):
        fd = real_os_open(*args, **kwargs)
        paths.append(fd_path(fd))
        return fd

    def spy_open(*args, **kwargs):
        file = real_open(*args, **kwargs)
        if hasattr(file, "fileno"):
            paths.append(fd_path(file.fileno()))
        return file

    monkeypatch.setattr(os, "open", spy_os_open)
    monkeypatch.setattr(builtins, "open", spy_open)
    monkeypatch.setattr(io, "open", spy_open)
    return paths


def outside(paths: list[str], root: Path) -> list[str]:
    real_root = os.path.realpath(root)
    return [p for p in paths if p != real_root and not p.startswith(real_root + os.sep)]


@pytest.fixture
def fifo_watchdog():
    """Unblocks a reader stuck on a FIFO (by opening its write end) so a blocking tool fails, not hangs."""
    armed: list[threading.Timer] = []
    fired: list[str] = []

    def arm(path):
        def unblock():
            fired.append(str(path))
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass  # no reader is blocked on it

        timer = threading.Timer(5.0, unblock)
        timer.start()
        armed.append(timer)
        return fired

    yield arm
    for timer in armed:
        timer.cancel()


def at_the_first_stat_of(name: str, swap, monkeypatch) -> list:
    """Calls `swap()` right after the code under test first stats (os.stat or os.lstat, by path or relative to
    a directory fd) a path whose last component is `name`: between its check and its open. The list it
    returns gets an item once the swap is made."""
    swapped: list[bool] = []

    def swap_once(real):
        def checked(path, *args, **kwargs):
            info = real(path, *args, **kwargs)
            if (not swapped and isinstance(path, (str, bytes, os.PathLike))
                    and os.path.basename(os.fsdecode(path).rstrip("/")) == name):
                swap()
                swapped.append(True)
            return info
        return checked

    monkeypatch.setattr(os, "stat", swap_once(os.stat))
    monkeypatch.setattr(os, "lstat", swap_once(os.lstat))
    return swapped


@pytest.mark.asyncio
@pytest.mark.section("真实往返")
class TestRealReadRoundTrip:
    @pytest.mark.cites("real-file", "content-lines")
    async def test_readme_round_trip_reads_the_real_file(self, ch07, ch08, place, snapshot):
        """The chapter 07 README round trip, end to end, with the real read tool on a real README.md."""
        model = ScriptedModel([readme.first_answer(), readme.answer_from_read_result])
        run = await run_loop(ch07, model=model, context=readme.context(),
                             tools=Registry([ch08.create_read_tool(place.root)]))
        assert run == snapshot  # a temporary path in it would differ from the snapshot, as would the secret
        # (The snapshot's `invariants hold` is the judge's check of the loop's promises: a graded test process
        # may not import the judge, so `run.problems` is not asked for here.)
        assert (run.reason, run.steps, run.executions) == ("stop", 2, ["read"])
        assert run.messages[2]["content"] == [text(readme.README)]
        assert run.messages[3]["content"] == [text("项目名是 tiny-pi。")]

    @pytest.mark.cites("follows-disk")
    async def test_the_answer_follows_the_file_on_disk(self, ch07, ch08, place, snapshot):
        """Changing README.md on disk changes the final answer: the run really depends on the file."""
        (place.root / "README.md").write_text("# pi-mono\nThe original.\n")
        model = ScriptedModel([readme.first_answer(), readme.answer_from_read_result])
        run = await run_loop(ch07, model=model, context=readme.context(),
                             tools=Registry([ch08.create_read_tool(place.root)]))
        assert run.messages[-1]["content"] == [text("项目名是 pi-mono。")]
        assert run == snapshot

    @pytest.mark.cites("refusal-is-result", "parent", "no-secret")
    async def test_an_escape_attempt_in_the_loop_is_an_error_result(self, ch07, ch08, place, snapshot):
        """A model asking for ../secret.txt gets an error result it can read; the secret never appears."""
        first = assistant_message([text("我先读取项目说明。"), readme.read_call(path="../secret.txt")], "toolUse")
        model = ScriptedModel([first, readme.answer_from_read_result])
        run = await run_loop(ch07, model=model, context=readme.context(),
                             tools=Registry([ch08.create_read_tool(place.root)]))
        assert (run.reason, run.messages[2]["isError"]) == ("stop", True)
        assert run == snapshot  # shows the secret, or a traceback, if the result held them

    @pytest.mark.cites("reassemble", "cap-max-lines", "details")
    async def test_reading_on_from_the_notice_in_the_loop(self, ch07, ch08, place, snapshot):
        """A model that follows the truncation notice's offset reads a long file to its end, page by page."""
        (place.root / "NOTES.md").write_text("".join(f"note {n}\n" for n in range(1, 8)))

        def next_page(request):
            last = request["messages"][-1]
            if last["role"] == "toolResult" and last["details"].get("truncated"):
                offset = last["details"]["nextOffset"]
                call = tool_call(f"call-{offset}", "read", {"path": "NOTES.md", "offset": offset})
                return assistant_message([call], "toolUse")
            if last["role"] == "toolResult":
                return assistant_message([text(f"读到第 {last['details']['endLine']} 行，文件结束。")], "stop")
            return assistant_message([tool_call("call-1", "read", {"path": "NOTES.md"})], "toolUse")

        context = {"systemPrompt": readme.SYSTEM_PROMPT, "messages": [user_message("请读完 NOTES.md。")]}
        run = await run_loop(ch07, model=ScriptedModel([next_page] * 5), context=context,
                             tools=Registry([ch08.create_read_tool(place.root, max_lines=3)]))
        pages = [result_text(m).split("\n\n[")[0] for m in run.messages if m["role"] == "toolResult"]
        assert "\n".join(pages) == "\n".join(f"note {n}" for n in range(1, 8))
        assert (run.reason, len(run.executions)) == ("stop", 3)
        assert run == snapshot


# Escape attempts: (path, with {tmp} and {root} filled in at run time; the refusal's details.error).
ESCAPES = {
    "parent": ("../secret.txt", "parent_traversal"),
    "parent_deep": ("../../../../../../../etc/passwd", "parent_traversal"),
    "parent_inner": ("docs/../../secret.txt", "parent_traversal"),
    "parent_dot": ("./../secret.txt", "parent_traversal"),
    "parent_bare": ("..", "parent_traversal"),
    "parent_trailing": ("docs/..", "parent_traversal"),
    "parent_after_file": ("README.md/../../secret.txt", "parent_traversal"),
    "absolute_outside": ("{tmp}/secret.txt", "outside_workspace"),
    "absolute_etc": ("/etc/passwd", "outside_workspace"),
    "absolute_root_then_up": ("{root}/../secret.txt", "parent_traversal"),
    "absolute_prefix_sibling": ("{root}-evil/secret.txt", "outside_workspace"),
    "absolute_proc_root": ("/proc/self/root{tmp}/secret.txt", "outside_workspace"),
    "absolute_inside_via_link": ("{root}/link_rel", "symlink_outside"),
    "link_absolute": ("link_abs", "symlink_outside"),
    "link_relative": ("link_rel", "symlink_outside"),
    "link_directory": ("outdir/secret.txt", "symlink_outside"),
    "link_deep": ("a/b/c/deep", "symlink_outside"),
    "link_chain": ("chain1", "symlink_outside"),
    "link_to_slash": ("slash/etc/passwd", "symlink_outside"),
    "link_directory_up": ("docs/up2/secret.txt", "symlink_outside"),
    "link_inside_then_out": ("docs/inner/c/deep", "symlink_outside"),
    "link_prefix_sibling": ("prefix", "symlink_outside"),
    "link_to_outside_fifo": ("fifolink", "symlink_outside"),
    "link_absolute_inside_then_up": ("abs_in_then_up", "symlink_outside"),
    "link_dotdot_in_middle": ("dotdot_in_middle", "symlink_outside"),
    "link_loop": ("loop1", "symlink_loop"),
    "nul_byte": ("README.md\0/../../secret.txt", "invalid_path"),
    "overlong_path": ("a/" * 2100 + "secret.txt", "too_long"),
    "overlong_component": ("x" * 256, "too_long"),
    "no_home_expansion": ("~/secret.txt", "not_found"),
    "no_url_decoding": ("%2e%2e/secret.txt", "not_found"),
    "backslash_is_a_name": ("..\\secret.txt", "not_found"),
    "file_url": ("file://{tmp}/secret.txt", "not_found"),
}


@pytest.mark.asyncio
@pytest.mark.section("越界")
class TestNothingOutsideTheRootIsOpened:
    @pytest.mark.parametrize("attempt", list(ESCAPES))
    @pytest.mark.cites(
        "opens-nothing-outside", "no-secret",
        parent=("parent", "check-order"), parent_deep=("parent",), parent_inner=("parent",),
        parent_dot=("parent", "split-only-slash"), parent_bare=("parent",), parent_trailing=("parent",),
        parent_after_file=("parent", "check-order"), absolute_outside=("outside",), absolute_etc=("outside",),
        absolute_root_then_up=("parent-before-absolute",), absolute_prefix_sibling=("absolute-by-components",),
        absolute_proc_root=("absolute-by-components",),
        absolute_inside_via_link=("absolute-by-components", "relative-target"),
        link_absolute=("absolute-target", "link-message"), link_relative=("relative-target",),
        link_directory=("absolute-target", "link-through-example"), link_deep=("relative-target",),
        link_chain=("walk", "absolute-target"), link_to_slash=("absolute-target",),
        link_directory_up=("relative-target",), link_inside_then_out=("relative-target", "inside-links"),
        link_prefix_sibling=("absolute-target", "absolute-by-components"), link_to_outside_fifo=("absolute-target",),
        link_absolute_inside_then_up=("climbs",), link_dotdot_in_middle=("relative-target",),
        link_loop=("symlink-limit",), nul_byte=("nul", "check-order"), overlong_path=("too-long-path",),
        overlong_component=("too-long-name",), no_home_expansion=("no-special",), no_url_decoding=("no-special",),
        backslash_is_a_name=("no-special",), file_url=("no-special",))
    async def test_escape_attempt_is_refused(self, ch06, ch08, shared_place, opened, attempt, snapshot):
        """Each escape attempt is an error result with its reason, shows no secret, and opens nothing outside."""
        opened.clear()  # only what the test body opens: a reporting plugin writes its file after set-up
        place = shared_place
        template, code = ESCAPES[attempt]
        path = template.format(tmp=place.tmp, root=place.root)
        result = await read(ch06, ch08.create_read_tool(place.root), {"path": path})
        assert (result["isError"], result.get("details")) == (True, {"error": code}), refusal_problem(result, code)
        assert SECRET not in result_text(result) and "Traceback" not in result_text(result)
        assert outside(opened, place.root) == []
        assert hide(jsonable({"kind": "refusal-check", "result": result, "openedOutside": outside(opened, place.root)}),
                    str(place.tmp)) == snapshot

    @pytest.mark.cites("inside-links", "absolute-inside", "opens-nothing-outside")
    async def test_links_that_stay_inside_are_followed(self, ch06, ch08, place, opened, snapshot):
        """Relative and absolute links whose targets lie inside the root read their target."""
        opened.clear()  # only what the test body opens: a reporting plugin writes its file after set-up
        tool = ch08.create_read_tool(place.root)
        reads, opened_any = [], False
        for arguments in [{"path": "docs/readme"}, {"path": "abs_inside"}, {"path": f"{place.root}/./docs//guide.md"}]:
            result = await read(ch06, tool, arguments)
            reads.append((arguments, result, outside(opened, place.root)))
            opened_any, opened[:] = opened_any or bool(opened), []
        assert [result_text(r) for _, r, _ in reads] == [readme.README] + ["# Guide\nRead the docs."] * 2
        assert opened_any and all(o == [] for _, _, o in reads)
        assert reads_record(reads, place, openedSomething=opened_any) == snapshot


def make_device(path: Path) -> None:
    try:
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # like /dev/null
    except PermissionError:
        pytest.skip("creating a device node needs CAP_MKNOD")


def make_socket(path: Path) -> None:
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.close()  # the socket file stays


# Refused reads that are not escapes: (what is placed at the path, the arguments, details.error).
REFUSALS = {
    "directory": (None, {"path": "docs"}, "directory"),
    "workspace_root": (None, {"path": "."}, "directory"),
    "missing_file": (None, {"path": "nope.md"}, "not_found"),
    "missing_directory": (None, {"path": "nope/x.md"}, "not_found"),
    "file_as_directory": (None, {"path": "README.md/x"}, "not_a_directory"),
    "fifo": (os.mkfifo, {"path": "pipe"}, "not_regular"),
    "device": (make_device, {"path": "null"}, "not_regular"),
    "socket": (make_socket, {"path": "agent.sock"}, "not_regular"),
    "binary": (lambda p: p.write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"), {"path": "logo.png"}, "binary"),
    "not_utf8": (lambda p: p.write_bytes("café au lait\n".encode("latin-1")), {"path": "latin1.txt"}, "not_utf8"),
    "empty_path": (None, {"path": ""}, "invalid_path"),
    "offset_past_the_end": (None, {"path": "README.md", "offset": 5}, "offset_beyond_end"),
    "parent": (None, {"path": "../secret.txt"}, "parent_traversal"),
    "absolute_outside": (None, {"path": "/etc/passwd"}, "outside_workspace"),
    "link_outside": (None, {"path": "outdir/secret.txt"}, "symlink_outside"),
    "link_loop": (None, {"path": "loop1"}, "symlink_loop"),
}


@pytest.mark.asyncio
@pytest.mark.section("拒绝")
class TestRefusals:
    @pytest.mark.parametrize("case", list(REFUSALS))
    @pytest.mark.cites(
        "refusal-shape", directory=("directory",), workspace_root=("root-directory", "ends-at-directory"),
        missing_file=("not-found-file", "not-found"), missing_directory=("not-found-directory", "not-found"),
        file_as_directory=("not-a-directory",), fifo=("fifo", "type-before-open"),
        device=("device", "type-before-open"), socket=("socket",), binary=("binary", "bytes-judged"),
        not_utf8=("not-utf8", "bytes-judged"), empty_path=("empty",), offset_past_the_end=("offset-beyond",),
        parent=("parent", "fields"), absolute_outside=("outside",), link_outside=("link-through-example",),
        link_loop=("loop", "symlink-limit"))
    async def test_refused_read(self, ch06, ch08, place, fifo_watchdog, snapshot, case):
        """Each refused read is an error result with a clear message and its reason in details.error."""
        make, arguments, code = REFUSALS[case]
        if make is not None:
            make(place.root / arguments["path"])
        fired = fifo_watchdog(place.root / arguments["path"])
        result = await read(ch06, ch08.create_read_tool(place.root), arguments)
        assert not blocked(fired, result), "the read blocked"
        assert (result["isError"], result.get("details")) == (True, {"error": code}), refusal_problem(result, code)
        assert tool_result_record(result, place, blocked=blocked(fired, result)) == snapshot

    @pytest.mark.parametrize("make", [os.mkfifo, make_device], ids=["fifo", "device"])
    @pytest.mark.cites("type-before-open")
    async def test_a_special_file_is_refused_without_being_opened(self, ch06, ch08, place, opened, make, snapshot):
        """A FIFO or device node is refused by its type before it is opened (opening one can block or act)."""
        make(place.root / "special")
        special = os.path.realpath(place.root / "special")
        # The probe's control, whatever the tool does: it must see an open of this very file.
        os.close(os.open(special, os.O_RDONLY | os.O_NONBLOCK))
        probe_sees_it = special in opened
        assert probe_sees_it, "the test's probe did not see the test itself open the special file"
        opened.clear()  # only what the read opens (a reporting plugin also writes its file after set-up)
        result = await read(ch06, ch08.create_read_tool(place.root), {"path": "special"})
        assert (result["isError"], result.get("details")) == (True, {"error": "not_regular"}), \
            refusal_problem(result, "not_regular")
        assert special not in opened, "the read opened the special file"
        assert tool_result_record(result, place, openedSpecial=special in opened, probeSeesOpens=probe_sees_it) \
            == snapshot

    @pytest.mark.parametrize("arguments", [{"path": 7}, {"path": "README.md", "offset": 0},
                                           {"path": "README.md", "limit": -1}, {"path": "README.md", "mode": "w"},
                                           {"offset": 2}])
    @pytest.mark.cites("schema")
    async def test_bad_arguments_are_stopped_by_the_schema(self, ch06, ch08, place, arguments, snapshot):
        """Arguments outside the tool's JSON Schema never reach it: the executor reports them."""
        result = await read(ch06, ch08.create_read_tool(place.root), arguments)
        assert result["isError"] is True and "Invalid arguments for tool read" in result_text(result)
        assert reads_record([(arguments, result, [])], place) == snapshot  # "refused by the schema"

    @pytest.mark.parametrize("case", ["root_gone", "permission_denied"])
    @pytest.mark.cites(root_gone=("root-opened",), permission_denied=("os-error", "os-calls"))
    async def test_an_os_error_is_still_an_answer(self, ch06, ch08, place, monkeypatch, case, snapshot):
        """The workspace directory gone after the tool was made, or a file the OS will not open (EACCES): an error
        result with details {"error": "os_error"}, naming the path as the model gave it, not the workspace's place."""
        tool = ch08.create_read_tool(place.root)
        if case == "root_gone":
            os.rename(place.root, place.tmp / "ws-gone")
            path = "README.md"
        else:
            path = "docs/locked.md"
            locked = place.root / path
            locked.write_text("locked\n")
            locked.chmod(0)
            try:  # as root (CI), or with CAP_DAC_OVERRIDE, the kernel opens it anyway: the test says no instead
                os.close(os.open(locked, os.O_RDONLY))
            except PermissionError:
                pass
            else:
                real_open = os.open

                def refusing_open(name, *args, **kwargs):
                    if os.path.basename(published_path(os.fsdecode(name))) == locked.name:
                        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fsdecode(name))
                    return real_open(name, *args, **kwargs)

                monkeypatch.setattr(os, "open", refusing_open)
        result = await read(ch06, tool, {"path": path})
        monkeypatch.undo()
        assert tool_result_record(result, place) == snapshot  # the place on the disk would show as {tmp}
        assert (result["isError"], result.get("details")) == (True, {"error": "os_error"})
        assert str(place.tmp) not in result_text(result)

    @pytest.mark.cites("names-bytes")
    async def test_names_are_their_bytes(self, ch06, ch08, place, snapshot):
        """No Unicode normalisation (café.txt in NFC and in NFD are two files, each read as itself), no case-insensitive
        match (readme.md is not README.md: not found), and a dotfile is a file like any other."""
        nfc, nfd = "caf\u00e9.txt", "cafe\u0301.txt"
        (place.root / nfc).write_text("composed (NFC)\n")
        (place.root / nfd).write_text("decomposed (NFD)\n")
        (place.root / ".env").write_text("A_DOTFILE=1\n")
        (place.root / "docs" / ".notes.md").write_text("notes\n")
        tool = ch08.create_read_tool(place.root)
        expected = {nfc: "composed (NFC)", nfd: "decomposed (NFD)", ".env": "A_DOTFILE=1", "docs/.notes.md": "notes",
                    "readme.md": None, "README.MD": None, "Docs/guide.md": None}
        reads = [({"path": path}, await read(ch06, tool, {"path": path}), []) for path in expected]
        assert reads_record(reads, place) == snapshot
        for (_, result, _), content in zip(reads, expected.values()):
            assert (result_text(result) if content else result.get("details")) == (content or {"error": "not_found"})

    @pytest.mark.cites("root-absolute")
    async def test_a_relative_root_stays_the_directory_it_named(self, ch06, ch08, place, monkeypatch, snapshot):
        """A root given as a relative path names the directory it named when the tool was made: a later change
        of the current directory (to one holding a decoy ws/) changes nothing."""
        decoy = place.tmp / "outside" / "ws"
        decoy.mkdir()
        (decoy / "README.md").write_text(SECRET)
        monkeypatch.chdir(place.tmp)
        tool = ch08.create_read_tool("ws")
        monkeypatch.chdir(decoy.parent)
        result = await read(ch06, tool, {"path": "README.md"})
        monkeypatch.undo()
        assert reads_record([({"path": "README.md"}, result, [])], place) == snapshot
        assert (result["isError"], result_text(result)) == (False, readme.README)

    @pytest.mark.cites("no-size-refusal", "chunks", "judged-when-read")
    async def test_a_large_file_is_read_like_any_other(self, ch06, ch08, place, snapshot):
        """An 11 MiB file (13,000 lines of text, then NUL bytes: a sparse hole) is not refused for its size: a
        window in its text is served (the NULs lie more than 1 MiB past it), a window in the NULs is binary."""
        with open(place.root / "large.log", "wb") as f:
            f.write((b"x" * 99 + b"\n") * 13_000)
            f.truncate(11 * 1024 * 1024)
        tool = ch08.create_read_tool(place.root)
        first = await read(ch06, tool, {"path": "large.log", "limit": 1})
        far = await read(ch06, tool, {"path": "large.log", "offset": 13_001})
        assert reads_record([({"path": "large.log", "limit": 1}, first, []),
                             ({"path": "large.log", "offset": 13_001}, far, [])], place) == snapshot
        assert (first["isError"], far.get("details")) == (False, {"error": "binary"})

    @pytest.mark.cites("chunks", "judged-when-read", "long-line-cut")
    async def test_a_long_line_is_read_only_as_far_as_the_window_needs(self, ch06, ch08, place, snapshot):
        """A first line of 1.3 MB with a NUL byte at 1,250,000: a read of it shows its first max_bytes bytes and
        stops reading there, more than 1 MiB before the NUL (served); a read of the second line reads through it
        (binary)."""
        (place.root / "one_line.txt").write_bytes(b"x" * 1_250_000 + b"\0" + b"x" * 50_000 + b"\nsecond\n")
        tool = ch08.create_read_tool(place.root)
        head = await read(ch06, tool, {"path": "one_line.txt"})
        second = await read(ch06, tool, {"path": "one_line.txt", "offset": 2})
        assert reads_record([({"path": "one_line.txt"}, head, []), ({"path": "one_line.txt", "offset": 2}, second, [])],
                            place) == snapshot
        assert (head["isError"], second.get("details")) == (False, {"error": "binary"})

    @pytest.mark.cites("root-not-directory")
    async def test_a_missing_root_is_refused_when_the_tool_is_made(self, ch08, place, snapshot):
        """Binding the tool to a directory that does not exist is the operator's error, raised at once."""
        with pytest.raises(ValueError, match="not a directory"):
            ch08.create_read_tool(place.tmp / "no-such-dir")
        assert raised_now(lambda: ch08.create_read_tool(place.tmp / "no-such-dir"), about="not a directory") == snapshot


def numbered_lines(count: int) -> str:
    return "".join(f"line {n:02}: {'x' * 20}\n" for n in range(1, count + 1))


# Windows of a 30-line file: (the tool's caps, the call's offset / limit).
WINDOWS = {
    "line_cap": ({"max_lines": 10}, {}),
    "offset_and_limit": ({}, {"offset": 11, "limit": 5}),
    "last_window": ({"max_lines": 10}, {"offset": 21}),
    "byte_cap": ({"max_bytes": 100}, {"offset": 3}),
}


@pytest.mark.asyncio
@pytest.mark.section("截断")
class TestTruncation:
    @pytest.mark.parametrize("case", list(WINDOWS))
    @pytest.mark.cites(line_cap=("window-example", "cap-max-lines"), offset_and_limit=("cap-limit",),
                       last_window=("last-page",), byte_cap=("cap-max-bytes", "body"))
    async def test_window(self, ch06, ch08, place, snapshot, case):
        """A window of a 30-line file: the text, and a notice naming the next offset when more follows."""
        caps, arguments = WINDOWS[case]
        (place.root / "long.txt").write_text(numbered_lines(30))
        result = await read(ch06, ch08.create_read_tool(place.root, **caps), {"path": "long.txt", **arguments})
        assert result["isError"] is False
        assert tool_result_record(result) == snapshot

    @pytest.mark.cites("long-line", "long-line-cut")
    async def test_one_line_longer_than_the_byte_cap(self, ch06, ch08, place, snapshot):
        """A single over-long line is cut on a character boundary, and the notice says so."""
        (place.root / "wide.txt").write_text("汉" * 300 + "\nnext\n")
        result = await read(ch06, ch08.create_read_tool(place.root, max_bytes=100), {"path": "wide.txt"})
        assert tool_result_record(result) == snapshot
        # (After the snapshot: in a masked grade the tool's own words reach the test masked, and only it is judged.)
        assert result_text(result).startswith("汉" * 33 + "\n\n[Line 1 is longer than the 100-byte limit")

    @pytest.mark.cites("defaults", "body")
    async def test_default_caps(self, ch06, ch08, place, snapshot):
        """Without caps given, a read returns at most DEFAULT_MAX_LINES lines and DEFAULT_MAX_BYTES bytes."""
        (place.root / "many.txt").write_text("".join(f"{n}\n" for n in range(1, 2601)))
        (place.root / "big.txt").write_text(("y" * 99 + "\n") * 1000)
        tool = ch08.create_read_tool(place.root)
        many = await read(ch06, tool, {"path": "many.txt"})
        assert many["details"]["endLine"] == ch08.DEFAULT_MAX_LINES == 2000
        big = await read(ch06, tool, {"path": "big.txt"})
        body = result_text(big).split("\n\n[")[0]
        assert ch08.DEFAULT_MAX_BYTES == 50 * 1024 and len(body.encode()) <= ch08.DEFAULT_MAX_BYTES
        assert big["details"]["nextOffset"] == ch08.DEFAULT_MAX_BYTES // 100 + 1
        facts = {"DEFAULT_MAX_LINES": getattr(ch08, "DEFAULT_MAX_LINES", None),
                 "DEFAULT_MAX_BYTES": getattr(ch08, "DEFAULT_MAX_BYTES", None),
                 "2600 short lines: details": many.get("details"),
                 "2600 short lines: notice": result_text(many).rpartition("\n")[2],
                 "1000 lines of 100 bytes: details": big.get("details"),
                 "1000 lines of 100 bytes: bytes of text shown": len(body.encode()),
                 "1000 lines of 100 bytes: notice": result_text(big).rpartition("\n")[2]}
        assert jsonable({"kind": "facts", "facts": facts}) == snapshot
        assert f"offset={ch08.DEFAULT_MAX_LINES + 1}" in result_text(many)  # (the tool's words: after the snapshot)

    @pytest.mark.cites("reassemble", "lines", "notice-format")
    async def test_reading_on_reassembles_the_whole_file(self, ch06, ch08, place, snapshot):
        """Following nextOffset from read to read returns every line exactly once, in order."""
        lines = [("é" * (n % 13)) + f"#{n}" for n in range(1, 60)] + ["", "last line without newline"]
        (place.root / "mixed.txt").write_text("\n".join(lines))
        tool = ch08.create_read_tool(place.root, max_lines=7, max_bytes=40)
        seen, reads, offset = [], [], 1
        for _ in range(100):
            arguments = {"path": "mixed.txt", "offset": offset}
            result = await read(ch06, tool, arguments)
            reads.append((arguments, result, []))
            seen.append(result_text(result).split("\n\n[")[0])
            if not result["details"]["truncated"]:
                break
            offset = result["details"]["nextOffset"]
        assert "\n".join(seen) == "\n".join(lines)
        record = reads_record(reads, place)
        record["caps"] = {"max_lines": 7, "max_bytes": 40}
        assert record == snapshot  # every page, and the last one untruncated

    @pytest.mark.cites("empty-file")
    async def test_an_empty_file_reads_as_empty(self, ch06, ch08, place, snapshot):
        """An empty file is an empty, untruncated result, not an error."""
        (place.root / "empty.txt").write_text("")
        result = await read(ch06, ch08.create_read_tool(place.root), {"path": "empty.txt"})
        assert result.get("isError") is False, \
            f"the empty file was not served: isError {result.get('isError')!r}, details {result.get('details')!r}, " \
            f"content {result.get('content')!r}"[:400]
        assert result_text(result) == "", f"the empty file was served as {result_text(result)!r}"
        details = result.get("details")
        assert isinstance(details, dict) and details.get("truncated") is False, \
            f"expected details with truncated false; got {details!r}"
        assert reads_record([({"path": "empty.txt"}, result, [])], place) == snapshot


@pytest.mark.asyncio
@pytest.mark.section("中止")
class TestAbort:
    @pytest.mark.cites("abort-before-chunk")
    async def test_an_aborted_signal_stops_the_read(self, ch06, ch08, place, snapshot):
        """A read started after the run was aborted returns an aborted error result, not the file."""
        controller = AbortController()
        controller.abort()
        result = await read(ch06, ch08.create_read_tool(place.root), {"path": "README.md"},
                            tool_context(signal=controller.signal))
        assert (result["isError"], result.get("details")) == (True, {"error": "aborted"}), \
            refusal_problem(result, "aborted")
        record = reads_record([({"path": "README.md"}, result, [])], place)
        record["reads"][0]["signal"] = "before"
        assert record == snapshot

    @pytest.mark.parametrize(("path", "window"), [("empty.txt", {}), ("README.md", {"limit": 1})],
                             ids=["empty_file", "one_line_window"])
    @pytest.mark.cites("aborted-even-small")
    async def test_an_aborted_signal_stops_a_read_of_one_chunk(self, ch06, ch08, place, path, window, snapshot):
        """A read started after the run was aborted returns an aborted error result even when one chunk would
        answer it (an empty file, a window of one line): the signal is checked before the first chunk too."""
        (place.root / "empty.txt").write_text("")
        controller = AbortController()
        controller.abort()
        arguments = {"path": path, **window}
        result = await read(ch06, ch08.create_read_tool(place.root), arguments, tool_context(signal=controller.signal))
        record = reads_record([(arguments, result, [])], place)
        record["reads"][0]["signal"] = "before"
        assert record == snapshot
        assert (result["isError"], result.get("details")) == (True, {"error": "aborted"})

    @pytest.mark.cites("yield", "cancel-closes")
    async def test_a_cancelled_read_closes_its_file(self, ch06, ch08, place, snapshot):
        """A far read in a 2.5 MB file whose task is cancelled at its first yield to the event loop: CancelledError
        reaches the caller, and no descriptor stays open."""
        (place.root / "huge.txt").write_text(("w" * 63 + "\n") * 40_000)
        tool = ch08.create_read_tool(place.root)
        call = tool_call("call-1", "read", {"path": "huge.txt", "offset": 40_000})

        async def cancel_at_its_first_yield(task):
            task.cancel()

        before = len(os.listdir("/proc/self/fd"))
        outcome = await bounded(lambda: ch06.execute_tool_call(call, Registry([tool]), tool_context()), "fixed",
                                {asyncio.current_task()}, then=cancel_at_its_first_yield)
        left = len(os.listdir("/proc/self/fd")) - before
        finished = "raised " + outcome["raised"] if "raised" in outcome else \
            "did not finish" if outcome.get("timedOut") else "returned a result: it never yielded between chunks"
        facts = {"the read, its task cancelled at its first yield": finished, "descriptors left open": left}
        assert jsonable({"kind": "facts", "facts": facts}) == snapshot
        assert (outcome.get("raised"), left) == ("CancelledError", 0)

    @pytest.mark.cites("progress", "abort-before-chunk", "unaborted-progress")
    async def test_abort_during_a_large_read_stops_it(self, ch06, ch08, place, snapshot):
        """Aborting at the first progress report of a long read stops it there, with an aborted error."""
        (place.root / "huge.txt").write_text("z" * 63 + "\n" * 1 + ("w" * 63 + "\n") * 60_000)
        controller = AbortController()
        reports = []

        def progress(content):
            reports.append(content)
            controller.abort()

        result = await read(ch06, ch08.create_read_tool(place.root), {"path": "huge.txt", "offset": 60_001},
                            tool_context(signal=controller.signal, progress=progress))
        assert (result["isError"], result.get("details")) == (True, {"error": "aborted"}), \
            refusal_problem(result, "aborted")
        assert len(reports) == 1, f"expected 1 progress report (the read aborted at the first); got {len(reports)}"

        unaborted = []
        whole = await read(ch06, ch08.create_read_tool(place.root), {"path": "huge.txt", "offset": 60_001},
                           tool_context(progress=unaborted.append))
        assert whole["isError"] is False and len(unaborted) > 1
        facts = {"aborted at the first progress report: details": result.get("details"),
                 "progress reports of the aborted read": len(reports),
                 "the same read unaborted: isError": whole.get("isError"),
                 "the same read unaborted: details": whole.get("details"),
                 "the same read unaborted: reports progress more than once": len(unaborted) > 1}
        assert jsonable({"kind": "facts", "facts": facts}) == snapshot

    @pytest.mark.cites("abort-in-loop", "progress")
    async def test_abort_during_a_read_in_the_loop(self, ch07, ch08, place, snapshot):
        """In the loop, a read aborted mid-way ends with its error result paired and no further request."""
        (place.root / "README.md").write_text(("w" * 63 + "\n") * 40_000)
        controller = AbortController()

        def abort_on_progress(event):
            if event["type"] == "tool_progress":
                controller.abort()

        far = tool_call("call-1", "read", {"path": "README.md", "offset": 40_000})
        model = ScriptedModel([assistant_message([far], "toolUse"), readme.answer_from_read_result])
        run = await run_loop(ch07, model=model, context=readme.context(), signal=controller.signal,
                             on_event=abort_on_progress, tools=Registry([ch08.create_read_tool(place.root)]))
        assert (run.reason, run.steps, len(model.requests), run.messages[-1]["isError"]) == ("aborted", 1, 1, True)
        assert run == snapshot


@pytest.mark.asyncio
@pytest.mark.section("加固")
class TestHardening:
    """What the project promises beyond the chapter: never part of the chapter's verdict (`--hardening`).
    The chapter leaves out a file or directory swapped between the tool's check and its open (its line 156);
    these hold a tool to closing that gap."""

    @pytest.mark.parametrize("swap_in", ["symlink", "fifo"])
    @pytest.mark.hardening("file-swap")
    async def test_a_swap_after_the_check_does_not_fool_it(self, ch06, ch08, place, opened, monkeypatch,
                                                           fifo_watchdog, swap_in, snapshot):
        """guide.md is replaced (by a link to the secret, or a FIFO) right after the tool first stats it."""
        opened.clear()  # only what the test body opens: a reporting plugin writes its file after set-up
        guide = place.root / "docs" / "guide.md"
        decoy = place.root / "docs" / ".decoy"
        if swap_in == "symlink":
            os.symlink(place.tmp / "secret.txt", decoy)
        else:
            os.mkfifo(decoy)
        fired = fifo_watchdog(guide)
        swapped = at_the_first_stat_of("guide.md", lambda: os.replace(decoy, guide), monkeypatch)
        result = await read(ch06, ch08.create_read_tool(place.root), {"path": "docs/guide.md"})
        monkeypatch.undo()
        assert not blocked(fired, result), "the read blocked on the FIFO swapped in"
        assert SECRET not in result_text(result) and outside(opened, place.root) == []
        if swapped:
            assert result["isError"] is True
        record = {"kind": "refusal-check", "result": result, "openedOutside": outside(opened, place.root),
                  "swapped": bool(swapped), "blocked": blocked(fired, result)}
        assert hide(jsonable(record), str(place.tmp)) == snapshot

    # (the directory swapped, the path read): a directory on the way, one level down and three levels down
    DIRECTORY_SWAPS = {"docs": ("docs", "docs/secret.txt"), "deep": ("a/b/c", "a/b/c/secret.txt")}

    @pytest.mark.parametrize("case", list(DIRECTORY_SWAPS))
    @pytest.mark.hardening("directory-swap")
    async def test_a_directory_swapped_after_its_check_is_not_followed(self, ch06, ch08, place, opened, monkeypatch,
                                                                       case, snapshot):
        """A directory on the path is replaced by a link to a directory outside (which holds secret.txt) right
        after the tool first stats it: the open of that directory must not follow the link (O_NOFOLLOW on every
        step, not only the last), so the walk meets the link and refuses it."""
        opened.clear()  # only what the test body opens: a reporting plugin writes its file after set-up
        directory, path = self.DIRECTORY_SWAPS[case]
        swapped_dir = place.root / directory

        def swap():
            os.rename(swapped_dir, swapped_dir.with_name(".away"))
            os.symlink(place.tmp / "outside", swapped_dir)

        swapped = at_the_first_stat_of(swapped_dir.name, swap, monkeypatch)
        result = await read(ch06, ch08.create_read_tool(place.root), {"path": path})
        monkeypatch.undo()
        record = {"kind": "refusal-check", "result": result, "openedOutside": outside(opened, place.root),
                  "swapped": bool(swapped), "blocked": False}
        assert hide(jsonable(record), str(place.tmp)) == snapshot
        # (What the snapshot shows, said again: these hold the reference to it when snapshots are regenerated.)
        assert SECRET not in result_text(result) and outside(opened, place.root) == []
        assert not swapped or result["isError"] is True

    @pytest.mark.hardening("fstat-after-open")
    async def test_a_fifo_swapped_in_for_the_open_and_back_is_refused(self, ch06, ch08, place, opened, monkeypatch,
                                                                      fifo_watchdog, snapshot):
        """guide.md is replaced by a FIFO right after the tool first stats it, and put back right after the tool
        opens it: what was opened is the FIFO, which only fstat on the open descriptor sees (a second stat by
        name sees the file put back, and reading the FIFO gives nothing: an empty file, served)."""
        opened.clear()  # only what the test body opens: a reporting plugin writes its file after set-up
        guide = place.root / "docs" / "guide.md"
        kept, decoy = guide.with_name(".kept"), guide.with_name(".decoy")
        os.mkfifo(decoy)
        fired = fifo_watchdog(guide)

        def swap_in():
            os.replace(guide, kept)
            os.replace(decoy, guide)

        swapped = at_the_first_stat_of("guide.md", swap_in, monkeypatch)
        restored: list[bool] = []
        real_open = os.open

        def open_then_put_back(path, *args, **kwargs):
            fd = real_open(path, *args, **kwargs)
            if swapped and not restored and os.path.basename(os.fsdecode(path)) == "guide.md":
                os.replace(kept, guide)
                restored.append(True)
            return fd

        monkeypatch.setattr(os, "open", open_then_put_back)
        result = await read(ch06, ch08.create_read_tool(place.root), {"path": "docs/guide.md"})
        monkeypatch.undo()
        record = {"kind": "refusal-check", "result": result, "openedOutside": outside(opened, place.root),
                  "swapped": bool(restored), "blocked": blocked(fired, result)}
        assert hide(jsonable(record), str(place.tmp)) == snapshot
        assert not blocked(fired, result) and (not restored or result.get("details") == {"error": "not_regular"})



test_generated = generated_scenarios("ch08_workspace_read")
