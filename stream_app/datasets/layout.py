"""Where an export's files go: a file and its split files, sidecars and manifest, or a folder."""

from __future__ import annotations

import os
from pathlib import Path

from stream_app.datasets.options import Split

SPLIT_NAMES: dict[Split, str] = {"all": "train", "train": "train", "eval": "validation"}


def is_parquet(out: Path) -> bool:
    return out.suffix.lower() == ".parquet"


def is_folder(out: str) -> bool:
    """``--out DIR/`` (or an existing folder): the HF layout."""
    return out.endswith(("/", os.sep)) or Path(out).is_dir()


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


def partial(path: Path) -> Path:
    return path.with_name(path.name + ".partial")
