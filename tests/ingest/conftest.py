"""Fixtures of the telemetry tests."""

from __future__ import annotations

import threading

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from stream_app.ingest import otlp


@pytest.fixture
def decode_threads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The thread of each ``otlp.decode`` call, in order: which thread decodes a body or a
    record, on the event loop or off it."""
    threads: list[int] = []
    real = otlp.decode

    def decode(value: bytes, encoding: otlp.Encoding | None = None) -> ExportLogsServiceRequest:
        threads.append(threading.get_ident())
        return real(value, encoding)

    monkeypatch.setattr(otlp, "decode", decode)
    return threads
