"""What never runs beside student code: rendering, comparison, invariants, reports, grading and the `course` command."""
