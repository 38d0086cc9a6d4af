"""Chapter 09's generated plans (shape: chapters.ch09_edit_tool.scenarios.EditPlan) and how a run is shown:
each result (text, details, diff), each rename, the files afterwards (modes and bytes), all compared."""

from __future__ import annotations

from hypothesis import strategies as st

from chapters.ch08_workspace_read.judge.plans import _text_of, visible

WORDS = ["alpha", "beta", "aa", "a", "é", "汉字", " ", "\t", "\r", "x"]
"""Line pieces: words met once or often, one overlapping itself ("aa"), multi-byte characters, a lone CR."""
NOTES = "notes.txt"
ESCAPES = ["../secret.txt", "out_abs", "out_rel", "out_dir/secret.txt", "{tmp}/secret.txt", "docs", ".",
           "nope.txt", "bad.bin", "latin1.txt", "docs/readme", "{root}/notes.txt", "loop1"]
"""Chapter 08's refusals met by an edit, and paths that stay inside (a link to notes.txt, the root's absolute path)."""
ENTRIES = [{"path": "docs/readme", "type": "link", "target": f"../{NOTES}"},
           {"path": "out_abs", "type": "link", "target": "{tmp}/secret.txt"},
           {"path": "out_rel", "type": "link", "target": "../secret.txt"},
           {"path": "out_dir", "type": "link", "target": "{tmp}/outside"},
           {"path": "loop1", "type": "link", "target": "loop1"},
           {"path": "bad.bin", "type": "file", "hex": b"TOP\0SECRET".hex()},
           {"path": "latin1.txt", "type": "file", "hex": "caf\u00e9 TOP".encode("latin-1").hex()}]


@st.composite
def file_texts(draw, max_lines: int) -> str:
    lines = draw(st.lists(st.lists(st.sampled_from(WORDS), max_size=3).map("".join), max_size=max_lines))
    ending = draw(st.sampled_from(["\n", "\r\n", "mixed"]))
    if ending == "mixed":  # the first break decides: LF then CRLF, or CRLF then LF
        first, rest = draw(st.permutations(["\n", "\r\n"]))
        body = first.join(lines[:2]) + (rest + rest.join(lines[2:]) if len(lines) > 2 else "")
    else:
        body = ending.join(lines)
    body += draw(st.sampled_from(["", "\n", "\r\n"])) if lines else ""
    return ("\ufeff" if draw(st.integers(0, 3)) == 0 else "") + body


@st.composite
def old_texts(draw, content: str) -> str:
    """Mostly a piece of the file (met once or more), else a word, a line with its break, or nothing."""
    text = content.removeprefix("\ufeff")
    how = draw(st.sampled_from(["piece", "piece", "piece", "word", "crlf", "empty"]))
    if how == "piece" and text:
        start = draw(st.integers(0, len(text) - 1))
        return text[start:start + draw(st.integers(1, 12))]
    if how == "crlf":
        return draw(st.sampled_from(WORDS)) + draw(st.sampled_from(["\n", "\r\n"]))
    return "" if how == "empty" else draw(st.sampled_from(WORDS))


@st.composite
def edit_plans(draw, *, max_lines=4, paths=(NOTES,), fail=False, modes=(None,)) -> dict:
    """A file and 1 to 3 edits of it, one after another."""
    content = draw(file_texts(max_lines))
    notes = {"path": NOTES, "type": "file", "hex": content.encode().hex()}
    mode = draw(st.sampled_from(modes))
    edits = []
    for _ in range(draw(st.integers(1, 3))):
        old = draw(old_texts(content))
        new = draw(st.one_of(st.just(old), st.lists(st.sampled_from([*WORDS, "\n", "\r\n", old]), max_size=4)
                             .map("".join)))
        edit = {"arguments": {"path": draw(st.sampled_from(paths)), "oldText": old, "newText": new}}
        edits.append({**edit, "failWrite": True} if fail and draw(st.booleans()) else edit)
    return {"entries": [{**notes, "mode": mode} if mode else notes, *ENTRIES], "edits": edits}


KINDS = {  # section: (its plans, the sentences they enforce, chapters.ch09_edit_tool.judge.contract)
    "match": (edit_plans(), ("count-overlapping", "no-match", "ambiguous", "one-place-only")),
    "diff": (edit_plans(max_lines=12), ("diff-how", "diff-direction")),
    "encoding": (edit_plans(paths=(NOTES, NOTES, "bad.bin", "latin1.txt")), ("bom", "line-ending", "restore")),
    "atomic": (edit_plans(paths=(NOTES, "docs/readme"), fail=True, modes=(None, 0o755, 0o600, 0o640)),
               ("temp-then-rename", "mode", "through-links", "write-failed")),
    "escape": (edit_plans(paths=(NOTES, *ESCAPES)), ("refusals-reused", "nothing-outside")),
}
STRATEGIES = {section: plans.map(lambda plan, s=section: {**plan, "section": s}) for section, (plans, _) in KINDS.items()}
EXAMPLES = dict.fromkeys(STRATEGIES, 25)


def cites_of(plan: dict) -> tuple[str, ...]:
    return KINDS[plan["section"]][1]


def file_line(path: str, kept: str) -> str:
    if kept.startswith("-> "):
        return f"{path}  {kept}"
    mode, data = kept.split(" ")
    return f"{path}  {mode}  {visible(bytes.fromhex(data).decode('utf-8', 'backslashreplace'))}"


def render_result(result, arguments) -> list[str]:
    out = [f"arguments  {visible(arguments)}"]
    if not isinstance(result, dict):
        return out + [f"result     not a tool result: {visible(result)}"]
    details = dict(result["details"]) if isinstance(result.get("details"), dict) else result.get("details")
    diff = details.pop("diff", None) if isinstance(details, dict) else None
    out += [f"result     {'error' if result.get('isError') else 'ok'} {visible(details)}",
            "  " + visible(_text_of(result.get("content")))]
    return out + (["diff", *("  " + visible(line) for line in str(diff).split("\n"))] if diff is not None else [])


def render_edits(record: dict) -> str:
    if "createRaised" in record:
        return f"## tool\ncreate_edit_tool raised {record['createRaised']}\n"
    out = []
    for n, edit in enumerate(record.get("edits", []), 1):
        out += ["", f"## edit {n}"] + (["write      fails: os.replace and os.rename raise EACCES"] if edit["failWrite"] else [])
        if "result" in edit:
            out += render_result(edit["result"], edit["arguments"])
        else:
            out += [f"arguments  {visible(edit['arguments'])}", f"result     {visible(edit)}"]
        out += [f"renamed    over {r['to']}{'' if r['sameDirectory'] else ' from another directory'}"
                for r in edit["renames"]]
    out += ["", "## files after", *(file_line(p, k) for p, k in record.get("files", {}).items())]
    return "\n".join(out + [f"removed  {p}" for p in record.get("removed", [])]).lstrip("\n") + "\n"


RENDERERS = {"workspace-edits": render_edits}


def describe(plan: dict) -> str:
    notes = next(e for e in plan["entries"] if e["path"] == NOTES)
    edits = [f"{n}. edit {visible(e['arguments'])}" + (", every rename failing with EACCES" if e.get("failWrite") else "")
             for n, e in enumerate(plan["edits"], 1)]
    return (f"{NOTES} holds {visible(bytes.fromhex(notes['hex']).decode())}" + (f" (mode {notes['mode']:04o})"
            if "mode" in notes else "") + ", beside chapter 08's secret and the entries of ENTRIES "
            "(chapters/ch09_edit_tool/judge/plans.py) || edits: "
            + "; ".join(edits))
