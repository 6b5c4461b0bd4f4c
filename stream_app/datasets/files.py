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
import os
import shutil
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import orjson

from stream_app.datasets.card import card
from stream_app.datasets.formats import records
from stream_app.datasets.layout import (
    SPLIT_NAMES,
    is_parquet,
    manifest_path,
    output_paths,
    partial,
    sidecar,
)
from stream_app.datasets.manifest import (
    Manifest,
    ManifestFile,
    Provenance,
    build_manifest,
    manifest_bytes,
)
from stream_app.datasets.options import Options, Split
from stream_app.datasets.skips import SkipReason, Skips
from stream_app.datasets.split import split_of
from stream_app.datasets.stage_counts import StageCounts
from stream_app.datasets.turn_lines import TurnLines, turn_key
from stream_app.datasets.writers import (
    DatasetError,
    JsonLinesWriter,
    ParquetWriter,
    Shard,
    SplitFiles,
    file_digest,
    require_parquet,
)


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


def check_replaceable(out: Path) -> None:
    """Raises :class:`DatasetError` unless ``out`` is a folder an export may replace whole:
    none yet, an empty one, or an export's set (its ``manifest.json`` names a format and its
    files). A folder of anything else (the input, the working directory) is never swapped
    out and deleted."""
    if not out.exists():
        return
    if not out.is_dir():
        raise DatasetError(f"{out} is a file, not a dataset folder: not replaced")
    try:
        if not any(out.iterdir()):
            return
        manifest = orjson.loads((out / "manifest.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        manifest = None
    if not (isinstance(manifest, dict) and "format" in manifest and "files" in manifest):
        raise DatasetError(
            f"{out} is a folder that holds no stream-app dataset (no manifest.json of "
            "export): not replaced, as export replaces its folder whole; name a new folder"
        )


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
    writing = _Writing(read, options, source, progress, provenance)
    if folder:
        check_replaceable(out)
        return _write_folder(writing, out, parquet)
    return _write_files(writing, out)


def _stage(
    read: TurnLines,
    options: Options,
    outs: dict[Split, SplitFiles],
    partial: Callable[[Path], Path],
    parquet: bool,
    progress: Callable[[int], None] | None,
) -> tuple[Skips, int]:
    """Writes every record into its split's staged files; returns the skips and the number
    of prompts found in both splits (kto and dpo split by prompt: none, by construction)."""
    skips = Skips()
    by_session = options.eval_fraction is not None and options.format not in ("kto", "dpo")
    counts = StageCounts()
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
            full = target.shard_bytes and target.size + len(line) > target.shard_bytes
            if target.writer is not None and target.shard_of is not None and full:
                target.close()  # the shard is full: the next one
                target.data, target.meta = target.shard_of(len(target.shards))
                target.writer, target.meta_sink = None, None
            if target.writer is None:
                target.size, target.shard_records = 0, 0
                target.writer = (
                    ParquetWriter(partial(target.data), options)
                    if parquet
                    else JsonLinesWriter(partial(target.data))
                )
                if target.meta is not None:
                    target.meta_sink = partial(target.meta).open("wb")
                target.sessions, target.last_session = 0, None
            target.writer.write(item.record, line)
            if target.meta_sink is not None and item.metadata is not None:
                target.meta_sink.write(
                    orjson.dumps(item.metadata, option=orjson.OPT_APPEND_NEWLINE)
                )
            target.records += 1
            target.shard_records += 1
            target.size += len(line)
            for key in item.keys:
                if (pair := turn_key(key)) is not None:
                    counts.session(target, pair[0])
            if by_session and item.prompt is not None:
                counts.prompt(item.prompt, split)
            written += 1
            if progress is not None and written % 1000 == 0:
                progress(written)
        shared = counts.shared()
    finally:
        for target in outs.values():
            target.close()
        counts.close()
    if progress is not None:
        progress(written)
    return skips, shared


def _files(
    outs: dict[Split, SplitFiles], staged: Callable[[Path], Path], base: Path
) -> list[ManifestFile]:
    files: list[ManifestFile] = []
    for target in outs.values():
        for shard in target.shards:
            pairs: list[tuple[Path, Literal["data", "metadata"]]] = [(shard.data, "data")]
            if shard.meta is not None:
                pairs.append((shard.meta, "metadata"))
            for path, role in pairs:
                size, sha = file_digest(staged(path))
                files.append(
                    {
                        "name": str(path.relative_to(base)),
                        "split": target.split,
                        "role": role,
                        "records": shard.records,
                        "sessions": shard.sessions,
                        "bytes": size,
                        "sha256": sha,
                    }
                )
    return files


def _number_shards(outs: dict[Split, SplitFiles], staged: Callable[[Path], Path]) -> None:
    """Each shard staged as ``<split>-NNNNN`` renamed ``<split>-NNNNN-of-NNNNN``, its count
    known once the split is written (HF's names)."""
    for target in outs.values():
        count = len(target.shards)
        numbered: list[Shard] = []
        for shard in target.shards:
            paths = [shard.data, shard.meta]
            named = [
                None if p is None else p.with_name(p.name.replace(".", f"-of-{count:05d}.", 1))
                for p in paths
            ]
            for old, new in zip(paths, named, strict=True):
                if old is not None and new is not None:
                    os.replace(staged(old), staged(new))
            assert named[0] is not None
            numbered.append(Shard(named[0], named[1], shard.records, shard.sessions))
        target.shards = numbered


@dataclass(frozen=True)
class _Writing:
    """What one export writes, whichever its layout: the turns read, the options, where they
    came from (for the manifest), whom to tell the records written."""

    read: TurnLines
    options: Options
    source: str
    progress: Callable[[int], None] | None
    provenance: Provenance | None

    @property
    def sidecars(self) -> bool:
        """Whether each data file has its sidecar of metadata, a line for each of its records
        (the chat, kto and dpo formats)."""
        return self.options.format in ("chat", "kto", "dpo")

    def stage(
        self, outs: dict[Split, SplitFiles], staged: Callable[[Path], Path], parquet: bool
    ) -> tuple[Skips, int]:
        return _stage(self.read, self.options, outs, staged, parquet, self.progress)

    def manifest(
        self, outs: dict[Split, SplitFiles], files: list[ManifestFile], skips: Skips, shared: int
    ) -> Manifest:
        return build_manifest(
            self.read, self.options, self.source, self.provenance, outs, files, skips, shared
        )


def _write_files(writing: _Writing, out: Path) -> Manifest:
    outs = {
        split: SplitFiles(split, path, sidecar(path) if writing.sidecars else None)
        for split, path in output_paths(out, writing.options.eval_fraction)
    }
    staged = [p for t in outs.values() for p in (t.data, t.meta) if p is not None]
    target = manifest_path(out)
    try:
        skips, shared = writing.stage(outs, partial, is_parquet(out))
        files = _files(outs, partial, out.parent)
        manifest = writing.manifest(outs, files, skips, shared)
        partial(target).write_bytes(manifest_bytes(manifest))
        with signals_held():
            target.unlink(missing_ok=True)  # no manifest describes a set half replaced
            for path in staged:
                if partial(path).exists():
                    os.replace(partial(path), path)
                else:  # an empty split, or none of this run: no file of an older run stays
                    path.unlink(missing_ok=True)
            os.replace(partial(target), target)
        return manifest
    finally:
        for path in [*staged, target]:
            partial(path).unlink(missing_ok=True)


def _write_folder(writing: _Writing, out: Path, parquet: bool) -> Manifest:
    building = partial(out)
    ext = "parquet" if parquet else "jsonl"
    sidecars, options = writing.sidecars, writing.options
    splits: list[Split] = ["train"] if options.eval_fraction is None else ["train", "eval"]
    outs: dict[Split, SplitFiles] = {}
    for split in splits:

        def shard_of(n: int, name: str = SPLIT_NAMES[split]) -> tuple[Path, Path | None]:
            stem = f"{name}-{n:05d}"  # "-of-NNNNN" added when the split is written
            meta = out / "metadata" / f"{stem}.jsonl" if sidecars else None
            return out / "data" / f"{stem}.{ext}", meta

        which: Split = "all" if options.eval_fraction is None else split
        data, meta = shard_of(0)
        outs[which] = SplitFiles(
            which, data, meta, shard_of=shard_of, shard_bytes=options.shard_bytes
        )

    def staged(path: Path) -> Path:
        return building / path.relative_to(out)

    shutil.rmtree(building, ignore_errors=True)  # a crashed run's
    try:
        (building / "data").mkdir(parents=True)
        if sidecars:
            (building / "metadata").mkdir()
        skips, shared = writing.stage(outs, staged, ext == "parquet")
        _number_shards(outs, staged)
        files = _files(outs, staged, out)
        for empty in ("data", "metadata"):  # nothing written in them: not there either
            with contextlib.suppress(OSError):
                (building / empty).rmdir()
        manifest = writing.manifest(outs, files, skips, shared)
        (building / "manifest.json").write_bytes(manifest_bytes(manifest))
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
