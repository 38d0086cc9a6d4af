"""Benchmarks of the chapter 07 loop: overhead per step, other runtimes, batches, memory, feedback time.

Run `python -m benchmarks --help` from the repository root. Nothing here is part of the test suite.
"""
