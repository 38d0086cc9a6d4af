"""`course hint`: graded hints for a failing scenario, per section and per kind of broken promise.

Two wrong loops of our own (not in the gallery) run through the real command in child processes
(started together by a module fixture); the rest drives the command on hand-made runs.
"""

import ast
import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from course.judge import check, cli, hints, invariants, mutants
from course.judge.render import observations
from course.judge.session import ChapterRun, Verdict
from course.judge.timeline import render_run
from course.manifest import CHAPTERS, HARDENING, find_chapter

ROOT = Path(__file__).resolve().parent.parent


def lower_priority() -> None:
    """In the child: yield the CPU to the session's own tests and to the `course grade` children
    of test_harness_cli, whose time limits must not be starved (it is started with the others)."""
    os.nice(10)
LOOP = find_chapter("07")
REFERENCE_LOOP = (ROOT / LOOP.reference_file).read_text(encoding="utf-8")
CHAPTER_TEXT = Path("/work/shared/spec/000_b463beaf6860d93c.txt")


def wrong_loop(find: str, replace: str) -> str:
    return mutants.Mutant("hint-test", "", "", find, replace, ()).source(REFERENCE_LOOP)


# Sends the system prompt with the first request only.
SYSTEM_PROMPT_ONCE = wrong_loop('"systemPrompt": options.context["systemPrompt"],',
                                '"systemPrompt": options.context["systemPrompt"] if len(messages) == 1 else None,')
# Gives every skipped result the reason "length", whatever the message's stopReason was.
SKIPPED_ALWAYS_LENGTH = wrong_loop('details={"skipped": True, "reason": assistant["stopReason"]}',
                                   'details={"skipped": True, "reason": "length"}')


class Children:
    """`course hint 07 --step 3` on each wrong loop, started together (tests/conftest.py starts them
    before the first test of the session, so they run while the other modules do)."""

    def __init__(self, workspace: Path) -> None:
        self.started: dict[str, subprocess.Popen] = {}
        for name, source in {"system_prompt": SYSTEM_PROMPT_ONCE, "skipped": SKIPPED_ALWAYS_LENGTH}.items():
            (workspace / name).mkdir()
            (workspace / name / f"{LOOP.module}.py").write_text(source, encoding="utf-8")
            env = {**os.environ, hints.STATE_ENV: str(workspace / f"{name}.json"), "NO_COLOR": "1"}
            self.started[name] = subprocess.Popen(
                [sys.executable, "-m", "course", "hint", "07", "--step", "3", f"--impl={workspace / name}"],
                cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                preexec_fn=lower_priority)

    def __getitem__(self, name: str) -> subprocess.Popen:
        return self.started[name]

    def stop(self) -> None:
        for child in self.started.values():
            child.kill()
            child.communicate()


_children: Children | None = None


def launch(tmp_path_factory) -> Children:
    global _children
    if _children is None:
        _children = Children(tmp_path_factory.mktemp("hints"))
    return _children


@pytest.fixture(scope="module")
def children(tmp_path_factory):
    yield launch(tmp_path_factory)


def finished(child: subprocess.Popen) -> tuple[int, str, str]:
    out, err = child.communicate(timeout=120)
    return child.returncode, out, err


def test_a_system_prompt_sent_once_is_hinted_by_its_broken_promise(children):
    code, out, err = finished(children["system_prompt"])
    assert (code, err) == (0, "")
    assert "hints for TestSingleToolRoundTrip::test_readme_round_trip" in out
    assert "Section 单工具往返 promises:" in out
    assert "chapter 07, section 「call-1 的结果进入第二次模型请求」, lines 124-176" in out
    assert "broken 1: request 2 has a different system prompt\n" \
           "      Every request, not only the first, carries context['systemPrompt'].\n" in out
    assert "line 162" in out
    assert "invariants       hold" not in out  # the invariants line only counts the promises shown


def test_a_wrong_skipped_reason_is_hinted_as_a_skipped_result(children):
    code, out, _ = finished(children["skipped"])
    assert code == 0
    assert "hints for TestNonExecutingTerminals::test_terminal_row[error]" in out  # length itself is right
    assert "Section 非执行终态 promises:" in out
    assert "chapter 07, section 「length：工具不启动，调用仍然闭合」, lines 200-233" in out
    assert re.search(r"broken 1: message 3 answers a call of message 2 \(stopReason error\), so it must be a "
                     r"skipped error result.*\n      A call of a message that is not toolUse is answered by a "
                     r"skipped error result", out)
    assert "lines 210-221 and 229" in out
    assert "has a different system prompt" not in out


