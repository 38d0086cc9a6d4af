"""A syrupy extension that stores each scenario as one readable text file.

A failing comparison starts with the first divergent line (section, index, expected, got)
before syrupy's own diff, so a student sees where the run went wrong, not a wall of text.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from course.judge.render import render_record
from course.recorder.record import jsonable
from course.judge.timeline import first_divergence


class RunSnapshotExtension(SingleFileSnapshotExtension):
    file_extension = "txt"
    _write_mode = WriteMode.TEXT

    def serialize(self, data: Any, **kwargs: Any) -> str:
        # As the recorder writes it (JSON data, course.recorder.record) and the judge renders it: plain
        # pytest and `course check` show a test's value as the same text, whatever JSON value it is.
        record = data.record() if callable(getattr(data, "record", None)) else data
        return render_record(jsonable(record))

    def diff_lines(self, serialized_data: Any, snapshot_data: Any) -> Iterator[str]:
        divergence = first_divergence(str(snapshot_data), str(serialized_data))
        if divergence is not None:
            yield from divergence.describe().splitlines()
            yield ""
        yield from super().diff_lines(serialized_data, snapshot_data)


def snapshot_assertion(request):
    """syrupy's `snapshot` fixture, with this extension: one readable text file per scenario."""
    from syrupy.assertion import SnapshotAssertion
    from syrupy.location import PyTestLocation

    return SnapshotAssertion(
        update_snapshots=request.config.option.update_snapshots,
        update_new_snapshots_only=getattr(request.config.option, "update_new_snapshots_only", False),
        extension_class=RunSnapshotExtension,
        test_location=PyTestLocation(request.node),
        session=request.session.config._syrupy,
    )
