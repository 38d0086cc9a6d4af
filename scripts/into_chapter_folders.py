"""Move every chapter still in the old layout into its folder, `chapters/<module>/` (issue 22).

    python scripts/into_chapter_folders.py [--data-from REV] [--dry-run]

Idempotent: a file already in its folder is left alone, and a second run moves nothing. Each move is a
`git mv`, so that git's rename detection carries edits made to the old files on other branches. For each
chapter of `course/catalogue.toml`:

    checkpoints/<module>.py                      -> chapters/<module>/<module>.py
    tests/test_<module>.py                       -> chapters/<module>/test_<module>.py
    tests/__snapshots__/test_<module>/*          -> chapters/<module>/__snapshots__/test_<module>/*
    docs/chapters/<module>.txt                   -> chapters/<module>/text.txt (its catalogue `text` line goes)
    course/recorder/scenarios/<module>.py        -> chapters/<module>/scenarios.py
    course/judge/scenarios/<module>.py           -> chapters/<module>/judge/plans.py
    course/judge/scenarios/chNN_<other>.py       -> chapters/<module>/judge/chNN_<other>.py
    course/judge/scenarios/pinned/<module>.json  -> chapters/<module>/judge/pinned.json
    course/judge/contracts/<module>.py           -> chapters/<module>/judge/contract.py
    course/judge/gallery/<module>.py             -> chapters/<module>/judge/gallery.py
    course/judge/gallery/loops/chNN_*.py         -> chapters/<module>/judge/loops/chNN_*.py
    docs/chapters/<module>.tracks.md             -> chapters/<module>/judge/tracks.md

and once: tests/conftest.py -> conftest.py (it applies to tests/ and chapters/ alike). The old module
names are rewritten to the new ones in every Python file of chapters/, tests/ and benchmarks/.

Data split out of shared files (read from the working tree, or with `--data-from REV` from that revision,
e.g. the main branch before the merge that replaced them):

    course/judge/hints.py  SECTIONS[NN], CHAPTER_TEXT[NN], KINDS  -> chapters/<module>/judge/hints.toml
    course/judge/mutant_signatures.json [NN]                       -> chapters/<module>/judge/signatures.json

The kinds of broken promise (KINDS) cite the chapter whose text their passages are in. The old
mutant_signatures.json is removed once split; hints.py is code, left for its own commit to change.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tomllib
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HINTS = "course/judge/hints.py"
SIGNATURES = "course/judge/mutant_signatures.json"


def git(*args: str, text: str | None = None) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True, input=text).stdout


def catalogue() -> list[dict]:
    return tomllib.loads((ROOT / "course" / "catalogue.toml").read_text(encoding="utf-8"))["chapters"]


def moves_of(chapter: dict) -> list[tuple[str, str]]:
    """(old path, new path) of every file of the chapter that is still in the old layout."""
    module, number = chapter["module"], chapter["number"]
    folder, judge = f"chapters/{module}", f"chapters/{module}/judge"
    pairs = [(old, new) for old, new in old_and_new_paths(module) if not old.startswith("tests/__snapshots__")]
    for path in sorted((ROOT / "tests" / "__snapshots__" / f"test_{module}").glob("*")):
        pairs.append((f"tests/__snapshots__/test_{module}/{path.name}", f"{folder}/__snapshots__/test_{module}/{path.name}"))
    for path in sorted((ROOT / "course" / "judge" / "scenarios").glob(f"ch{number}_*.py")):
        if path.stem != module:
            pairs.append((f"course/judge/scenarios/{path.name}", f"{judge}/{path.name}"))
    for path in sorted((ROOT / "course" / "judge" / "gallery" / "loops").glob(f"ch{number}_*.py")):
        pairs.append((f"course/judge/gallery/loops/{path.name}", f"{judge}/loops/{path.name}"))
    return [(old, new) for old, new in pairs if (ROOT / old).exists() and not (ROOT / new).exists()]


def move(old: str, new: str, dry_run: bool) -> None:
    print(f"git mv {old} {new}")
    if not dry_run:
        (ROOT / new).parent.mkdir(parents=True, exist_ok=True)
        git("mv", old, new)


def renamed_modules(chapters: list[dict]) -> list[tuple[re.Pattern, str]]:
    """The old module names of the chapters' files and their new ones, as substitutions (longest first)."""
    subs: list[tuple[str, str]] = []
    for chapter in chapters:
        module, number = chapter["module"], chapter["number"]
        new, judge = f"chapters.{module}", f"chapters.{module}.judge"
        extra = {p.stem for p in (ROOT / "chapters" / module / "judge").glob(f"ch{number}_*.py")}
        extra |= {p.stem for p in (ROOT / "course" / "judge" / "scenarios").glob(f"ch{number}_*.py")} - {module}
        for name in sorted(extra):
            subs += [(rf"from course\.judge\.scenarios import {name}\b", f"from {judge} import {name}"),
                     (rf"\bcourse\.judge\.scenarios\.{name}\b", f"{judge}.{name}")]
        for old, part, name in (("course.recorder.scenarios", new, "scenarios"), ("course.judge.scenarios", judge, "plans"),
                                ("course.judge.contracts", judge, "contract"), ("course.judge.gallery", judge, "gallery")):
            escaped = re.escape(old)
            subs += [(rf"from {escaped} import {module} as (\w+)", rf"from {part} import {name} as \1"),
                     (rf"from {escaped} import {module}\b", f"from {part} import {name} as {module}"),
                     (rf"\b{escaped}\.{module}\b", f"{part}.{name}")]
    for chapter in chapters:  # the old paths, where docstrings and tests name them
        module = chapter["module"]
        for old, new in old_and_new_paths(module):
            subs.append((rf"(?<![\w/.]){re.escape(old)}(?![\w.])", new))
    return [(re.compile(pattern), replacement) for pattern, replacement in subs]


