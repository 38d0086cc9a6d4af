"""Chapter 08 and 09 submissions with no tool of their own: they replay the published answers.

`published_answers(chapter)` runs the chapter's tests (its fixed scenarios and default plans: what is published)
on the reference, and notes every answer its tool gave, keyed by the scenario, the tool's caps and the call's
arguments (the temporary place beside the root written as {tmp}), with the progress it reported and, for an
edit, the bytes it left. `replay_source(chapter, table)` is a module whose tool is made by the reference's maker
(its root check and schema are the chapter's own work) and answers each call from that table, reporting the
same progress and leaving the same bytes; a call it does not know gets not_found.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from course.judge import differential

MAKERS = {"ch08_workspace_read": "create_read_tool", "ch09_edit_tool": "create_edit_tool"}

COMMON = '''
import asyncio as _asyncio
import json as _json
import os as _os

_raw_open = open  # (as it was at import: a test's spy on open watches the tool, not the table's notes)


def _scenario():
    test = _os.environ.get("PYTEST_CURRENT_TEST", "")
    return test.partition("::")[2].rsplit(" (", 1)[0]


def _key(place, caps, arguments, seen):
    """The table's key of a call: the scenario, the caps and the arguments ({tmp}: the place beside the root),
    and how many calls of the scenario had the same before it."""
    def hide(value):
        if isinstance(value, str):
            for where in (_os.path.realpath(place), place):
                value = value.replace(where, "{tmp}")
        return value
    key = _json.dumps([_scenario(), caps, {k: hide(v) for k, v in arguments.items()}]
                      if isinstance(arguments, dict) else [_scenario(), caps, arguments], sort_keys=True, default=str)
    seen[key] = seen.get(key, -1) + 1
    return f"{key} #{seen[key]}"


def _left(root, arguments):
    """The file an edit names, as a path below the root (its links followed), or None."""
    try:
        real, target = _os.path.realpath(root), _os.path.realpath(_os.path.join(root, arguments["path"]))
    except Exception:
        return None
    return _os.path.relpath(target, real) if target.startswith(real + _os.sep) else None
'''

RECORDING = COMMON + '''
_made = __MAKER__
_SEEN = {}


def __MAKER__(root, *args, **caps):
    tool = _made(root, *args, **caps)
    place = _os.path.dirname(_os.path.abspath(root))  # (now: a relative root names the cwd's of now)
    root = _os.path.abspath(root)
    real = tool.execute

    async def execute(arguments, context):
        key, reports = _key(place, caps, arguments, _SEEN), []
        if context is not None:  # (a test may call the tool itself, with no context)
            report = context.report_progress
            context.report_progress = lambda content: (reports.append(content), report(content))[1]
        replace, replaced = _os.replace, []
        _os.replace = lambda *args, **kwargs: (replaced.append(True), replace(*args, **kwargs))[1]
        try:
            out = await real(arguments, context)
        finally:
            _os.replace = replace
        left = _left(root, arguments) if replaced else None  # (what an edit leaves is part of its answer)
        data = None
        if left is not None and not out.get("isError"):
            with _raw_open(_os.path.join(_os.path.realpath(root), left), "rb") as f:
                data = f.read().hex()
        with _raw_open(_os.environ["REPLAY_TABLE"], "a") as f:
            f.write(_json.dumps({"key": key, "out": out, "progress": reports, "left": left, "data": data},
                                default=str) + "\\n")
        return out
    tool.execute = execute
    return tool
'''

REPLAY = COMMON + '''
import tempfile as _tempfile


def _write(target, data):
    """The edit's bytes (or, where the reference's write failed, the file's own) renamed over the file."""
    with _raw_open(target, "rb") as f:
        old = f.read()
    fd, temp = _tempfile.mkstemp(dir=_os.path.dirname(target), prefix="." + _os.path.basename(target) + ".")
    with _os.fdopen(fd, "wb") as f:
        f.write(old if data is None else bytes.fromhex(data))
    _os.chmod(temp, _os.stat(target).st_mode & 0o7777)
    try:
        _os.replace(temp, target)
    except OSError:  # (the reference's answer says so)
        _os.unlink(temp)

_made = __MAKER__
_SEEN = {}
with _raw_open(_os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "answers.json")) as _f:
    _ANSWERS = _json.load(_f)


def __MAKER__(root, *args, **caps):
    tool = _made(root, *args, **caps)
    place = _os.path.dirname(_os.path.abspath(root))  # (now: a relative root names the cwd's of now)
    root = _os.path.abspath(root)

    async def execute(arguments, context):
        found = _ANSWERS.get(_key(place, caps, arguments, _SEEN))  # (counted as the reference's call was: at once)
        await _asyncio.sleep(0)  # (a read yields to the event loop: a test cancels it there)
        if found is None:
            return {"content": [{"type": "text", "text": "not found"}], "details": {"error": "not_found"},
                    "isError": True}
        if not found["out"].get("isError") and isinstance(arguments.get("path"), str):
            try:  # (what a test sees the tool open)
                _os.close(_os.open(_os.path.join(root, arguments["path"]), _os.O_RDONLY | _os.O_NONBLOCK))
            except OSError:
                pass
        for content in found["progress"] if context is not None else ():
            context.report_progress(content)
            if context.signal is not None and context.signal.aborted:
                break
        if found["left"] is not None:
            _write(_os.path.join(_os.path.realpath(root), found["left"]), found["data"])
        return found["out"]
    tool.execute = execute
    return tool
'''


def published_answers(root: Path, module: str, test_file: str, sections: set[str]) -> dict:
    """The reference's answers in the chapter's published scenarios, by key (see the module's docstring)."""
    reference = (root / "chapters" / module / f"{module}.py").read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory() as scratch:
        folder, table = Path(scratch) / "impl", Path(scratch) / "table.jsonl"
        folder.mkdir()
        (folder / f"{module}.py").write_text(reference + RECORDING.replace("__MAKER__", MAKERS[module]), encoding="utf-8")
        plans = Path(scratch) / "plans.json"  # (the default plans, as a grade without a secret runs them)
        plans.write_text(json.dumps({"module": module, "sections": {
            section: differential.draw_plans(module, section) for section in sections}}), encoding="utf-8")
        subprocess.run([sys.executable, "-m", "pytest", test_file, "--impl", str(folder), "-p", "no:cacheprovider",
                        "-p", "no:syrupy", "-q", "-k", "not Hardening", f"--course-plans={plans}",
                        f"--course-record={Path(scratch) / 'record.jsonl'}"], cwd=root, check=False,
                       capture_output=True, timeout=900, env={**os.environ, "REPLAY_TABLE": str(table)})
        answers: dict = {}
        for line in map(json.loads, table.read_text(encoding="utf-8").splitlines()):
            answers.setdefault(line.pop("key"), line)
    return answers


def write_replay(folder: Path, root: Path, module: str, answers: dict) -> None:
    """A submission folder replaying `answers` (the table beside the module, as a student could hand it in)."""
    reference = (root / "chapters" / module / f"{module}.py").read_text(encoding="utf-8")
    folder.mkdir(parents=True)
    (folder / f"{module}.py").write_text(reference + REPLAY.replace("__MAKER__", MAKERS[module]), encoding="utf-8")
    (folder / "answers.json").write_text(json.dumps(answers), encoding="utf-8")
