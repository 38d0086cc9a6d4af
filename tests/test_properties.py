"""Property tests: the chapter 07 loop keeps its promises on every generated scripted run.

What a generated run is, the Hypothesis profiles, and how to reproduce a failure: generated_runs.py
and the README's "Guarantees". Hypothesis is imported only when this test runs, so collecting
the suite (`pytest -k ch07`) does not pay for it.
"""

import importlib
import sys

from _pytest.assertion.rewrite import AssertionRewritingHook


def import_hypothesis_without_assert_rewriting() -> None:
    """pytest rewrites the asserts of every module of a distribution that registers a pytest
    plugin, Hypothesis included (even with the plugin disabled): about 1.3 s of compiling on each
    run where bytecode is not cached, more than the 500 runs take. Hypothesis needs no rewriting."""
    hooks = [finder for finder in sys.meta_path if isinstance(finder, AssertionRewritingHook)]
    for hook in hooks:
        sys.meta_path.remove(hook)
    try:
        importlib.import_module("hypothesis.strategies")
    finally:
        sys.meta_path[:0] = hooks


def test_every_generated_run_keeps_the_loops_promises():
    import_hypothesis_without_assert_rewriting()
    import generated_runs

    generated_runs.every_generated_run_keeps_the_promises()


def test_the_checker_reports_and_never_crashes_on_a_broken_loops_output():
    import_hypothesis_without_assert_rewriting()
    import generated_runs

    generated_runs.the_checker_reports_and_never_crashes()
