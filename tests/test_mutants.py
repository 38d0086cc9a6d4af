"""The mutation gate: each chapter's tests fail every known-wrong variant of its reference, and a
student whose failures match a variant's signature is told that variant's hint.

The tests that judge the whole gallery (every variant against its chapter's whole suite) are marked
`gate` and left out of a plain `pytest` (pyproject's addopts): `pytest -m gate` or `course mutants`
runs them, and CI does. The rest check the gallery's structure and the gate's machinery on a few variants.
"""

import asyncio
import importlib
import inspect
import re
import sys
import types

import pytest

from course.judge import mutants
from course.judge import starter as course_starter
from course.judge.cli import main
from course import manifest
from course.manifest import CHAPTERS, HARDENING, Chapter, find_chapter

VARIANTS = [pytest.param(c, v, id=f"{c.number}-{v.name}") for c in CHAPTERS for v in mutants.variants(c)]
# What a loop that runs the tools of a `length` answer shows: the evidence diagnosis reads (kept in the
# stored signatures; `test_diagnose_matches_what_the_variant_really_fails` holds them to the variant).
LENGTH_EVIDENCE = mutants.load_signatures()["07"]["length-executes-tools"]
LENGTH_FAILURES = set(LENGTH_EVIDENCE)


def section_marks(chapter) -> set[str]:
    """The section names the chapter's test module marks its scenarios with."""
    return set(re.findall(r'@pytest\.mark\.section\("([^"]+)"\)', (mutants.REPO / chapter.test_file).read_text()))


@pytest.fixture(scope="module")
def gallery():
    """Every chapter's variants judged by every test of its chapter (the slow part: worker processes)."""
    return mutants.run_gallery(CHAPTERS)


GALLERIED = [c for c in CHAPTERS if mutants.gallery(c) is not None]
"""The chapters with a gallery of known mistakes (optional: a chapter without one is skipped by the gate)."""


def test_every_gallery_has_distinct_names():
    assert GALLERIED, "no chapter has a gallery: the tests below check nothing"
    for chapter in GALLERIED:
        names = [v.name for v in mutants.variants(chapter)]
        assert names[0] == "starter" and len(names) > 1, chapter.number
        assert len(set(names)) == len(names), f"chapter {chapter.number} repeats a variant name"


@pytest.fixture
def chapter_without_gallery(monkeypatch, tmp_path):
    """A chapter 99 in the catalogue with a checkpoint and tests but nothing optional (no gallery, no
    signatures, no hints, no generated plans), in a copy of the course's files."""
    chapter = Chapter("99", "ch99_nothing_optional", "A chapter with nothing optional", ("answer",))
    for c in [*CHAPTERS, chapter]:
        (tmp_path / c.folder).mkdir(parents=True)
        (tmp_path / c.test_file).write_text("")
    (tmp_path / chapter.reference_file).write_text("def answer():\n    return 42\n")
    (tmp_path / chapter.test_file).write_text("def test_answer():\n    pass\n")
    monkeypatch.setattr(mutants, "REPO", tmp_path)
    with_it = [*CHAPTERS, chapter]
    monkeypatch.setattr(manifest, "CHAPTERS", with_it)  # (what find_chapter reads)
    monkeypatch.setattr(mutants, "CHAPTERS", with_it)
    return chapter


def test_the_gate_skips_a_chapter_without_a_gallery_with_a_clear_line(chapter_without_gallery, capsys):
    assert mutants.gallery(chapter_without_gallery) is None
    assert [v.name for v in mutants.variants(chapter_without_gallery)] == ["starter"]
    assert mutants.run_gallery([chapter_without_gallery]) == []
    assert main(["mutants", "99"]) == 0
    assert capsys.readouterr().out == (
        "Chapter 99 — A chapter with nothing optional: skipped, no gallery of known mistakes "
        "(chapters/ch99_nothing_optional/judge/gallery.py); add one to have its tests held to them\n\n")
    assert mutants.diagnose("99", {"test_answer": "failed: AssertionError"}) == []


