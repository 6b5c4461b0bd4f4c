"""What every rule family shares: the replacement, the caches' bounds, line breaks as text
carries them, and the scans for needles and word starts."""

from __future__ import annotations

REDACTED = "[REDACTED]"

# Short texts are redacted once and remembered: names and values repeat from record to
# record (keys of ``raw``, hook names, paths), and every rule is a pure function of the
# text. At most this many of at most this many characters: a few MiB.
_REMEMBERED = 8192
_REMEMBERED_CHARS = 256

# A line break as text carries it: itself, or escaped once or more inside JSON text.
_EOL = r"(?:\r?\n|(?:\\+r)?\\+n)"
# What separates the lines of a wrapped block: a line break (then an indented YAML value
# goes on), or the end of one string of a JSON list and the start of the next.
_SEP = rf"(?:[ \t]*{_EOL}[ \t]*|\\*\"[ \t]*,(?:\s|{_EOL})*\\*\")"


# The rest of a line, which in JSON text ends at an escaped line break too.
_LINE = r"(?:[^\r\n\\]|\\(?![nr]))*?"
_AUTH_SCHEME = r"(?:bearer|basic|digest|token|bot|negotiate|ntlm|apikey|sso-key|ssws|oauth)"

_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _starts_word(text: str, at: int) -> bool:
    """Whether a word starts at ``at``: after no word character, or after a line break
    escaped in JSON text (``...\\nmysql -p...``)."""
    return (
        at == 0
        or text[at - 1] not in _WORD_CHARS
        or (at >= 2 and text[at - 2] == "\\" and text[at - 1] in "nrt")
    )


def _occurrences(lower: str, needles: tuple[str, ...]) -> list[int]:
    """Where the needles occur, in order (``str.find`` per needle: faster than one regex
    of them all, which CPython tries branch by branch at every position)."""
    found: list[int] = []
    for needle in needles:
        at = lower.find(needle)
        while at >= 0:
            found.append(at)
            at = lower.find(needle, at + 1)
    if len(found) > 1:
        found = sorted(set(found))
    return found


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _lower(text: str) -> str:
    """``text`` in lower case, each character where it was (``str.lower`` may turn one
    character into two, and the needles' positions must be the text's)."""
    lower = text.lower()
    return lower if len(lower) == len(text) else text.translate(_ASCII_LOWER)


def _cut(text: str, spans: list[tuple[int, int]]) -> str:
    if not spans:
        return text
    parts: list[str] = []
    at = 0
    for start, end in spans:
        parts += (text[at:start], REDACTED)
        at = end
    parts.append(text[at:])
    return "".join(parts)


_URLSAFE = str.maketrans("-_", "+/")
