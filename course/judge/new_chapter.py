"""`course new NN "title"`: a new chapter's working skeleton, the minimal chapter of docs/instructors.md.

It writes the three things a chapter needs and nothing optional:

- the reference checkpoint `chapters/chNN_<slug>/chNN_<slug>.py` (`checkpoints.chNN_<slug>`), with one
  placeholder function;
- its test module `chapters/chNN_<slug>/test_chNN_<slug>.py`, snapshot tests in the course's notation (the
  `snapshot` fixture; a value without a renderer shows as indented JSON, course.judge.render);
- its entry in the catalogue (`course/catalogue.toml`), in the order of the chapter numbers;

then generates the snapshots from the reference (as `course snapshots update NN` does). Every
command works on the chapter from there: check, status, start, hint, watch, snapshots, grade,
mutants (which skips it until it has a gallery) and `pytest -k chNN`. It writes over nothing: a
number, module or file that is already there refuses the whole chapter before anything is written.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

import checkpoints
from course import manifest
from course.judge.testrun import course_root, run_pytest
from course.manifest import Chapter

PLACEHOLDER_SECTION = "basics"
"""The skeleton's one section: renamed after the chapter text's own section headings."""

CHECKPOINT = '''"""Chapter {number}: {title}.

The reference checkpoint, written by `course new {number}`. Replace `example` with what the chapter
builds, in the order the chapter text builds it, and keep the catalogue entry's `names`
(course/catalogue.toml) to the public names the chapter's tests use.
"""

from __future__ import annotations


def example(text: str) -> dict:
    """The words of `text` and how many there are (a placeholder: the chapter's own function replaces it)."""
    words = text.split()
    return {{"text": text, "words": words, "count": len(words)}}
'''

TESTS = '''"""Chapter {number}: {title}. Each scenario compares what the chapter's module returns with its snapshot.

A value is shown in the course's notation (course.judge.render): a record of a kind with a renderer
as that kind is shown, any other JSON value as indented JSON. `course snapshots update {number}` writes
the snapshots from the reference; `course check {number}` judges a student's module with the same tests.
Written by `course new {number}`: replace these scenarios with the chapter's own.
"""

import pytest

from course.recorder.harness import load_checkpoint


@pytest.fixture
def {keyword}():
    return load_checkpoint("{module}")


@pytest.mark.section("{section}")
class TestExample:
    def test_two_words(self, {keyword}, snapshot):
        """two words are counted as two."""
        assert {keyword}.example("hello world") == snapshot

    def test_empty_text(self, {keyword}, snapshot):
        """an empty text has no words."""
        assert {keyword}.example("") == snapshot
'''


class Refused(Exception):
    """The chapter cannot be added as asked: the message says why (nothing was written)."""


def slug_of(title: str) -> str:
    """The module's name after `chNN_`: the title's ASCII words, lower case, joined by `_`."""
    return "_".join(re.findall(r"[a-z0-9]+", title.lower()))


def planned_chapter(number: str, title: str, slug: str | None) -> Chapter:
    """The chapter `course new` would add, or Refused saying why it cannot."""
    if not re.fullmatch(r"\d{1,2}", number.removeprefix("ch")):
        raise Refused(f"{number!r} is not a chapter number (two digits: 10)")
    number = number.removeprefix("ch").zfill(2)
    if not title.strip() or not title.isprintable():
        raise Refused("the title must be a printable text on one line")
    slug = slug if slug is not None else slug_of(title)
    if not slug:
        raise Refused(f"the title {title!r} has no ASCII words to name the module by: give --slug (e.g. edit_tool)")
    if not re.fullmatch(r"[a-z0-9_]+", slug) or not f"ch{number}_{slug}".isidentifier():
        raise Refused(f"--slug {slug!r}: lower-case letters, digits and _ only")
    chapter = Chapter(number, f"ch{number}_{slug}", title.strip(), ("example",))
    for other in manifest.load_catalogue(manifest.CATALOGUE):
        if other.number == chapter.number or other.module == chapter.module:
            raise Refused(f"the catalogue already has chapter {other.number} ({other.module})")
    return chapter


def catalogue_entry(chapter: Chapter) -> str:
    """The chapter's [[chapters]] table (a JSON string is a TOML basic string: the title is printable)."""
    quoted = lambda text: json.dumps(text, ensure_ascii=False)  # noqa: E731
    names = ", ".join(quoted(name) for name in chapter.names)
    return (f"[[chapters]]\nnumber = {quoted(chapter.number)}\nmodule = {quoted(chapter.module)}\n"
            f"title = {quoted(chapter.title)}\nnames = [{names}]\n")


def with_entry(text: str, chapter: Chapter, chapters: list[Chapter]) -> str:
    """The catalogue's text with the chapter's table before the first chapter numbered after it (else last)."""
    headers = [m.start() for m in re.finditer(r"^\[\[chapters\]\][ \t]*$", text, re.MULTILINE)]
    later = [n for n, other in enumerate(chapters) if other.number > chapter.number]
    if not later or len(headers) != len(chapters):
        return text.rstrip("\n") + "\n\n" + catalogue_entry(chapter)
    at = headers[later[0]]
    return text[:at] + catalogue_entry(chapter) + "\n" + text[at:]


def add_to_catalogue(chapter: Chapter, path: Path) -> None:
    """Write the catalogue with the chapter's entry, read back before it replaces the old one (atomically)."""
    text = with_entry(path.read_text(encoding="utf-8"), chapter, manifest.load_catalogue(path))
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    partial.write_text(text, encoding="utf-8")
    try:
        listed = manifest.load_catalogue(partial)
        if chapter not in listed:
            raise Refused(f"the catalogue written would not list chapter {chapter.number}; {path} is left as it was")
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def skeleton_files(chapter: Chapter, root: Path) -> dict[Path, str]:
    """The checkpoint and the test module, by path; Refused if either (or its snapshots) is there already."""
    values = {"number": chapter.number, "title": chapter.title, "module": chapter.module,
              "keyword": chapter.keyword, "section": PLACEHOLDER_SECTION}
    files = {root / chapter.reference_file: CHECKPOINT.format(**values),
             root / chapter.test_file: TESTS.format(**values)}
    for path in [*files, root / chapter.snapshot_dir]:
        if path.exists():
            raise Refused(f"{path.relative_to(root)} is there already: it is left as it is")
    return files


def write_skeleton(chapter: Chapter, root: Path) -> list[Path]:
    """Write the checkpoint, the test module and the catalogue entry; all of them or (Refused, OSError) none."""
    if not manifest.CATALOGUE.resolve().is_relative_to(root.resolve()):
        raise Refused(f"the course package reads its catalogue from {manifest.CATALOGUE}, outside the course "
                      f"at {root}: run `course new` in your clone of the course, installed with pip install -e")
    files = skeleton_files(chapter, root)
    folder = root / chapter.folder
    made = not folder.exists()
    written: list[Path] = []
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for path, text in files.items():
            with path.open("x", encoding="utf-8") as file:  # (never over a file made since the check)
                written.append(path)
                file.write(text)
        add_to_catalogue(chapter, manifest.CATALOGUE)
    except BaseException:
        for path in written:
            path.unlink(missing_ok=True)
        if made:
            folder.rmdir()
        raise
    if str(folder) not in checkpoints.__path__:  # (the package found the chapter folders when it was imported)
        checkpoints.__path__.append(str(folder))
    return [manifest.CATALOGUE.resolve(), *files]


def new(args: argparse.Namespace) -> int:
    """Add the chapter's skeleton to the course and generate its snapshots from its reference."""
    root = course_root().resolve()
    try:
        chapter = planned_chapter(args.chapter, args.title, args.slug)
        written = write_skeleton(chapter, root)
    except (Refused, manifest.CatalogueError, OSError) as refused:
        print(f"course new: {refused}", file=sys.stderr)
        return 2
    print(f"chapter {chapter.number} — {chapter.title}")
    for path in written:
        print(f"  wrote {path.relative_to(root)}")
    run = run_pytest([chapter], extra=["--snapshot-update"])
    snapshots = sorted((root / chapter.snapshot_dir).glob("*.txt"))
    print(f"  wrote {len(snapshots)} snapshots in {chapter.snapshot_dir}/ (from the reference)")
    if not run.passed:
        print(f"\nthe reference's tests did not pass ({run.describe_exit()}):\n{run.tail()}")
        return 1
    print(f"\nnext: course check {chapter.number}; then write the chapter, step by step: docs/instructors.md")
    return 0


def register(commands) -> None:
    parser = commands.add_parser("new", help="instructors: add a chapter (checkpoint, tests, snapshots, catalogue entry)")
    parser.add_argument("chapter", metavar="NN", help="the new chapter's number, e.g. 10")
    parser.add_argument("title", help="what the chapter builds, e.g. \"The edit tool\"")
    parser.add_argument("--slug", default=None,
                        help="the module's name after chNN_ (default: the title's ASCII words, e.g. the_edit_tool)")
    parser.set_defaults(handler=new)
