"""Writing a dataset (SPEC §9): its files, JSON lines or Parquet, split by session, and the
manifest beside them.

Every file is written to ``NAME.partial`` and renamed when complete, the manifest last: an
export is complete when its manifest is there, and an interrupted one leaves no half file
under a final name. Nothing in the output depends on the time or the machine, so the same
input and options give the same bytes (Parquet: with the same pyarrow version).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Literal, Protocol, TypedDict, cast

import orjson

from stream_app.console.wording import counted
from stream_app.datasets.formats import (
    Format,
    Options,
    Record,
    SkippedTurn,
    Skips,
    Split,
    Trajectory,
    TurnLines,
    TurnsLine,
    records,
    split_of,
    turn_key,
)

MANIFEST_VERSION: Literal[1] = 1
PARQUET_ROWS = 1_000  # rows of one Parquet row group
PARQUET_MISSING = "writing Parquet needs pyarrow: pip install 'stream-app[parquet]'"


class DatasetError(Exception):
    """Why the dataset cannot be written, in one line."""


class ManifestFile(TypedDict):
    name: str  # the file's name, beside the manifest
    split: Split  # "all" without --eval-fraction
    records: int  # lines (JSON lines) or rows (Parquet)
    sessions: int  # distinct sessions among them
    bytes: int
    sha256: str  # of the file's bytes, hex


class ManifestRead(TypedDict):
    records: int  # records read (a file's non-blank lines)
    turns: int  # distinct turn keys among them
    sessions: int  # distinct sessions those keys name


class ManifestOptions(TypedDict):
    reasoning: bool
    only_accepted: bool
    eval_fraction: float | None


class Manifest(TypedDict):
    version: Literal[1]
    format: Format
    source: str  # the file read, or "topic NAME"
    options: ManifestOptions
    read: ManifestRead
    files: list[ManifestFile]
    skipped: dict[str, int]  # turns not written, by reason: every reason of the closed list
    skipped_turns: list[SkippedTurn]  # the first ones skipped for what they are, by key


def is_parquet(out: Path) -> bool:
    return out.suffix.lower() == ".parquet"


def require_parquet() -> None:
    """Raises :class:`DatasetError` when pyarrow, the ``parquet`` extra, is missing."""
    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise DatasetError(PARQUET_MISSING) from None


def stem(out: Path) -> Path:
    """``data/ds.jsonl`` -> ``data/ds``: what the split files and the manifest are named by."""
    return out.with_suffix("") if out.suffix else out


def output_paths(out: Path, eval_fraction: float | None) -> list[tuple[Split, Path]]:
    """``out`` itself, or ``<stem>.train<suffix>`` and ``<stem>.eval<suffix>`` in its place."""
    if eval_fraction is None:
        return [("all", out)]
    suffix = out.suffix or ".jsonl"
    return [(split, Path(f"{stem(out)}.{split}{suffix}")) for split in ("train", "eval")]


def manifest_path(out: Path) -> Path:
    return Path(f"{stem(out)}.manifest.json")


def _partial(path: Path) -> Path:
    return path.with_name(path.name + ".partial")


class _Writer(Protocol):
    path: Path

    def write(self, session_id: str, record: Record) -> None: ...

    def close(self) -> None: ...


class _Jsonl:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.sink: IO[bytes] = _partial(path).open("wb")

    def write(self, session_id: str, record: Record) -> None:
        self.sink.write(orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE))

    def close(self) -> None:
        self.sink.close()


def parquet_schema(options: Options) -> Any:
    """The columns of each format: those of its JSON lines, with free-form JSON (a Turn,
    which holds tool arguments and decisions' ``raw``) as its JSON text."""
    import pyarrow as pa

    text = pa.string()
    if options.format == "turns":
        return pa.schema([("key", text), ("value", text)])
    if options.format == "trajectories":
        return pa.schema([("session_id", text), ("org_id", text), ("turns", pa.list_(text))])
    function = pa.struct([("name", text), ("arguments", text)])
    call = pa.struct([("id", text), ("type", text), ("function", function)])
    fields = [("role", text), ("content", text)]
    if options.reasoning:
        fields.append(("reasoning_content", text))
    fields += [("tool_calls", pa.list_(call)), ("tool_call_id", text)]
    metadata = pa.struct(
        [
            ("session_id", text),
            ("inference_call_id", text),
            ("agent_harness", text),
            ("accepted", pa.int64()),
            ("rejected", pa.int64()),
        ]
    )
    return pa.schema([("messages", pa.list_(pa.struct(fields))), ("metadata", metadata)])


def parquet_row(form: Format, record: Record) -> dict[str, Any]:
    """A record of format ``form`` as a row of :func:`parquet_schema`'s columns."""
    if form == "chat":
        return dict(record)
    if form == "trajectories":
        line = cast(Trajectory, record)
        turns = [orjson.dumps(turn).decode() for turn in line["turns"]]
        return {"session_id": line["session_id"], "org_id": line["org_id"], "turns": turns}
    turn = cast(TurnsLine, record)
    return {"key": turn["key"], "value": orjson.dumps(turn["value"]).decode()}


class _Parquet:
    def __init__(self, path: Path, options: Options) -> None:
        import pyarrow.parquet as pq

        self.path, self.format = path, options.format
        self.schema = parquet_schema(options)
        self.sink = pq.ParquetWriter(str(_partial(path)), self.schema)
        self.rows: list[dict[str, Any]] = []

    def write(self, session_id: str, record: Record) -> None:
        self.rows.append(parquet_row(self.format, record))
        if len(self.rows) >= PARQUET_ROWS:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa

        if self.rows:
            self.sink.write_table(pa.Table.from_pylist(self.rows, schema=self.schema))
            self.rows = []

    def close(self) -> None:
        self._flush()
        self.sink.close()


def _digest(path: Path) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as source:
        while chunk := source.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def write_dataset(
    read: TurnLines,
    options: Options,
    out: Path,
    source: str,
    progress: Callable[[int], None] | None = None,
) -> Manifest:
    """Writes the dataset of ``read`` to ``out`` (or its split files) and the manifest
    beside it; returns the manifest. ``progress`` is told the records written so far.

    Raises :class:`DatasetError` when Parquet is asked for without pyarrow, and OSError when
    a file cannot be written; then no file is left behind, partial or final.
    """
    parquet = is_parquet(out)
    if parquet:
        require_parquet()
    paths = output_paths(out, options.eval_fraction)
    writers: dict[Split, _Writer] = {}
    done: list[Path] = []
    try:
        for split, path in paths:
            writers[split] = _Parquet(path, options) if parquet else _Jsonl(path)
            done.append(_partial(path))
        skips = Skips()
        counts = dict.fromkeys(writers, 0)
        sessions: dict[Split, set[str]] = {split: set() for split in writers}
        for n, (session_id, record) in enumerate(records(read, options, skips), 1):
            split = split_of(session_id, options.eval_fraction)
            writers[split].write(session_id, record)
            counts[split] += 1
            sessions[split].add(session_id)
            if progress is not None and n % 1000 == 0:
                progress(n)
        for writer in writers.values():
            writer.close()
        files: list[ManifestFile] = []
        for split, path in paths:
            size, sha = _digest(_partial(path))
            files.append(
                {
                    "name": path.name,
                    "split": split,
                    "records": counts[split],
                    "sessions": len(sessions[split]),
                    "bytes": size,
                    "sha256": sha,
                }
            )
        manifest: Manifest = {
            "version": MANIFEST_VERSION,
            "format": options.format,
            "source": source,
            "options": {
                "reasoning": options.reasoning,
                "only_accepted": options.only_accepted,
                "eval_fraction": options.eval_fraction,
            },
            "read": _read_counts(read),
            "files": files,
            "skipped": skips.as_counts(),
            "skipped_turns": skips.listed,
        }
        target = manifest_path(out)
        done.append(_partial(target))
        _partial(target).write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2) + b"\n")
        for _, path in paths:
            os.replace(_partial(path), path)
        os.replace(_partial(target), target)
        if progress is not None:
            progress(sum(counts.values()))
        return manifest
    except BaseException:
        for writer in writers.values():
            with contextlib.suppress(Exception):  # already failing: the partial goes below
                writer.close()
        for partial in done:
            partial.unlink(missing_ok=True)
        raise


