"""Writing a dataset (SPEC §9): its files, JSON lines or Parquet, split, the metadata
sidecars, the card and the manifest.

Two layouts. ``--out FILE``: the file (or ``<stem>.train``/``<stem>.eval``), each written to
``NAME.partial`` and renamed, the old manifest removed first and the new one written last,
so a manifest on disk always describes the files beside it. ``--out DIR/``: a Hugging Face
dataset folder (``data/<split>-00000-of-00001.<ext>``, ``metadata/``, ``README.md`` with
``configs``, ``manifest.json``) built in ``DIR.partial`` and swapped in whole, so the old set
survives any failure. Signals are held during the renames, so none leaves half a set.

One schema: :func:`features` declares each format's columns once; the card carries them for
loaders of JSON lines and the Parquet file carries them in its schema, free-form JSON (tool
arguments as objects, a Turn) as HF's ``Json``. Nothing in the output depends on the time or
the machine beyond the provenance the manifest names (the command, the version).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import shutil
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal, Protocol, TypedDict

import orjson

from stream_app.console.wording import counted
from stream_app.datasets.formats import (
    MAX_PAIRS,
    Format,
    Options,
    Profile,
    SkippedTurn,
    SkipReason,
    Skips,
    Split,
    TurnLines,
    records,
    split_of,
    turn_key,
)

MANIFEST_VERSION: Literal[2] = 2
PARQUET_ROWS = 1_000  # rows of one Parquet row group at most
PARQUET_BYTES = 32 * 1024 * 1024  # ... and about this many bytes of JSON
PARQUET_MISSING = "writing Parquet needs pyarrow: pip install 'stream-app[parquet]'"
SPLIT_NAMES: dict[Split, str] = {"all": "train", "train": "train", "eval": "validation"}


class DatasetError(Exception):
    """Why the dataset cannot be written, in one line."""


class ManifestFile(TypedDict):
    name: str  # the file's path, relative to the manifest's folder
    split: Split  # "all" without --eval-fraction
    role: Literal["data", "metadata"]  # metadata: the sidecar aligned by line with data
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
    include_implicit: bool
    keep_credentials: bool
    max_example_bytes: int
    eval_fraction: float | None


class ManifestSplit(TypedDict):
    by: Literal["session", "prompt"]  # what a split is drawn by
    rule: str
    salt: str
    eval_fraction: float | None
    records: dict[str, int]  # per split, empty ones included
    empty: dict[str, str]  # a split not written, and why


class Provenance(TypedDict):
    input: dict[str, Any]  # {"path", "sha256"} or {"topic", "partitions": [...]}
    stream_app_version: str
    command: list[str]


class Manifest(TypedDict):
    version: Literal[2]
    format: Format
    profile: Profile | None  # None: turns and trajectories
    source: str  # the file read, or "topic NAME"
    provenance: Provenance
    options: ManifestOptions
    read: ManifestRead
    split: ManifestSplit
    files: list[ManifestFile]
    shared_prompts: int  # prompts with examples in both splits (kto, dpo: 0 by construction)
    redacted: int  # credentials replaced in the content written
    skipped: dict[str, int]  # turns not written, by reason: the format's closed list
    skipped_turns: list[SkippedTurn]  # the first ones skipped for what they are, by key


def is_parquet(out: Path) -> bool:
    return out.suffix.lower() == ".parquet"


def is_folder(out: str) -> bool:
    """``--out DIR/`` (or an existing folder): the HF layout."""
    return out.endswith(("/", os.sep)) or Path(out).is_dir()


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


def sidecar(path: Path) -> Path:
    """The metadata lines of a data file: ``<its stem>.metadata.jsonl``."""
    return Path(f"{stem(path)}.metadata.jsonl")


def manifest_path(out: Path) -> Path:
    return Path(f"{stem(out)}.manifest.json")


def _partial(path: Path) -> Path:
    return path.with_name(path.name + ".partial")


# --- Features: one schema for JSON lines and Parquet --------------------------------------

Feature = str | list[Any] | dict[str, Any]  # "string" | "int64" | "json" | [item] | {field}
_TOOL: Feature = {"type": "string", "function": {"name": "string", "parameters": "json"}}


def _message(options: Options, profile: Profile, weight: bool) -> dict[str, Feature]:
    arguments = "string" if profile == "openai" else "json"
    call = {
        "id": "string",
        "type": "string",
        "function": {"name": "string", "arguments": arguments},
    }
    fields: dict[str, Feature] = {"role": "string", "content": "string"}
    if options.reasoning:
        fields["reasoning_content"] = "string"
    fields |= {"tool_calls": [call], "tool_call_id": "string"}
    if weight:
        fields["weight"] = "int64"
    return fields


def features(options: Options) -> dict[str, Feature]:
    """The columns of a format and profile, for both encodings."""
    profile = options.chosen_profile
    if options.format == "turns":
        return {"key": "string", "value": "json"}
    if options.format == "trajectories":
        return {"session_id": "string", "org_id": "string", "turns": ["json"]}
    if options.format == "chat":
        message = _message(options, profile, profile == "openai")
        return {"messages": [message], "tools": [_TOOL]}
    message = _message(options, profile, False)
    if options.format == "kto":
        return {"prompt": [message], "completion": [message], "label": "bool"}
    if profile == "trl":
        return {"prompt": [message], "chosen": [message], "rejected": [message]}
    return {
        "input": {"messages": [message], "tools": [_TOOL]},
        "preferred_output": [message],
        "non_preferred_output": [message],
    }


def yaml_features(tree: dict[str, Feature]) -> list[dict[str, Any]]:
    """``dataset_info.features`` of a card, as HF writes them."""

    def spec(feature: Feature) -> dict[str, Any]:
        if isinstance(feature, str):
            return {"dtype": feature}
        if isinstance(feature, list):
            inner = spec(feature[0])
            return {"list": inner.get("dtype", inner.get("struct"))}
        return {"struct": [{"name": n, **spec(f)} for n, f in feature.items()]}

    return [{"name": name, **spec(feature)} for name, feature in tree.items()]


def hf_features(tree: dict[str, Feature]) -> dict[str, Any]:
    """The features as HF's ``Features.to_dict`` spells them (Parquet schema metadata)."""

    def spec(feature: Feature) -> Any:
        if feature == "json":
            return {"_type": "Json"}
        if isinstance(feature, str):
            return {"dtype": feature, "_type": "Value"}
        if isinstance(feature, list):
            return {"feature": spec(feature[0]), "_type": "List"}
        return {n: spec(f) for n, f in feature.items()}

    return {name: spec(feature) for name, feature in tree.items()}


