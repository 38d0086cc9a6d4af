"""The chapters of the course, in order. Adding a chapter is one line here, one checkpoint module
(`checkpoints/<module>.py`) and one test module (`tests/test_<module>.py`)."""

from __future__ import annotations

from dataclasses import dataclass, field

HARDENING = "加固"
"""The hardening track, as a section name: what the project adds beyond a chapter's text. Its checks are
labelled as beyond the chapter wherever they appear and never decide whether a chapter passes."""


@dataclass(frozen=True)
class Chapter:
    number: str
    """Two digits, as students type it: `course check 07`."""
    module: str
    """The checkpoint module's name, in `checkpoints/` and in a student's directory."""
    title: str
    """What the chapter builds."""
    names: tuple[str, ...] = ()
    """What the chapter's tests use of the module: a module without one of them cannot be judged."""
    runs_in: tuple[str, ...] = ()
    """Later chapters' reference modules the chapter's generated scenarios run its module in (chapter 06's
    `in_the_loop`: the reference loop of chapter 07): a graded copy holds their files."""
    weights: dict[str, float] = field(default_factory=dict, hash=False, compare=False)
    """Points per section for `course grade` (a section not listed is worth 1), earned in proportion
    to the section's scenarios passed."""
    text: str | None = None
    """The chapter's text, as a path from the repository root (it may be absent: what cites it still
    prints its stored quotes, `course.judge.contracts`)."""
    hardening_weight: float = 0.0
    """Points of the hardening track (加固, beyond the chapter) in `course grade`: 0 leaves it out unless
    `--hardening WEIGHT` asks for it; it never decides whether the chapter passes."""

    @property
    def keyword(self) -> str:
        """What `pytest -k` selects the chapter by."""
        return f"ch{self.number}"

    @property
    def test_file(self) -> str:
        return f"tests/test_{self.module}.py"

    @property
    def snapshot_dir(self) -> str:
        """Where the chapter's snapshot files live (one per scenario)."""
        return f"tests/__snapshots__/test_{self.module}"


CHAPTERS: list[Chapter] = [
    Chapter("06", "ch06_tool_execution", "Executing one tool call", ("execute_tool_call",),
            runs_in=("ch07_agent_loop",), text="docs/chapters/ch06_tool_execution.txt"),
    Chapter("07", "ch07_agent_loop", "The agent loop", ("AgentLoopOptions", "run_agent_loop"),
            weights={"纯文本 stop": 1, "单工具往返": 2, "非执行终态": 2, "并发工具": 2, "取消与上限": 3},
            text="../shared/spec/000_b463beaf6860d93c.txt"),
    Chapter("08", "ch08_workspace_read", "A workspace read tool",
            ("create_read_tool", "DEFAULT_MAX_LINES", "DEFAULT_MAX_BYTES"), text="docs/chapters/ch08_workspace_read.txt"),
]


def find_chapter(number: str) -> Chapter:
    wanted = number.removeprefix("ch").zfill(2)
    for chapter in CHAPTERS:
        if chapter.number == wanted:
            return chapter
    known = ", ".join(c.number for c in CHAPTERS)
    raise LookupError(f"No chapter {number!r}; the chapters are {known}")
