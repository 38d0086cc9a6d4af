"""Chapter 09's generated scenarios, run: a plan is a workspace (chapter 08's entries, built by chapter 08's
`build`, beside its secret and outside files) and the edits to make in it, one after another through the
reference chapter 06 executor, or as one batch of calls through the reference chapter 07 loop.

The record holds each edit's result, every rename the edit made (os.replace, os.rename: where to, and
whether from the same directory), and what the edits changed on disk: every file of the workspace
afterwards, and every path outside it that changed. `{tmp}` stands for the run's temporary directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import tempfile
from typing import Any, NotRequired, TypedDict

from course.recorder.harness import run_loop
from course.recorder.impl import load_reference
from course.recorder.record import jsonable
from course.recorder.scenarios.ch08_workspace_read import FAST_TEMP, bounded, build, expand, hide, remove
from course.runtime.messages import assistant_message, text, tool_call, user_message
from course.runtime.scripted import ScriptedModel
from course.runtime.tools import Registry, ToolExecutionContext

SECTIONS = {"roundtrip": "编辑往返", "match": "唯一匹配", "diff": "差异", "encoding": "编码与换行",
            "atomic": "原子写入", "escape": "越界"}


class Edit(TypedDict):
    arguments: dict[str, Any]
    """path, oldText, newText: any JSON (the schema judges it); strings may hold {tmp}, {root}, {real}."""
    failWrite: NotRequired[bool]
    """os.replace and os.rename fail with EACCES while this edit runs."""


class EditPlan(TypedDict):
    entries: list[dict]
    """The workspace, as chapter 08's plans give it (course.recorder.scenarios.ch08_workspace_read.build); a
    file's entry may add "mode" (its permission bits)."""
    edits: list[Edit]
    loop: NotRequired[bool]
    """The edits are one batch of calls a scripted model makes through the reference loop."""


def tree(tmp: str) -> dict[str, str]:
    """Every path under `tmp` (links not followed): a file as its mode and bytes, a link as its target."""
    found = {}
    for directory, names, files in os.walk(tmp):
        for name in names + files:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            if os.path.islink(path):
                found[path] = "-> " + os.readlink(path)
            elif os.path.isfile(path):
                with open(path, "rb") as file:
                    found[path] = f"{info.st_mode & 0o7777:04o} {file.read().hex()}"
    return found


@contextlib.contextmanager
def renames(fail: bool):
    """Every os.replace and os.rename made inside the block; each fails with EACCES when `fail`."""
    seen: list[dict] = []
    real = {"replace": os.replace, "rename": os.rename}

    def spy(name):
        def rename(src, dst, *args, **kwargs):
            same = os.path.dirname(os.path.abspath(src)) == os.path.dirname(os.path.abspath(dst))
            seen.append({"to": os.fspath(dst), "sameDirectory": same})
            if fail:
                raise PermissionError(errno.EACCES, "Permission denied")
            return real[name](src, dst, *args, **kwargs)
        return rename

    os.replace, os.rename = spy("replace"), spy("rename")
    try:
        yield seen
    finally:
        os.replace, os.rename = real["replace"], real["rename"]


async def one_edit(registry: Registry, edit: Edit, places: dict, key: str, ours: set) -> dict:
    ch06 = load_reference("ch06_tool_execution")
    call = tool_call("call-1", "edit", expand(edit["arguments"], places))
    with renames(edit.get("failWrite", False)) as seen:
        outcome = await bounded(lambda: ch06.execute_tool_call(call, registry, ToolExecutionContext()), key, ours)
    return {**outcome, "arguments": call["arguments"], "renames": seen, "failWrite": edit.get("failWrite", False)}


async def edits_in_the_loop(plan: EditPlan, registry: Registry, places: dict, key: str, ours: set) -> dict:
    calls = [tool_call(f"call-{n}", "edit", expand(edit["arguments"], places)) for n, edit in enumerate(plan["edits"], 1)]
    model = ScriptedModel([assistant_message([text("editing"), *calls], "toolUse"),
                           assistant_message([text("done")], "stop")])
    context = {"systemPrompt": "You are tiny-pi.", "messages": [user_message("edit them")]}
    outcome = await bounded(lambda: run_loop(load_reference("ch07_agent_loop"), model=model, context=context,
                                             tools=registry), key, ours)
    if "result" in outcome:
        outcome["run"] = outcome.pop("result").record()
    return outcome


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
        if plan.get("loop"):
            record["loop"] = await edits_in_the_loop(plan, registry, places, key, ours)
        for edit in [] if plan.get("loop") else plan["edits"]:
            record["edits"].append(await one_edit(registry, edit, places, key, ours))
        after = tree(tmp)
        inside = places["real"]
        record["files"] = {path: kept for path, kept in sorted(after.items())
                           if path.startswith(inside + os.sep) or before.get(path) != kept}
        record["removed"] = sorted(set(before) - set(after))
        record["interrupted"] = any(o.get("timedOut") for o in [*record["edits"], record.get("loop", {})])
        return jsonable(hide(record, tmp))
    finally:
        os.umask(umask)
        remove(tmp)
