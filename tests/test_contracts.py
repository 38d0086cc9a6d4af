"""Every check cites what it enforces, and the chapter track holds a student to the chapter and nothing else.

- every stored quote is on the line of the chapter text it cites, under the heading it names;
- every fixed scenario of a chapter with a contract names the chapter's sentences it enforces (chapter track)
  or the project's promise it holds (the hardening track, 加固), and every name is one the table knows;
- every kind of generated plan cites the chapter, and the chapter track's plans stay inside its contract;
- a failure shows what it enforces; a chapter without a text or a table breaks nothing.
"""

from pathlib import Path

import pytest

from course.judge import contracts, differential
from course.judge.index import expected_scenarios
from chapters.ch06_tool_execution.judge import ch06_plans
from chapters.ch07_agent_loop.judge import ch07_plans
from course.manifest import CHAPTERS, HARDENING, Chapter, find_chapter

ROOT = Path(__file__).resolve().parent.parent
CITING = [chapter for chapter in CHAPTERS if contracts.for_chapter(chapter.module).cites]
LOOP = find_chapter("07")


def test_chapter_07_has_a_table_and_a_text_in_the_manifest():
    assert LOOP in CITING
    assert LOOP.text == "../shared/spec/000_b463beaf6860d93c.txt"  # relative to the repository root, as the guide says


@pytest.mark.parametrize("chapter", CITING, ids=[c.number for c in CITING])
def test_every_quote_is_on_the_line_it_cites(chapter: Chapter):
    path = contracts.text_path(chapter, ROOT)
    if path is None:
        pytest.skip(f"chapter {chapter.number}'s text ({chapter.text_path}) is not here: the quotes cannot be checked "
                    "against it (they still print, stored with each citation)")
    assert contracts.quote_problems(contracts.for_chapter(chapter.module), path.read_text(encoding="utf-8")) == []


def test_a_quote_off_its_line_or_heading_is_found():
    text = "title\n#first\nsome words here\n#second\nother words\n"
    table = contracts.Contract({
        "right": contracts.Cite("first", 3, "words here"),
        "moved": contracts.Cite("second", 3, "words here"),
        "wrong": contracts.Cite("second", 5, "no such words"),
        "past": contracts.Cite("second", 9, "x"),
    })
    problems = contracts.quote_problems(table, text)
    assert [p.split(":")[0] for p in problems] == ["moved", "wrong", "past"]


@pytest.mark.parametrize("chapter", CITING, ids=[c.number for c in CITING])
def test_every_fixed_scenario_names_what_it_enforces(chapter: Chapter):
    table = contracts.for_chapter(chapter.module)
    fixed = [e for e in expected_scenarios(chapter, ROOT) if not e.generated]
    assert fixed
    for scenario in fixed:
        assert scenario.cites, f"{scenario.scenario} cites nothing: mark it @pytest.mark.cites(...) or hardening(...)"
        assert table.unknown(scenario.cites) == [], scenario.scenario
        if scenario.track == HARDENING:
            assert set(scenario.cites) <= set(table.promises), f"{scenario.scenario}: 加固 names promises"
        else:
            assert set(scenario.cites) <= set(table.cites), f"{scenario.scenario}: the chapter track cites the text"


def test_a_parametrized_case_cites_its_own_sentences_first():
    by_name = {e.scenario: e for e in expected_scenarios(LOOP, ROOT)}
    assert by_name["TestNonExecutingTerminals::test_terminal_row[length]"].cites == (
        "length-not-run", "length-events", "pairing")
    assert by_name["TestHardening::test_max_steps_must_be_a_positive_integer[0]"].cites == ("max-steps-checked",)
    assert by_name["TestHardening::test_max_steps_must_be_a_positive_integer[0]"].track == HARDENING


def test_every_kind_of_plan_cites_the_chapter():
    table = contracts.for_chapter(LOOP.module)
    for name, kind in ch07_plans.KINDS.items():
        assert kind.cites and set(kind.cites) <= set(table.cites), name
        assert kind.section in ch07_plans.CHAPTER_SECTIONS, name


@pytest.mark.parametrize("section", ch07_plans.CHAPTER_SECTIONS)
@pytest.mark.parametrize("seed", [None, 7])
def test_the_chapter_tracks_plans_stay_inside_the_chapter(section: str, seed):
    plans = differential.draw_plans(LOOP.module, section, seed=seed)
    kinds = set()
    for plan in plans:
        assert ch07_plans.beyond_the_chapter(plan) == [], plan
        assert ch07_plans.KINDS[plan["kind"]].section == section
        kinds.add(plan["kind"])
        if section == "pure_stop":  # a 纯文本 stop plan is a pure stop
            assert [(s["stopReason"], s["calls"]) for s in plan["steps"]] == [("stop", [])]
    assert kinds == {name for name, kind in ch07_plans.KINDS.items() if kind.section == section}


