"""Writing a split's rows: JSON lines or Parquet, and the files' digests."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, NamedTuple, Protocol

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


class Shard(NamedTuple):
    """A data file written and its sidecar, with their rows and distinct sessions."""

    data: Path
    meta: Path | None
    records: int
    sessions: int


@dataclass(slots=True)
class SplitFiles:
    """One split's files being written: the data and its metadata sidecar (one file, or, in
    a folder, shards of at most ``shard_bytes`` each)."""

    split: Split
    data: Path  # final path (a folder: of the shard being written, renamed when all are)
    meta: Path | None
    writer: RowWriter | None = None
    meta_sink: IO[bytes] | None = None
    records: int = 0  # in the split
    sessions: int = 0  # distinct sessions of the shard being written (the stage counts them)
    last_session: str | None = None  # the shard's latest, counted already
    shard_of: Callable[[int], tuple[Path, Path | None]] | None = None  # a folder's shard paths
    shard_bytes: int = 0  # 0: one file
    size: int = 0  # bytes of the shard being written
    shard_records: int = 0
    shards: list[Shard] = field(default_factory=list)  # the shards closed

    def close(self) -> None:
        """Closes the shard being written and counts it."""
        if self.writer is None:
            return
        self.writer.close()
        if self.meta_sink is not None:
            self.meta_sink.close()
        self.shards.append(Shard(self.data, self.meta, self.shard_records, self.sessions))