def test_a_gallery_that_fails_to_import_is_an_error_not_a_chapter_without_one(monkeypatch):
    def fails(name, *args, **kwargs):  # the gallery is there, but imports a module that is not
        raise ModuleNotFoundError("No module named 'hypothetical'", name="hypothetical")

    monkeypatch.setattr(manifest.importlib, "import_module", fails)
    with pytest.raises(ModuleNotFoundError, match="hypothetical"):
        mutants.gallery(find_chapter("07"))


@pytest.mark.parametrize(("chapter", "variant"), VARIANTS)
def test_variant_applies_to_the_current_reference(chapter, variant):
    reference = mutants.reference_source(chapter)
    source = variant.source(reference)  # a Mutant whose `find` is not there exactly once raises StalePatch
    assert source != reference
    compile(source, f"{variant.name}.py", "exec")
    if isinstance(variant, mutants.Mutant):
        for find, _ in variant.patches:
            assert reference.count(find) == 1, f"{variant.name}: {find!r}"
    if isinstance(variant, (mutants.Mutant, mutants.Loop)):
        assert variant.section in section_marks(chapter), f"{variant.name}: no tests are marked {variant.section!r}"
        assert variant.full_hint.endswith(f" — see {variant.section}")
        assert variant.track in ("chapter", HARDENING)


def test_a_stale_patch_is_refused():
    missing = mutants.Mutant("gone", "非执行终态", "hint", "this text is not in the reference", "")
    twice = mutants.Mutant("twice", "非执行终态", "hint", "import", "")
    reference = mutants.reference_source(find_chapter("07"))
    for mutant, count in ((missing, 0), (twice, reference.count("import"))):
        with pytest.raises(mutants.StalePatch, match=f"has {count} copies"):
            mutant.source(reference)


def test_a_mutant_with_several_patches_applies_each_exactly_once():
    mutant = mutants.Mutant("m", "s", "h", "a = 1", "a = 2", also=(("b = 1", "b = 2\nc = 3"),))
    assert mutant.source("def f():\n    a = 1\n    b = 1\n") == "def f():\n    a = 2\n    b = 2\n    c = 3\n"
    for reference in ("a = 1\n", "a = 1\nb = 1\nb = 1\n"):
        with pytest.raises(mutants.StalePatch, match="'b = 1'"):
            mutant.source(reference)


def test_a_patch_keeps_the_indentation_of_its_line():
    mutant = mutants.Mutant("m", "s", "h", "b = 2", "b = 3\nc = 4")
    assert mutant.source("def f():\n    a = 1\n    b = 2\n") == "def f():\n    a = 1\n    b = 3\n    c = 4\n"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.number)
