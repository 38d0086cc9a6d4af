"""Generated scenarios, the judge's half: what plans there are and how a run of one is shown.

Each chapter may have one, `chapters/<module>/judge/plans.py` (never copied beside student code), with

- `STRATEGIES: dict[str, SearchStrategy]`: per section id (the keys of the recorder's `SECTIONS`),
  a Hypothesis strategy of plans — JSON data the recorder's `run_plan` executes;
- `RENDERERS: dict[str, Callable[[dict], str]]`: per record `kind` its chapter's notation, showing
  exactly what the chapter promises (what the reference does that nothing promises is left out);
- `describe(plan: dict) -> str`: the plan in words a student can follow.

A student's run of a plan must render exactly as the reference's run of the same plan.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType

from course.manifest import CHAPTERS, FOLDER, JUDGE


def for_chapter(module: str) -> ModuleType:
    return importlib.import_module(f"{FOLDER}.{module}.{JUDGE}.plans")


def renderer(kind: str) -> Callable[[dict], str] | None:
    """The renderer of a record kind, from whichever chapter declares it."""
    for chapter in CHAPTERS:
        try:
            found = for_chapter(chapter.module).RENDERERS.get(kind)
        except ImportError:
            continue
        if found is not None:
            return found
    return None
