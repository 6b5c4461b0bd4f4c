"""The walk of a JSON value: keys, values, pairs of members, lists of lines."""

from __future__ import annotations

import functools
import re
from typing import TypeVar, cast

from stream_app.core.redaction.common import _REMEMBERED, _REMEMBERED_CHARS, REDACTED
from stream_app.core.redaction.encodings import _wrapped_lines
from stream_app.core.redaction.engine import _KEY_BASE64, _KEY_BEGIN, _KEY_END, _PUTTY_LINES
from stream_app.core.redaction.names import (
    _MATERIAL,
    _ORDINARY,
    _TOKENISH,
    _fold_name,
    _kind,
    _looks_like_key,
)
from stream_app.core.redaction.structures import (
    _HOLDS_A_VALUE,
    _NAMES_A_VALUE,
    _PAIR_NAMES,
    _PAIR_VALUES,
    JWK_PRIVATE,
    _argv,
    _jwt_parts,
)
from stream_app.core.redaction.text import _redact_short, redact_text, search_text
from stream_app.models.json_types import Json, JsonObject


def redact_value(value: Json) -> Json:
    """A redacted copy of a JSON value; the input is left untouched."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return _members(value)
    if isinstance(value, list):
        return _lines(value)
    return value


J = TypeVar("J", bound=Json)


def redact(value: J) -> J:
    """A redacted copy of a JSON value, of the same shape: an object stays an object."""
    return cast(J, redact_value(value))


@functools.lru_cache(maxsize=_REMEMBERED)
def _member(key: str) -> tuple[str, int, int]:
    """A dict key as ``redact`` takes it: redacted (a key may itself be a credential), the
    kind of name it is, and its part in a name/value pair (keys repeat: remembered)."""
    name = redact_text(key)
    role = (name if name.isascii() else _fold_name(name)).lower()
    pair = _NAMES_A_VALUE if role in _PAIR_NAMES else _HOLDS_A_VALUE if role in _PAIR_VALUES else 0
    return name, _kind(name), pair


def _members(value: JsonObject) -> JsonObject:
    out: JsonObject = {}
    pairs = parts = 0
    for k, v in value.items():
        name, kind, pair = _member(k) if len(k) <= _REMEMBERED_CHARS else _member.__wrapped__(k)
        if name in out:  # two keys were, and now read the same
            n, base = 1, name
            while name in out:
                n += 1
                name = f"{base} ({n})"
        if kind == _ORDINARY and type(v) is str:  # the commonest: redact_text, inlined
            out[name] = _redact_short(v) if len(v) <= _REMEMBERED_CHARS else search_text(v)
            if v[:3] == "eyJ":
                parts += 1
        else:
            out[name] = _under(kind, v)
        pairs |= pair
    if pairs == _NAMES_A_VALUE | _HOLDS_A_VALUE:
        _pair_value(value, out)
    if parts > 1:
        names = list(out)
        for i in _jwt_parts(list(value.values())):
            out[names[i]] = REDACTED
    if "kty" in value:  # a JSON Web Key: its private members go
        for name, k in zip(list(out), value, strict=True):
            if k in JWK_PRIVATE and value[k] not in (None, ""):
                out[name] = REDACTED
    return out


def _pair_value(value: JsonObject, out: JsonObject) -> None:
    """The value member of a name/value pair goes as the name it is given says (the
    members of ``out`` are those of ``value``, in order)."""
    members = list(zip(out, value.items(), strict=True))
    kind = next(
        (
            _kind(v)
            for _, (k, v) in members
            if isinstance(v, str)
            and _member.__wrapped__(k)[2] == _NAMES_A_VALUE
            and _kind(v) != _ORDINARY
        ),
        _ORDINARY,
    )
    if kind == _ORDINARY:
        return
    for name, (k, v) in members:
        if _member.__wrapped__(k)[2] == _HOLDS_A_VALUE:
            out[name] = _under(kind, v)


def _under(kind: int, value: Json) -> Json:
    """The value of a key of this kind."""
    if kind == _ORDINARY or value is None or value == "" or isinstance(value, bool):
        return redact_value(value)
    if kind == _TOKENISH and isinstance(value, int | float):
        return value
    if kind == _MATERIAL and not _looks_like_key(value):
        return redact_value(value)
    return REDACTED


_BASE64_LINE = re.compile(r"[A-Za-z0-9+/=]{4,}")
_KEY_BASE64_LINE = re.compile(rf"(?:{_KEY_BASE64}|LS0tLS1CRUdJTi)[A-Za-z0-9+/=]*")


def _lines(values: list[Json]) -> list[Json]:
    """A redacted list; a key given as a list of lines goes whole, not only the line that
    names it: the lines after a PEM BEGIN up to its END, the ``Private-Lines`` of a PuTTY
    key file, the base64 lines that follow a line of bare key material, lines of base64 of
    one width that together decode to a credential. A list with a flag in it is also read
    as a command line (_argv); the parts of a JWT as items go with their signature."""
    out: list[Json] = []
    pem = False  # inside a PEM block
    lines = 0  # PuTTY private lines to go
    base64 = False  # after a line of bare key material
    flags = parts = wide = 0  # what the list as a whole may be: a command line, a JWT, base64
    spaced = 0  # strings with a space: many of them, and the list is lines, not arguments
    for v in values:
        if not isinstance(v, str):
            out.append(redact_value(v))
            base64 = False
            continue
        if " " in v:
            spaced += 1
        if v[:1] == "-":
            flags += 1
        elif v[:3] == "eyJ":
            parts += 1
        elif len(v) >= 60:
            wide += 1
        if pem:
            end = _KEY_END.search(v)
            pem = end is None
            out.append(REDACTED if end is None else REDACTED + redact_text(v[end.end() :]))
            continue
        if lines:
            lines -= 1
            out.append(REDACTED)
            continue
        if base64 and _BASE64_LINE.fullmatch(v.strip()):
            out.append(REDACTED)
            continue
        base64 = False
        begin = _KEY_BEGIN.search(v) if "BEGIN" in v else None
        if begin is not None and _KEY_END.search(v, begin.end()) is None:
            pem = True
            out.append(redact_text(v[: begin.start()]) + REDACTED)
            continue
        putty = _PUTTY_LINES.fullmatch(v.strip()) if "Private-Lines" in v else None
        if putty is not None:
            lines = int(putty[1])
            out.append(v)
            continue
        clean = redact_text(v)
        base64 = clean != v and _KEY_BASE64_LINE.fullmatch(v.strip()) is not None
        out.append(clean)
    if flags and len(values) > 1 and spaced * 2 <= len(values):
        _argv(values, out)
    if parts > 1:
        for i in _jwt_parts(values):
            out[i] = REDACTED
    if wide > 1:
        _wrapped_lines(values, out)
    return out