def _read_counts(read: TurnLines) -> ManifestRead:
    sessions = {pair[0] for key in read.latest if (pair := turn_key(key)) is not None}
    return {"records": read.records, "turns": len(read.latest), "sessions": len(sessions)}


_UNITS = {
    "turns": ("turn line", "turn lines"),
    "chat": ("chat example", "chat examples"),
    "trajectories": ("trajectory", "trajectories"),
}


def summary(manifest: Manifest, out: Path) -> str:
    """The export's line about a dataset made from a file: what was read, written where,
    and skipped."""
    read = manifest["read"]
    return "stream-app export: " + "; ".join(
        [
            f"{counted(read['records'], 'record')} read from {manifest['source']}, "
            f"{counted(read['turns'], 'turn')} of {counted(read['sessions'], 'session')}",
            *written(manifest, out),
        ]
    )


def written(manifest: Manifest, out: Path) -> list[str]:
    """What the export wrote where, and skipped: the dataset's part of its summary (a topic
    export says what it read in a line of its own, ``export.summary``)."""
    noun, plural = _UNITS[manifest["format"]]
    total = sum(f["records"] for f in manifest["files"])
    paths = dict(output_paths(out, manifest["options"]["eval_fraction"]))
    where = " and ".join(f"{paths[f['split']]} ({f['records']})" for f in manifest["files"])
    skipped = {reason: n for reason, n in manifest["skipped"].items() if n}
    return [
        f"{counted(total, noun, plural)} written to {where}",
        f"{counted(sum(skipped.values()), 'turn')} skipped"
        + (" (" + ", ".join(f"{k} {v}" for k, v in skipped.items()) + ")" if skipped else ""),
        f"manifest {manifest_path(out)}",
    ]
