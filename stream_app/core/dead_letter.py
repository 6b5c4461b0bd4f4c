"""Building dead-letter values (SPEC §6).

A dead letter always fits the broker: its orjson serialization is at most
``DEAD_LETTER_MAX_BYTES`` (512 KiB, half of Kafka's default 1 MiB message limit, leaving
room for the record key and headers). The carried key is cut to ``DEAD_LETTER_KEY_MAX_BYTES``
of JSON text (it is also the dead letter's record key), the error to
``DEAD_LETTER_ERROR_MAX_CHARS``, and the value to whatever room is left. Text is cut on a
character boundary and base64 on a 4-character boundary, so what is carried is always a
prefix of the original that still decodes. A cut dead letter says so: ``truncated: true``,
and for each of value and key that was cut, its original length in bytes and the hex
SHA-256 of its original bytes (``original_length``/``original_sha256``,
``original_key_length``/``original_key_sha256``).
"""

from __future__ import annotations

import base64
import hashlib

import orjson

from stream_app.core.counts import Count
from stream_app.core.records import Origin, Outputs, Source, TurnRevision
from stream_app.models.dead_letter import DeadLetterDict, Encoding, Reason
from stream_app.models.timestamps import format_utc

DEAD_LETTER_MAX_BYTES = 512 * 1024
DEAD_LETTER_KEY_MAX_BYTES = 16 * 1024
DEAD_LETTER_ERROR_MAX_CHARS = 2000


def _original(text: str, encoding: Encoding) -> bytes:
    return base64.b64decode(text) if encoding == "base64" else text.encode()


def _prefix(text: str, encoding: Encoding, room: int) -> str:
    """The longest prefix of ``text`` whose JSON string (quotes included) fits ``room``."""
    if encoding == "base64":  # no character is escaped; whole 4-character groups decode
        return text[: max(room - 2, 0) // 4 * 4]

    def fits(n: int) -> bool:
        return len(orjson.dumps(text[:n])) <= room

    # No character takes more than 6 bytes (\u00XX), so this many always fit.
    lo, hi = max(room - 2, 0) // 6, min(len(text), max(room - 2, 0))
    if fits(hi):
        return text[:hi]
    while hi - lo > 1:  # fits(lo) and not fits(hi)
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return text[:lo]


def _clip_error(error: str) -> str:
    if len(error) <= DEAD_LETTER_ERROR_MAX_CHARS:
        return error
    return error[: DEAD_LETTER_ERROR_MAX_CHARS - 1] + "…"


# The largest the value's truncation fields can be, for measuring the room left.
_VALUE_CUT_SHAPE = {"truncated": True, "original_length": 2**63 - 1, "original_sha256": "0" * 64}
_KEY_CUT_FIELDS = ("original_key_length", "original_key_sha256")


def dead_letter(origin: Origin, reason: Reason, error: str, now: float) -> DeadLetterDict:
    letter: DeadLetterDict = {
        "source_topic": origin.source_topic,
        "partition": origin.partition,
        "offset": origin.offset,
        "key": origin.key,
        "value": origin.value,
        "encoding": origin.encoding,
        "reason": reason,
        "error": _clip_error(error),
        "dead_lettered_at": format_utc(now),
    }
    key, value, encoding = origin.key, origin.value, origin.encoding
    key_cut: tuple[int, str] | None = None  # the original key's length and SHA-256
    value_cut: tuple[int, str] | None = None
    if key is not None and len(orjson.dumps(key)) > DEAD_LETTER_KEY_MAX_BYTES:
        original = _original(key, encoding)
        letter["key"] = _prefix(key, encoding, DEAD_LETTER_KEY_MAX_BYTES)
        key_cut = (len(original), hashlib.sha256(original).hexdigest())
    # A character escapes to 6 bytes at most: a value of up to an eighth of the cap in
    # characters fits beside the longest key and error. A longer one is measured.
    if value is not None and len(value) > DEAD_LETTER_MAX_BYTES // 8:
        letter["value"] = ""
        key_fields = {} if key_cut is None else dict(zip(_KEY_CUT_FIELDS, key_cut, strict=True))
        overhead = len(orjson.dumps({**letter, **_VALUE_CUT_SHAPE, **key_fields}))
        room = DEAD_LETTER_MAX_BYTES - overhead + 2  # the two quotes of "" are counted
        if len(orjson.dumps(value)) > room:
            original = _original(value, encoding)
            letter["value"] = _prefix(value, encoding, room)
            value_cut = (len(original), hashlib.sha256(original).hexdigest())
        else:
            letter["value"] = value
    if value_cut is not None or key_cut is not None:
        letter["truncated"] = True
    if value_cut is not None:
        letter["original_length"], letter["original_sha256"] = value_cut
    if key_cut is not None:
        letter["original_key_length"], letter["original_key_sha256"] = key_cut
    return letter


def rejected(origin: Origin, reason: Reason, error: str, now: float) -> Outputs:
    """The outputs of a record that ends as a dead letter."""
    out = Outputs(outcome="dead_lettered")
    out.dead_letters.append(dead_letter(origin, reason, error, now))
    out.counts[Count.dead_letter(reason)] += 1
    return out


def turn_too_large(
    revision: TurnRevision, source: Source, problem: str, now: float
) -> DeadLetterDict:
    """The dead letter of a turn revision the producer refused (SPEC §6 ``turn_too_large``).

    ``source`` is (topic, partition, offset) of the record whose processing emitted the
    revision; ``problem`` what the producer said. The dead letter carries the turn's key and
    its Turn JSON (truncated past the cap, as every dead letter), and its error names the
    session and the ``inference_call_id``.
    """
    body = revision.value
    topic, partition, offset = source
    origin = Origin(topic, partition, offset, revision.key, body.decode(), "utf-8")
    error = (
        f"turn: session {revision.session_id!r}, inference_call_id "
        f"{revision.turn['inference_call_id']!r}: {len(body)} bytes of Turn JSON the producer "
        f"refused ({problem})"
    )
    return dead_letter(origin, Reason.TURN_TOO_LARGE, error, now)


def original_key(letter: DeadLetterDict) -> bytes | None:
    """The source record's key bytes: a dead letter keeps the key it came with."""
    key = letter["key"]
    if key is None:
        return None
    return base64.b64decode(key) if letter["encoding"] == "base64" else str(key).encode()
