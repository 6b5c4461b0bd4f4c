"""Credentials that a structure gives away: a JWT in parts, a name/value pair, an argument
list read as the command line it is."""

from __future__ import annotations

import binascii
import re

import orjson

from stream_app.core.redaction import text as search  # a cycle: used at call time only
from stream_app.core.redaction.common import _URLSAFE, REDACTED, _cut, _occurrences, _starts_word
from stream_app.core.redaction.names import _ORDINARY, _kind, _value_span
from stream_app.models.json_types import Json

# -- a JWT given in parts: header, payload and signature as separate values ---------------

# A part of a JWT: base64url of a JSON object; a signature: a long run of base64url.
_JWT_PART = re.compile(r"(?:(?<![A-Za-z0-9_-])|(?<=\\[nrt]))eyJ[A-Za-z0-9_-]{8,}(?![\w=-])")
_SIGNATURE = re.compile(r"(?:(?<![A-Za-z0-9_-])|(?<=\\[nrt]))[A-Za-z0-9_-]{32,}={0,2}(?![\w=-])")
_NOT_JOSE, _JOSE_HEADER, _JOSE_CLAIMS = 0, 1, 2
# How far apart the parts of one JWT may be written.
_JWT_GAP = 200


def _jose(part: str) -> int:
    """Whether ``part`` is a JWT's header (a JSON object with ``alg``), another of its
    parts (a JSON object: the claims), or neither."""
    body = part.translate(_URLSAFE)
    try:
        doc = orjson.loads(binascii.a2b_base64(body + "=" * (-len(body) % 4)))
    except (binascii.Error, orjson.JSONDecodeError):
        return _NOT_JOSE
    if not isinstance(doc, dict):
        return _NOT_JOSE
    return _JOSE_HEADER if isinstance(doc.get("alg"), str) else _JOSE_CLAIMS


def _split_jwts(text: str) -> str:
    """``text`` without the parts of a JWT written apart (``h=eyJ…`` then ``p=eyJ…`` then
    ``s=…``): a header with a JSON object next to it, and the signature nearest them."""
    parts = [(m.start(), m.end(), _jose(m[0])) for m in _JWT_PART.finditer(text)]
    spans: set[tuple[int, int]] = set()
    for start, end, kind in parts:
        if kind != _JOSE_HEADER:
            continue
        near = [
            (max(s - end, start - e), s, e)
            for s, e, k in parts
            if k == _JOSE_CLAIMS and max(s - end, start - e) <= _JWT_GAP
        ]
        if not near:
            continue  # a header alone is public
        _, s, e = min(near)
        lo, hi = min(start, s), max(end, e)
        spans |= {(start, end), (s, e)}
        after = _SIGNATURE.search(text, hi)
        before = [
            m for m in _SIGNATURE.finditer(text, max(lo - _JWT_GAP, 0), lo) if m[0][:3] != "eyJ"
        ]
        if after is not None and after.start() - hi <= _JWT_GAP and after[0][:3] != "eyJ":
            spans.add(after.span())
        elif before:
            spans.add(before[-1].span())
    return _cut(text, sorted(spans))


def _jwt_parts(values: list[Json]) -> list[int]:
    """Which of sibling values (an object's, a list's) are the parts of a JWT given apart:
    a header and other parts as strings, and the signature beside them."""
    kinds = {
        i: _jose(v)
        for i, v in enumerate(values)
        if isinstance(v, str) and v[:3] == "eyJ" and _JWT_PART.fullmatch(v)
    }
    found = set(kinds.values())
    if _JOSE_HEADER not in found or _JOSE_CLAIMS not in found:
        return []
    return [
        i
        for i, v in enumerate(values)
        if kinds.get(i) or (i not in kinds and isinstance(v, str) and _SIGNATURE.fullmatch(v))
    ]


# -- a name and its value as two members: ``{"name": "DB_PASSWORD", "value": …}`` --------

# Members that name another member's value, and the members that hold it: Kubernetes, ECS
# and HAR ``name``/``value``, Postman and GitLab ``key``/``value``, CloudFormation's
# ``ParameterKey``/``ParameterValue``, Netlify's ``values``.
_PAIR_NAMES = frozenset(
    {"name", "key", "parametername", "parameterkey", "optionname", "variable", "header"}
)
_PAIR_VALUES = frozenset({"value", "values", "parametervalue", "optionvalue"})
_NAMES_A_VALUE, _HOLDS_A_VALUE = 1, 2
_PAIR_NEEDLES = ("name", "key", "variable", "header")
_PAIR_PREFIXES = ("parameter", "option", "header")
_PAIR_NAME = re.compile(
    r"(?i:name|key|variable|header)\\*[\"']?[ \t]*[:=][ \t]*"
    r"(?P<q>\\*[\"']?)(?P<name>[\w.:/@-]+)(?P=q)(?![\w.:/@-])"
)
_PAIR_VALUE = re.compile(r"(?i:(?:parameter|option)?values?)\\*[\"']?[ \t]*[:=][ \t]*")
# What ends one object of a text: a brace or bracket, or the next item of a YAML list.
_RECORD_EDGE = re.compile(r"[{}\[\]]|(?:\r?\n|\\+n)[ \t]*-[ \t]")
_RECORD_REACH = 300


def _pair_start(text: str, lower: str, at: int) -> int | None:
    """Where a member's name that holds ``at`` starts, if it starts a word (or follows
    one of the prefixes: ``ParameterKey``)."""
    for prefix in _PAIR_PREFIXES:
        if lower.endswith(prefix, 0, at) and _starts_word(text, at - len(prefix)):
            return at - len(prefix)
    return at if _starts_word(text, at) else None