def parquet_schema(options: Options) -> Any:
    """The Arrow schema of :func:`features`: free-form JSON as its text, HF's ``Json``."""
    import pyarrow as pa

    def arrow(feature: Feature) -> Any:
        if isinstance(feature, str):
            return {"json": pa.string(), "string": pa.string(), "bool": pa.bool_()}.get(
                feature, pa.int64() if feature == "int64" else pa.float64()
            )
        if isinstance(feature, list):
            return pa.list_(arrow(feature[0]))
        return pa.struct([(n, arrow(f)) for n, f in feature.items()])

    tree = features(options)
    meta = {"huggingface": orjson.dumps({"info": {"features": hf_features(tree)}})}
    return pa.schema([(n, arrow(f)) for n, f in tree.items()], metadata=meta)


def _column(feature: Feature, value: Any) -> Any:
    if value is None:
        return None
    if feature == "json":
        return orjson.dumps(value).decode()
    if isinstance(feature, list):
        return [_column(feature[0], v) for v in value]
    if isinstance(feature, dict):
        return {n: _column(f, value.get(n)) for n, f in feature.items()}
    return value


def parquet_row(tree: dict[str, Feature], record: Any) -> dict[str, Any]:
    """A record as a row of the columns of ``tree``: absent fields null, JSON as text."""
    return {n: _column(f, record.get(n)) for n, f in tree.items()}


# --- Writers ------------------------------------------------------------------------------


class _Writer(Protocol):
    def write(self, record: Any, line: bytes) -> None: ...

    def close(self) -> None: ...


class _Jsonl:
    def __init__(self, path: Path) -> None:
        self.sink: IO[bytes] = path.open("wb")

    def write(self, record: Any, line: bytes) -> None:
        self.sink.write(line)

    def close(self) -> None:
        self.sink.close()


class _Parquet:
    def __init__(self, path: Path, options: Options) -> None:
        import pyarrow.parquet as pq

        self.tree = features(options)
        self.schema = parquet_schema(options)
        self.sink = pq.ParquetWriter(str(path), self.schema)
        self.rows: list[dict[str, Any]] = []
        self.size = 0

    def write(self, record: Any, line: bytes) -> None:
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


def _digest(path: Path) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as source:
        while chunk := source.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


