"""The same workload on other agent runtimes, when installed (`pip install -e '.[bench]'`):
pydantic-ai, openai-agents, LangGraph (`create_react_agent`) and smolagents (`ToolCallingAgent`).

Each peer gets an offline scripted model that answers S times with one call of a no-op tool and
then with a final text, exactly like tiny-pi's workload. A peer's whole run has a time budget, so
a runtime whose cost grows with the transcript cannot keep the report waiting for many minutes:
a size whose predicted time exceeds what is left is skipped, and a run that overruns is stopped.
"""

from __future__ import annotations

import asyncio
import gc
import importlib.metadata
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from benchmarks.workloads import Elapsed, elapsed_since, start_clocks


@dataclass
class Progress:
    """What a peer's run has done so far; read when a run is stopped part-way."""

    requests: int = 0
    """Model requests answered."""
    executions: int = 0
    """No-op tool executions."""
    output: object = None
    """The run's final output (the final text, "done", when it completes)."""


async def pydantic_ai_run(tool_steps: int, progress: Progress) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.usage import UsageLimits

    def answer(messages, info):
        progress.requests += 1
        if progress.requests <= tool_steps:
            return ModelResponse(parts=[ToolCallPart("noop", {}, tool_call_id=f"call-{progress.requests}")])
        return ModelResponse(parts=[TextPart("done")])

    agent = Agent(FunctionModel(answer), instructions="You are a benchmark.")

    @agent.tool_plain
    async def noop() -> str:
        """Does nothing and says ok."""
        progress.executions += 1
        return "ok"

    result = await agent.run("go", usage_limits=UsageLimits(request_limit=None))
    progress.output = result.output


async def openai_agents_run(tool_steps: int, progress: Progress) -> None:
    from agents import Agent, RunConfig, Runner, function_tool
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    @function_tool
    async def noop() -> str:
        """Does nothing and says ok."""
        progress.executions += 1
        return "ok"

    class ScriptedModel(Model):
        async def get_response(self, *args, **kwargs) -> ModelResponse:
            progress.requests += 1
            n = progress.requests
            if n <= tool_steps:
                output = [ResponseFunctionToolCall(type="function_call", id=f"fc-{n}", call_id=f"call-{n}",
                                                   name="noop", arguments="{}", status="completed")]
            else:
                output = [ResponseOutputMessage(
                    type="message", id="final", role="assistant", status="completed",
                    content=[ResponseOutputText(type="output_text", text="done", annotations=[])])]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args, **kwargs):
            raise NotImplementedError("the benchmark does not stream")

    agent = Agent(name="bench", instructions="You are a benchmark.", model=ScriptedModel(), tools=[noop])
    result = await Runner.run(agent, "go", max_turns=tool_steps + 1, run_config=RunConfig(tracing_disabled=True))
    progress.output = result.final_output


async def langgraph_run(tool_steps: int, progress: Progress) -> None:
    import warnings

    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    with warnings.catch_warnings():  # create_react_agent is deprecated in favour of langchain's create_agent
        warnings.simplefilter("ignore")
        from langgraph.prebuilt import create_react_agent

    @tool
    async def noop() -> str:
        """Does nothing and says ok."""
        progress.executions += 1
        return "ok"

    def answers():
        for n in range(1, tool_steps + 1):
            progress.requests += 1
            yield AIMessage(content="", tool_calls=[{"name": "noop", "args": {}, "id": f"call-{n}"}])
        progress.requests += 1
        yield AIMessage(content="done")

    class ScriptedChatModel(GenericFakeChatModel):
        def bind_tools(self, tools, **kwargs):
            return self  # the script decides the calls

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        agent = create_react_agent(ScriptedChatModel(messages=answers()), [noop], prompt="You are a benchmark.")
    # Each step is two graph steps (the model, then the tools).
    result = await agent.ainvoke({"messages": [("user", "go")]}, {"recursion_limit": 2 * tool_steps + 5})
    progress.output = result["messages"][-1].content


async def smolagents_run(tool_steps: int, progress: Progress) -> None:
    """smolagents runs synchronously: in a thread, stopped through its model when the budget runs out."""
    import threading

    from smolagents import ToolCallingAgent, tool
    from smolagents.models import ChatMessage, ChatMessageToolCall, ChatMessageToolCallFunction, Model
    from smolagents.monitoring import LogLevel

    stop = threading.Event()

    @tool
    def noop() -> str:
        """Does nothing and says ok."""
        progress.executions += 1
        return "ok"

    class ScriptedModel(Model):
        def generate(self, messages, stop_sequences=None, response_format=None, tools_to_call_from=None, **kwargs):
            if stop.is_set():
                raise RuntimeError("stopped at its budget")
            progress.requests += 1
            n = progress.requests
            name, arguments = ("noop", {}) if n <= tool_steps else ("final_answer", {"answer": "done"})
            return ChatMessage(role="assistant", content=None, tool_calls=[ChatMessageToolCall(
                id=f"call-{n}", type="function", function=ChatMessageToolCallFunction(name=name, arguments=arguments))])

    def run() -> None:
        agent = ToolCallingAgent(tools=[noop], model=ScriptedModel(), max_steps=tool_steps + 1,
                                 verbosity_level=LogLevel.OFF)
        progress.output = agent.run("go")

    try:
        await asyncio.to_thread(run)
    finally:
        stop.set()


