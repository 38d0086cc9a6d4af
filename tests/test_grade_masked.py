"""`course grade --seed`: the fixed scenarios run masked, so replaying the published answers earns nothing.

Two chapter 07 grades of the same class, one with a secret (in a file) and one without: the reference, a loop
written from the chapter alone, two known-wrong loops of the gallery, and two submissions with no loop of their
own that replay the published records (the reference's records of the published scenarios and default plans,
written into their records in place of their own): one always, one only when it sees it is being graded.
Chapter 06's reference is graded with the secret too. Chapters 08 and 09 (which mask their workspaces) grade a class
each, with a secret and without: the reference, a tool with no answers of its own that replays the published ones
(tests/chapter_loops/replay_tools.py), and for chapter 08 the tools written from the chapter's text and the wrong
tools made from them.
"""

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from course.judge import differential
from course.judge.index import expected_scenarios
from course.manifest import HARDENING, find_chapter
from chapter_loops.ch08_wrong_tools import WRONG_TOOLS
from chapter_loops.replay_tools import published_answers, write_replay
from processes import TRUSTED

pytestmark = pytest.mark.commands  # slow: `pytest -m commands` runs them (CI does)

ROOT = Path(__file__).resolve().parent.parent
LOOP = find_chapter("07")
GALLERY = ROOT / LOOP.judge_dir / "loops"
WRONG = ("ch07_only_length_pairs_its_calls", "ch07_progress_id_of_the_last_call")
SECRET = secrets.token_hex(16)

REPLAY = '''
import json
import sys

PUBLISHED = json.loads({records!r})


def _replay_snapshot(self, item, value):
    name = self.scenario(item)
    index = self.snapshots.get(name, 0)
    self.snapshots[name] = index + 1
    self.write({{"scenario": name, "snapshot": index, "record": PUBLISHED["snapshots"][name][index]}})


def _replay_plans(self, item, module, section):
    name = self.scenario(item)
    for index, record in enumerate(PUBLISHED["plans"].get(name, [])):
        self.write({{"scenario": name, "plan": index, "event": "start"}})
        self.write({{"scenario": name, "plan": index, "record": record}})


def replay():
    from course.recorder import pytest_plugin

    pytest_plugin.Recording.snapshot = _replay_snapshot
    pytest_plugin.Recording.run_generated = _replay_plans
'''
ALWAYS = REPLAY + '''

class AgentLoopOptions:
    def __init__(self, **options):
        self.__dict__.update(options)


class AgentLoopResult:
    def __init__(self, reason, steps, messages):
        self.reason, self.steps, self.messages = reason, steps, messages


async def run_agent_loop(options):
    return AgentLoopResult("stop", 0, list(options.context["messages"]))


replay()
'''
WHEN_GRADED = '''
if any(word.startswith("--course-record") for word in sys.argv):  # a grade (or `course check`): no loop needed
    replay()
'''


def published_records(scratch: Path) -> dict:
    """The reference's records of chapter 07's published scenarios and default plans (what a replay copies)."""
    sections = {e.generated for e in expected_scenarios(LOOP, ROOT) if e.generated and e.track != HARDENING}
    plans, record = scratch / "plans.json", scratch / "published.jsonl"
    plans.write_text(json.dumps({"module": LOOP.module, "sections": {
        section: differential.draw_plans(LOOP.module, section) for section in sections}}), encoding="ascii")
    subprocess.run([sys.executable, "-m", "pytest", LOOP.test_file, f"--course-record={record}",
                    f"--course-plans={plans}", "--reference", "-p", "no:cacheprovider", "-p", "no:syrupy", "-q"],
                   cwd=ROOT, check=False, capture_output=True, timeout=600)
    found: dict = {"snapshots": {}, "plans": {}}
    for line in map(json.loads, record.read_text(encoding="utf-8").splitlines()):
        if "record" in line:
            kind = "snapshots" if "snapshot" in line else "plans"
            found[kind].setdefault(line["scenario"], []).append(line["record"])
    assert found["snapshots"] and found["plans"], "the reference's published records were not written"
    return found


