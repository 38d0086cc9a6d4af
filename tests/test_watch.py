"""`course watch`, colour and the install hints: what a student sees around the check itself."""

import io
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from course.judge import check, cli, extras, terminal, watch
from course.judge.session import ChapterRun, Verdict
from course.manifest import find_chapter

ROOT = Path(__file__).resolve().parent.parent


def lower_priority() -> None:
    """In the child: yield the CPU to the session's own tests and to the `course grade` children
    of test_harness_cli, whose time limits must not be starved (it is started with the others)."""
    os.nice(10)


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def plain_env(monkeypatch):
    for name in ("NO_COLOR", "ANSI_COLORS_DISABLED", "FORCE_COLOR", "TERM"):
        monkeypatch.delenv(name, raising=False)


def watch_args(tmp_path, *more):
    return cli.build_parser().parse_args(["watch", "07", "--impl", str(tmp_path), *more])


def test_watch_checks_again_after_each_change(capsys, tmp_path):
    checked = []
    changes = [{(2, str(tmp_path / "ch07_agent_loop.py"))}, {(2, str(tmp_path / "helpers.py"))}]
    assert watch.watch(watch_args(tmp_path), iter(changes), lambda args: checked.append(args.chapter) or 0) == 0
    assert checked == ["07", "07", "07"]  # once at the start, once per change
    out = capsys.readouterr().out
    assert "changed: " in out and out.index("ch07_agent_loop.py") < out.index("helpers.py")
    assert terminal.CLEAR not in out  # not a terminal: every run stays in the log
    assert out.count("waiting for a change in") == 3


def test_watch_starts_each_run_on_a_fresh_screen_on_a_terminal(monkeypatch, tmp_path, plain_env):
    screen = Terminal()
    monkeypatch.setattr(sys, "stdout", screen)
    changes = [{(2, str(tmp_path / "ch07_agent_loop.py"))}]
    assert watch.watch(watch_args(tmp_path), iter(changes), lambda args: print("the check") or 1) == 0
    runs = screen.getvalue().split(terminal.CLEAR)
    assert len(runs) == 3 and runs[0] == ""  # cleared before each of the two runs
    assert all(run.startswith("\033[") and "watching" in run and "the check" in run for run in runs[1:])


def test_watch_goes_on_after_a_run_that_fails_hangs_or_crashes(monkeypatch, capsys, tmp_path):
    """A timed-out run is reported and the watching goes on; so does a checker that raises."""
    verdicts = [Verdict("TestPureStop::test_pure_stop", "chapters/ch07_agent_loop/test_ch07_agent_loop.py", "passed"),
                Verdict("TestSingleToolRoundTrip::test_readme_round_trip", "chapters/ch07_agent_loop/test_ch07_agent_loop.py", "timeout",
                        problem="did not finish within 5 s")]
    given = []

    def judge_chapter(chapter, implementation, **options):
        given.append(options)
        for verdict in verdicts:
            options["on_verdict"](verdict)
        return ChapterRun(find_chapter("07"), verdicts)

    monkeypatch.setattr(check, "judge_chapter", judge_chapter)
    outcomes = iter([lambda: check.check(args), lambda: 1 / 0, lambda: check.check(args)])
    args = watch_args(tmp_path, "--timeout", "5")
    changes = [{(2, str(tmp_path / "a.py"))}, {(2, str(tmp_path / "b.py"))}]
    assert watch.watch(args, iter(changes), lambda _: next(outcomes)()) == 0
    out = capsys.readouterr().out
    assert [options["timeout"] for options in given] == [5.0, 5.0]  # the watch's time limit reaches the run
    assert out.count("TIMEOUT TestSingleToolRoundTrip::test_readme_round_trip") == 2
    assert "course watch: this check could not run (ZeroDivisionError: division by zero)" in out
    assert out.count("waiting for a change in") == 3


def test_ctrl_c_during_a_check_ends_the_watch_quietly(capsys, tmp_path):
    def interrupted(args):
        raise KeyboardInterrupt

    assert watch.watch(watch_args(tmp_path), iter([]), interrupted) == 0
    assert capsys.readouterr().out.endswith("\nstopped watching\n")


