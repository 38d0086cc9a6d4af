"""What chapter 09 (the edit tool, added by docs/instructors.md's checklist) costs in lines: the harness code it
adds outside its checkpoint and tests is at most twice its checkpoint, and docs/instructors.md's table is what
the files hold now. `python tests/test_chapter_lines.py` prints the table to paste there.

Everything of the chapter is in its folder: its Python files other than the checkpoint and the tests are the
harness code it adds; the rest (text, pinned plans, hints, signatures, snapshots) is data. The catalogue entry
is part of the minimal chapter, counted as data."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULE = "ch09_edit_tool"
FOLDER = ROOT / "chapters" / MODULE
CHECKPOINT, TESTS = f"chapters/{MODULE}/{MODULE}.py", f"chapters/{MODULE}/test_{MODULE}.py"


def chapter_files() -> list[str]:
    """The chapter's files other than its checkpoint, its tests and their snapshots, from the repository root."""
    found = [p for p in FOLDER.rglob("*") if p.is_file() and "__snapshots__" not in p.parts
             and "__pycache__" not in p.parts]
    return sorted(str(p.relative_to(ROOT)) for p in found if str(p.relative_to(ROOT)) not in (CHECKPOINT, TESTS))


def harness() -> list[str]:
    return [path for path in chapter_files() if path.endswith(".py")]


def data() -> list[str]:
    return ["course/catalogue.toml"] + [path for path in chapter_files() if not path.endswith(".py")]


def lines(path: str) -> int:
    """The file's lines; of the catalogue, only the chapter's [[chapters]] table."""
    text = (ROOT / path).read_text(encoding="utf-8").splitlines()
    if path == "course/catalogue.toml":
        start = text.index(f'module = "{MODULE}"') - 2
        return next((n for n in range(start + 1, len(text)) if text[n].startswith("[[")), len(text)) - start
    return len(text)


def table() -> str:
    rows = [("checkpoint", CHECKPOINT), ("tests", TESTS)] + [("harness", p) for p in harness()] + \
        [("data", p) for p in data()]
    code = sum(lines(p) for p in harness())
    out = ["| kind | file | lines |", "|---|---|---|"] + [f"| {kind} | `{path}` | {lines(path)} |" for kind, path in rows]
    return "\n".join(out + [f"| harness, in all | | {code} ({code / lines(CHECKPOINT):.2f}× the checkpoint) |"])


def test_the_chapter_has_harness_code_to_count():
    assert {"scenarios.py", "plans.py", "gallery.py", "contract.py"} <= {Path(p).name for p in harness()}, harness()


def test_the_harness_code_is_at_most_twice_the_checkpoint():
    assert sum(lines(p) for p in harness()) <= 2 * lines(CHECKPOINT), table()


def test_docs_instructors_md_holds_the_table_as_the_files_are_now():
    assert table() in (ROOT / "docs" / "instructors.md").read_text(encoding="utf-8"), \
        f"paste this table (python tests/test_chapter_lines.py) into docs/instructors.md:\n{table()}"


if __name__ == "__main__":
    print(table())
