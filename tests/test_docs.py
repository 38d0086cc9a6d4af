"""The README is a one-page map and the docs it points at are there; tox.ini runs any chapter.

What each doc says a command prints is held by the tests of that command; here, only what ties the
documents, CI and tox.ini to the repository.
"""

import configparser
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ["README.md", "docs/students.md", "docs/instructors.md", "docs/guarantees.md", "docs/benchmarks.md"]
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


def quick_start_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = section.split("```", 2)[1]
    return [line for line in block.splitlines() if line.strip()]


def test_the_readme_has_the_two_quick_start_commands_and_ci_runs_the_test_one():
    run, test = quick_start_commands()
    assert run.endswith("&& .venv/bin/course") and test.endswith("&& .venv/bin/python -m pytest")
    assert "\n" + test + "\n" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_the_readme_points_at_every_doc_and_stays_one_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 60
    for doc in DOCS[1:]:
        assert f"]({doc})" in readme, doc


def test_every_relative_link_of_the_docs_leads_to_a_file_or_folder():
    for doc in DOCS:
        path = ROOT / doc
        text = path.read_text(encoding="utf-8")
        for target, _ in LINK.findall(text):
            if "://" not in target:
                assert (path.parent / target).exists(), f"{doc} links to {target}, which is not there"


def test_tox_runs_any_chapter_of_the_catalogue_without_an_environment_of_its_own():
    """`tox -e chapter -- chNN` runs `pytest -k chNN`: adding a chapter touches no tox.ini."""
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini", encoding="utf-8")
    assert tox["testenv:chapter"]["commands"].split() == ["pytest", "-k", "{posargs}"]
    assert not [name for name in tox.sections() if re.fullmatch(r"testenv:ch\d\d.*|testenv:ch\{.*", name)], \
        "a chapter's own tox environment: the `chapter` environment runs any chapter"

