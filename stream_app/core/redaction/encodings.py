"""Encoded text, decoded and searched again: percent-encoding, base64 (gone whole when what
it holds is a credential)."""

from __future__ import annotations

import binascii
import html
import itertools
import re
from collections.abc import Callable
from urllib.parse import quote, unquote

from stream_app.core.redaction import text as search  # a cycle: used at call time only
from stream_app.core.redaction.common import _SEP, _URLSAFE, REDACTED, _cut
from stream_app.core.redaction.engine import (
    _CHUNK,
    _SHAPE_FORMATS,
    _SHAPE_START,
    _SHAPES,
    _TELEGRAM,
    _first_shape,
)
from stream_app.models.json_types import Json

# -- percent-encoded text: decoded, searched, and encoded again where a credential went ---

_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
_RUN_REST = re.compile(r"[^\s\"'<>\\]*")
_RUN_STOP = frozenset(" \t\r\n\f\v\"'<>\\")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~%")


def _percent_runs(text: str, depth: int) -> str:
    """``text`` with each run of percent-encoded characters (no space, quote or bracket in
    it) searched once decoded."""
    parts: list[str] = []
    at = scanned = 0
    for m in _PERCENT.finditer(text):
        if m.start() < scanned:
            continue
        start = m.start()
        while start > scanned and text[start - 1] not in _RUN_STOP:
            start -= 1
        rest = _RUN_REST.match(text, m.end())
        end = m.end() if rest is None else rest.end()
        scanned = end
        run = text[start:end]
        clean = _percent_decoded(run, depth)
        if clean != run:
            parts += (text[at:start], clean)
            at = end
    if not parts:
        return text
    parts.append(text[at:])
    return "".join(parts)


def _percent_decoded(run: str, depth: int) -> str:
    """A run of percent-encoded text, unchanged unless its decoded text holds a credential.

    The redacted text is encoded again as the run was: what the run had literally stays
    literal, the rest is encoded; so the run reads as before but for ``[REDACTED]``. A run
    encoded twice is decoded twice, by the search of the decoded text.
    """
    plain = unquote(run)
    if plain == run:
        return run
    clean = search.search_text(plain, depth)
    if clean == plain:
        return run
    literal = "".join({c for c in run if c not in _UNRESERVED})
    return REDACTED.join(quote(piece, safe=literal) for piece in clean.split(REDACTED))


# -- base64: decoded, and gone whole when what it holds is a credential -------------------

# A whole run of base64, standard or URL-safe, long enough to hold ``name=value`` (16
# characters), whose first 12 bytes are ASCII: the first of every 4 characters then codes
# a byte under 128, a letter in A-Z or a-f. Most ids and words fail there, undecoded.
_BASE64_BODY = r"(?:[A-Za-f][A-Za-z0-9+/_-]{3}){4}[A-Za-z0-9+/_-]*={0,2}"
_BASE64_RUN = re.compile(rf"(?:(?<![A-Za-z0-9+/_-])|(?<=\\[nrt])){_BASE64_BODY}")
# The shapes or a run of base64, in one search: most texts have neither.
_SHAPES_OR_BASE64 = re.compile(
    rf"{_SHAPE_START}(?:{_SHAPE_FORMATS}|(?P<b64>(?<![+/_-]){_BASE64_BODY}))|{_TELEGRAM}"
)
_BASE64_ANY = re.compile(r"[A-Za-z0-9+/_-]+={0,2}")
# Base64 in base64 in ... is decoded this many levels deep; longer runs are not decoded.
_BASE64_DEPTH = 4
_BASE64_MAX = 1 << 20
# Bytes that text does not hold (tab, line breaks and form feed aside).
_NOT_TEXT = re.compile(rb"[\x00-\x08\x0e-\x1f\x7f]")
_WRAP = re.compile(_SEP)


def _base64_text(run: str) -> str | None:
    """What a run of base64 decodes to when that is text (UTF-8, no control characters),
    else None. Its first bytes are decoded first: most runs are ids, hashes, words or
    binary data, and say so there."""
    if len(run) > _BASE64_MAX or run.islower() or run.isupper() or run.isdigit():
        return None  # one case or digits only: a word, a hex hash, an id
    body = run.rstrip("=")
    if "-" in body or "_" in body:
        if "+" in body or "/" in body:
            return None  # both alphabets: a path or a name, not base64
        body = body.translate(_URLSAFE)
    if len(body) % 4 == 1:
        return None
    body += "=" * (-len(body) % 4)
    try:
        if _NOT_TEXT.search(binascii.a2b_base64(body[:24])):
            return None
        data = binascii.a2b_base64(body)
        text = data.decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    return None if _NOT_TEXT.search(data) else text


def _scan(text: str, depth: int) -> tuple[str, int | None]:
    """One pass over the runs of 16 or more characters without a space, where every shape
    but an armoured block and every run of base64 worth decoding are: ``text`` without
    the runs of base64 that hold a credential (_base64_blobs), and where its first shape
    may start (_first_shape)."""
    armour = [i for i in (text.find("-----BEGIN"), text.find("---- BEGIN")) if i >= 0]
    first = None
    shapes = True  # still looking for the first shape
    decode = depth < _BASE64_DEPTH
    spans: list[tuple[int, int]] = []
    done = 0  # where the last run of base64 ended
    for chunk in _CHUNK.finditer(text):
        start, end = chunk.span()
        if shapes and armour and start > armour[0]:
            shapes = False
        run = None
        if shapes and decode:
            found = _SHAPES_OR_BASE64.search(text, start, end)
            if found is None:
                continue
            if found["b64"] is None or _SHAPES.search(text, start, end) is not None:
                first, shapes = start, False
            if found["b64"] is not None and found.start() >= done:
                run = found
        elif shapes:
            if _SHAPES.search(text, start, end) is not None:
                first, shapes = start, False
            continue
        elif not decode:
            break
        if run is None and end > done:
            run = _BASE64_RUN.search(text, max(start, done), end)
        if run is not None:
            done = _base64_blobs(text, run, end, depth, spans)
    if spans:  # the text changed: look for its first shape again
        text = _cut(text, spans)
        return text, _first_shape(text)
    return text, first if first is not None else armour[0] if armour else None


