"""`course status` and `course snapshots verify` judge several runs in threads: the reference's runs of
the generated plans are computed first, in one thread (a reference run watches what the whole process
opens, so another thread's files would be taken for its own), and verify judges the reference unless
--impl names other modules."""

import threading

from course.judge import check, cli, snapshots
from course.judge.session import ChapterRun
from course.manifest import CHAPTERS


def fake_oracle(events):
    def oracle(chapter, root, seed=None, hardening=False):
        events.append(("oracle", chapter.number, threading.current_thread().name))
        return {f"plans of {chapter.number}": []}, {f"plans of {chapter.number}": []}
    return oracle


def fake_judge(events):
    def judge(chapter, implementation, **options):
        events.append(("judge", chapter.number, implementation, options["plans"], options["wanted"]))
        return ChapterRun(chapter, [])
    return judge


def test_verify_judges_the_reference_whatever_student_or_the_environment_hold(monkeypatch, tmp_path, capsys):
    events = []
    monkeypatch.setattr(snapshots, "judge_chapter", fake_judge(events))
    monkeypatch.setattr(snapshots, "reference_oracle", fake_oracle(events))
    (tmp_path / "student").mkdir()  # a student/ beside the snapshots must not be what is verified
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TINY_PI_IMPL", str(tmp_path / "student"))
    assert cli.main(["snapshots", "verify", "07", "--runs", "2"]) == 0
    assert [event[2] for event in events if event[0] == "judge"] == [None, None]  # None: the reference
    assert cli.main(["snapshots", "verify", "07", "--runs", "2", "--impl", "student"]) == 0
    assert [event[2] for event in events if event[0] == "judge"][2:] == [str(tmp_path / "student")] * 2
    assert capsys.readouterr().out.count("deterministic: 0 scenarios rendered identically in 2 runs") == 2


def test_verify_computes_the_reference_s_runs_once_before_its_threads(monkeypatch, capsys):
    events = []
    monkeypatch.setattr(snapshots, "judge_chapter", fake_judge(events))
    monkeypatch.setattr(snapshots, "reference_oracle", fake_oracle(events))
    assert cli.main(["snapshots", "verify", "--runs", "3"]) == 0
    oracles = [e for e in events if e[0] == "oracle"]
    assert events[:len(CHAPTERS)] == oracles and [e[1] for e in oracles] == [c.number for c in CHAPTERS]
    assert {e[2] for e in oracles} == {threading.main_thread().name}
    judged = events[len(CHAPTERS):]
    assert len(judged) == 3 * len(CHAPTERS)
    assert all(plans == wanted == {f"plans of {number}": []} for _, number, _, plans, wanted in judged)
    capsys.readouterr()


def test_status_computes_every_chapter_s_reference_runs_before_its_threads(monkeypatch, capsys):
    events = []
    monkeypatch.setattr(check, "judge_chapter", fake_judge(events))
    monkeypatch.setattr(check, "reference_oracle", fake_oracle(events))
    check.status(cli.build_parser().parse_args(["status"]))
    oracles = [e for e in events if e[0] == "oracle"]
    assert events[:len(CHAPTERS)] == oracles and {e[2] for e in oracles} == {threading.main_thread().name}
    judged = sorted(events[len(CHAPTERS):], key=lambda e: e[1])
    assert [(number, plans) for _, number, _, plans, _ in judged] == \
        [(c.number, {f"plans of {c.number}": []}) for c in CHAPTERS]
    assert "\n0 of 0 scenarios pass\n" in capsys.readouterr().out