class Watching:
    """A real `course watch 07` on a copy of the reference (tests/conftest.py starts it before the
    first test of the session, so its first check runs while the other modules do)."""

    def __init__(self, directory: Path) -> None:
        (directory / "ch07_agent_loop.py").write_text((ROOT / "chapters" / "ch07_agent_loop" / "ch07_agent_loop.py").read_text())
        self.child = subprocess.Popen([sys.executable, "-m", "course", "watch", "07", f"--impl={directory}"],
                                      cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      env={**os.environ, "NO_COLOR": "1"}, preexec_fn=lower_priority)

    def stop(self) -> None:
        self.child.kill()
        self.child.communicate()


_watching: Watching | None = None


def launch(tmp_path_factory) -> Watching:
    global _watching
    if _watching is None:
        _watching = Watching(tmp_path_factory.mktemp("watch"))
    return _watching


def test_ctrl_c_ends_the_real_command_without_a_traceback(tmp_path_factory):
    """`course watch` in a child: once it waits for a change, SIGINT ends it with exit 0 and no traceback."""
    child = launch(tmp_path_factory).child
    lines = []
    for line in child.stdout:  # the first check runs; then it waits for a change
        lines.append(line)
        if line.startswith("waiting for a change"):
            break
    child.send_signal(signal.SIGINT)
    rest, err = child.communicate(timeout=60)
    out = "".join(lines) + rest
    assert child.returncode == 0, err
    assert "Traceback" not in err + out and out.endswith("stopped watching\n")
    assert "chapter 07 passes" in out


def test_watch_without_watchfiles_says_what_to_install(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(extras, "_installed", lambda module: module != "watchfiles")
    assert cli.main(["watch", "07", "--impl", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("course watch needs the test extra (missing: watchfiles): ")
    assert err.rstrip().endswith("install -e '.[test]'") and "Traceback" not in err
    assert watch.watch(watch_args(tmp_path)) == 2  # called directly, too


@pytest.mark.parametrize("command", [["check", "07"], ["status"], ["hint", "07"], ["grade", "07", "x"]])
def test_commands_that_run_tests_say_what_to_install_instead_of_0_of_0(monkeypatch, capsys, command):
    monkeypatch.setattr(extras, "_installed", lambda module: module not in ("syrupy", "hypothesis"))
    monkeypatch.setattr(check, "judge_chapter", lambda *a, **k: pytest.fail("no tests may run without the extra"))
    assert cli.main(command) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"course {command[0]} needs the test extra (missing: syrupy, hypothesis): " \
                           f"{extras.install_command()}\n"


def test_the_install_command_names_this_python_and_the_clone(monkeypatch):
    monkeypatch.chdir(ROOT)
    assert extras.install_command().endswith(" install -e '.[test]'")
    monkeypatch.chdir(ROOT / "tests")
    assert extras.install_command().endswith(f" install -e '{ROOT}[test]'")


def test_the_demo_needs_nothing_beyond_the_core_install(monkeypatch, capsys):
    monkeypatch.setattr(extras, "_installed", lambda module: False)
    assert cli.main([]) == 0
    assert "4  assistant   [stop] 项目名是 tiny-pi。" in capsys.readouterr().out


def test_colour_only_on_a_terminal_and_never_with_no_color(monkeypatch, plain_env):
    screen = Terminal()
    assert terminal.paint("FAIL", "fail", screen) == "\033[1m\033[31mFAIL\033[0m"
    assert terminal.paint("a\n\nb", "dim", screen).split("\n")[1] == ""  # line by line, empty lines plain
    assert terminal.paint("FAIL", "fail", io.StringIO()) == "FAIL"  # a pipe or a file
    monkeypatch.setenv("NO_COLOR", "1")
    assert terminal.paint("FAIL", "fail", screen) == "FAIL"
    monkeypatch.setenv("NO_COLOR", "")  # empty: as if unset (no-color.org)
    assert terminal.paint("ok", "pass", screen) != "ok"
    monkeypatch.setenv("TERM", "dumb")
    assert terminal.paint("ok", "pass", screen) == "ok" and not terminal.clear_screen(screen)
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert terminal.paint("ok", "pass", io.StringIO()) != "ok"
    with pytest.raises(ValueError):
        terminal.paint("x", "purple")


def test_clear_screen_only_on_a_terminal(plain_env):
    screen, log = Terminal(), io.StringIO()
    assert terminal.clear_screen(screen) and screen.getvalue() == terminal.CLEAR
    assert not terminal.clear_screen(log) and log.getvalue() == ""
