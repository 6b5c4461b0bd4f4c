"""Wording shared by the commands' summary lines, which people read."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``1 revision``, ``0 revisions``, ``2 revisions``; ``plural`` when adding s is wrong."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