def old_and_new_paths(module: str) -> list[tuple[str, str]]:
    folder = f"chapters/{module}"
    return [(f"checkpoints/{module}.py", f"{folder}/{module}.py"), (f"tests/test_{module}.py", f"{folder}/test_{module}.py"),
            (f"tests/__snapshots__/test_{module}", f"{folder}/__snapshots__/test_{module}"),
            (f"docs/chapters/{module}.txt", f"{folder}/text.txt"),
            (f"course/recorder/scenarios/{module}.py", f"{folder}/scenarios.py"),
            (f"course/judge/scenarios/{module}.py", f"{folder}/judge/plans.py"),
            (f"course/judge/scenarios/pinned/{module}.json", f"{folder}/judge/pinned.json"),
            (f"course/judge/contracts/{module}.py", f"{folder}/judge/contract.py"),
            (f"course/judge/gallery/{module}.py", f"{folder}/judge/gallery.py"),
            (f"docs/chapters/{module}.tracks.md", f"{folder}/judge/tracks.md")]


def rewrite_imports(chapters: list[dict], dry_run: bool) -> None:
    subs = renamed_modules(chapters)
    files = [ROOT / "conftest.py", *sorted((ROOT / "chapters").rglob("*.py")), *sorted((ROOT / "tests").rglob("*.py")),
             *sorted((ROOT / "benchmarks").rglob("*.py"))]
    for path in files:
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        changed = text
        for pattern, replacement in subs:
            changed = pattern.sub(replacement, changed)
        if changed != text:
            print(f"rewrote the chapters' module names in {path.relative_to(ROOT)}")
            if not dry_run:
                path.write_text(changed, encoding="utf-8")


def drop_moved_texts(chapters: list[dict], dry_run: bool) -> None:
    """The catalogue's `text` line of a chapter whose text now is its folder's text.txt goes (the default)."""
    path = ROOT / "course" / "catalogue.toml"
    text = path.read_text(encoding="utf-8")
    for chapter in chapters:
        module = chapter["module"]
        if (ROOT / "chapters" / module / "text.txt").exists():
            text = re.sub(rf'(?m)^text = "docs/chapters/{re.escape(module)}\.txt"\n', "", text)
    if text != path.read_text(encoding="utf-8"):
        print("dropped the catalogue's text lines of the texts now in their chapter folders")
        if not dry_run:
            path.write_text(text, encoding="utf-8")


# --- the data split out of shared files ------------------------------------------------------------

def old_text(path: str, revision: str | None) -> str | None:
    """A shared file as it was (at `revision`, or in the working tree); None when it is not there."""
    if revision:
        try:
            return git("show", f"{revision}:{path}")
        except subprocess.CalledProcessError:
            return None
    return (ROOT / path).read_text(encoding="utf-8") if (ROOT / path).exists() else None


def old_hints(revision: str | None) -> types.ModuleType | None:
    """The old hints module (run from its text), or None when it holds no per-chapter data any more."""
    text = old_text(HINTS, revision)
    if text is None or not re.search(r"(?m)^SECTIONS\b", text):
        return None
    sys.path.insert(0, str(ROOT))
    module = types.ModuleType("old_course_hints")
    sys.modules[module.__name__] = module
    exec(compile(text, HINTS, "exec"), module.__dict__)
    return module


