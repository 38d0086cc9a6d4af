"""`course watch NN`: check the chapter now and again after every change to your Python files.

Like rustlings' watch mode: each run starts on a fresh screen (on a terminal; a log or a pipe keeps
every run), a run that fails, hangs (each scenario is stopped after `--timeout` seconds) or crashes the checker is
reported and the watching goes on, and Ctrl-C ends it quietly.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from course.judge import check, extras
from course.judge.terminal import clear_screen, paint
from course.judge.testrun import default_implementation, shown
from course.manifest import FOLDER, ROOT

DEFAULT_TIMEOUT = 10.0
"""Seconds one scenario may take before it is stopped (and the check goes on with the others)."""


def _run_once(args: argparse.Namespace, directory: Path, changed: set | None, run_check: Callable) -> None:
    clear_screen()
    print(paint(f"watching {shown(directory)} — Ctrl-C stops", "dim"))
    if changed:
        names = sorted({shown(path) for _, path in changed})
        print(paint(f"changed: {', '.join(names)}", "dim"))
    print()
    try:
        run_check(args)
    except (KeyboardInterrupt, GeneratorExit):
        raise
    except BaseException as error:  # SystemExit too: one run's trouble never ends the watch
        print(paint(f"course watch: this check could not run ({type(error).__name__}: {error})", "fail"))
    print(paint(f"\nwaiting for a change in {shown(directory)} — Ctrl-C stops", "dim"), flush=True)


def watch(args: argparse.Namespace, changes: Iterable[set] | None = None,
          run_check: Callable[[argparse.Namespace], int] | None = None) -> int:
    """Check the chapter now and again after every change to the implementation's Python files.

    `changes` replaces the file watcher and `run_check` the check (tests hand in a finite list of
    change sets and a check of their own)."""
    implementation = default_implementation(args.impl)
    directory = Path(implementation) if implementation else ROOT / FOLDER  # (the references)
    if not directory.is_dir():
        print(f"course watch: {directory} is not a directory", file=sys.stderr)
        return 2
    if changes is None:
        absent = extras.missing({"watchfiles": "watchfiles"})
        if absent:
            print(extras.install_hint("watch", absent), file=sys.stderr)
            return 2
        import watchfiles

        changes = watchfiles.watch(directory, watch_filter=watchfiles.PythonFilter())
    run_check = check.check if run_check is None else run_check
    try:
        _run_once(args, directory, None, run_check)
        for changed in changes:
            _run_once(args, directory, changed, run_check)
    except KeyboardInterrupt:
        print(paint("\nstopped watching", "dim"))
    return 0


def register(commands) -> None:
    parser = commands.add_parser("watch", help="re-run `course check NN` whenever your files change")
    parser.add_argument("chapter", metavar="NN")
    check.implementation_options(parser)
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S",
                        help=f"stop a scenario that runs longer than S seconds (default {DEFAULT_TIMEOUT:g}) "
                             "and go on watching")
    check.hardening_option(parser)
    parser.set_defaults(handler=watch, json=None)
