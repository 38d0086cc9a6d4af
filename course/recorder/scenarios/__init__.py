"""Generated scenarios, the recorder's half: running one plan on an implementation.

Each chapter may have one, `chapters/<module>/scenarios.py` (beside its checkpoint), with

- `SECTIONS: dict[str, str]`: the chapter's sections that have generated scenarios, as
  {ASCII id: the section's name in the chapter text, as its test module marks it};
- `async def run_plan(plan: dict, load) -> dict`: run one plan (JSON data, made by the judge's
  strategies in `course.judge.scenarios`) on the implementation that `load(module_name)` returns,
  and return the record (JSON data, see `course.recorder.record`), whose `kind` the judge renders.

This half runs beside student code, so it imports neither the judge nor Hypothesis.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from course.manifest import FOLDER


def for_chapter(module: str) -> ModuleType:
    return importlib.import_module(f"{FOLDER}.{module}.scenarios")
