"""What `course check` prints (course.judge.report): short and true, whatever the verdicts."""

from pathlib import Path

from course.judge.report import Report, enforces
from course.judge.session import ChapterRun, Verdict
from course.manifest import HARDENING, find_chapter

LOOP = find_chapter("07")
ROOT = Path(__file__).resolve().parent.parent
STARTER = "NotImplementedError: run_agent_loop: yours to write (chapter 07)"


def verdict(name: str, section: str, status: str = "failed", **fields) -> Verdict:
    return Verdict(name, LOOP.test_file, status, section, "what it checks", **fields)


def shown(verdicts: list[Verdict], capsys) -> str:
    report = Report(LOOP, "student", False, ROOT)
    for v in verdicts:
        report.show(v)
    report.summarize(ChapterRun(LOOP, verdicts))
    return capsys.readouterr().out


def test_a_sections_first_failure_is_shown_in_full_and_its_later_ones_counted(capsys):
    out = shown([verdict("TestPureStop::a", "纯文本 stop", cites=("pure-stop",), problem="ValueError: x"),
                 verdict("TestPureStop::b", "纯文本 stop", cites=("turn-end",), problem="ValueError: x"),
                 verdict("TestPureStop::c", "纯文本 stop", status="passed")], capsys)
    assert "  FAIL    TestPureStop::a\n        enforces: 「没有工具的 stop 直接结束」 line 110: " in out
    assert "TestPureStop::b" not in out.split("\n\n")[0]  # not shown one by one...
    assert "纯文本 stop: 1 of 3 pass; failing: a (shown), b" in out  # ...but counted under its section
    assert "the same problem in 2 scenarios: ValueError: x" in out and "  PASS    TestPureStop::c" in out


def test_the_same_problem_in_another_section_is_said_in_a_line_with_what_it_enforces(capsys):
    out = shown([verdict("TestPureStop::a", "纯文本 stop", cites=("pure-stop",), problem=STARTER),
                 verdict("TestAbortAndMaxSteps::b", "取消与上限", cites=("abort-before-start",), problem=STARTER)], capsys)
    assert out.startswith("first: run_agent_loop still raises NotImplementedError, the starter's body")
    assert out.count("problem:  NotImplementedError") == 1
    assert "  FAIL    TestAbortAndMaxSteps::b\n        the same problem as TestPureStop::a (shown above)\n" \
           "        enforces: 「取消与 maxSteps 阻止新的模型请求」 line 278: " in out


def test_no_what_to_do_first_for_a_mistake_that_is_not_the_starters(capsys):
    out = shown([verdict("TestPureStop::a", "纯文本 stop", cites=("pure-stop",), problem="ValueError: x")], capsys)
    assert "first:" not in out


def test_the_hardening_track_is_labelled_beyond_the_chapter(capsys):
    beyond = verdict("TestHardening::x", HARDENING, cites=("max-steps-checked",), problem="AssertionError: y")
    out = shown([beyond], capsys)
    assert "  FAIL    TestHardening::x  [加固 (beyond the chapter)]" in out
    assert "        enforces: 加固 (beyond the chapter), promise max-steps-checked: " in out
    assert "加固: 0 of 1 pass; failing: x (shown)  [加固 (beyond the chapter)]" in out
    plan = verdict("test_generated[hardening_abort]", HARDENING)
    assert enforces(LOOP, plan) == ["加固 (beyond the chapter): this plan stays inside the chapter's contract (the "
                                    "chapter track checks it too)"]
