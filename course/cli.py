"""The `course` command. With no arguments it runs the chapter 07 README round trip."""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

from course import readme_example
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
    if args.workspace is not None:
        return workspace_demo(args)
    with use_clock(StepClock()):
        run = asyncio.run(_demo_run())
    print("Chapter 07 — README round trip on the scripted model\n")
    print(run.render() if args.json else run.render().split("\n## messages")[0], end="")
    return 0 if not run.problems else 1


# Chapter 08: the same round trip with the real workspace read tool (`course demo --workspace [DIR]`).
TEMPORARY_WORKSPACE = ""


def workspace_demo(args: argparse.Namespace) -> int:
    """The README round trip with chapter 08's read tool on DIR, or on a temporary workspace it creates."""
    with tempfile.TemporaryDirectory(prefix="tiny-pi-workspace-") as temporary:
        root = args.workspace or temporary
        if root == temporary:
            Path(root, "README.md").write_text(readme_example.README + "\n", encoding="utf-8")
        try:
            read_tool = load_checkpoint("ch08_workspace_read").create_read_tool(root)
        except ValueError as error:
            print(f"course: {error}", file=sys.stderr)
            return 2
        model = ScriptedModel([readme_example.first_answer(), readme_example.answer_from_read_result])
        with use_clock(StepClock()):
            run = asyncio.run(run_loop(load_checkpoint("ch07_agent_loop"), model=model,
                                       context=readme_example.context(), tools=Registry([read_tool])))
        where = "a temporary workspace holding README.md" if root == temporary else root
    print(f"Chapter 08 — README round trip with the workspace read tool on {where}\n")
    print(run.render() if args.json else run.render().split("\n## messages")[0], end="")
    return 0 if not run.problems else 1


def register(commands) -> None:
    demo_parser = commands.add_parser("demo", help="run the chapter 07 README round trip (the default)")
    demo_parser.add_argument("--json", action="store_true", help="also print the transcript as JSON")
    demo_parser.add_argument("--workspace", nargs="?", const=TEMPORARY_WORKSPACE, metavar="DIR",
                             help="read README.md from DIR with chapter 08's read tool "
                                  "(without DIR: from a temporary workspace it creates)")
    demo_parser.set_defaults(handler=demo)


# Each command module has `register(commands)`, adding its subcommand; this list is the CLI.
COMMANDS = [register]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="course", description=__doc__)
    parser.set_defaults(handler=demo, json=False, workspace=None)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    for add_command in COMMANDS:
        add_command(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