@dataclass(slots=True)
class _Out:
    """One split's files being written: the data and its metadata sidecar."""

    split: Split
    data: Path  # final path
    meta: Path | None
    writer: _Writer | None = None
    meta_sink: IO[bytes] | None = None
    records: int = 0
    sessions: set[str] | None = None


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait while a set is swapped in: it is whole either way."""
    held = {signal.SIGINT, signal.SIGTERM}
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    except (AttributeError, ValueError, OSError):
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _exchange(a: Path, b: Path) -> bool:
    """Swaps two paths in one step (Linux renameat2 RENAME_EXCHANGE); False where it cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    done = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    return bool(done == 0)


def write_dataset(
    read: TurnLines,
    options: Options,
    out: Path,
    source: str,
    progress: Callable[[int], None] | None = None,
    provenance: Provenance | None = None,
    folder: bool = False,
    parquet: bool = False,
) -> Manifest:
    """Writes the dataset of ``read`` to ``out`` (a file, its split files, or with ``folder``
    an HF dataset folder, of Parquet shards with ``parquet``) with its manifest; returns the
    manifest. ``progress`` is told the records written so far.

    Raises :class:`DatasetError` when Parquet is asked for without pyarrow, and OSError when
    a file cannot be written; then the old set is left as it was and no partial remains.
    """
    parquet = parquet or (is_parquet(out) and not folder)
    if parquet:
        require_parquet()
    if folder:
        return _write_folder(read, options, out, source, progress, provenance, parquet)
    return _write_files(read, options, out, source, progress, provenance)


def _stage(
    read: TurnLines,
    options: Options,
    outs: dict[Split, _Out],
    partial: Callable[[Path], Path],
    parquet: bool,
    progress: Callable[[int], None] | None,
) -> tuple[Skips, int]:
    """Writes every record into its split's staged files; returns the skips and the number
    of prompts found in both splits."""
    skips = Skips()
    prompts: dict[str, set[Split]] = {}
    written = 0
    try:
        for item in records(read, options, skips):
            line = orjson.dumps(item.record, option=orjson.OPT_APPEND_NEWLINE)
            if len(line) > options.max_example_bytes:
                for key in item.keys:
                    skips.add(key, SkipReason.TOO_LARGE)
                continue
            split = split_of(item.split_key, options.eval_fraction, options.split_salt)
            target = outs[split]
            if target.writer is None:
                target.writer = (
                    _Parquet(partial(target.data), options)
                    if parquet
                    else _Jsonl(partial(target.data))
                )
                if target.meta is not None:
                    target.meta_sink = partial(target.meta).open("wb")
                target.sessions = set()
            target.writer.write(item.record, line)
            if target.meta_sink is not None and item.metadata is not None:
                target.meta_sink.write(
                    orjson.dumps(item.metadata, option=orjson.OPT_APPEND_NEWLINE)
                )
            target.records += 1
            assert target.sessions is not None
            for key in item.keys:
                if (pair := turn_key(key)) is not None:
                    target.sessions.add(pair[0])
            if item.prompt is not None:
                prompts.setdefault(item.prompt, set()).add(split)
            written += 1
            if progress is not None and written % 1000 == 0:
                progress(written)
    finally:
        for target in outs.values():
            if target.writer is not None:
                target.writer.close()
            if target.meta_sink is not None:
                target.meta_sink.close()
    if progress is not None:
        progress(written)
    return skips, sum(1 for sides in prompts.values() if len(sides) > 1)


def _files(
    outs: dict[Split, _Out], staged: Callable[[Path], Path], base: Path
) -> list[ManifestFile]:
    files: list[ManifestFile] = []
    for target in outs.values():
        if target.writer is None:
            continue
        sessions = len(target.sessions or ())
        pairs: list[tuple[Path, Literal["data", "metadata"]]] = [(target.data, "data")]
        if target.meta is not None:
            pairs.append((target.meta, "metadata"))
        for path, role in pairs:
            size, sha = _digest(staged(path))
            files.append(
                {
                    "name": str(path.relative_to(base)),
                    "split": target.split,
                    "role": role,
                    "records": target.records,
                    "sessions": sessions,
                    "bytes": size,
                    "sha256": sha,
                }
            )
    return files


