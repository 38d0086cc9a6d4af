"""A chapter's generated scenarios as pytest tests: one test per section that has them.

`test_generated = generated_scenarios("ch07_agent_loop")` in a chapter's test module adds
`test_generated[<section id>]`, marked with the section so that `pytest -k <section name>` selects
it. Run by plain pytest, each draws the section's plans with Hypothesis and requires the run of
every plan on the implementation under test to render exactly as the reference's run of it
(`course.judge.differential`). Run by `course check` or `course grade`, it only records the runs
of the plans the judge handed in; the judge compares them (`course.recorder.pytest_plugin`).
"""

from __future__ import annotations

import pytest

from course.recorder import scenarios


GENERATED_TIMEOUT = 120
"""Seconds a whole generated section may take: each of its plans has its own limit (`limits`), so
this only bounds a machine so loaded that many plans crawl."""


def generated_scenarios(module: str):
    sections = scenarios.for_chapter(module).SECTIONS
    cases = [pytest.param(key, id=key, marks=pytest.mark.section(name)) for key, name in sections.items()]

    @pytest.mark.timeout(GENERATED_TIMEOUT)
    @pytest.mark.parametrize("section", cases)
    def test_generated(section, request):
        """generated plans of this section: every run must be the reference's run of the same plan."""
        from course.recorder.pytest_plugin import recording

        recorder = recording(request.config)
        if recorder is not None:
            recorder.run_generated(request.node, module, section)
            return
        from course.judge.differential import compare_section  # plain pytest: judged here, in process

        compare_section(module, section)

    test_generated.__module__ = f"tests.test_{module}"
    test_generated.course_generated = True  # (never masked: its plans are the judge's, run as they are)
    return test_generated
