"""Correct variants of a reference, which its chapter's tests must pass: what a chapter leaves to the
implementation, tried. The mutation gate holds the tests to failing known-wrong code; this holds them to
passing right code that is not the reference's own (a test that depends on what the chapter leaves open
fails a student who chose otherwise).

Each variant is judged like a gallery variant (`course.judge.mutants.run_variants`: the chapter's whole
test module, generated plans included, against the variant through `--impl`), in worker processes: slow,
so marked `commands` and run by CI with the command tests (`pytest -m commands`).
"""

import pytest

from course.judge import mutants
from course.manifest import find_chapter

CH08 = find_chapter("08")
CHUNK_CONSTANT = "CHUNK_BYTES = 64 * 1024"
CHUNK_SIZES = {"4-kib": "4 * 1024", "8-kib": "8 * 1024", "1-mib": "1024 * 1024", "3000-bytes": "3000"}
"""Chunk sizes a chapter 08 reader may take (any up to 1 MiB, one read call each): powers of two below and at
the limit, and one that is none, so that chunks end inside lines and characters anywhere."""


def chunk_variant(name: str, size: str) -> mutants.Mutant:
    return mutants.Mutant(f"chunks-{name}", "中止", f"a correct reader with chunks of {size} bytes",
                          CHUNK_CONSTANT, f"CHUNK_BYTES = {size}")


@pytest.mark.commands
@pytest.mark.timeout(1800)  # four runs of chapter 08's whole suite: minutes of wall time beside CI's busy processes
def test_chapter_08_passes_readers_of_any_chunk_size():
    """The reference with chunks of 4 KiB, 8 KiB, 1 MiB and 3000 bytes instead of 64 KiB passes every chapter 08
    test: binary detection, abort, progress and the plans do not depend on the chunk size."""
    reference = mutants.reference_source(CH08)
    assert reference.count(CHUNK_CONSTANT) == 1, "the reference no longer sets its chunk size in one line"
    chosen = [(CH08, chunk_variant(name, size)) for name, size in CHUNK_SIZES.items()]
    outcomes = mutants.run_variants(chosen, timeout=120)
    problems = {o.variant: o.error or o.failed for o in outcomes if o.error is not None or o.failed or not o.passed}
    assert problems == {}, f"correct readers failed chapter 08's tests: {problems}"