def _manifest(
    read: TurnLines,
    options: Options,
    source: str,
    provenance: Provenance | None,
    outs: dict[Split, _Out],
    files: list[ManifestFile],
    skips: Skips,
    shared: int,
) -> Manifest:
    by: Literal["session", "prompt"] = "prompt" if options.format in ("kto", "dpo") else "session"
    salted = " after the salt and a NUL byte" if options.split_salt else ""
    rule = (
        f"a {by} goes to {SPLIT_NAMES['eval']} when the first 8 bytes of the SHA-256 of its "
        f"UTF-8 {'id' if by == 'session' else 'hash'}{salted}, big-endian over 2^64, are "
        "below eval_fraction"
    )
    empty = {
        SPLIT_NAMES[t.split]: (
            f"no {by} fell in it (eval_fraction {options.eval_fraction})"
            if t.split == "eval"
            else f"every {by} fell in {SPLIT_NAMES['eval']}"
        )
        for t in outs.values()
        if t.writer is None and t.split != "all"
    }
    if options.eval_fraction is None and all(t.writer is None for t in outs.values()):
        empty["train"] = "no turn could be written (see skipped)"
    profile = options.chosen_profile if options.format in ("chat", "kto", "dpo") else None
    return {
        "version": MANIFEST_VERSION,
        "format": options.format,
        "profile": profile,
        "source": source,
        "provenance": provenance or {"input": {}, "stream_app_version": "", "command": []},
        "options": {
            "reasoning": options.reasoning,
            "only_accepted": options.only_accepted,
            "include_implicit": options.include_implicit,
            "keep_credentials": options.keep_credentials,
            "max_example_bytes": options.max_example_bytes,
            "eval_fraction": options.eval_fraction,
        },
        "read": _read_counts(read),
        "split": {
            "by": by,
            "rule": rule,
            "salt": options.split_salt,
            "eval_fraction": options.eval_fraction,
            "records": {SPLIT_NAMES[t.split]: t.records for t in outs.values()},
            "empty": empty,
        },
        "files": files,
        "shared_prompts": shared,
        "redacted": skips.redacted,
        "skipped": skips.as_counts(options.format),
        "skipped_turns": skips.listed,
    }


def _dump(manifest: Manifest) -> bytes:
    return orjson.dumps(manifest, option=orjson.OPT_INDENT_2) + b"\n"


def _write_files(
    read: TurnLines,
    options: Options,
    out: Path,
    source: str,
    progress: Callable[[int], None] | None,
    provenance: Provenance | None,
) -> Manifest:
    sidecars = options.format in ("chat", "kto", "dpo")
    outs = {
        split: _Out(split, path, sidecar(path) if sidecars else None)
        for split, path in output_paths(out, options.eval_fraction)
    }
    staged = [p for t in outs.values() for p in (t.data, t.meta) if p is not None]
    target = manifest_path(out)
    try:
        skips, shared = _stage(read, options, outs, _partial, is_parquet(out), progress)
        files = _files(outs, _partial, out.parent)
        manifest = _manifest(read, options, source, provenance, outs, files, skips, shared)
        _partial(target).write_bytes(_dump(manifest))
        with signals_held():
            target.unlink(missing_ok=True)  # no manifest describes a set half replaced
            for path in staged:
                if _partial(path).exists():
                    os.replace(_partial(path), path)
                else:  # an empty split, or none of this run: no file of an older run stays
                    path.unlink(missing_ok=True)
            os.replace(_partial(target), target)
        return manifest
    finally:
        for path in [*staged, target]:
            _partial(path).unlink(missing_ok=True)


def _write_folder(
    read: TurnLines,
    options: Options,
    out: Path,
    source: str,
    progress: Callable[[int], None] | None,
    provenance: Provenance | None,
    parquet: bool,
) -> Manifest:
    building = _partial(out)
    ext = "parquet" if parquet else "jsonl"
    sidecars = options.format in ("chat", "kto", "dpo")
    splits: list[Split] = ["train"] if options.eval_fraction is None else ["train", "eval"]
    outs: dict[Split, _Out] = {}
    for split in splits:
        name = f"{SPLIT_NAMES[split]}-00000-of-00001"
        meta = out / "metadata" / f"{name}.jsonl" if sidecars else None
        outs["all" if options.eval_fraction is None else split] = _Out(
            "all" if options.eval_fraction is None else split, out / "data" / f"{name}.{ext}", meta
        )

    def staged(path: Path) -> Path:
        return building / path.relative_to(out)

    shutil.rmtree(building, ignore_errors=True)  # a crashed run's
    try:
        (building / "data").mkdir(parents=True)
        if sidecars:
            (building / "metadata").mkdir()
        skips, shared = _stage(read, options, outs, staged, ext == "parquet", progress)
        files = _files(outs, staged, out)
        for empty in ("data", "metadata"):  # nothing written in them: not there either
            with contextlib.suppress(OSError):
                (building / empty).rmdir()
        manifest = _manifest(read, options, source, provenance, outs, files, skips, shared)
        (building / "manifest.json").write_bytes(_dump(manifest))
        (building / "README.md").write_text(card(manifest, options, ext, outs))
        with signals_held():
            if out.exists() and _exchange(building, out):
                shutil.rmtree(building)  # the old set, now under the partial name
            else:
                old = out.with_name(out.name + ".old.partial")
                if out.exists():
                    os.replace(out, old)
                os.replace(building, out)
                shutil.rmtree(old, ignore_errors=True)
        return manifest
    finally:
        shutil.rmtree(building, ignore_errors=True)


