"""Wording shared by the commands' summary lines, which people read."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``1 revision``, ``0 revisions``, ``2 revisions``; ``plural`` when adding s is wrong."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def named(ids: list[str], shown: int = 10) -> str:
    """``a, b, c`` for a few ids, ``a, b, ... and 12 more`` for many: a line stays a line."""
    head = ", ".join(ids[:shown])
    return head if len(ids) <= shown else f"{head} and {len(ids) - shown} more"


def unclosed_warning(sessions: list[str]) -> str:
    """The warning for sessions whose last messages make no turn yet: no assistant message
    with a finishReason closed them, so they wait in state (a misspelt finishReason does this)."""
    return (
        f"{counted(len(sessions), 'session')} {'ends' if len(sessions) == 1 else 'end'} with "
        "messages that no finishing message "
        f"closes (an assistant message with finishReason): {named(sessions)}"
    )
