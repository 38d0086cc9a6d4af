"""The `course` command. With no arguments it runs the chapter 07 README round trip."""

from __future__ import annotations

import argparse
import asyncio
import sys

from course import check, grade, readme_example, snapshots, starter
from course.clock import StepClock, use_clock
from course.harness import load_checkpoint, run_loop
from course.scripted import ScriptedModel
from course.tools import Registry


async def _demo_run(model):
    return await run_loop(
        load_checkpoint("ch07_agent_loop"),
        model=model,
        context=readme_example.context(),
        tools=Registry([readme_example.memory_read_tool()]),
    )


def demo(args: argparse.Namespace) -> int:
    """Run the README round trip on the scripted model (or a real one) and print what happened."""
    if getattr(args, "provider", None) is not None:
        return real_model_demo(args)
    with use_clock(StepClock()):
        run = asyncio.run(_demo_run(ScriptedModel([readme_example.first_answer(), readme_example.final_answer()])))
    _print_run("the scripted model", run, args.json)
    return 0 if not run.problems else 1


def _print_run(on: str, run, with_json: bool) -> None:
    print(f"Chapter 07 — README round trip on {on}\n")
    print(run.render() if with_json else run.render().split("\n## messages")[0], end="")


def real_model_demo(args: argparse.Namespace) -> int:
    """The round trip on a real model: `--provider openai|anthropic --model NAME [--base-url URL]`."""
    if not args.model:
        print("course demo: --provider needs --model NAME", file=sys.stderr)
        return 2
    try:
        from course.providers import AnthropicModel, OpenAIChatModel
        model_class = OpenAIChatModel if args.provider == "openai" else AnthropicModel
        model = model_class(args.model, base_url=args.base_url, record_requests=True)
    except ImportError as exc:  # the providers extra is not installed
        print(f"course demo: {exc}", file=sys.stderr)
        return 2

    async def run_and_close():
        try:
            return await _demo_run(model)
        finally:
            await model.aclose()

    run = asyncio.run(run_and_close())
    _print_run(f"{args.provider} model {args.model}", run, args.json)
    error = run.messages[-1].get("errorMessage")
    if error:
        print(f"\nThe model request failed: {error}", file=sys.stderr)
    return 0 if not run.problems and run.reason == "stop" else 1


def register(commands) -> None:
    demo_parser = commands.add_parser("demo", help="run the chapter 07 README round trip (the default)")
    demo_parser.add_argument("--json", action="store_true", help="also print the transcript as JSON")
    # Real models (course.providers, the providers extra); the API key comes from the environment.
    demo_parser.add_argument("--provider", choices=["openai", "anthropic"],
                             help="run on a real model: an OpenAI-compatible server or Anthropic")
    demo_parser.add_argument("--model", help="the model name the provider knows (needed with --provider)")
    demo_parser.add_argument("--base-url", help="the API root, e.g. http://127.0.0.1:8080/v1 for a local server "
                             "(default $OPENAI_BASE_URL / $ANTHROPIC_BASE_URL, else the provider's)")
    demo_parser.set_defaults(handler=demo)


# Each command module has `register(commands)`, adding its subcommand; this list is the CLI.
COMMANDS = [register, starter.register, check.register, snapshots.register, grade.register]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="course", description=__doc__)
    parser.set_defaults(handler=demo, json=False)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    for add_command in COMMANDS:
        add_command(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except LookupError as unknown:  # e.g. a chapter number the manifest does not list
        print(f"course: {unknown.args[0]}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