@dataclass
class Peer:
    name: str
    """How the report names it."""
    distributions: tuple[str, ...]
    """The PyPI distributions that provide it; the first one installed gives the version."""
    run: Callable[[int, Progress], Awaitable[None]]
    """Runs the workload for S tool steps, updating the progress as it goes."""


PEERS = [
    Peer("pydantic-ai", ("pydantic-ai-slim", "pydantic-ai"), pydantic_ai_run),
    Peer("openai-agents", ("openai-agents",), openai_agents_run),
    Peer("langgraph", ("langgraph",), langgraph_run),
    Peer("smolagents", ("smolagents",), smolagents_run),
]


def installed_version(peer: Peer) -> str | None:
    for distribution in peer.distributions:
        try:
            return f"{distribution} {importlib.metadata.version(distribution)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


@dataclass
class PeerSize:
    """What happened to one peer at one size S."""

    tool_steps: int
    """S."""
    elapsed: Elapsed | None = None
    """Time of the complete run; None when it did not run or did not finish."""
    note: str = ""
    """Why there is no time (skipped, stopped, failed)."""


@dataclass
class PeerReport:
    peer: str
    """The peer's name."""
    version: str | None
    """Distribution and version, or None when not installed."""
    sizes: list[PeerSize] = field(default_factory=list)
    """One entry per size asked for, in order."""
    problem: str = ""
    """Why the peer did not run at all (not installed, failed on a small warm-up run)."""


def predicted_seconds(done: list[PeerSize], tool_steps: int) -> float:
    """Extrapolate from the last completed sizes with the growth exponent they show (quadratic from one)."""
    last = done[-1]
    exponent = 2.0
    if len(done) >= 2:
        before = done[-2]
        exponent = max(1.0, math.log(last.elapsed.wall / before.elapsed.wall)
                       / math.log(last.tool_steps / before.tool_steps))
    return last.elapsed.wall * (tool_steps / last.tool_steps) ** exponent


async def run_once(peer: Peer, tool_steps: int, timeout: float, progress: Progress) -> Elapsed:
    """Time of one complete run; TimeoutError past `timeout`, RuntimeError if the run was not the workload."""
    started = start_clocks()
    await asyncio.wait_for(peer.run(tool_steps, progress), timeout)
    elapsed = elapsed_since(started)
    if (progress.executions, progress.output) != (tool_steps, "done"):
        raise RuntimeError(f"ran {progress.executions} of {tool_steps} tool calls and ended with {progress.output!r}")
    return elapsed


def measure_peer(peer: Peer, sizes: list[int], budget: float) -> PeerReport:
    """Run `peer` once at each size, smallest first, within `budget` seconds for all of them."""
    report = PeerReport(peer.name, installed_version(peer))
    if report.version is None:
        report.problem = f"not installed (pip install -e '.[bench]' adds {peer.distributions[0]})"
        return report
    try:  # imports, schema building and first-call caches, untimed
        asyncio.run(run_once(peer, 3, budget, Progress()))
    except Exception as exc:
        report.problem = f"failed on a 3-step warm-up: {type(exc).__name__}: {exc}"
        return report

    spent = 0.0
    done: list[PeerSize] = []
    for tool_steps in sorted(set(sizes)):
        size = PeerSize(tool_steps)
        report.sizes.append(size)
        left = budget - spent
        predicted = predicted_seconds(done, tool_steps) if done else 0.0
        if predicted > left:
            size.note = f"skipped: predicted {predicted:.0f} s, {max(left, 0):.0f} s left of its {budget:.0f} s budget"
            continue
        progress = Progress()
        gc.collect()
        started = time.perf_counter()
        try:
            size.elapsed = asyncio.run(run_once(peer, tool_steps, left, progress))
            done.append(size)
        except TimeoutError:
            size.note = f"stopped at its budget after {left:.0f} s, at step {progress.requests} of {tool_steps}"
        except Exception as exc:
            size.note = f"failed: {type(exc).__name__}: {exc}"
        spent += time.perf_counter() - started
    return report
