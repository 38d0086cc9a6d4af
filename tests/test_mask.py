"""The masks of a grade with a secret (course.recorder.mask): derived from the secret, deterministic, and
handed to the child without it; a masked scenario keeps everything a loop looks at but the letters."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from course.judge import secret
from course.judge.session import ChapterRun, Masking
from course.manifest import HARDENING, find_chapter
from course.recorder import mask as masks
from course.recorder.harness import load_checkpoint, run_loop
from course.runtime import readme_example as readme
from course.runtime.scripted import ScriptedModel
from course.runtime.tools import Registry

ROOT = Path(__file__).resolve().parent.parent
LONG_SECRET = b"0f1e2d3c4b5a69788796a5b4c3d2e1f0"
SCENARIO = "TestSingleToolRoundTrip::test_readme_round_trip"


def scenario_mask(grading_secret: bytes, scenario: str = SCENARIO) -> masks.Mask:
    return masks.Mask(masks.scenario_key(secret.derive(grading_secret, "mask", "ch07_agent_loop"), scenario))


def test_a_mask_is_the_same_for_the_same_secret_and_scenario_and_differs_otherwise():
    texts = [readme.QUESTION, readme.README, "call-1", "read"]
    same, again = scenario_mask(LONG_SECRET), scenario_mask(LONG_SECRET)
    assert [same.text(t) for t in texts] == [again.text(t) for t in texts] and same.clock == again.clock
    for other in (scenario_mask(LONG_SECRET + b"1"), scenario_mask(LONG_SECRET, "TestPureStop::test_pure_stop")):
        assert [other.text(t) for t in texts] != [same.text(t) for t in texts] and other.clock != same.clock


def test_the_child_gets_a_key_derived_from_the_secret_never_the_secret():
    key = secret.derive(LONG_SECRET, "mask", "ch07_agent_loop")
    handed = json.dumps(Masking(key, {"TestPureStop::test_pure_stop": ["..."]}).plans_entry())
    assert LONG_SECRET.decode() not in handed and LONG_SECRET.hex() not in handed and key.hex() in handed
    assert "..." not in handed  # (nor the reference's renderings it is judged against)
    assert key != secret.derive(LONG_SECRET, "mask", "ch06_tool_execution")
    assert key not in (secret.derive(LONG_SECRET, "plans", "ch07_agent_loop", section) for section in ("abort", "batch"))


@pytest.mark.parametrize("text", [readme.QUESTION, readme.README, "", "  a\tb\n", "汉" * 3 + "é\u0301x\x00",
                                  "call-1", "\ud800 lone"])
def test_the_substitution_keeps_lengths_whitespace_and_inverts(text):
    mask = scenario_mask(LONG_SECRET)
    masked = mask.text(text)
    assert mask.untext(masked) == text and len(masked) == len(text)
    assert len(masked.encode("utf-8", "surrogatepass")) == len(text.encode("utf-8", "surrogatepass"))
    assert [c.isspace() or not c.isalnum() for c in masked] == [c.isspace() or not c.isalnum() for c in text]
    if any(c.isalnum() and c.isascii() for c in text):
        assert masked != text


async def test_a_masked_run_records_the_masked_scenario_and_shows_the_test_the_published_one():
    ch07 = load_checkpoint("ch07_agent_loop")

    def inputs():
        return dict(model=ScriptedModel([readme.first_answer(), readme.final_answer()]), context=readme.context(),
                    tools=Registry([readme.memory_read_tool()]))

    published = await run_loop(ch07, **inputs())
    mask = scenario_mask(LONG_SECRET)
    with masks.masking(mask), masks.masked_clock():
        given = inputs()
        masked = await run_loop(ch07, **given)
    record = masked.record()
    text = json.dumps(record, ensure_ascii=False)
    assert all(word not in text for word in ("call-1", "tiny-pi", '"read"', "请读取")), text
    assert record["messages"][1]["content"][1]["id"] == mask.text("call-1")
    assert record["messages"][0]["timestamp"] == mask.clock.start
    # The test's view: the published run, but for the clock.
    without_time = lambda messages: [{k: v for k, v in m.items() if k != "timestamp"} for m in messages]  # noqa: E731
    assert without_time(masked.messages) == without_time(published.messages)
    assert (masked.reason, masked.steps, masked.executions) == ("stop", 2, ["read"])
    assert len(given["model"].requests) == 2 and given["model"].requests[1]["messages"][-1]["toolCallId"] == "call-1"


def test_masked_chapter_07_scenarios_keep_their_own_assertions(tmp_path):
    """Every chapter 07 test passes its own assertions masked (they see the published scenario), recording
    runs that share no id or text with the published snapshots."""
    plans, record = tmp_path / "plans.json", tmp_path / "record.jsonl"
    key = secret.derive(LONG_SECRET, "mask", "ch07_agent_loop")
    plans.write_text(json.dumps({"module": "ch07_agent_loop", "sections": {},
                                 "mask": Masking(key).plans_entry()}), encoding="ascii")
    subprocess.run([sys.executable, "-m", "pytest", "chapters/ch07_agent_loop/test_ch07_agent_loop.py", "-k", "not generated",
                    f"--course-record={record}", f"--course-plans={plans}", "--reference", "-p", "no:cacheprovider",
                    "-p", "no:syrupy", "-q"], cwd=ROOT, check=False, capture_output=True, timeout=300)
    lines = [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()]
    ends = {line["scenario"]: line["outcome"] for line in lines if line.get("event") == "end"}
    assert len(ends) >= 20 and set(ends.values()) == {"passed"}, ends
    snapshots = [json.dumps(line["record"], ensure_ascii=False) for line in lines if "snapshot" in line]
    assert len(snapshots) == len(ends) and not any("call-1" in text or "tiny-pi" in text for text in snapshots)


def test_a_path_climbing_out_to_a_name_beside_the_workspace_is_masked_as_that_name_is():
    """Names below the root, and the catalogue's names beside it (and what lies below them), are masked in a path
    however it reaches them; a name beyond the root's folder, or beside it and not listed, is kept."""
    from course.recorder.workspace_mask import Place, masked_path

    def f(name):
        return name.upper()

    place = Place(("/t/ws", "/t/ws"), frozenset({"secret.txt", "outside"}))
    assert [masked_path(f, path, place) for path in (
        "docs/guide.md", "../secret.txt", "docs/../../secret.txt", "../ws/README.md", "../ws-evil/secret.txt",
        "../../etc/passwd", "..", "/t/secret.txt", "/t/outside/secret.txt", "/t/ws/../secret.txt",
        "/proc/self/root/t/secret.txt", "/etc/passwd", "~/secret.txt")] == [
        "DOCS/GUIDE.MD", "../SECRET.TXT", "DOCS/../../SECRET.TXT", "../ws/README.MD", "../ws-evil/secret.txt",
        "../../etc/passwd", "..", "/t/SECRET.TXT", "/t/OUTSIDE/SECRET.TXT", "/t/ws/../SECRET.TXT",
        "/proc/self/root/t/SECRET.TXT", "/etc/passwd", "~/SECRET.TXT"]
    # A link's target, read from the folder that holds it (a/b/c below the root; outside/ beside it).
    assert masked_path(f, "../../../../secret.txt", place, ("ws", "a", "b", "c")) == "../../../../SECRET.TXT"
    assert masked_path(f, "../secret.txt", place, ("outside",)) == "../SECRET.TXT"
    # With no names beside (chapters that list none), what lies beside the root is never masked.
    alone = Place(("/t/ws", "/t/ws"))
    assert [masked_path(f, path, alone) for path in ("../secret.txt", "/t/secret.txt", "README.md")] == [
        "../secret.txt", "/t/secret.txt", "README.MD"]


