"""Chapter 09: The edit tool.

The reference checkpoint, written by `course new 09`. Replace `example` with what the chapter
builds, in the order the chapter text builds it, and keep the catalogue entry's `names`
(course/catalogue.toml) to the public names the chapter's tests use.
"""

from __future__ import annotations


def example(text: str) -> dict:
    """The words of `text` and how many there are (a placeholder: the chapter's own function replaces it)."""
    words = text.split()
    return {"text": text, "words": words, "count": len(words)}