def _base64_blobs(
    text: str, first: re.Match[str], end: int, depth: int, spans: list[tuple[int, int]]
) -> int:
    """The runs of base64 from ``first`` to ``end`` (a line, or lines of one width as
    ``base64`` wraps them, which may go past ``end``) whose decoded text holds a
    credential, added to ``spans``: each goes whole. Returns where the last run ended."""
    done = first.start()
    for m in itertools.chain((first,), _BASE64_RUN.finditer(text, first.end(), end)):
        begin, stop = m.span()
        stop, run = _wrapped(text, begin, stop)
        done = stop
        decoded = _base64_text(run)
        if decoded is not None and search.search_text(decoded, depth + 1) != decoded:
            spans.append((begin, stop))
    return done


def _wrapped(text: str, start: int, end: int) -> tuple[int, str]:
    """Where a run of base64 ends that goes on over lines of its width (the last one may
    be shorter; lines of a text, or strings of a JSON list in it), and the run."""
    run = [text[start:end]]
    width = end - start
    if width < 60 or width % 4:
        return end, run[0]
    while (gap := _WRAP.match(text, end)) is not None:
        line = _BASE64_ANY.match(text, gap.end())
        if line is None or line.end() - line.start() > width:
            break
        if line.end() < len(text) and text[line.end()] not in " \t\r\n\\\"',":
            break
        end = line.end()
        run.append(line[0])
        if line.end() - line.start() < width:
            break
    return end, "".join(run)


def _wrapped_lines(values: list[Json], out: list[Json]) -> None:
    """The lines of a list that make one run of base64 (``base64``'s output as lines) go
    when it holds a credential."""
    i = 0
    while i < len(values):
        v = values[i]
        if isinstance(v, str) and len(v) >= 60 and len(v) % 4 == 0 and _BASE64_ANY.fullmatch(v):
            j = i + 1
            run = [v]
            while j < len(values) and isinstance(line := values[j], str):
                if len(line) > len(v) or not _BASE64_ANY.fullmatch(line):
                    break
                j += 1
                run.append(line)
                if len(line) < len(v):
                    break
            decoded = _base64_text("".join(run))
            if j > i + 1 and decoded is not None and search.redact_text(decoded) != decoded:
                out[i:j] = [REDACTED] * (j - i)
            i = j
        else:
            i += 1


# -- HTML entities and ``\uXXXX`` escapes: decoded, searched, cut where they were ---------

_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6}|quot|apos|amp|lt|gt|nbsp);")
_ESCAPE = re.compile(r"\\+u([0-9A-Fa-f]{4})")


def _entities(text: str, depth: int) -> str:
    """``text`` with what its HTML entities, decoded, hide cut out where it was written."""
    return _decoded(text, _ENTITY, lambda m: html.unescape(m[0]), depth)


def _escapes(text: str, depth: int) -> str:
    """``text`` with what its ``\\uXXXX`` escapes (a name written ``\\u0070assword``),
    decoded, hide cut out where it was written."""
    return _decoded(text, _ESCAPE, lambda m: chr(int(m[1], 16)), depth)


def _decoded(
    text: str, pattern: re.Pattern[str], decode: Callable[[re.Match[str]], str], depth: int
) -> str:
    """``text`` decoded by ``pattern`` and ``decode``, searched, and the spans that search
    cut out of the decoded text cut out of ``text`` at the places they came from."""
    pieces: list[str] = []
    origin: list[int] = []  # for each decoded character, where it starts in ``text``
    at = 0
    for m in pattern.finditer(text):
        pieces.append(text[at : m.start()])
        origin.extend(range(at, m.start()))
        char = decode(m)
        pieces.append(char)
        origin.extend([m.start()] * len(char))
        at = m.end()
    if not pieces:
        return text
    pieces.append(text[at:])
    origin.extend(range(at, len(text) + 1))  # and the end
    plain = "".join(pieces)
    clean = search.search_text(plain, depth)
    if clean == plain:
        return text
    spans = _cut_spans(plain, clean)
    if spans is None:
        return REDACTED  # not a text cut at places: nothing of it is kept
    # from where the first character cut was written to where the next one was
    return _cut(text, [(origin[start], origin[end]) for start, end in spans])


def _cut_spans(plain: str, clean: str) -> list[tuple[int, int]] | None:
    """Where ``clean`` (``plain`` redacted) has ``[REDACTED]``, as spans of ``plain``; None
    if ``clean`` is not ``plain`` with spans cut out."""
    pieces = clean.split(REDACTED)
    if not plain.startswith(pieces[0]):
        return None
    spans: list[tuple[int, int]] = []
    at = len(pieces[0])
    for i, piece in enumerate(pieces[1:], 1):
        if i == len(pieces) - 1:
            found = len(plain) - len(piece) if plain.endswith(piece) else -1
        else:
            found = plain.find(piece, at + 1) if piece else at + 1
        if found < at:
            return None
        spans.append((at, found))
        at = found + len(piece)
    return spans