def test_every_scenario_the_catalogue_names_for_masking_is_one_of_its_chapter():
    """A `published_form` or `replayable` entry naming no scenario (renamed, removed) would name nothing at a grade."""
    from course.judge.index import expected_scenarios
    from course.manifest import CHAPTERS

    root = Path(__file__).resolve().parent.parent
    for chapter in CHAPTERS:
        names = {e.scenario for e in expected_scenarios(chapter, root) if not e.generated}
        listed = set(chapter.published_form) | set(chapter.replayable)
        assert listed <= names, (chapter.module, sorted(listed - names))
        assert not set(chapter.published_form) & set(chapter.replayable), chapter.module


def graded_run(chapter, passed: dict[str, bool], sections: dict[str, str]) -> ChapterRun:
    from course.judge.session import Verdict
    return ChapterRun(chapter, [Verdict(name, "", "passed" if ok else "failed", sections[name])
                                for name, ok in passed.items()])


def test_a_replay_earns_nothing_for_scenarios_whose_answer_no_mask_changes_and_a_correct_run_all():
    """In a grade with a secret, what a replay passes all the same (a schema's refusal, a published-form scenario)
    earns its points only in the share of the rest of the chapter track a submission passes."""
    from course.judge.grade import grade_of
    chapter = find_chapter("08")
    sections = {"refuse": "A", "read": "A", "generated": "B", "beyond": HARDENING}
    replayable = frozenset({"refuse", "beyond"})
    everything = dict.fromkeys(sections, True)
    correct = grade_of("correct", chapter, graded_run(chapter, everything, sections), 60, replayable=replayable)
    assert correct.points == correct.max_points == 2 and correct.status == "pass"
    replay = {"refuse": True, "read": False, "generated": False, "beyond": True}
    row = grade_of("replay", chapter, graded_run(chapter, replay, sections), 60, hardening=1, replayable=replayable)
    assert (row.points, row.sections[HARDENING][0], row.passed) == (0, 0, 1)
    # Half the other points (the generated section, worth 1 of the 1.5 outside `refuse`) earn two thirds of its.
    half = {"refuse": True, "read": False, "generated": True, "beyond": False}
    row = grade_of("half", chapter, graded_run(chapter, half, sections), 60, replayable=replayable)
    assert row.sections == {"A": [round(0.5 * 2 / 3, 2), 1.0], "B": [1.0, 1.0], HARDENING: [0.0, 0.0]}
    # Without a secret nothing is replayable: the same run earns its scenarios' whole points.
    assert grade_of("half", chapter, graded_run(chapter, half, sections), 60).sections["A"] == [0.5, 1.0]