def test_the_starter_keeps_the_interface_and_implements_nothing(chapter, monkeypatch):
    reference = importlib.import_module(f"checkpoints.{chapter.module}")
    starter = types.ModuleType(f"starter_{chapter.module}")
    monkeypatch.setitem(sys.modules, starter.__name__, starter)  # dataclasses look their module up
    exec(compile(course_starter.starter_source(chapter), "starter.py", "exec"), starter.__dict__)

    def public(module):  # (pytest's assertion rewriting adds names like "@py_builtins" to the reference)
        return {name for name in vars(module) if name.isidentifier() and not name.startswith("_")}

    # The reference's opt-ins beyond the chapter (its `加固` imports) are the only names the starter lacks.
    beyond = course_starter.beyond_the_chapter(mutants.reference_source(chapter))
    assert public(reference) - beyond == public(starter) and not beyond & public(starter)
    functions = [name for name, value in vars(reference).items() if not name.startswith("_")
                 and inspect.isfunction(value) and value.__module__ == reference.__name__]
    assert functions
    for name in functions:
        function = getattr(starter, name)
        assert str(inspect.signature(function)) == str(inspect.signature(getattr(reference, name)))
        assert function.__doc__ == getattr(reference, name).__doc__
        parameters = inspect.signature(function).parameters.values()
        args = [None for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        kwargs = {p.name: None for p in parameters if p.kind is p.KEYWORD_ONLY}  # create_read_tool's caps
        with pytest.raises(NotImplementedError):
            result = function(*args, **kwargs)
            if inspect.iscoroutine(result):
                asyncio.run(result)


@pytest.mark.gate
def test_every_variant_is_killed(gallery):
    survivors = [o for o in gallery if not o.killed]
    tables = "\n".join(mutants.render_table(c, [o for o in gallery if o.chapter == c.number]) for c in GALLERIED)
    assert not survivors, f"variants the tests do not catch:\n{tables}"
    assert {o.chapter for o in gallery} == {c.number for c in GALLERIED}


@pytest.mark.gate
def test_the_stored_signatures_are_the_gallery_s_and_diagnosis_names_each_variant(gallery):
    assert mutants.gallery_problems(gallery) == []


def test_a_stale_signature_or_an_unnamed_variant_is_a_gallery_problem():
    stored = mutants.load_signatures()["07"]
    outcomes = [mutants.Outcome("07", name, list(tests), 0, evidence=dict(tests)) for name, tests in stored.items()]
    assert mutants.gallery_problems(outcomes) == []
    length = next(o for o in outcomes if o.variant == "length-executes-tools")
    length.evidence = {**length.evidence, "TestPureStop::test_pure_stop": "generated"}
    length.failed.append("TestPureStop::test_pure_stop")
    problems = mutants.gallery_problems(outcomes)
    assert problems[0] == ("chapter 07: the stored failure signatures of length-executes-tools are not what it "
                           "fails now: run `course mutants --write-signatures` and read the diff")
    assert problems[1:] == ["chapter 07: diagnosis does not name length-executes-tools from its own failures "
                            "(it names nothing)"]


def test_every_variant_has_a_stored_signature():
    stored = mutants.load_signatures()
    for chapter in GALLERIED:
        assert set(stored.get(chapter.number, {})) == {v.name for v in mutants.variants(chapter)}, \
            f"chapter {chapter.number}'s gallery changed: run `course mutants --write-signatures`"


@pytest.mark.commands  # judges variants in worker processes (seconds each)
def test_the_command_fails_when_a_variant_survives(capsys):
    deselect = [arg for test in sorted(LENGTH_FAILURES) for arg in ("--deselect", test)]
    assert main(["mutants", "07", "--variant", "length-executes-tools", *deselect]) == 1
    out = capsys.readouterr().out
    assert "1 variant, 1 not killed" in out
    assert re.search(r"^length-executes-tools +SURVIVED \(\d+ tests passed\)$", out, re.MULTILINE), out


def test_without_a_chapter_the_command_judges_every_chapter_and_fails_on_any_survivor(monkeypatch, capsys):
    judged = []

    def fake_gallery(chapters, **options):  # the last chapter's first mistake survives
        judged.extend(c.number for c in chapters)
        return [mutants.Outcome(c.number, v.name, [] if (c, i) == (GALLERIED[-1], 1) else ["TestX::test_y"], 3)
                for c in chapters if mutants.gallery(c) for i, v in enumerate(mutants.variants(c))]

    monkeypatch.setattr(mutants, "run_gallery", fake_gallery)
    assert main(["mutants"]) == 1
    assert judged == [c.number for c in CHAPTERS]
    out = capsys.readouterr().out
    assert [line.split(":")[0] for line in out.splitlines() if line.startswith("Chapter ")] == \
        [f"Chapter {c.number} — {c.title}" for c in CHAPTERS]
    assert re.search(rf"^{mutants.variants(GALLERIED[-1])[1].name} +SURVIVED \(3 tests passed\)$", out, re.MULTILINE)


@pytest.mark.commands  # judges variants in worker processes (seconds each)
def test_the_command_passes_when_every_variant_is_killed(capsys):
    assert main(["mutants", "07", "--variant", "length-executes-tools"]) == 0
    out = capsys.readouterr().out
    assert "1 variant, all killed" in out
    killed_by = rf"{len(LENGTH_FAILURES)}: test_terminal_row\[length\], test_length_with_two_calls_starts_neither"
    assert re.search(rf"^length-executes-tools +{killed_by}", out, re.MULTILINE), out


@pytest.mark.commands  # judges variants in worker processes (seconds each)
def test_a_crashing_or_stale_variant_is_reported_and_the_rest_still_judged():
    chapter = find_chapter("07")
    dies = mutants.Mutant("dies", "纯文本 stop", "h", "return await stream.result()", "import os\nos._exit(3)")
    stale = mutants.Mutant("stale", "纯文本 stop", "h", "text the reference does not have", "")
    length = next(v for v in mutants.variants(chapter) if v.name == "length-executes-tools")
    dead, unapplied, judged = mutants.run_variants([(chapter, dies), (chapter, stale), (chapter, length)], jobs=1)
    assert not dead.killed and dead.error.startswith("the worker exited 3")
    assert not unapplied.killed and "has 0 copies" in unapplied.error
    assert judged.killed and set(judged.failed) == LENGTH_FAILURES  # judged by a fresh worker
    assert "ERROR: the worker exited 3" in mutants.render_table(chapter, [dead, unapplied, judged])


def test_show_prints_the_variant_as_a_diff(capsys):
    assert main(["mutants", "07", "--show", "length-executes-tools"]) == 0
    diff = capsys.readouterr().out.splitlines()
    assert '-            if assistant["stopReason"] != "toolUse":' in diff
    assert '+            if assistant["stopReason"] not in ("toolUse", "length"):' in diff
    assert len([line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")]) == 2


def test_diagnose_names_the_length_mistake_and_its_section():
    assert LENGTH_EVIDENCE["TestNonExecutingTerminals::test_terminal_row[length]"].startswith(
        "timeline 7: tool_skipped(call-1) → tool_start(call-1) | broken: ")
    assert mutants.diagnose("07", LENGTH_EVIDENCE) == [
        ("length-executes-tools",
         "your loop runs tools after a truncated response (stopReason length) — see 非执行终态"),
    ]
    full_ids = {f"chapters/ch07_agent_loop/test_ch07_agent_loop.py::{name}": key for name, key in LENGTH_EVIDENCE.items()}
    assert [name for name, _ in mutants.diagnose("ch07", full_ids)] == ["length-executes-tools"]


def test_the_same_failing_scenarios_with_other_evidence_name_no_mistake():
    # Another mistake can fail exactly the same scenarios: only the same first divergences identify it.
    other = {name: "timeline 7: tool_skipped(call-1) → tool_skipped(call-2)" for name in LENGTH_EVIDENCE}
    assert mutants.diagnose("07", other) == []
    other = dict(LENGTH_EVIDENCE, **{"TestNonExecutingTerminals::test_terminal_row[length]": "timeline 7: a → b"})
    assert mutants.diagnose("07", other) == []
    signature = mutants.load_signatures()["07"]["request-sends-caller-messages"]
    system_prompt_only_once = {name: key.split(" | ")[0] + " | broken: request 2 has a different system prompt"
                               for name, key in signature.items()}
    assert mutants.diagnose("07", system_prompt_only_once) == []


def test_failing_generated_sections_alone_name_no_mistake():
    signatures = mutants.load_signatures()["07"]
    only_generated = {name: tests for name, tests in signatures.items() if not mutants.identifying(tests)}
    assert only_generated, "no variant is caught by generated sections alone: this test checks nothing"
    for tests in only_generated.values():
        assert mutants.diagnose("07", tests) == []


def test_diagnose_recognises_two_mistakes_at_once():
    signatures = mutants.load_signatures()["07"]
    evidence = LENGTH_EVIDENCE | signatures["context-tools-forwarded"]
    assert [name for name, _ in mutants.diagnose("07", evidence)] == ["context-tools-forwarded", "length-executes-tools"]


def test_diagnose_says_nothing_about_failures_it_cannot_explain():
    assert mutants.diagnose("07", {}) == []
    assert mutants.diagnose("07", LENGTH_EVIDENCE | {"TestPureStop::test_pure_stop": "timeline 1: a → b"}) == []
    assert mutants.diagnose("07", {"TestNoSuchScenario::test_anything": "failed: AssertionError"}) == []


def test_diagnose_of_a_student_who_has_not_started():
    everything = mutants.load_signatures()["07"]["starter"]
    assert [name for name, _ in mutants.diagnose("07", everything)] == ["starter"]


def _failed_call(run):
    """What pytest's makereport sees of a test that raised: the exception `run()` raises."""
    try:
        run()
    except BaseException:  # noqa: BLE001 — whatever it raised is the evidence
        return types.SimpleNamespace(excinfo=pytest.ExceptionInfo.from_current())
    raise AssertionError("it raised nothing")


def test_an_exception_the_test_raises_itself_identifies_no_mistake():
    # A test that looks up result["details"] and finds none raises a KeyError of its own: like a bare
    # assert, that says only that something differs, whatever code was judged.
    from checkpoints import ch06_tool_execution
    from course.runtime.tools import ToolExecutionContext

    item = types.SimpleNamespace(nodeid="chapters/ch06_tool_execution/test_ch06_tool_execution.py::TestX::test_y", funcargs={})
    own = mutants._evidence_in_process(item, _failed_call(lambda: {"content": []}["details"]))
    # The same kind of exception raised inside the code under test is that code's doing.
    theirs = mutants._evidence_in_process(item, _failed_call(lambda: asyncio.run(ch06_tool_execution.execute_tool_call(
        {"type": "toolCall", "id": "c", "name": "read", "arguments": {}}, None, ToolExecutionContext()))))
    assert own == "error: KeyError" + mutants.OUTSIDE and theirs == "error: AttributeError"
    assert not mutants.identifying({"TestX::test_y": own}) and mutants.identifying({"TestX::test_y": theirs})
    # course check's evidence says the same, from where the recorder found the exception (None: not in the code)
    said = [types.SimpleNamespace(scenario="TestX::test_y", status="error", divergence=None, broken=[],
                                  problem="KeyError: 'details'", where=where, passed=False)
            for where in (None, "student/ch06_tool_execution.py:12")]
    assert [mutants.evidence_of([verdict]) for verdict in said] == [
        {"TestX::test_y": "error: KeyError" + mutants.OUTSIDE}, {"TestX::test_y": "error: KeyError"}]


def test_mistakes_the_evidence_cannot_tell_apart_are_named_as_what_the_evidence_shows(tmp_path, capsys):
    # A tool's CancelledError turned into a result: `except BaseException` and catching CancelledError leave
    # the same evidence. Both are named, each hint saying what the evidence shows before what code would do it,
    # under a heading that says they are a match of evidence.
    from course.judge import check
    from course.judge.session import ChapterRun, Verdict

    evidence = mutants.load_signatures()["06"]["cancellation-swallowed"]
    found = mutants.diagnose("06", evidence)
    assert [name for name, _ in found] == ["cancellation-swallowed", "cancellation-caught"]
    shown = "a CancelledError raised in the tool became an error result instead of propagating: if you catch "
    assert all(hint.startswith(shown) for _, hint in found)
    chapter = find_chapter("06")
    (tmp_path / f"{chapter.module}.py").write_text("", encoding="utf-8")
    run = ChapterRun(chapter, [Verdict(name, chapter.test_file, "failed") for name in evidence])
    check.summarize(chapter, run, str(tmp_path), mutants.diagnosis_of("06", evidence))
    out = capsys.readouterr().out
    assert "these failures fit 2 known mistakes equally: a match of evidence, which another mistake can also " \
           "leave, and at most one of these is yours; check which, if any:" in out
    assert "no scenario of the course tells them apart: read your code against each hint" in out
    assert "a known mistake (another mistake can fail the same way" not in out


def test_the_gate_knows_which_track_must_fail_each_variant():
    stored = mutants.load_signatures()["07"]
    outcomes = {name: mutants.Outcome("07", name, list(tests), 0, evidence=dict(tests)) for name, tests in stored.items()}
    assert mutants.track_problems(list(outcomes.values())) == []
    tracks = mutants.tracks_of(find_chapter("07"))
    # A mistake against the chapter that only the hardening track caught, and a hardening mistake the chapter
    # track failed: each is a problem of the gate.
    length = outcomes["length-executes-tools"]
    length.failed = [test for test in length.failed if tracks.get(test) == HARDENING] or ["TestHardening::x"]
    late = outcomes["late-progress-emitted"]
    late.failed = [*late.failed, "TestPureStop::test_pure_stop"]
    problems = mutants.track_problems([length, late])
    assert problems[0].startswith("chapter 07: length-executes-tools is a mistake against the chapter, but only the "
                                  "hardening track fails it")
    assert problems[1].startswith("chapter 07: late-progress-emitted breaks only hardening promises, yet the chapter "
                                  "track fails it (TestPureStop::test_pure_stop)")


def test_every_hardening_variant_passes_the_chapter_track_and_fails_the_hardening_track():
    chapter = find_chapter("07")
    tracks = mutants.tracks_of(chapter)
    stored = mutants.load_signatures()["07"]
    beyond = [v for v in mutants.variants(chapter) if v.track == HARDENING]
    assert len(beyond) == 15
    for variant in beyond:
        assert {tracks.get(test) for test in stored[variant.name]} == {HARDENING}, variant.name


def test_a_check_of_the_chapter_track_never_names_a_mistake_by_what_only_the_hardening_track_shows():
    chapter = find_chapter("07")
    tracks = mutants.tracks_of(chapter)
    judged = {name for name, track in tracks.items() if track != HARDENING}
    stored = mutants.load_signatures()["07"]
    for variant in (v for v in mutants.variants(chapter) if v.track == HARDENING):
        evidence = {test: key for test, key in stored[variant.name].items() if test in judged}
        assert variant.name not in [name for name, _ in mutants.diagnosis_of("07", evidence, judged).found]
    # The length mistake, judged on the chapter track alone, is named as before.
    length = {test: key for test, key in stored["length-executes-tools"].items() if test in judged}
    found = mutants.diagnosis_of("07", length, judged)
    assert (found.how, [name for name, _ in found.found]) == ("one", ["length-executes-tools"])


def test_mistakes_that_fail_alike_on_the_tracks_judged_are_told_apart_by_the_scenario_that_differs(monkeypatch):
    signatures = {"07": {
        "one": {"TestPureStop::test_pure_stop": "timeline 1: a → b", "test_generated[hardening_abort]": "generated"},
        "two": {"TestPureStop::test_pure_stop": "timeline 1: a → b"},
    }}
    monkeypatch.setattr(mutants, "load_signatures", lambda: signatures)
    monkeypatch.setattr(mutants, "variants", lambda chapter: [
        mutants.Mutant("one", "纯文本 stop", "hint one", "x", "y"), mutants.Mutant("two", "纯文本 stop", "hint two", "x", "y")])
    judged = {"TestPureStop::test_pure_stop"}
    found = mutants.diagnosis_of("07", {"TestPureStop::test_pure_stop": "timeline 1: a → b"}, judged)
    assert (found.how, [name for name, _ in found.found]) == ("alike", ["one", "two"])
    assert found.note == ("test_generated[hardening_abort] tells them apart, in the hardening track (加固, beyond "
                          "the chapter): course check 07 --hardening")
    assert found.heading().startswith("these failures fit 2 known mistakes equally")