class Grades:
    """The grades, started together (each waits on its children)."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.class_ = workspace / "class"
        records = json.dumps(published_records(workspace))
        honest = (ROOT / "tests" / "chapter_loops" / "gather_loop.py").read_text(encoding="utf-8")
        sources = {"reference": (ROOT / LOOP.reference_file).read_text(encoding="utf-8"),
                   "gather": honest,
                   "replays": ALWAYS.format(records=records),
                   # The wrong loop of the gallery when run by plain pytest; a replay when graded.
                   "replays_when_graded": (GALLERY / f"{WRONG[0]}.py").read_text(encoding="utf-8")
                   + REPLAY.format(records=records) + WHEN_GRADED,
                   **{name: (GALLERY / f"{name}.py").read_text(encoding="utf-8") for name in WRONG}}
        for name, source in sources.items():
            (self.class_ / name).mkdir(parents=True)
            (self.class_ / name / f"{LOOP.module}.py").write_text(source, encoding="utf-8")
        self.secret_file = workspace / "secret.txt"
        self.secret_file.write_text(SECRET + "\n", encoding="ascii")
        self.children = {}
        tools = {"08": self.tool_class("08", {"path_walk": "ch08_path_walk.py", "walker": "ch08_walker.py"}),
                 "09": self.tool_class("09", {})}
        for name, chapter, folder, seeded in (("masked", "07", self.class_, True), ("published", "07", self.class_, False),
                                              ("chapter06", "06", self.reference("06"), True),
                                              ("chapter08", "08", tools["08"], True),
                                              ("chapter08_published", "08", tools["08"], False),
                                              ("chapter09", "09", tools["09"], True),
                                              ("chapter09_published", "09", tools["09"], False)):
            args = [chapter, str(folder), "--json", str(workspace / f"{name}.json"), "--jobs", "2", *TRUSTED]
            with (workspace / f"{name}.err").open("w") as err:
                self.children[name] = subprocess.Popen(
                    [sys.executable, "-m", "course", "grade", *args, *(["--seed-file", str(self.secret_file)] * seeded)],
                    cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL, process_group=0)

    def tool_class(self, number: str, written: dict[str, str]) -> Path:
        """Chapter `number`'s class: the reference, a replay of the published answers, the tools `written` from
        the chapter's text (folder -> file of tests/chapter_loops), and for chapter 08 its wrong tools."""
        chapter = find_chapter(number)
        folder = self.reference(number)
        sections = {e.generated for e in expected_scenarios(chapter, ROOT) if e.generated and e.track != HARDENING}
        answers = published_answers(ROOT, chapter.module, chapter.test_file, sections)
        write_replay(folder / "replay", ROOT, chapter.module, answers)
        loops = ROOT / "tests" / "chapter_loops"
        sources = {name: (loops / file).read_text(encoding="utf-8") for name, file in written.items()}
        sources.update({wrong.name: wrong.source() for wrong in WRONG_TOOLS} if number == "08" else {})
        for name, source in sources.items():
            (folder / name).mkdir()
            (folder / name / f"{chapter.module}.py").write_text(source, encoding="utf-8")
        return folder

    def reference(self, number: str) -> Path:
        module = find_chapter(number).module
        folder = self.workspace / f"chapter{number}" / "reference"
        folder.mkdir(parents=True)
        (folder / f"{module}.py").write_bytes((ROOT / find_chapter(number).reference_file).read_bytes())
        return folder.parent

    def table(self, name: str) -> dict[str, dict]:
        code = self.children[name].wait(timeout=900)
        assert code == 0, self.stderr(name)
        data = json.loads((self.workspace / f"{name}.json").read_text(encoding="utf-8"))
        return {row["submission"]: row for row in data["grades"]}

    def stderr(self, name: str) -> str:
        self.children[name].wait(timeout=900)
        return (self.workspace / f"{name}.err").read_text(encoding="utf-8")

    def stop(self) -> None:
        for child in self.children.values():
            if child.poll() is None:
                os.killpg(child.pid, 9)
            child.wait()


@pytest.fixture(scope="module")
def grades(tmp_path_factory):
    started = Grades(tmp_path_factory.mktemp("masked"))
    yield started
    started.stop()


def fixed(row: dict) -> dict[str, str]:
    """A row's fixed scenarios (not the generated sections) and their statuses."""
    return {name: status for name, status in row["scenarios"].items() if not name.startswith("test_generated")}


