"""The `course` command. With no arguments it runs the chapter 07 README round trip."""

from __future__ import annotations

import argparse
import os
import sys

from course.judge import check, extras, grade, hints, mutants, new_chapter, snapshots, starter, watch

# `course demo --workspace` without a DIR: a temporary workspace holding the chapter's README.md.
TEMPORARY_WORKSPACE = ""


def demo(args: argparse.Namespace) -> int:
    """Run the README round trip and print what happened (course/judge/demo.py)."""
    # Imported here: `course check` and the other commands start a child pytest and should not
    # first pay for the loop and jsonschema, which only the demo needs.
    from course.judge import demo as demo_command

    return demo_command.run(args)


def register(commands) -> None:
    demo_parser = commands.add_parser("demo", help="run the chapter 07 README round trip (the default)")
    demo_parser.add_argument("--json", action="store_true", help="also print the transcript as JSON")
    demo_parser.add_argument("--workspace", nargs="?", const=TEMPORARY_WORKSPACE, metavar="DIR",
                             help="read README.md from DIR with chapter 08's read tool "
                                  "(without DIR: from a temporary workspace it creates)")
    # Real models (course.runtime.providers, the providers extra); the API key comes from the environment.
    demo_parser.add_argument("--provider", choices=["openai", "anthropic"],
                             help="run on a real model: an OpenAI-compatible server or Anthropic")
    demo_parser.add_argument("--model", help="the model name the provider knows (needed with --provider)")
    demo_parser.add_argument("--base-url", help="the API root, e.g. http://127.0.0.1:8080/v1 for a local server "
                             "(default $OPENAI_BASE_URL / $ANTHROPIC_BASE_URL, else the provider's)")
    demo_parser.set_defaults(handler=demo)


# Each command module has `register(commands)`, adding its subcommand; this list is the CLI.
COMMANDS = [register, starter.register, check.register, watch.register, hints.register, snapshots.register,
            grade.register, mutants.register, new_chapter.register]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="course", description=__doc__)
    parser.set_defaults(handler=demo, json=False, workspace=None, provider=None)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", dest="command")
    for add_command in COMMANDS:
        add_command(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # argparse fills an optional positional only before the options: `course hint 07 --impl DIR SCENARIO`
    # leaves SCENARIO over. It is the scenario all the same.
    if len(extra) == 1 and not extra[0].startswith("-") and getattr(args, "scenario", False) is None:
        args.scenario, extra = extra[0], []
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    # What a run held is printed as it was, but a lone surrogate in it must not end the command: it shows
    # as its escape instead.
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    missing_extra = extras.check_installed(args.command)  # an install hint, not a traceback or "0 of 0"
    if missing_extra is not None:
        return missing_extra
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
    except KeyboardInterrupt:  # Ctrl-C: the user asked to stop; the shell's code for SIGINT, no traceback
        return 130


if __name__ == "__main__":
    sys.exit(main())
