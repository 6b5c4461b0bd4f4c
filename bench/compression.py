"""``python -m bench --compression``: what each producer codec costs on this app's output.

The benchmark workload is replayed through the core; its turn records (the bulk of what
the worker produces, with the turn bodies' changelog) are packed into record batches by
aiokafka's record batch builder, which its producer builds requests with, one run per codec
in the same process. Printed: MB/s of uncompressed bytes packed, the time per record (and
against packing uncompressed), and compressed size over uncompressed.
"""

from __future__ import annotations

import io
import time
from typing import Any

import orjson
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from stream_app.config import Settings
from stream_app.replay import replay

CODECS = {
    "none": DefaultRecordBatch.CODEC_NONE,
    "gzip": DefaultRecordBatch.CODEC_GZIP,
    "snappy": DefaultRecordBatch.CODEC_SNAPPY,
    "lz4": DefaultRecordBatch.CODEC_LZ4,
    "zstd": DefaultRecordBatch.CODEC_ZSTD,
}
BATCH_BYTES = 16 * 1024  # aiokafka's default max_batch_size, what the worker uses


def turn_records(lines: list[dict[str, Any]]) -> list[tuple[bytes, bytes]]:
    """(key, value) of every turn revision the core emits for ``lines``."""
    turns = io.BytesIO()
    replay([orjson.dumps(line) for line in lines], Settings(), turns, io.BytesIO())
    out = []
    for line in turns.getvalue().splitlines():
        doc = orjson.loads(line)
        # A TURNS line holds the key as text: its UTF-8 bytes are the record key.
        out.append((doc["key"].encode(), orjson.dumps(doc["value"])))
    return out


def _build_all(records: list[tuple[bytes, bytes]], codec: int) -> tuple[int, int]:
    """Packs ``records`` in order into batches; (uncompressed bytes, batch bytes)."""
    plain = built = 0
    batch = _batch(codec)
    for key, value in records:
        plain += len(key) + len(value)
        while batch.append(0, None, key=key, value=value, headers=[]) is None:
            built += len(batch.build())
            batch = _batch(codec)
    return plain, built + len(batch.build())


def _batch(codec: int) -> DefaultRecordBatchBuilder:
    return DefaultRecordBatchBuilder(
        2,
        codec,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=0,
        batch_size=BATCH_BYTES,
    )


def measure(lines: list[dict[str, Any]], seconds: float = 1.0) -> dict[str, dict[str, float]]:
    records = turn_records(lines)
    found: dict[str, dict[str, float]] = {}
    for name, codec in CODECS.items():
        rounds, started = 0, time.perf_counter()
        while True:
            plain, built = _build_all(records, codec)
            rounds += 1
            elapsed = time.perf_counter() - started
            if elapsed >= seconds:
                break
        found[name] = {
            "mb_per_s": plain * rounds / elapsed / 1e6,
            "us_per_record": 1e6 * elapsed / (rounds * len(records)),
            "size_ratio": built / plain,
        }
    return found


def report(found: dict[str, dict[str, float]]) -> str:
    base = found["none"]["us_per_record"]
    lines = [f"{'codec':<8} {'MB/s':>8} {'us/record':>10} {'vs none':>8} {'size':>6}"]
    for name, row in found.items():
        lines.append(
            f"{name:<8} {row['mb_per_s']:>8,.0f} {row['us_per_record']:>10.1f}"
            f" {row['us_per_record'] / base:>7.1f}x {row['size_ratio']:>6.2f}"
        )
    return "\n".join(lines)
