"""The manifest: what a set holds, where it came from, what was skipped; and the export's
summary line."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal, TypedDict

import orjson

from stream_app.console.wording import counted
from stream_app.datasets.layout import SPLIT_NAMES, is_folder, manifest_path
from stream_app.datasets.options import Format, Options, Profile, Split
from stream_app.datasets.skips import SkippedTurn, Skips
from stream_app.datasets.turn_lines import TurnLines
from stream_app.datasets.writers import SplitFiles
from stream_app.models.json_types import JsonObject

MANIFEST_VERSION: Literal[2] = 2


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
    input: JsonObject  # {"path", "sha256"} or {"topic", "partitions": [...]}
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


def build_manifest(
    read: TurnLines,
    options: Options,
    source: str,
    provenance: Provenance | None,
    outs: dict[Split, SplitFiles],
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
        "read": read_counts(read),
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


def manifest_bytes(manifest: Manifest) -> bytes:
    return orjson.dumps(manifest, option=orjson.OPT_INDENT_2) + b"\n"


def read_counts(read: TurnLines) -> ManifestRead:
    return {"records": read.records, "turns": read.keys, "sessions": read.sessions}


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
