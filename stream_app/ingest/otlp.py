"""OTLP logs as the agents and the OpenTelemetry Collector write them (SPEC §10): one
``ExportLogsServiceRequest`` decoded from protobuf or JSON, and its values as JSON.

Decoding is ``opentelemetry-proto``'s (protobuf's own parser and ``json_format``), not a
parser of this project's. Two things of OTLP's JSON that ``json_format`` does not know are
taken care of first: trace and span ids are hex, not base64, and a receiver must ignore
fields it does not know. Every failure, whatever the bytes, is :class:`InvalidOtlp` with a
short reason: the caller answers 400 or dead-letters ``invalid_otlp``, and nothing stops.

Pure: no Kafka, no Faust, no clock.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable
from typing import Literal

import orjson
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from stream_app.models.json_types import Json, JsonObject

Encoding = Literal["otlp_proto", "otlp_json"]
# The Collector's Kafka exporter names its encodings so (``encoding: otlp_proto``).
ENCODINGS: tuple[Encoding, ...] = ("otlp_proto", "otlp_json")
_ID_FIELDS = ("traceId", "spanId")  # hex in OTLP's JSON, base64 in protobuf's


class InvalidOtlp(ValueError):
    """A value that is not an OTLP ``ExportLogsServiceRequest``; the message says why, short."""


def encoding_of(value: bytes) -> Encoding:
    """How a telemetry topic's record is encoded, from its bytes: JSON starts with ``{`` (or
    ``[``, not a request either way) after white space, which an ``ExportLogsServiceRequest``
    in protobuf never does (its only field is 1, so its first byte is ``0x0a``)."""
    return "otlp_json" if value.lstrip()[:1] in (b"{", b"[") else "otlp_proto"


def decode(value: bytes, encoding: Encoding | None = None) -> ExportLogsServiceRequest:
    """The request in ``value``; ``encoding`` None decides it from the bytes."""
    kind = encoding or encoding_of(value)
    request = ExportLogsServiceRequest()
    if kind == "otlp_proto":
        try:
            request.ParseFromString(value)
        except (DecodeError, RecursionError, ValueError) as exc:
            raise InvalidOtlp(f"not an OTLP protobuf ExportLogsServiceRequest: {exc}") from None
        return request
    try:
        doc = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise InvalidOtlp(f"not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise InvalidOtlp("not an OTLP JSON ExportLogsServiceRequest: not an object")
    try:
        _hex_ids(doc)
        json_format.ParseDict(doc, request, ignore_unknown_fields=True)
    except (json_format.ParseError, RecursionError, ValueError, TypeError, AttributeError) as exc:
        reason = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        raise InvalidOtlp(f"not an OTLP JSON ExportLogsServiceRequest: {reason}") from None
    return request


def _hex_ids(doc: JsonObject) -> None:
    """OTLP's JSON writes trace and span ids in hex, which ``json_format`` would read as
    base64: rewritten in place, under each log record."""
    for resource_logs in _objects(doc.get("resourceLogs")):
        for scope_logs in _objects(resource_logs.get("scopeLogs")):
            for record in _objects(scope_logs.get("logRecords")):
                for name in _ID_FIELDS:
                    hex_id = record.get(name)
                    if isinstance(hex_id, str):
                        try:
                            record[name] = base64.b64encode(bytes.fromhex(hex_id)).decode()
                        except ValueError:
                            raise InvalidOtlp(f"{name}: not hex: {hex_id[:80]!r}") from None


def _objects(value: Json) -> list[JsonObject]:
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, dict)]


def encode_json(request: ExportLogsServiceRequest) -> bytes:
    """OTLP JSON of a request, as the Collector's ``otlp_json`` writes it (ids in hex)."""
    doc = json_format.MessageToDict(request)
    for resource_logs in doc.get("resourceLogs", ()):
        for scope_logs in resource_logs.get("scopeLogs", ()):
            for record in scope_logs.get("logRecords", ()):
                for name in _ID_FIELDS:
                    if name in record:
                        record[name] = base64.b64decode(record[name]).hex()
    return orjson.dumps(doc)


def value_json(value: AnyValue, depth: int = 0) -> Json:
    """An attribute's value as JSON: bytes as base64 text, a double that JSON cannot hold
    (NaN, infinities) as its name, nesting past 64 levels as null."""
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "int_value":
        return value.int_value
    if kind == "double_value":
        number = value.double_value
        return number if math.isfinite(number) else str(number)
    if depth >= 64:
        return None
    if kind == "array_value":
        return [value_json(item, depth + 1) for item in value.array_value.values]
    if kind == "kvlist_value":
        return attributes_json(value.kvlist_value.values, depth + 1)
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    return None


def attributes_json(attributes: Iterable[KeyValue], depth: int = 0) -> JsonObject:
    """Attributes as a JSON object (a repeated key: the last one)."""
    return {kv.key: value_json(kv.value, depth) for kv in attributes}


def attribute_map(attributes: Iterable[KeyValue]) -> dict[str, AnyValue]:
    """Attributes by key (a repeated key: the last one), to look several up."""
    return {kv.key: kv.value for kv in attributes}


def attribute(attributes: Iterable[KeyValue], key: str) -> AnyValue | None:
    """The value of a key (the last, when repeated)."""
    found = None
    for kv in attributes:
        if kv.key == key:
            found = kv.value
    return found
