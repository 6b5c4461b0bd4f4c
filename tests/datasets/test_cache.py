"""A folder exported again loads its new rows, not the old ones from HF's cache.

HF ``datasets`` (5.0.1, ``load.LocalDatasetModuleFactory.get_module``) keys the cache of a
local folder whose card has ``configs`` by the folder's name and a hash of the card's YAML
(its ``dataset_info`` and the configs, whose ``data_files`` are the patterns, unresolved):
not by the files' times or bytes. So the card itself must change whenever the data does:
``dataset_info.splits`` gives each split's rows and ``download_size`` the data's bytes, and
the config's ``description`` the data files' SHA-256 (a re-draw of the split with the same
counts changes only that)."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from stream_app.datasets.formats import records
from stream_app.datasets.layout import SPLIT_NAMES
from stream_app.datasets.options import Options, Split
from stream_app.datasets.skips import Skips
from stream_app.datasets.split import split_of
from stream_app.datasets.turn_lines import read_turn_lines
from tests.datasets.test_verdicts import export, lines, verdict_turns

EVAL = 0.3


def rows_of(row: dict[str, Any]) -> tuple[Any, ...]:
    """A kto row as loaded or as written, the same either way (HF adds absent keys as None)."""
    messages = [*row["prompt"], *row["completion"]]
    return (row["label"], *(m["content"] for m in messages))


def on_disk(folder: Path) -> dict[str, list[tuple[Any, ...]]]:
    manifest = orjson.loads((folder / "manifest.json").read_bytes())
    split: dict[str, list[tuple[Any, ...]]] = {}
    for f in manifest["files"]:
        if f["role"] == "data":
            rows = split.setdefault(SPLIT_NAMES[f["split"]], [])
            path = folder / f["name"]
            if path.suffix == ".parquet":
                table = pytest.importorskip("pyarrow.parquet").read_table(path)
                rows.extend(rows_of(row) for row in table.to_pylist())
            else:
                rows.extend(rows_of(row) for row in lines(path))
    return split


def load(folder: Path) -> tuple[dict[str, list[tuple[Any, ...]]], set[str]]:
    """The rows ``load_dataset`` gives, and the cache folders it read them from."""
    datasets = pytest.importorskip("datasets")
    loaded = datasets.load_dataset(str(folder))
    rows = {split: [rows_of(row) for row in loaded[split]] for split in loaded}
    where = {str(Path(f["filename"]).parent) for s in loaded for f in loaded[s].cache_files}
    return rows, where


def same_counts_salt(turns: bytes) -> str:
    """A salt that draws another split of the kto rows with the same count on each side."""
    items = list(records(read_turn_lines(turns.splitlines()), Options(format="kto"), Skips()))

    def drawn(salt: str) -> tuple[Counter[Split], list[Split]]:
        sides = [split_of(item.split_key, EVAL, salt) for item in items]
        return Counter(sides), sides

    counts, sides = drawn("")
    salt = next(s for n in range(1, 1000) if drawn(s := str(n))[0] == counts)
    assert drawn(salt)[1] != sides
    return salt


@pytest.mark.parametrize("parquet", [False, True], ids=["jsonl", "parquet"])
def test_a_folder_exported_again_loads_its_new_rows_and_an_unchanged_one_its_cache(
    parquet: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))  # one cache for all loads
    turns = verdict_turns()
    salt = same_counts_salt(turns)
    shared: dict[str, Any] = {"format": "kto", "eval_fraction": EVAL, "parquet": parquet}
    folder = tmp_path / "kto"
    seen: list[set[str]] = []
    steps: list[tuple[str, dict[str, Any]]] = [
        ("first", {}),
        ("the split drawn again, same counts", {"split_salt": salt}),
        ("more rows", {"split_salt": salt, "include_implicit": True}),
        ("unchanged", {"split_salt": salt, "include_implicit": True}),
    ]
    for name, options in steps:
        manifest, _ = export(tmp_path, "kto", turns, True, **shared, **options)
        loaded, where = load(folder)
        assert loaded == on_disk(folder), name
        assert {k: len(v) for k, v in loaded.items()} == manifest["split"]["records"], name
        seen.append(where)
    assert len({*map(frozenset, seen[:3])}) == 3  # each change read anew
    assert seen[3] == seen[2]  # the same data: HF's cache of it


def test_the_card_names_each_splits_rows_and_the_data_files_sha256(tmp_path: Path) -> None:
    """What enters HF's cache key is what the folder holds: rows per split written, their
    bytes, and the SHA-256 a user can compute again (``sha256sum data/* | sha256sum``)."""
    manifest, folder = export(
        tmp_path, "set", verdict_turns(), folder=True, format="kto", eval_fraction=EVAL
    )
    front = (folder / "README.md").read_text().split("---\n")[1]
    yaml = pytest.importorskip("yaml")
    meta = yaml.safe_load(front)
    data = sorted(p for p in (folder / "data").iterdir())
    listing = "".join(
        f"{hashlib.sha256(p.read_bytes()).hexdigest()}  data/{p.name}\n" for p in data
    )
    digest = hashlib.sha256(listing.encode()).hexdigest()
    (config,) = meta["configs"]
    assert digest in config["description"]
    assert meta["dataset_info"]["splits"] == [
        {"name": name, "num_examples": n} for name, n in manifest["split"]["records"].items() if n
    ]
    assert meta["dataset_info"]["download_size"] == sum(p.stat().st_size for p in data)
    assert digest in (folder / "README.md").read_text().split("---\n", 2)[2]  # said in prose