# What the variables in the checker's report f-strings hold (anything else: a number or a name).
REPORT_WORDS = {"kind": ["tool_start", "tool_skipped", "tool_end"], "where": ["message 7"],
                "missing": ["never got a tool_start", "has no tool_skipped event"],
                "before": ["message 7", "the end of the run"]}


def _fillings(part: ast.expr) -> list[str]:
    if isinstance(part, ast.Constant):
        return [str(part.value)]
    value = part.value  # a FormattedValue
    if isinstance(value, ast.IfExp) and isinstance(value.body, ast.Constant) and isinstance(value.orelse, ast.Constant):
        return [value.body.value, value.orelse.value]
    return REPORT_WORDS.get(ast.unparse(value), ["7"])


def _expand(string: ast.JoinedStr) -> list[str]:
    return ["".join(words) for words in itertools.product(*(_fillings(part) for part in string.values))]


def _report_formats() -> list[str]:
    """Every report line invariants.py can produce, its placeholders filled with stand-ins."""
    tree = ast.parse(Path(invariants.__file__).read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "append" \
                and getattr(node.func.value, "id", None) == "problems":
            argument = node.args[0]
            if isinstance(argument, ast.JoinedStr):
                found += _expand(argument)
            elif isinstance(argument, ast.Constant):
                found.append(argument.value)
        if isinstance(node, ast.ListComp) and isinstance(node.elt, ast.JoinedStr):  # the not-a-dict reports
            found += _expand(node.elt)
    return found


def test_every_report_line_of_the_checker_has_a_kind_with_a_hint():
    """A new report line in invariants.py fails here until a kind (and its hint) covers it."""
    formats = _report_formats()
    assert len(formats) >= 30
    unclassified = [line for line in formats if hints.classify(line) is None]
    assert unclassified == []


@pytest.mark.parametrize("line, kind", [
    ("request 2 has a different system prompt", "system-prompt"),
    ("the run changed its options (context): the caller may run them again", "options-changed"),
    ("the transcript holds the same list or object in 2 places or more: a caller changing one message would "
     "change another", "shared-objects"),
    ("request 1 carries 'notes' besides the chapter's systemPrompt, messages and tools: the caller's context "
     "is not the request", "request-keys"),
    ("request 2 does not carry the registry's tool definitions", "tool-definitions"),
    ("event 7 tool_start for call-1, but the latest assistant message (stopReason length) does not run its calls",
     "tools-on-a-terminal-message"),
    ("event 9 tool_start for b, expected a next, in call order", "tool-event-order"),
    ("message 4 is the result for read(b), expected read(a) next, in call order", "result-order"),
    ("tool call read(call-1) of message 2 has no result before the end of the run", "result-missing"),
    ("tool call read(call-1) of message 2 has no tool_skipped event", "tool-event-missing"),
    ("steps is 3, more than max_steps 2", "steps"),
    ("the caller's context['messages'] was changed", "caller-messages-changed"),
])
def test_report_lines_are_classified_by_their_wording(line, kind):
    assert hints.classify(line).name == kind


def test_a_line_no_kind_describes_is_shown_without_a_guess():
    steps = hints.hint_steps("07", "单工具往返", ["the moon is made of cheese"], None)
    assert "broken 1: the moon is made of cheese\n    (no hint is written for this kind of report" in steps[2]
    assert hints.classify("the moon is made of cheese") is None


def test_every_section_of_every_chapter_with_hints_has_a_hint():
    """Each section a chapter's tests mark (and each generated-scenario section) has steps 1 and 2, in every
    chapter that has hints (they are optional: a chapter without them gets the generic steps)."""
    hinted = [chapter for chapter in CHAPTERS if chapter.number in hints.SECTIONS]
    assert hinted, "no chapter has hints: this test checks nothing"
    for chapter in hinted:
        source = (ROOT / chapter.test_file).read_text(encoding="utf-8")
        marked = set(re.findall(r'@pytest\.mark\.section\("([^"]+)"\)', source)) - {HARDENING}
        assert marked and marked <= set(hints.SECTIONS[chapter.number]), chapter.number


def test_a_hardening_scenario_says_it_is_beyond_the_chapter_and_names_its_promise():
    promise = "加固 (beyond the chapter), promise max-steps-checked: a max_steps that is not a positive integer"
    steps = hints.hint_steps("07", HARDENING, [], None, purpose="max_steps=0 is refused", enforces=[promise])
    assert steps[0].startswith("This scenario is in the hardening track (加固): beyond the chapter.")
    assert steps[1].startswith("Beyond the chapter: the project's promise, not the chapter text's:\n  " + promise)
    assert "Section 加固 promises" not in "\n".join(steps)


def test_a_chapter_scenario_quotes_the_sentences_it_enforces_where_the_chapter_says_so():
    quote = "「没有工具的 stop 直接结束」 line 110: 局部消息从 [user] 变成 [user, assistant]，模型调用次数和 steps 都是 1。"
    steps = hints.hint_steps("07", "纯文本 stop", [], None, enforces=[quote])
    assert steps[1].startswith(f"This scenario enforces:\n  {quote}\nRead chapter 07, section 「没有工具的 stop 直接结束」")


def test_a_chapter_without_hints_gets_the_generic_steps():
    steps = hints.hint_steps("99", "basics", [], {"section": "value", "index": 2, "expected": "1", "got": "2"},
                             purpose="the answer is 1")
    assert steps[0] == "This scenario belongs to section basics of chapter 99.\nThis scenario: the answer is 1"
    assert steps[1] == "Read the section of chapter 99 that the scenario's section names (basics)."
    assert steps[2] == "first divergence in value, line 2:\n  expected: 1\n  got:      2"


@pytest.mark.skipif(not CHAPTER_TEXT.is_file(), reason="the chapter 07 text is not on this machine")
def test_every_passage_cited_lies_inside_its_section_of_the_chapter_text():
    lines = CHAPTER_TEXT.read_text(encoding="utf-8").splitlines()
    assert lines[0] == hints.CHAPTER_TEXT["07"]
    starts = {line[1:]: n for n, line in enumerate(lines, 1) if line.startswith("#")}
    ends = dict(zip(starts.values(), [*list(starts.values())[1:], len(lines) + 1]))
    passages = [p for s in hints.SECTIONS["07"].values() for p in s.passages]
    passages += [p for k in hints.KINDS for p in k.passages]
    for passage in passages:
        start = starts[passage.title]  # the title is the text's own
        assert start <= passage.first <= passage.last < ends[start], passage


def test_the_broken_promises_are_read_from_the_rendered_run():
    problems = ["request 2 has a different system prompt", "steps is 3, more than max_steps 2"]
    text = render_run(events=[], messages=[], requests=None,
                      observations=observations({"steps": 3, "reason": "stop"}, problems))
    assert hints.broken_promises_in(["## observations\ninvariants  hold\n", text]) == problems
    assert hints.broken_promises_in(["## transcript\n  broken 1  not an observation\n"]) == []


def test_step_three_without_a_broken_promise_shows_the_divergence_or_the_exception():
    divergence = {"section": "timeline", "index": 7, "expected": "tool_skipped(call-1)", "got": "tool_start(call-1)"}
    step3 = hints.hint_steps("07", "非执行终态", [], divergence)[2]
    assert "first divergence in timeline, line 7:\n  expected: tool_skipped(call-1)\n  got:      tool_start(call-1)" in step3
    assert "a tool started where the chapter skips the call" in step3
    step3 = hints.hint_steps("07", "纯文本 stop", [], None, problem="NotImplementedError: run_agent_loop",
                             where="student/ch07_agent_loop.py:12")[2]
    assert "Your code raised: NotImplementedError: run_agent_loop (at student/ch07_agent_loop.py:12)" in step3
    assert "starter's body" in step3


def test_chapters_without_their_text_here_point_at_their_description_in_the_docs():
    step2 = hints.hint_steps("08", "截断", [], None)[1]
    assert "not in this repository" in step2 and "docs/students.md" in step2 and "Chapter 08" in step2


# --- the command on hand-made runs --------------------------------------------------------------

def fake_run(*scenarios: Verdict, exit_code: int = 1) -> ChapterRun:
    return ChapterRun(LOOP, list(scenarios))


def scenario(name: str, status: str = "failed", section: str = "非执行终态", **more) -> Verdict:
    return Verdict(scenario=name, file=LOOP.test_file, status=status, section=section, **more)


@pytest.fixture
def command(monkeypatch, tmp_path, capsys):
    """Run `course hint ARGS` on the run `command.run`; returns (exit code, output)."""
    monkeypatch.setenv(hints.STATE_ENV, str(tmp_path / "hints.json"))
    monkeypatch.setenv("NO_COLOR", "1")

    class Command:
        run = fake_run()
        calls = []

        def __call__(self, *args):
            capsys.readouterr()
            code = cli.main(["hint", "07", *args, "--impl", str(tmp_path)])
            return code, capsys.readouterr().out

    command = Command()

    def judge_chapter(chapter, implementation, **options):
        command.calls.append(options)
        return command.run

    monkeypatch.setattr(check, "judge_chapter", judge_chapter)
    return command


LENGTH = {"section": "timeline", "index": 7, "expected": "tool_skipped(call-1)", "got": "tool_start(call-1)"}


def test_each_call_shows_one_more_step_then_stays_at_the_last(command):
    command.run = fake_run(scenario("TestPureStop::test_pure_stop", "passed", "纯文本 stop"),
                           scenario("TestNonExecutingTerminals::test_terminal_row[length]", divergence=LENGTH,
                                    purpose="length must not start tools."))
    shown = []
    for _ in range(4):
        code, out = command()
        assert code == 0
        shown.append(re.findall(r"^hint (\d) of 3", out, re.M))
    assert shown == [["1"], ["1", "2"], ["1", "2", "3"], ["1", "2", "3"]]
    assert "hints for TestNonExecutingTerminals::test_terminal_row[length]" in out
    assert "This scenario: length must not start tools." in out
    code, out = command("--step", "1")
    assert re.findall(r"^hint (\d) of 3", out, re.M) == ["1"]
    assert "more: course hint 07 'TestNonExecutingTerminals::test_terminal_row[length]'  (or --step 2)" in out
    assert command.calls[0]["timeout"] == 10.0  # each scenario's time limit


def test_a_scenario_is_named_by_the_end_of_its_id(command):
    command.run = fake_run(scenario("TestX::test_terminal_row[length]", divergence=LENGTH),
                           scenario("TestX::test_terminal_row[error]"),
                           scenario("TestX::test_ok", "passed"))
    code, out = command("test_terminal_row[error]", "--step", "3")
    assert code == 0 and "hints for TestX::test_terminal_row[error]" in out
    assert command("test_ok")[1].startswith("TestX::test_ok passes with")
    assert command("terminal_row")[0] == 2  # two scenarios: it asks which
    assert command("nothing_like_it")[0] == 2


def test_the_scenario_may_follow_the_options(command, tmp_path, capsys):
    command.run = fake_run(scenario("TestX::test_terminal_row[length]", divergence=LENGTH),
                           scenario("TestX::test_terminal_row[error]"))
    capsys.readouterr()
    assert cli.main(["hint", "07", "--impl", str(tmp_path), "test_terminal_row[error]", "--step", "1"]) == 0
    assert "hints for TestX::test_terminal_row[error]" in capsys.readouterr().out
    with pytest.raises(SystemExit):  # two would-be scenarios: still refused, as any unknown argument is
        cli.main(["hint", "07", "--impl", str(tmp_path), "test_terminal_row[error]", "another"])


def test_a_chapter_that_passes_has_nothing_to_hint(command):
    command.run = fake_run(scenario("TestPureStop::test_pure_stop", "passed"), exit_code=0)
    code, out = command()
    assert code == 0 and "Every scenario of chapter 07 passes" in out


def test_every_chapter_06_passage_cited_lies_inside_its_section_of_the_chapter_text():
    lines = (Path(__file__).resolve().parent.parent / "chapters/ch06_tool_execution/text.txt").read_text(
        encoding="utf-8").splitlines()
    assert lines[0] == hints.CHAPTER_TEXT["06"]
    starts = {line[1:]: n for n, line in enumerate(lines, 1) if line.startswith("#")}
    ends = dict(zip(starts.values(), [*list(starts.values())[1:], len(lines) + 1]))
    for passage in hints.SECTIONS["06"]["工具执行"].passages:
        start = starts[passage.title]
        assert start <= passage.first <= passage.last < ends[start], passage
