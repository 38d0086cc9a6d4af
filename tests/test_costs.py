"""What a run does not pay for: costs that are not the chapter's own work.

No test here times anything (speed is what `python -m benchmarks` reports); each checks the
behaviour that keeps a cost away.
"""

import pytest

from checkpoints.ch07_agent_loop import AgentLoopOptions, run_agent_loop
from course.recorder.harness import load_checkpoint, run_loop
from course.runtime import readme_example as readme
from course.runtime.scripted import ScriptedModel
from course.runtime.tools import Registry


def readme_options() -> AgentLoopOptions:
    return AgentLoopOptions(model=ScriptedModel([readme.first_answer(), readme.final_answer()]),
                            context=readme.context(), tools=Registry([readme.memory_read_tool()]))


# asyncio.run() formats the repr of its task's result when the task finishes (Python 3.11), and
# pytest prints the repr of whatever a failing assertion names: neither may cost a whole transcript.

@pytest.mark.asyncio
async def test_a_loop_results_repr_leaves_the_transcript_out():
    result = await run_agent_loop(readme_options())
    assert repr(result) == "AgentLoopResult(reason='stop', steps=2)"


@pytest.mark.asyncio
async def test_a_harness_runs_repr_leaves_the_transcript_and_events_out():
    run = await run_loop(load_checkpoint("ch07_agent_loop"), model=ScriptedModel([readme.first_answer(),
                         readme.final_answer()]), context=readme.context(), tools=Registry([readme.memory_read_tool()]))
    assert repr(run) == "Run(reason='stop', steps=2, executions=['read'], problems=[])"
