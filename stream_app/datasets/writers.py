"""Writing a split's rows: JSON lines or Parquet, and the files' digests."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from stream_app.datasets.features import features, parquet_row, parquet_schema
from stream_app.datasets.options import Options, Split
from stream_app.datasets.record_types import Record
from stream_app.models.json_types import JsonObject

PARQUET_ROWS = 1_000  # rows of one Parquet row group at most
PARQUET_BYTES = 32 * 1024 * 1024  # ... and about this many bytes of JSON
PARQUET_MISSING = "writing Parquet needs pyarrow: pip install 'stream-app[parquet]'"


class DatasetError(Exception):
    """Why the dataset cannot be written, in one line."""


def require_parquet() -> None:
    """Raises :class:`DatasetError` when pyarrow, the ``parquet`` extra, is missing."""
    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise DatasetError(PARQUET_MISSING) from None


class RowWriter(Protocol):
    def write(self, record: Record, line: bytes) -> None: ...

    def close(self) -> None: ...


class JsonLinesWriter:
    def __init__(self, path: Path) -> None:
        self.sink: IO[bytes] = path.open("wb")

    def write(self, record: Record, line: bytes) -> None:
        self.sink.write(line)

    def close(self) -> None:
        self.sink.close()


class ParquetWriter:
    def __init__(self, path: Path, options: Options) -> None:
        import pyarrow.parquet as pq

        self.tree = features(options)
        self.schema = parquet_schema(options)
        self.sink = pq.ParquetWriter(str(path), self.schema)
        self.rows: list[JsonObject] = []
        self.size = 0

    def write(self, record: Record, line: bytes) -> None:
        self.rows.append(parquet_row(self.tree, record))
        self.size += len(line)
        if len(self.rows) >= PARQUET_ROWS or self.size >= PARQUET_BYTES:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa

        if self.rows:
            self.sink.write_table(pa.Table.from_pylist(self.rows, schema=self.schema))
            self.rows, self.size = [], 0

    def close(self) -> None:
        self._flush()
        self.sink.close()


def file_digest(path: Path) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as source:
        while chunk := source.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


@dataclass(slots=True)
class SplitFiles:
    """One split's files being written: the data and its metadata sidecar."""

    split: Split
    data: Path  # final path
    meta: Path | None
    writer: RowWriter | None = None
    meta_sink: IO[bytes] | None = None
    records: int = 0
    sessions: set[str] | None = None
