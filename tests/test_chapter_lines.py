"""What chapter 09 (the edit tool, added by docs/instructors.md's checklist) costs in lines: the harness code it
adds outside its checkpoint and tests is at most twice its checkpoint, and docs/instructors.md's table is what
the files hold now. `python tests/test_chapter_lines.py` prints the table to paste there."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULE = "ch09_edit_tool"
CHECKPOINT, TESTS = f"checkpoints/{MODULE}.py", f"tests/test_{MODULE}.py"
HARNESS = [f"course/recorder/scenarios/{MODULE}.py", f"course/judge/scenarios/{MODULE}.py",
           f"course/judge/gallery/{MODULE}.py", f"course/judge/contracts/{MODULE}.py", "course/judge/hints.py"]
"""Code: every file of the chapter's own, and its block of SECTIONS in hints.py."""
DATA = ["course/catalogue.toml", f"docs/chapters/{MODULE}.txt", f"course/judge/scenarios/pinned/{MODULE}.json"]
"""Not code: the catalogue entry (part of the minimal chapter), the chapter text, the pinned plans."""


def lines(path: str) -> int:
    """The file's lines; of a file other chapters share, only the chapter's own block."""
    text = (ROOT / path).read_text(encoding="utf-8").splitlines()
    if path == "course/judge/hints.py":  # SECTIONS["09"]: from its key to the line closing it
        start = text.index('    "09": {  # chapters/ch09_edit_tool/text.txt: each section\'s lines, and what to look for in them')
        return text.index("    },", start) - start + 1
    if path == "course/catalogue.toml":  # the chapter's [[chapters]] table
        start = text.index(f'module = "{MODULE}"') - 2
        return next((n for n in range(start + 1, len(text)) if text[n].startswith("[[")), len(text)) - start
    return len(text)


def table() -> str:
    rows = [("checkpoint", CHECKPOINT), ("tests", TESTS)] + [("harness", p) for p in HARNESS] + [("data", p) for p in DATA]
    harness = sum(lines(p) for p in HARNESS)
    out = ["| kind | file | lines |", "|---|---|---|"] + [f"| {kind} | `{path}` | {lines(path)} |" for kind, path in rows]
    return "\n".join(out + [f"| harness, in all | | {harness} ({harness / lines(CHECKPOINT):.2f}× the checkpoint) |"])


def test_the_harness_code_is_at_most_twice_the_checkpoint():
    assert sum(lines(p) for p in HARNESS) <= 2 * lines(CHECKPOINT), table()


def test_docs_instructors_md_holds_the_table_as_the_files_are_now():
    assert table() in (ROOT / "docs" / "instructors.md").read_text(encoding="utf-8"), \
        f"paste this table (python tests/test_chapter_lines.py) into docs/instructors.md:\n{table()}"


if __name__ == "__main__":
    print(table())