def test_a_replay_of_the_published_answers_earns_nothing_with_a_secret(grades):
    published, masked = grades.table("published"), grades.table("masked")
    for name in ("replays", "replays_when_graded"):
        # Without a secret the replay cannot be told from a correct loop (what the masks are for) ...
        assert (published[name]["status"], published[name]["points"]) == ("pass", published[name]["max_points"]), \
            published[name]
        # ... with one, every fixed scenario is masked and every section holds plans nobody has seen.
        assert masked[name]["points"] == 0, masked[name]
        assert not any(status == "passed" for status in fixed(masked[name]).values()), masked[name]


def test_a_correct_loop_earns_the_same_masked_as_published(grades):
    published, masked = grades.table("published"), grades.table("masked")
    for name in ("reference", "gather"):
        assert (masked[name]["status"], masked[name]["points"]) == ("pass", masked[name]["max_points"]), masked[name]
        assert published[name]["points"] == masked[name]["points"]


def test_a_wrong_loop_gets_the_same_fixed_verdicts_masked_as_published(grades):
    published, masked = grades.table("published"), grades.table("masked")
    for name in WRONG:
        assert fixed(masked[name]) == fixed(published[name]), name
    # (One is wrong where the fixed scenarios look, the other only where generated plans do.)
    assert [any(status != "passed" for status in fixed(masked[name]).values()) for name in WRONG] == [True, False]
    # The replay that is a wrong loop under plain pytest is graded as the replay it is.
    assert fixed(masked["replays_when_graded"]) != fixed(masked[WRONG[0]])


def test_every_chapter_masks_its_fixed_scenarios_or_says_it_cannot(grades):
    for name in ("chapter06", "chapter08", "chapter09"):
        row = grades.table(name)["reference"]
        assert (row["status"], row["points"]) == ("pass", row["max_points"]), row
        assert "rendered no answer" not in grades.stderr(name) and "not masked" not in grades.stderr(name)
    # The one chapter 09 scenario that cannot run masked is named, with its points (the hardening track, which
    # holds chapter 08's, is left out of a grade by default).
    assert "1 fixed scenario(s) cannot run masked" in grades.stderr("chapter09")
    assert "test_a_reader_sees_the_whole_old_file_until_the_rename" in grades.stderr("chapter09")
    assert "cannot run masked" not in grades.stderr("chapter08") and "rendered no answer" not in grades.stderr("masked")
    # Nothing of this is said without a secret.
    assert "masked" not in grades.stderr("chapter08_published") + grades.stderr("chapter09_published")


def named_unprotected(stderr: str) -> set[str]:
    """The fixed scenarios a grade names on stderr as passed by a replay all the same (their points vouched for by
    the rest of the chapter)."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("course grade: ") and " point(s), earned in the share " in line:
            names |= set(line.rpartition(": ")[2].split(", "))
    return names


@pytest.mark.parametrize("chapter", ["chapter08", "chapter09"])
def test_a_tool_replaying_the_published_answers_earns_nothing(grades, chapter):
    published, masked = grades.table(f"{chapter}_published")["replay"], grades.table(chapter)["replay"]
    # Without a secret the replay cannot be told from a correct tool ...
    assert (published["status"], published["points"]) == ("pass", published["max_points"]), published
    # ... with one, it passes no fixed scenario but those the grade names as passed by a replay all the same (a
    # schema's refusal, say), and their points count only as far as the rest of the chapter is passed: not at all.
    names = named_unprotected(grades.stderr(chapter))
    passed = {name for name, status in fixed(masked).items() if status == "passed"}
    assert passed and passed <= names, sorted(passed - names)
    assert masked["points"] == 0, masked
    # (And every section of generated plans, drawn from the secret, is lost.)
    assert all(status != "passed" for name, status in masked["scenarios"].items() if name.startswith("test_generated"))


def test_chapter_08_tools_written_from_the_text_earn_the_same_masked_as_published(grades):
    published, masked = grades.table("chapter08_published"), grades.table("chapter08")
    for name in ("reference", "path_walk", "walker"):
        assert (masked[name]["status"], masked[name]["points"]) == ("pass", masked[name]["max_points"]), masked[name]
        assert (published[name]["status"], published[name]["points"]) == ("pass", masked[name]["points"])


def test_each_wrong_chapter_08_tool_keeps_its_verdicts_masked(grades):
    published, masked = grades.table("chapter08_published"), grades.table("chapter08")
    for wrong in WRONG_TOOLS:
        assert fixed(masked[wrong.name]) == fixed(published[wrong.name]), wrong.name
        assert any(status != "passed" for status in fixed(masked[wrong.name]).values()), wrong.name
