"""The search of one string: every rule family, in order."""

from __future__ import annotations

import functools
import re

from stream_app.core.redaction.common import _REMEMBERED, _REMEMBERED_CHARS, _lower, _occurrences
from stream_app.core.redaction.encodings import _entities, _escapes, _percent_runs, _scan
from stream_app.core.redaction.engine import _pgpass, _places, _shapes
from stream_app.core.redaction.names import (
    _ASSIGNMENT,
    _DASH,
    _FLAG,
    _FLAG_CHARS,
    _FOLD,
    _NAME_CHARS,
    _NAME_FIRST,
    _NAME_THEN_NEEDLES,
    _NAME_THEN_VALUE,
    _STEMS,
    _columns,
    _foldable,
    _labels,
    _name_starts,
    _named_arguments,
    _named_elements,
    _named_values,
    _unfold,
)
from stream_app.core.redaction.structures import _argv_arrays, _jwk, _pairs, _split_jwts

# Every rule of place or name needs one of these: most ids, paths and words have none.
_HINT = re.compile(r"[\s:=<'\"%&]|-[-up]|(?i:hook)")
# Prose (letters, digits, spaces and the commonest punctuation) can only be what one of
# these rules finds, each with a word of its own; everything else needs a character that
# prose lacks.
_PROSE = re.compile(r"[A-Za-z0-9 \t\r\n.,!?;()]*")
_PROSE_NEEDLES = (
    *("bearer", "machine", "default", "requirepass", "masterauth", "config", "secret"),
    "setx",
)


def redact_text(text: str) -> str:
    """``text`` with its credentials replaced by ``[REDACTED]``."""
    if len(text) <= _REMEMBERED_CHARS:
        return _redact_short(text)
    return search_text(text)


@functools.lru_cache(maxsize=_REMEMBERED)
def _redact_short(text: str) -> str:
    return search_text(text)


def search_text(text: str, depth: int = 0) -> str:
    """``text`` redacted; ``depth``: how many levels of base64 it was decoded from. Then
    again with look-alike letters folded (a name in Cyrillic or fullwidth letters), what
    that finds cut out of the text as it was written."""
    text = _redact_written(text, depth)
    if not text.isascii() and _foldable(text):
        folded = text.translate(_FOLD)
        clean = _redact_written(folded, depth)
        if clean != folded:
            text = _unfold(text, folded, clean)
    return text


def _redact_written(text: str, depth: int) -> str:
    if len(text) >= 16:
        text, first = _scan(text, depth)
        if first is not None:
            text = _shapes(text, first)
        if "eyJ" in text:
            text = _split_jwts(text)
    if _HINT.search(text) is None:
        return text
    lower = _lower(text)
    if _PROSE.fullmatch(text) and not any(n in lower for n in _PROSE_NEEDLES):
        return text
    text = _places(text, lower)
    if ":" in text:
        text = _pgpass(text)
    if "%" in text:
        text = _percent_runs(text, depth)
    if "&" in text and ";" in text:
        text = _entities(text, depth)
    if "\\u" in text:
        text = _escapes(text, depth)
    if "kty" in text:
        text = _jwk(text)
    if ('"-' in text or "'-" in text) and "[" in text:
        text = _argv_arrays(text)
    lower = _lower(text)
    stems = _occurrences(lower, _STEMS)
    if not stems:
        return text
    if "=" in text or ":" in text:
        clean = _named_values(
            _ASSIGNMENT, text, _name_starts(text, stems, _NAME_CHARS, _NAME_FIRST)
        )
        if clean != text:
            text, lower = clean, _lower(clean)
            stems = _occurrences(lower, _STEMS)
    if "(" in text or "[" in text:
        clean = _named_arguments(text)
        if clean != text:
            text, lower = clean, _lower(clean)
            stems = _occurrences(lower, _STEMS)
    if ": " in text or ":\t" in text:
        clean = _labels(text, stems)
        if clean != text:
            text, lower = clean, _lower(clean)
            stems = _occurrences(lower, _STEMS)
    if "," in text and ("\n" in text or "\\n" in text):
        text = _columns(text, stems)
    if "-" in text:
        text = _named_values(_FLAG, text, _name_starts(text, stems, _FLAG_CHARS, _DASH))
        lower = _lower(text)
    if "set" in lower or "config" in lower or "secret" in lower:
        text = _named_values(_NAME_THEN_VALUE, text, _occurrences(lower, _NAME_THEN_NEEDLES))
        lower = _lower(text)
    if "value" in lower:
        text = _pairs(text, lower)
    if "</" in text:
        text = _named_elements(text)
    return text
