"""The `course` command. With no arguments it runs the chapter 07 README round trip."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from course import check, grade, mutants, snapshots, starter

# The demo's runtime (the loop, jsonschema) is imported when the demo runs: `course check` and the
# other commands start a child pytest and should not pay for it first.

# `course demo --workspace` without a DIR: a temporary workspace holding the chapter's README.md.
TEMPORARY_WORKSPACE = ""


def demo(args: argparse.Namespace) -> int:
    """Run the README round trip and print what happened.

    The model is the scripted one, or a real one with --provider; the read tool is the chapter's
    in-memory stand-in, or chapter 08's workspace read tool with --workspace.
    """
    import asyncio

    from course import readme_example
    from course.clock import StepClock, use_clock
    from course.harness import load_checkpoint
    from course.scripted import ScriptedModel

    with tempfile.TemporaryDirectory(prefix="tiny-pi-workspace-") as temporary:
        if args.workspace is None:
            read_tool, where = readme_example.memory_read_tool(), None
        else:
            root = args.workspace or temporary
            if root == temporary:
                Path(root, "README.md").write_text(readme_example.README + "\n", encoding="utf-8")
            try:
                read_tool = load_checkpoint("ch08_workspace_read").create_read_tool(root)
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
        print(f"Chapter 07 — README round trip on {on}\n")
    else:
        print(f"Chapter 08 — README round trip on {on} with the workspace read tool on {where}\n")
    print(run.render() if args.json else run.render().split("\n## messages")[0], end="")
    if args.provider is not None:
        error = run.messages[-1].get("errorMessage")
        if error:
            print(f"\nThe model request failed: {error}", file=sys.stderr)
        return 0 if not run.problems and run.reason == "stop" else 1
    return 0 if not run.problems else 1


async def _demo_run(model, read_tool):
    from course import readme_example
    from course.harness import load_checkpoint, run_loop
    from course.tools import Registry

    return await run_loop(
        load_checkpoint("ch07_agent_loop"),
        model=model,
        context=readme_example.context(),
        tools=Registry([read_tool]),
    )


def real_model_run(args: argparse.Namespace, read_tool):
    """The round trip on a real model: `--provider openai|anthropic --model NAME [--base-url URL]`."""
    if not args.model:
        print("course demo: --provider needs --model NAME", file=sys.stderr)
        return None
    import asyncio

    try:
        from course.providers import AnthropicModel, OpenAIChatModel
        model_class = OpenAIChatModel if args.provider == "openai" else AnthropicModel
        model = model_class(args.model, base_url=args.base_url, record_requests=True)
    except ImportError as exc:  # the providers extra is not installed
        print(f"course demo: {exc}", file=sys.stderr)
        return None

    async def run_and_close():
        try:
            return await _demo_run(model, read_tool)
        finally:
            await model.aclose()

    return asyncio.run(run_and_close())


def register(commands) -> None:
    demo_parser = commands.add_parser("demo", help="run the chapter 07 README round trip (the default)")
    demo_parser.add_argument("--json", action="store_true", help="also print the transcript as JSON")
    demo_parser.add_argument("--workspace", nargs="?", const=TEMPORARY_WORKSPACE, metavar="DIR",
                             help="read README.md from DIR with chapter 08's read tool "
                                  "(without DIR: from a temporary workspace it creates)")
    # Real models (course.providers, the providers extra); the API key comes from the environment.
    demo_parser.add_argument("--provider", choices=["openai", "anthropic"],
                             help="run on a real model: an OpenAI-compatible server or Anthropic")
    demo_parser.add_argument("--model", help="the model name the provider knows (needed with --provider)")
    demo_parser.add_argument("--base-url", help="the API root, e.g. http://127.0.0.1:8080/v1 for a local server "
                             "(default $OPENAI_BASE_URL / $ANTHROPIC_BASE_URL, else the provider's)")
    demo_parser.set_defaults(handler=demo)


# Each command module has `register(commands)`, adding its subcommand; this list is the CLI.
COMMANDS = [register, starter.register, check.register, snapshots.register, grade.register, mutants.register]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="course", description=__doc__)
    parser.set_defaults(handler=demo, json=False, workspace=None, provider=None)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    for add_command in COMMANDS:
        add_command(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code = args.handler(args)
        sys.stdout.flush()  # a reader that went away shows here, where it is handled, not at exit
        return code
    except LookupError as unknown:  # e.g. a chapter number the manifest does not list
        print(f"course: {unknown.args[0]}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `course status | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the flush at exit cannot fail
        return 1


if __name__ == "__main__":
    sys.exit(main())
