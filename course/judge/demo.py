"""`course demo` (and plain `course`): the README round trip of the loop chapter, printed as the chapter
writes it (the catalogue's [demo] names the chapters: `loop`, and `workspace` for its read tool).

Imported only when the demo runs (see course.judge.cli): the loop and jsonschema are what it needs and
the other commands do not.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

from course.runtime import readme_example
from course.runtime.clock import StepClock, use_clock
from course.recorder.harness import load_checkpoint, run_loop
from course.runtime.scripted import ScriptedModel
from course.runtime.tools import Registry
from course.manifest import Chapter, demo_chapters, find_chapter


def _demo(role: str) -> Chapter:
    return find_chapter(demo_chapters()[role])


def run(args: argparse.Namespace) -> int:
    """Run the README round trip and print what happened.

    The model is the scripted one, or a real one with --provider; the read tool is the chapter's
    in-memory stand-in, or chapter 08's workspace read tool with --workspace.
    """
    with tempfile.TemporaryDirectory(prefix="tiny-pi-workspace-") as temporary:
        if args.workspace is None:
            read_tool, where = readme_example.memory_read_tool(), None
        else:
            root = args.workspace or temporary
            if root == temporary:
                Path(root, "README.md").write_text(readme_example.README + "\n", encoding="utf-8")
            try:
                read_tool = load_checkpoint(_demo("workspace").module).create_read_tool(root)
            except ValueError as error:
                print(f"course: {error}", file=sys.stderr)
                return 2
            where = "a temporary workspace holding README.md" if root == temporary else root

        if args.provider is None:
            # With the real read tool the final answer is computed from what the tool returned.
            final = readme_example.final_answer() if where is None else readme_example.answer_from_read_result
            with use_clock(StepClock()):
                run = asyncio.run(_demo_run(ScriptedModel([readme_example.first_answer(), final]), read_tool))
            on = "the scripted model"
        else:
            run = real_model_run(args, read_tool)
            if run is None:
                return 2
            on = f"{args.provider} model {args.model}"

    if where is None:
        print(f"Chapter {_demo('loop').number} — README round trip on {on}\n")
    else:
        print(f"Chapter {_demo('workspace').number} — README round trip on {on} with the workspace read tool on {where}\n")
    print(run.render() if args.json else run.render().split("\n## messages")[0], end="")
    if args.provider is not None:
        error = run.messages[-1].get("errorMessage")
        if error:
            print(f"\nThe model request failed: {error}", file=sys.stderr)
        return 0 if not run.problems and run.reason == "stop" else 1
    return 0 if not run.problems else 1


async def _demo_run(model, read_tool):
    return await run_loop(
        load_checkpoint(_demo("loop").module),
        model=model,
        context=readme_example.context(),
        tools=Registry([read_tool]),
    )


def real_model_run(args: argparse.Namespace, read_tool):
    """The round trip on a real model: `--provider openai|anthropic --model NAME [--base-url URL]`."""
    if not args.model:
        print("course demo: --provider needs --model NAME", file=sys.stderr)
        return None
    try:
        from course.runtime.providers import AnthropicModel, OpenAIChatModel
        model_class = OpenAIChatModel if args.provider == "openai" else AnthropicModel
        model = model_class(args.model, base_url=args.base_url, record_requests=True)
    except (ImportError, ValueError) as exc:  # the providers extra is not installed; a --base-url not usable
        print(f"course demo: {exc}", file=sys.stderr)
        return None

    async def run_and_close():
        try:
            return await _demo_run(model, read_tool)
        finally:
            await model.aclose()

    return asyncio.run(run_and_close())
