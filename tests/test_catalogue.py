"""The chapter catalogue (course/catalogue.toml): read as `Chapter`s, in order, and refused with a clear
message when an entry is not one."""

import pytest

from course import manifest
from course.manifest import CHAPTERS, CatalogueError, Chapter, find_chapter, load_catalogue


def test_the_catalogue_lists_the_course_s_chapters_in_order():
    assert [c.number for c in CHAPTERS] == sorted({c.number for c in CHAPTERS})
    loop = find_chapter("ch07")
    assert loop == Chapter("07", "ch07_agent_loop", "The agent loop", ("AgentLoopOptions", "run_agent_loop"))
    assert loop.weights["取消与上限"] == 3 and loop.test_file == "chapters/ch07_agent_loop/test_ch07_agent_loop.py"
    assert find_chapter("6").runs_in == ("ch07_agent_loop",)  # a TOML array is a tuple, as Chapter's fields are
    assert hash(find_chapter("08"))  # (frozen, and hashable: a tuple, not a list)


def write(tmp_path, text: str):
    path = tmp_path / "catalogue.toml"
    path.write_text(text, encoding="utf-8")
    return path


ENTRY = '[[chapters]]\nnumber = "10"\nmodule = "ch10_edit"\ntitle = "Edits"\n'


def test_a_minimal_entry_is_a_chapter_with_the_defaults(tmp_path):
    [chapter] = load_catalogue(write(tmp_path, ENTRY))
    assert chapter == Chapter("10", "ch10_edit", "Edits")
    assert (chapter.names, chapter.runs_in, chapter.weights) == ((), (), {})


@pytest.mark.parametrize(("text", "said"), [
    ('[[chapters]]\nnumber = "10"\nmodule = "ch10_edit"\n', "chapter 1 (ch10_edit) has no title"),
    (ENTRY + 'colour = "red"\n', "chapter 1 (ch10_edit) has unknown keys colour (a chapter's keys: hardening_weight, masked_beside, masked_calls, masked_tools, module, names,"),
    (ENTRY.replace('"10"', "10"), "number 10 is not two digits in quotes"),
    (ENTRY.replace("ch10_edit", "edit"), "module 'edit' is not a Python module name starting with ch10_"),
    (ENTRY + 'names = ["edit file"]\n', "names is not a list of Python names"),
    (ENTRY + 'weights = { "basics" = "two" }\n', "weights is not a table of section = points"),
    (ENTRY + 'text = 7\n', "text is not a path (from the repository root) in quotes"),
    (ENTRY + 'hardening_weight = -1\n', "hardening_weight is not a number of points, at least 0"),
    (ENTRY + 'masked_beside = ["../secret.txt"]\n', "masked_beside is not a list of file names (no /, not . or ..)"),
    (ENTRY + ENTRY.replace("10", "09"), "chapter 09 comes after chapter 10"),
    (ENTRY + ENTRY, "chapter 10 comes after chapter 10"),
    ('[[chapters]]\nnumber = "10\n', "cannot be read as TOML"),
    ("", "no [[chapters]] tables"),
], ids=["no-title", "unknown-key", "number-not-text", "module-name", "names", "weights", "text", "hardening-weight",
        "masked-beside", "out-of-order", "twice",
        "not-toml", "empty"])  # (ids without the entries' text: `pytest -k ch10` is a chapter's, not these)
def test_an_entry_that_is_no_chapter_is_refused_saying_why(tmp_path, text, said):
    path = write(tmp_path, text)
    with pytest.raises(CatalogueError) as refused:
        load_catalogue(path)
    assert str(refused.value).startswith(str(path)) and said in str(refused.value)


def test_the_package_reads_the_catalogue_beside_it():
    assert manifest.CATALOGUE.name == "catalogue.toml" and load_catalogue() == CHAPTERS
