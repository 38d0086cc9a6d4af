"""A plan's choices, each one drawn by Hypothesis, so that a failing plan shrinks.

A chapter's plan builder takes a `Draw` and asks it for every choice it makes (`integers`, `sampled_from`,
`booleans`, `one_in`, `permutations`); `plans(builder, ...)` is the Hypothesis strategy of the plans the
builder makes. Since each choice is a Hypothesis draw, Hypothesis shrinks a failing plan choice by choice:
towards the lowest integer, the first option, False, the order given. A builder lists the simplest option
first (the fewest steps, calls, hooks), so the plan a failure ends with is the smallest that still fails.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from hypothesis import strategies as st

T = TypeVar("T")


@functools.lru_cache(maxsize=4096)
def _integers(low: int, high: int) -> st.SearchStrategy[int]:
    return st.integers(low, high)


@functools.lru_cache(maxsize=4096)
def _options(options: tuple) -> st.SearchStrategy:
    return st.sampled_from(options)


def _hashable(options: Sequence) -> tuple | None:
    options = tuple(options)
    try:
        hash(options)
    except TypeError:  # (options holding dicts or lists: a strategy of their own each time)
        return None
    return options


class Draw:
    """The choices of one plan, each drawn by Hypothesis's `draw` (of an `st.composite`)."""

    def __init__(self, draw: Callable[[st.SearchStrategy[T]], T]) -> None:
        self.draw = draw

    def integers(self, low: int, high: int) -> int:
        """From `low` to `high`, both included; shrinks towards `low`."""
        return self.draw(_integers(low, high))

    def sampled_from(self, options: Sequence[T]) -> T:
        """One of `options` (an option listed twice comes twice as often); shrinks towards the first."""
        hashable = _hashable(options)
        return self.draw(_options(hashable) if hashable is not None else st.sampled_from(list(options)))

    def booleans(self) -> bool:
        """True or False, as often; shrinks towards False."""
        return self.draw(st.booleans())

    def one_in(self, n: int) -> bool:
        """True one time in `n`; shrinks towards False."""
        return self.integers(1, n) == n if n > 1 else True

    def permutations(self, items: Sequence[T]) -> list[T]:
        """`items` in any order; shrinks towards the order given."""
        return list(self.draw(st.permutations(list(items)))) if len(items) > 1 else list(items)


def plans(builder: Callable[..., Any], *args: Any, **kwargs: Any) -> st.SearchStrategy:
    """The Hypothesis strategy of what `builder(Draw, *args, **kwargs)` makes."""

    @st.composite
    def drawn(draw) -> Any:
        return builder(Draw(draw), *args, **kwargs)

    return drawn()


# --- how plans are generated: each drawn afresh from the seed, as plain random choices -------------------

from hypothesis.internal.conjecture import providers as _providers  # noqa: E402


class FreshDraws(_providers.HypothesisProvider):
    """Hypothesis's own choices (from the test's seeded random), as a backend of its own: Hypothesis then
    draws every example afresh, without the search heuristics of its default backend (a first stretch of
    near-minimal examples, then copies of parts of earlier ones), which with a few dozen plans per section
    would make many near copies. A failing example is shrunk by the default backend, as any."""


BACKEND = "tiny-pi-fresh-draws"
_providers.AVAILABLE_PROVIDERS[BACKEND] = FreshDraws