def toml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # (JSON's escapes are TOML basic strings' too)


def toml_passages(passages, number: str) -> str:
    rows = []
    for p in passages:
        other = f"chapter = {toml_string(p.chapter)}, " if p.chapter != number else ""
        rows.append(f"{{ {other}section = {toml_string(p.title)}, lines = [{p.first}, {p.last}] }}")
    return "[" + ", ".join(rows) + "]"


def hints_toml(hints: types.ModuleType, number: str) -> str | None:
    """The chapter's hints as TOML: its text's title, its sections, the kinds of broken promise citing it."""
    title = hints.CHAPTER_TEXT.get(number)
    sections = hints.SECTIONS.get(number, {})
    kinds = [kind for kind in hints.KINDS if kind.passages and kind.passages[0].chapter == number]
    if title is None and not sections and not kinds:
        return None
    out = ["# The chapter's hints (`course hint`): what each section promises, where its text says so, and the",
           "# kinds of broken promise the invariant checker reports, each cited by section and line of the text.", ""]
    if title is not None:
        out += [f"text_title = {toml_string(title)}", ""]
    for name, section in sections.items():
        out.append(f"[sections.{toml_string(name)}]")
        out.append(f"promise = {toml_string(section.promise)}")
        if section.passages:
            out.append(f"passages = {toml_passages(section.passages, number)}")
        for key in ("look_for", "elsewhere"):
            if getattr(section, key):
                out.append(f"{key} = {toml_string(getattr(section, key))}")
        out.append("")
    for kind in kinds:
        out += ["[[kinds]]", f"name = {toml_string(kind.name)}",
                "patterns = [" + ", ".join(toml_string(p) for p in kind.patterns) + "]",
                f"asks = {toml_string(kind.asks)}", f"passages = {toml_passages(kind.passages, number)}", ""]
    text = "\n".join(out)
    tomllib.loads(text)  # (it must read back)
    return text


def split_data(chapters: list[dict], revision: str | None, dry_run: bool) -> None:
    hints = old_hints(revision)
    signatures_text = old_text(SIGNATURES, revision)
    signatures = json.loads(signatures_text) if signatures_text else {}
    for chapter in chapters:
        judge = ROOT / "chapters" / chapter["module"] / "judge"
        written = {}
        if hints is not None and (text := hints_toml(hints, chapter["number"])) is not None:
            written["hints.toml"] = text
        if chapter["number"] in signatures:
            written["signatures.json"] = json.dumps(signatures[chapter["number"]], ensure_ascii=False, indent=1) + "\n"
        for name, text in written.items():
            path = judge / name
            if path.exists() and path.read_text(encoding="utf-8") == text:
                continue
            print(f"wrote {path.relative_to(ROOT)}")
            if not dry_run:
                judge.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
                git("add", str(path.relative_to(ROOT)))
    if (ROOT / SIGNATURES).exists():
        print(f"git rm {SIGNATURES}")
        if not dry_run:
            git("rm", "-q", SIGNATURES)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-from", metavar="REV", default=None,
                        help="read hints.py and mutant_signatures.json as they were at this revision")
    parser.add_argument("--dry-run", action="store_true", help="say what would be done, do nothing")
    args = parser.parse_args(argv)
    chapters = catalogue()
    # (the data first: the old hints module imports what the moves leave in place)
    split_data(chapters, args.data_from, args.dry_run)
    if (ROOT / "tests" / "conftest.py").exists() and not (ROOT / "conftest.py").exists():
        move("tests/conftest.py", "conftest.py", args.dry_run)
    for chapter in chapters:
        for old, new in moves_of(chapter):
            move(old, new, args.dry_run)
    for place in ("tests/__snapshots__", "course/judge/gallery/loops", "course/judge/scenarios/pinned", "docs/chapters"):
        for folder in sorted((ROOT / place).glob("**/"), reverse=True):  # (the folders the moves emptied)
            if folder.is_dir() and not any(folder.iterdir()) and not args.dry_run:
                folder.rmdir()
    drop_moved_texts(chapters, args.dry_run)
    rewrite_imports(chapters, args.dry_run)
    old_places = ("checkpoints", "course/recorder/scenarios", "course/judge/scenarios", "course/judge/gallery",
                  "course/judge/contracts", "docs/chapters", "tests")
    left = [path for place in old_places for path in git("ls-files", place).split() if re.search(r"/(test_)?ch\d\d_", path)]
    if left:
        print("still in the old layout (no chapter of the catalogue claims them; move them by hand):\n  "
              + "\n  ".join(left))
    return 0


if __name__ == "__main__":
    sys.exit(main())
