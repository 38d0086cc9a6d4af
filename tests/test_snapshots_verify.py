"""`course snapshots verify` verifies the reference's snapshots: without --impl it judges the reference
checkpoints, never a student/ it finds beside them or $TINY_PI_IMPL."""

from course.judge import cli, snapshots
from course.judge.session import ChapterRun


def test_verify_judges_the_reference_whatever_student_or_the_environment_hold(monkeypatch, tmp_path, capsys):
    judged = []

    def judge(chapter, implementation, **options):
        judged.append(implementation)
        return ChapterRun(chapter, [])

    monkeypatch.setattr(snapshots, "judge_chapter", judge)
    (tmp_path / "student").mkdir()  # a student/ beside the snapshots must not be what is verified
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TINY_PI_IMPL", str(tmp_path / "student"))
    assert cli.main(["snapshots", "verify", "07", "--runs", "2"]) == 0
    assert judged == [None, None]  # None: the reference checkpoints
    assert cli.main(["snapshots", "verify", "07", "--runs", "2", "--impl", "student"]) == 0
    assert judged[2:] == [str(tmp_path / "student")] * 2
    assert capsys.readouterr().out.count("deterministic: 0 scenarios rendered identically in 2 runs") == 2
