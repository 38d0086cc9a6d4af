"""Chapter 09's generated scenarios, run: a plan (EditPlan) is a workspace, built by chapter 08's `build` beside its
secret, and edits made in it one by one through the reference chapter 06 executor. The record: each edit's result
and renames, every file of the workspace afterwards, and every path outside it that changed."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import pathlib
import tempfile
from typing import Any, NotRequired, TypedDict

from course.recorder.impl import load_reference
from course.recorder.record import jsonable
from chapters.ch08_workspace_read.scenarios import FAST_TEMP, bounded, build, expand, hide, remove
from course.runtime.messages import tool_call
from course.runtime.tools import Registry, ToolExecutionContext

SECTIONS = {"match": "唯一匹配", "diff": "差异", "encoding": "编码与换行", "atomic": "原子写入", "escape": "越界"}


class Edit(TypedDict):
    arguments: dict[str, Any]  # path, oldText, newText: any JSON; strings may hold {tmp}, {root}, {real}
    failWrite: NotRequired[bool]  # os.replace and os.rename fail with EACCES during this edit


class EditPlan(TypedDict):
    entries: list[dict]  # chapter 08's workspace entries; a file's may add "mode" (its permission bits)
    edits: list[Edit]
    section: NotRequired[str]  # the section that drew it (what it cites: the judge's CITES)


def tree(tmp: str) -> dict[str, str]:
    """Every path under `tmp` (links not followed): a file as its mode and bytes, a link as its target."""
    found = {}
    for path in (os.path.join(folder, name) for folder, names, files in os.walk(tmp) for name in names + files):
        if os.path.islink(path) or os.path.isfile(path):
            found[path] = "-> " + os.readlink(path) if os.path.islink(path) else \
                f"{os.stat(path).st_mode & 0o7777:04o} {pathlib.Path(path).read_bytes().hex()}"
    return found


@contextlib.contextmanager
def renames(fail: bool):
    """Every os.replace and os.rename made inside the block; each fails with EACCES when `fail`."""
    seen: list[dict] = []
    real = os.replace, os.rename

    def spy(function):
        def rename(src, dst, *args, **kwargs):
            same = os.path.dirname(os.path.abspath(src)) == os.path.dirname(os.path.abspath(dst))
            seen.append({"to": os.fspath(dst), "sameDirectory": same})
            if fail:
                raise PermissionError(errno.EACCES, "Permission denied")
            return function(src, dst, *args, **kwargs)
        return rename

    os.replace, os.rename = map(spy, real)
    try:
        yield seen
    finally:
        os.replace, os.rename = real


async def one_edit(registry: Registry, edit: Edit, places: dict, key: str, ours: set) -> dict:
    ch06 = load_reference("ch06_tool_execution")
    call = tool_call("call-1", "edit", expand(edit["arguments"], places))
    with renames(edit.get("failWrite", False)) as seen:
        outcome = await bounded(lambda: ch06.execute_tool_call(call, registry, ToolExecutionContext()), key, ours)
    return {**outcome, "arguments": call["arguments"], "renames": seen, "failWrite": edit.get("failWrite", False)}


async def run_plan(plan: EditPlan, load) -> dict:
    student = load("ch09_edit_tool")
    key = getattr(student, "__name__", "?")
    tmp = os.path.realpath(tempfile.mkdtemp(prefix="ch09-", dir=FAST_TEMP if os.access(FAST_TEMP, os.W_OK) else None))
    ours, umask = {asyncio.current_task()}, os.umask(0o022)  # the files' modes are shown: the same everywhere
    try:
        places = build(tmp, plan)
        for entry in plan["entries"]:
            if "mode" in entry:
                os.chmod(os.path.join(places["real"], entry["path"]), entry["mode"])
        os.umask(umask)
        before = tree(tmp)
        record: dict = {"kind": "workspace-edits", "edits": []}
        try:
            registry = Registry([student.create_edit_tool(places["root"])])
        except Exception as error:
            return jsonable(hide({**record, "createRaised": f"{type(error).__name__}: {error}"}, tmp))
        for edit in plan["edits"]:
            record["edits"].append(await one_edit(registry, edit, places, key, ours))
        after = tree(tmp)
        record["files"] = {path: kept for path, kept in sorted(after.items())
                           if path.startswith(places["real"] + os.sep) or before.get(path) != kept}
        record["removed"] = sorted(set(before) - set(after))
        record["interrupted"] = any(edit.get("timedOut") for edit in record["edits"])
        return jsonable(hide(record, tmp))
    finally:
        os.umask(umask)
        remove(tmp)
