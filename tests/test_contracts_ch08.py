"""Chapter 08's checks cite what they enforce (issue 21), as chapter 07's do (tests/test_contracts.py):

- every kind of read a generated plan makes cites sentences of the chapter text, and belongs to one section;
- the plans stay inside the chapter's contract (none leans on a hardening promise), each section's plans
  make only that section's kinds of read, and every kind is made (the published plans and a hidden seed's);
- a failing plan shows what the read its run first departed at holds the tool to, beside the divergence;
- the hardening track is the five fixed tests of a swap between check and open, each naming its promise.
"""

from pathlib import Path

import pytest

from course.judge import contracts, differential
from course.judge.index import expected_scenarios
from chapters.ch08_workspace_read.judge import plans as plans_of
from course.manifest import HARDENING, find_chapter

ROOT = Path(__file__).resolve().parent.parent
READ = find_chapter("08")
TABLE = contracts.for_chapter(READ.module)


def test_chapter_08_has_a_table_and_a_text_in_the_manifest():
    assert READ.text_path == "chapters/ch08_workspace_read/text.txt"
    assert contracts.quote_problems(TABLE, (ROOT / READ.text_path).read_text(encoding="utf-8")) == []


def test_every_kind_of_read_cites_the_chapter():
    for name, kind in plans_of.KINDS.items():
        assert kind.cites and set(kind.cites) <= set(TABLE.cites), name
        assert kind.section in plans_of.CHAPTER_SECTIONS, name


@pytest.mark.parametrize("section", plans_of.CHAPTER_SECTIONS)
@pytest.mark.parametrize("seed", [None, 7])
def test_the_plans_stay_inside_the_chapter_and_exercise_their_section(section: str, seed):
    kinds = set()
    for plan in differential.draw_plans(READ.module, section, seed=seed):
        assert plans_of.beyond_the_chapter(plan) == []
        cited = plans_of.cites_of(plan)
        assert cited and set(cited) <= set(TABLE.cites), plan.get("reads")
        for read in plan["reads"]:
            assert plans_of.KINDS[read["kind"]].section == section, read
            kinds.add(read["kind"])
    assert kinds == {name for name, kind in plans_of.KINDS.items() if kind.section == section}


def test_there_is_no_hardening_section_of_generated_plans():
    """The chapter track holds every generated plan: the hardening track is the fixed tests of section 加固."""
    assert plans_of.HARDENING_SECTIONS == {}
    tracks = {e.scenario: e.track for e in expected_scenarios(READ, ROOT)}
    assert {name for name, track in tracks.items() if track == HARDENING} == {
        "TestHardening::test_a_swap_after_the_check_does_not_fool_it[symlink]",
        "TestHardening::test_a_swap_after_the_check_does_not_fool_it[fifo]",
        "TestHardening::test_a_directory_swapped_after_its_check_is_not_followed[docs]",
        "TestHardening::test_a_directory_swapped_after_its_check_is_not_followed[deep]",
        "TestHardening::test_a_fifo_swapped_in_for_the_open_and_back_is_refused",
    }
    leaned = {name for e in expected_scenarios(READ, ROOT) if e.track == HARDENING for name in e.cites}
    assert leaned == set(TABLE.promises)


def test_a_failing_plan_quotes_what_the_read_it_departed_at_holds_to():
    plan = {"rootLink": False, "rootSpelling": "str", "caps": {}, "entries": plans_of.base_entries(), "reads": [
        {"kind": "inside", "arguments": {"path": "README.md"}},
        {"kind": "links-out", "arguments": {"path": "out_rel"}}]}
    expected = "## read 1\narguments  x\nresult  ok\n\n## read 2\narguments  y\nresult     error {\"error\": \"symlink_outside\"}\n"
    got = expected.replace("symlink_outside", "not_found")
    said = differential.verdict(READ.module, plan, got, expected).splitlines()
    quotes = [f"enforces: {TABLE.cites[name].text()}" for name in plans_of.KINDS["links-out"].cites]
    at = said.index(quotes[0])
    assert said[at:at + len(quotes)] == quotes
    assert said[at + len(quotes)] == "first divergence in read 2, line 2:"
    assert f"enforces: {TABLE.cites['inside-links'].text()}" not in said  # read 1's, which did not depart


def test_a_read_on_from_a_notice_is_held_to_the_whole_plan():
    """A plan that reads on from each nextOffset renders more reads than it lists: its whole list applies."""
    plan = {"caps": {"max_lines": 2}, "entries": [], "reads": [
        {"kind": "reading-on", "arguments": {"path": "notes.txt"}, "follow": 3},
        {"kind": "empty-file", "arguments": {"path": "empty.txt"}}]}
    assert plans_of.cites_at(plan, "read 3") == ()
    assert differential.plan_cites(READ.module, plan, "read 3") == plans_of.cites_of(plan)
    assert set(plans_of.KINDS["empty-file"].cites) <= set(plans_of.cites_of(plan))


def test_a_paths_spelling_adds_what_it_holds_to():
    plan = {"rootLink": True, "rootSpelling": "relative", "caps": {}, "entries": [], "reads": [
        {"kind": "inside", "arguments": {"path": "/proc/self/root{real}/README.md"}},
        {"kind": "inside", "arguments": {"path": "{root}/../ws/README.md"}}]}
    assert plans_of.cites_at(plan, "read 1") == (*plans_of.KINDS["inside"].cites, "absolute-by-components",
                                                 "root-link", "root-absolute")
    assert {"parent", "parent-before-absolute"} <= set(plans_of.cites_at(plan, "read 2"))