def card(manifest: Manifest, options: Options, ext: str, outs: dict[Split, _Out]) -> str:
    """The dataset card: YAML ``configs`` naming the splits written and ``dataset_info``
    features (JSON is YAML), then what the set is, where it came from and how it was split."""
    written = [t for t in outs.values() if t.writer is not None]
    files = [
        {"split": SPLIT_NAMES[t.split], "path": f"data/{SPLIT_NAMES[t.split]}-*.{ext}"}
        for t in written
    ]
    configs = [{"config_name": "default", "data_files": files}]
    info = {"features": yaml_features(features(options))}
    front = (
        "---\nconfigs: "
        + orjson.dumps(configs).decode()
        + "\ndataset_info: "
        + orjson.dumps(info).decode()
        + "\n---\n"
    )
    profile = manifest["profile"]
    encoding = {
        "openai": "tool arguments are JSON text (OpenAI's encoding); tool results are text",
        "trl": "tool arguments are JSON objects (TRL's encoding); tool results are text",
        None: "a Turn is a JSON object (HF `Json`)",
    }[profile]
    prov = manifest["provenance"]
    lines = [
        f"# stream-app {manifest['format']} dataset",
        "",
        f"- Format: `{manifest['format']}`"
        + (f", profile `{profile}`" if profile else "")
        + f"; {encoding}.",
        f"- Input: {manifest['source']} ({orjson.dumps(prov['input']).decode()}).",
        f"- Made by stream-app {prov['stream_app_version']}: `{' '.join(prov['command'])}`.",
        f"- Split by {manifest['split']['by']}: {manifest['split']['rule']}; salt "
        f"`{manifest['split']['salt']}`.",
        "- Records: "
        + ", ".join(f"{k} {v}" for k, v in manifest["split"]["records"].items())
        + "."
        + "".join(
            f" The {k} split is empty and not written: {v}."
            for k, v in manifest["split"]["empty"].items()
        ),
        f"- Prompts in both splits: {manifest['shared_prompts']}.",
        f"- Credentials redacted: {manifest['redacted']}"
        + (" (redaction off: --keep-credentials)." if options.keep_credentials else "."),
        "- Turns skipped: "
        + (", ".join(f"{k} {v}" for k, v in manifest["skipped"].items() if v) or "none")
        + ".",
    ]
    if options.format == "dpo":
        lines.append(f"- At most {MAX_PAIRS} pairs a prompt.")
    if options.format in ("chat", "kto", "dpo"):
        lines.append(
            "- `metadata/` holds one line per row of `data/`, in the same order (session, "
            "turn, decisions counted explicit and implicit apart, retention score)."
        )
    lines.append("- `manifest.json`: every file with its SHA-256.")
    return front + "\n".join(lines) + "\n"


def _read_counts(read: TurnLines) -> ManifestRead:
    sessions = {pair[0] for key in read.latest if (pair := turn_key(key)) is not None}
    return {"records": read.records, "turns": len(read.latest), "sessions": len(sessions)}


_UNITS = {
    "turns": ("turn line", "turn lines"),
    "chat": ("chat example", "chat examples"),
    "trajectories": ("trajectory", "trajectories"),
    "kto": ("kto row", "kto rows"),
    "dpo": ("dpo pair", "dpo pairs"),
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
    export says what it read in a line of its own, ``topic.summary``)."""
    noun, plural = _UNITS[manifest["format"]]
    data = [f for f in manifest["files"] if f["role"] == "data"]
    total = sum(f["records"] for f in data)
    base = out.parent if not is_folder(str(out)) else Path(str(out).rstrip("/" + os.sep))
    where = " and ".join(f"{base / f['name']} ({f['records']})" for f in data) or "no file"
    empty = [f"{k} empty, not written" for k in manifest["split"]["empty"]]
    skipped = {reason: n for reason, n in manifest["skipped"].items() if n}
    folder = is_folder(str(out))
    return [
        f"{counted(total, noun, plural)} written to {where}",
        *empty,
        f"{counted(sum(skipped.values()), 'turn')} skipped"
        + (" (" + ", ".join(f"{k} {v}" for k, v in skipped.items()) + ")" if skipped else ""),
        f"manifest {base / 'manifest.json' if folder else manifest_path(out)}",
    ]