def test_the_hardening_plans_name_promises_the_table_knows_and_lean_on_each():
    table = contracts.for_chapter(LOOP.module)
    leaned = set()
    for section in ch07_plans.HARDENING_SECTIONS:
        for plan in differential.draw_plans(LOOP.module, section):
            promises = ch07_plans.beyond_the_chapter(plan)
            assert set(promises) <= set(table.promises)
            leaned.update(promises)
    fixed = {name for e in expected_scenarios(LOOP, ROOT) if e.track == HARDENING for name in e.cites}
    assert leaned | fixed == set(table.promises)


def test_a_failing_plan_says_what_it_enforces_beside_its_first_divergence():
    plan = differential.draw_plans(LOOP.module, "terminals")[0]
    said = differential.verdict(LOOP.module, plan, "## timeline\n 1  a\n", "## timeline\n 1  b\n").splitlines()
    table = contracts.for_chapter(LOOP.module)
    quotes = [f"enforces: {table.cites[name].text()}" for name in ch07_plans.KINDS[plan["kind"]].cites]
    at = said.index(quotes[0])
    assert said[at:at + len(quotes)] == quotes
    assert said[at + len(quotes)] == "first divergence in timeline, line 1:"


def test_a_chapter_without_a_text_or_a_table_breaks_nothing(tmp_path):
    empty = contracts.for_chapter("ch_nothing_here")
    assert (empty.cites, empty.promises) == ({}, {})
    assert empty.lines(["x"]) == ["(no citation named 'x')"]
    chapter = Chapter("99", "ch99_nothing", "Nothing yet", text="docs/chapters/ch99_nothing.txt")
    assert contracts.text_path(chapter, tmp_path) is None
    assert contracts.text_path(Chapter("98", "ch98", "No text"), tmp_path) is None


# --- chapter 06: the same pattern, its plans in chapters/ch06_tool_execution/judge/ch06_plans.py ----------------

EXECUTOR = find_chapter("06")


def test_chapter_06_has_a_table_and_a_text_in_the_manifest():
    assert EXECUTOR in CITING and EXECUTOR.text_path == "chapters/ch06_tool_execution/text.txt"


def test_every_kind_of_chapter_06_plan_cites_the_chapter_or_names_a_promise():
    from chapters.ch06_tool_execution import scenarios as recorder

    table = contracts.for_chapter(EXECUTOR.module)
    for name, kind in ch06_plans.KINDS.items():
        assert kind.section in recorder.SECTIONS, name
        if kind.track == HARDENING:
            assert recorder.SECTIONS[kind.section] == HARDENING and kind.cites and set(kind.cites) <= set(table.promises)
        else:
            assert kind.section in ch06_plans.CHAPTER_SECTIONS and kind.cites and set(kind.cites) <= set(table.cites)
    assert set(ch06_plans.IN_THE_LOOP_CITES.values()) <= set(table.cites)


@pytest.mark.parametrize("section", ch06_plans.CHAPTER_SECTIONS)
@pytest.mark.parametrize("seed", [None, 7])
def test_chapter_06s_chapter_track_plans_stay_inside_the_chapter(section: str, seed):
    table = contracts.for_chapter(EXECUTOR.module)
    kinds = set()
    for plan in differential.draw_plans(EXECUTOR.module, section, seed=seed):
        assert ch06_plans.beyond_the_chapter(plan) == [], plan
        assert ch06_plans.KINDS[plan["kind"]].section == section
        assert set(ch06_plans.cites_of(plan)) <= set(table.cites)
        kinds.add(plan["kind"])
        if section == "in_the_loop":  # chapter 07's chapter-track plans, every call through this executor
            loop_plan = plan["loopPlan"]
            assert loop_plan["executor"] == "chapter06" and loop_plan["registry"] and ch06_plans._calls(loop_plan)
            assert set(ch07_plans.beyond_the_chapter(loop_plan)) <= {"exception-named"}  # (this executor names it)
    assert kinds == {name for name, kind in ch06_plans.KINDS.items() if kind.section == section}


def test_chapter_06s_hardening_plans_name_promises_the_table_knows_and_lean_on_each():
    table = contracts.for_chapter(EXECUTOR.module)
    leaned = set()
    for section in ch06_plans.HARDENING_SECTIONS:
        for plan in differential.draw_plans(EXECUTOR.module, section):
            promises = ch06_plans.cites_of(plan)
            assert set(promises) <= set(table.promises)
            leaned.update(promises)
    assert leaned == set(table.promises)
    fixed = {name for e in expected_scenarios(EXECUTOR, ROOT) if e.track == HARDENING for name in e.cites}
    assert fixed == {"tool-output-checked", "tool-output-json"}


def test_a_failing_chapter_06_plan_says_what_it_enforces_beside_its_first_divergence():
    plan = next(p for p in differential.draw_plans(EXECUTOR.module, "context") if p["kind"] == "changes-during")
    said = differential.verdict(EXECUTOR.module, plan, "## result\n{}\n", "## result\n[]\n").splitlines()
    table = contracts.for_chapter(EXECUTOR.module)
    quotes = [f"enforces: {table.cites[name].text()}" for name in ch06_plans.cites_of(plan)]
    assert quotes[0] == f"enforces: {table.cites['arguments-copy'].text()}"
    at = said.index(quotes[0])
    assert said[at:at + len(quotes)] == quotes
    assert said[at + len(quotes)].startswith("first divergence in result")
