"""The `course` command. With no arguments it runs the chapter 07 README round trip."""

from __future__ import annotations

import argparse
import asyncio
import sys

from course import mutants, readme_example
from course.clock import StepClock, use_clock
from course.harness import load_checkpoint, run_loop
from course.scripted import ScriptedModel
from course.tools import Registry


async def _demo_run():
    model = ScriptedModel([readme_example.first_answer(), readme_example.final_answer()])
    return await run_loop(
        load_checkpoint("ch07_agent_loop"),
        model=model,
        context=readme_example.context(),
        tools=Registry([readme_example.memory_read_tool()]),
    )


def demo(args: argparse.Namespace) -> int:
    """Run the README round trip on the scripted model and print what happened."""
    with use_clock(StepClock()):
        run = asyncio.run(_demo_run())
    print("Chapter 07 — README round trip on the scripted model\n")
    print(run.render() if args.json else run.render().split("\n## messages")[0], end="")
    return 0 if not run.problems else 1


def register(commands) -> None:
    demo_parser = commands.add_parser("demo", help="run the chapter 07 README round trip (the default)")
    demo_parser.add_argument("--json", action="store_true", help="also print the transcript as JSON")
    demo_parser.set_defaults(handler=demo)


# Each command module has `register(commands)`, adding its subcommand; this list is the CLI.
COMMANDS = [register, mutants.register]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="course", description=__doc__)
    parser.set_defaults(handler=demo, json=False)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    for add_command in COMMANDS:
        add_command(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