def _pairs(text: str, lower: str) -> str:
    """``text`` with the value of each name/value pair whose name names a secret redacted:
    the value member found in the same object (JSON text, or one item of a YAML list)."""
    spans: list[tuple[int, int]] = []
    for at in _occurrences(lower, _PAIR_NEEDLES):
        m = _PAIR_NAME.match(text, at)
        if m is None or _pair_start(text, lower, at) is None:
            continue
        kind = _kind(m["name"])
        if kind == _ORDINARY:
            continue
        lo, hi = max(at - _RECORD_REACH, 0), m.end() + _RECORD_REACH
        for edge in _RECORD_EDGE.finditer(text, lo, min(hi, len(text))):
            if edge.end() <= at:
                lo = edge.end()
            elif edge.start() >= m.end():
                hi = edge.start()
                break
        at_value = lower.find("value", lo, hi)
        while at_value >= 0:
            v_start = _pair_start(text, lower, at_value)
            vm = None if v_start is None else _PAIR_VALUE.match(text, v_start)
            span = None if vm is None else _value_span(text, vm.end(), kind)
            if span is not None:
                spans.append(span)
            at_value = lower.find("value", at_value + 5, hi)
    kept: list[tuple[int, int]] = []
    for span in sorted(set(spans)):
        if not kept or span[0] >= kept[-1][1]:
            kept.append(span)
    return _cut(text, kept)


# -- an argument list: read as the command line it is -------------------------------------

# An argument that stands for itself in the line: no space, quote, backslash or bracket (a
# rule would read those across arguments) but in what was redacted already.
_ARG_WORD = re.compile(r"(?:[^\s\"'`\\\[\]{}()<>]|\[REDACTED\])+")


def _command_line(args: list[str | None]) -> dict[int, str]:
    """What redaction takes out of an argument list (``["mysql", "-u", "app",
    "--password", "…"]``) read as one command line, by index: the rules of a command's
    place and of a flag's name see each argument beside the ones before it. Every other
    argument (a space, a quote or a bracket in it) stands in the line as one word, and
    goes whole if that word goes; ``None`` (not a string) is never taken."""
    words = [a if a and _ARG_WORD.fullmatch(a) else "_" for a in args]
    line = " ".join(words)
    clean = search.redact_text(line)
    if clean == line:
        return {}
    got = clean.split(" ")
    if len(got) != len(words):  # a rule took more than one word: those differing go whole
        n = min(len(got), len(words))
        a = next((i for i in range(n) if got[i] != words[i]), n)
        b = next((i for i in range(n - a) if got[-1 - i] != words[-1 - i]), n - a)
        return {i: REDACTED for i in range(a, len(words) - b) if args[i]}
    return {
        i: word if words[i] == args[i] else REDACTED
        for i, word in enumerate(got)
        if word != words[i] and args[i]
    }


def _argv(values: list[Json], out: list[Json]) -> None:
    """A list's strings read as a command line (see _command_line) lose what it takes."""
    taken = _command_line([v if isinstance(v, str) else None for v in values])
    for i, word in taken.items():
        # the element alone lost something already (a key's lines): then it goes whole
        out[i] = word if out[i] == values[i] else REDACTED


_ARRAY_OPEN = re.compile(r"\[[ \t]*(?=\\*[\"'])")
_ARRAY_ITEM = re.compile(
    r"(?P<q>\\*[\"'])(?P<item>(?:(?!(?P=q))[^\r\n])*?)(?P=q)[ \t]*(?P<sep>,[ \t]*|\])"
)


def _argv_arrays(text: str) -> str:
    """``text`` with each array of strings written in it (JSON, a Python list) that holds
    a flag read as a command line (see _command_line)."""
    spans: list[tuple[int, int]] = []
    words: list[str] = []
    for opening in _ARRAY_OPEN.finditer(text):
        items: list[re.Match[str]] = []
        at = opening.end()
        while (item := _ARRAY_ITEM.match(text, at)) is not None:
            items.append(item)
            at = item.end()
            if item["sep"] == "]":
                break
        else:
            continue
        if len(items) < 2 or not any(i["item"][:1] == "-" for i in items):
            continue
        for index, word in _command_line([i["item"] for i in items]).items():
            spans.append(items[index].span("item"))
            words.append(word)
    if not spans:
        return text
    parts: list[str] = []
    at = 0
    for (start, end), word in sorted(zip(spans, words, strict=True)):
        if start >= at:
            parts += (text[at:start], word)
            at = end
    parts.append(text[at:])
    return "".join(parts)


# -- a JSON Web Key: its private members ---------------------------------------------------

# The private members of a JWK (RFC 7518): an EC or OKP key's ``d``, an RSA key's ``d``,
# ``p``, ``q``, ``dp``, ``dq``, ``qi`` and ``oth``, a symmetric key's ``k``.
JWK_PRIVATE = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})
_JWK_MEMBER = re.compile(
    r"(\\*[\"'](?:d|p|q|dp|dq|qi|k)\\*[\"'][ \t]*:[ \t]*\\*[\"'])[A-Za-z0-9_=-]+(?=\\*[\"'])"
)


def _jwk(text: str) -> str:
    """``text`` (JSON with a ``kty`` member) without the private members of a key."""
    spans = [(m.end(1), m.end()) for m in _JWK_MEMBER.finditer(text)]
    return _cut(text, spans)
