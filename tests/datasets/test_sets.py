"""Issue 52: a dataset set is one thing. HF ``datasets`` loads JSON lines and Parquet of one
export with the same features; a folder is replaced whole or not at all (a failure between
files, SIGTERM); every skip reason is reached; content is redacted unless asked not to."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from stream_app.cli.main import main
from stream_app.datasets.turn_lines import read_turn_lines
from tests.datasets.test_verdicts import export, lines, verdict_turns

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "session.jsonl"
SHAPES = [
    {"format": "chat"},
    {"format": "chat", "profile": "trl"},
    {"format": "chat", "reasoning": True},
    {"format": "kto"},
    {"format": "dpo"},
    {"format": "dpo", "profile": "openai"},
    {"format": "trajectories"},
    {"format": "turns"},
]


def load(folder: Path) -> Any:
    datasets = pytest.importorskip("datasets")
    return datasets.load_dataset(str(folder))


def snapshot(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "-".join(str(v) for v in s.values()))
def test_json_lines_and_parquet_load_with_the_same_features_and_rows(
    shape: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    turns = verdict_turns()
    manifest, _ = export(tmp_path, "j", turns, folder=True, eval_fraction=0.2, **shape)
    export(tmp_path, "p", turns, folder=True, eval_fraction=0.2, parquet=True, **shape)
    as_lines, as_parquet = load(tmp_path / "j"), load(tmp_path / "p")
    assert set(as_lines) == set(as_parquet) == {"train", "validation"}
    for split in ("train", "validation"):
        assert as_lines[split].features == as_parquet[split].features
        assert as_lines[split].num_rows == manifest["split"]["records"][split] > 0
        assert as_lines[split].to_list() == as_parquet[split].to_list()
    card = (tmp_path / "j" / "README.md").read_text()
    assert card.startswith("---\nconfigs: ") and "dataset_info: " in card
    assert "stream-app" in card and manifest["split"]["rule"] in card


def test_the_readme_recipe_loads_on_the_demo_with_no_empty_split(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import re
    import shlex

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    assert main(["replay", str(EXAMPLE), "--out", "turns.jsonl", "--dlq", "dlq.jsonl"]) == 0
    readme = (ROOT / "README.md").read_text().split("## Build a dataset", 1)[1].split("## ", 1)[0]
    commands = [
        c.strip()
        for line in re.findall(r"^(stream-app export .+)$", readme, re.MULTILINE)
        for c in line.split("&&")
    ]
    assert len(commands) == 4
    # The demo: a session and its retry (a fork at the file read whose edit was rejected,
    # the session's accepted): every set has rows, kto both labels, dpo the pair.
    rows = {
        "sft": {"train": 4, "validation": 1},  # the fork's msg-a1 written once
        "sft-trl": {"train": 2},
        "kto": {"train": 2},
        "dpo": {"train": 1},
    }
    for command in commands:
        capsys.readouterr()
        assert main(shlex.split(command)[1:]) == 0, command
        (said,) = capsys.readouterr().err.splitlines()
        folder = Path(shlex.split(command)[-1])
        manifest = orjson.loads((folder / "manifest.json").read_bytes())
        loaded = load(folder)
        assert {split: loaded[split].num_rows for split in loaded} == rows[folder.name], said
        assert manifest["split"]["records"] == rows[folder.name] and not manifest["split"]["empty"]
        if folder.name == "kto":
            assert sorted(loaded["train"]["label"]) == [False, True]
        if folder.name == "dpo":
            assert "1 dpo pair written" in said
            (pair,) = loaded["train"].to_list()
            assert pair["chosen"] != pair["rejected"]
        assert (
            manifest["provenance"]["input"]["sha256"]
            == hashlib.sha256(Path("turns.jsonl").read_bytes()).hexdigest()
        )
        assert manifest["provenance"]["stream_app_version"]


def test_a_failure_between_files_and_sigint_keep_the_old_set_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import stream_app.datasets.files as files

    turns = verdict_turns()
    export(tmp_path, "set", turns, folder=True, format="kto", eval_fraction=0.2)
    before = snapshot(tmp_path / "set")
    real = files.file_digest
    calls = 0

    def failing(path: Path) -> tuple[int, str]:
        nonlocal calls
        calls += 1
        if calls == 2:  # the first file staged, the second not yet described
            raise OSError(28, "No space left on device", str(path))
        return real(path)

    monkeypatch.setattr(files, "file_digest", failing)
    with pytest.raises(OSError):
        export(tmp_path, "set", turns, folder=True, format="dpo", eval_fraction=0.2)
    assert snapshot(tmp_path / "set") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["set"]
    monkeypatch.setattr(files, "file_digest", real)

    def interrupted(path: Path) -> tuple[int, str]:
        raise KeyboardInterrupt

    monkeypatch.setattr(files, "file_digest", interrupted)
    with pytest.raises(KeyboardInterrupt):
        export(tmp_path, "set", turns, folder=True, format="dpo")
    assert snapshot(tmp_path / "set") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["set"]
    # A file set: the old manifest never describes new files (it goes before the renames).
    monkeypatch.setattr(files, "file_digest", real)
    export(tmp_path, "ds.jsonl", turns, format="kto", eval_fraction=0.2)
    monkeypatch.setattr(files.os, "replace", _fail_second(os.replace))
    with pytest.raises(OSError):
        export(tmp_path, "ds.jsonl", turns, format="dpo", eval_fraction=0.2)
    assert not (tmp_path / "ds.manifest.json").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]


def _fail_second(real: Any) -> Any:
    calls = 0

    def replace(a: Any, b: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise OSError(5, "Input/output error", str(b))
        real(a, b)

    return replace


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_is_one_line_and_leaves_the_old_set_and_no_partial(
    sig: int, code: int, tmp_path: Path
) -> None:
    source = tmp_path / "turns.jsonl"
    source.write_bytes(verdict_turns() * 1)
    out = tmp_path / "set"
    assert main(["export", "--from", str(source), "--format", "chat", "--out", f"{out}/"]) == 0
    before = snapshot(out)
    big = tmp_path / "big.jsonl"
    with big.open("wb") as sink:  # enough turns that writing takes a while
        for i in range(40):
            sink.write(verdict_turns().replace(b'"sess-', f'"r{i}-sess-'.encode()))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "stream_app",
            "export",
            "--from",
            str(big),
            "--format",
            "chat",
            "--out",
            f"{out}/",
        ],
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    partial = tmp_path / "set.partial"
    deadline = time.monotonic() + 60
    while not partial.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    assert proc.poll() is None, "the export ended before it could be interrupted"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code
    (line,) = err.decode().splitlines()
    assert line.startswith("stream-app export: ") and "nothing written" in line
    assert snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.jsonl", "set", "turns.jsonl"]


def test_an_input_without_turns_keeps_the_old_set_and_replay_input_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "turns.jsonl"
    source.write_bytes(verdict_turns())
    out = tmp_path / "set"
    assert main(["export", "--from", str(source), "--format", "kto", "--out", f"{out}/"]) == 0
    before = snapshot(out)
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"\n")
    capsys.readouterr()
    assert main(["export", "--from", str(empty), "--format", "kto", "--out", f"{out}/"]) == 0
    (line,) = capsys.readouterr().err.splitlines()
    assert line == f"stream-app export: no turn in {empty}: nothing written, {out} kept"
    assert snapshot(out) == before
    new = tmp_path / "new"  # nothing was there: nothing is said to be kept
    assert main(["export", "--from", str(empty), "--format", "kto", "--out", f"{new}/"]) == 0
    (line,) = capsys.readouterr().err.splitlines()
    assert line == f"stream-app export: no turn in {empty}: nothing written" and not new.exists()
    args = ["export", "--from", str(EXAMPLE), "--format", "kto", "--out", f"{out}/"]
    assert main(args) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"stream-app export: {EXAMPLE}:1: not a turn line")
    assert snapshot(out) == before


def _line(key: list[str], value: Any) -> bytes:
    return orjson.dumps({"key": orjson.dumps(key).decode(), "value": value})


def test_every_skip_reason_of_reading_is_reached(tmp_path: Path) -> None:
    base = orjson.loads(verdict_turns().splitlines()[0])
    session, call = orjson.loads(base["key"])
    good = _line([session, call], base["value"])
    nul = _line(["s\x00", call], base["value"])
    surrogate = good.replace(session.encode(), b"x\\ud800", 1).replace(b'"key":"', b'"key":"', 1)
    nan = good[:-1] + b',"extra":NaN}'
    big = _line(["s-big", call], {**base["value"], "completion": "x" * 5000})
    manifest, _ = export(
        tmp_path,
        "r.jsonl",
        b"\n".join([nul, surrogate, nan, big]),
        format="turns",
        max_example_bytes=4096,
    )
    assert manifest["skipped"] == {
        "not_a_turn": 0,
        "unrepresentable_unicode": 2,
        "non_finite_number": 1,
        "too_large": 1,
    }
    # An example larger than the limit, though its line is not.
    manifest, _ = export(
        tmp_path, "c.jsonl", verdict_turns(), format="chat", max_example_bytes=6000
    )
    assert manifest["skipped"]["too_large"] > 0


def test_credentials_in_content_are_redacted_unless_kept(tmp_path: Path) -> None:
    doc = orjson.loads(verdict_turns().splitlines()[0])
    secret = "hunter2-Correct-Horse-42"
    doc["value"]["new_messages"][0]["parts"].append(
        {"type": "text", "content": f"here: password={secret}"}
    )
    source = orjson.dumps(doc)
    for form in ("chat", "turns", "trajectories"):
        manifest, out = export(tmp_path, f"{form}.jsonl", source, format=form)
        assert secret.encode() not in out.read_bytes() and manifest["redacted"] == 1, form
        manifest, out = export(
            tmp_path, f"k{form}.jsonl", source, format=form, keep_credentials=True
        )
        assert secret.encode() in out.read_bytes() and manifest["redacted"] == 0
    assert manifest["options"]["keep_credentials"] is True


def test_the_split_salt_redraws_the_split_deterministically(tmp_path: Path) -> None:
    turns = verdict_turns()
    sides = []
    for name, salt in (("a", ""), ("b", "x"), ("c", "x")):
        export(tmp_path, f"{name}.jsonl", turns, format="chat", eval_fraction=0.3, split_salt=salt)
        sides.append({m["session_id"] for m in lines(tmp_path / f"{name}.eval.metadata.jsonl")})
    assert sides[1] == sides[2] != sides[0]
    assert orjson.loads((tmp_path / "b.manifest.json").read_bytes())["split"]["salt"] == "x"
    # A folder's card names the rule with its fraction and salt: enough to draw it again.
    for salt, said in (("x", "salt `x`"), ("", "no salt")):
        export(
            tmp_path, "set", turns, folder=True, format="kto", eval_fraction=0.3, split_salt=salt
        )
        card = (tmp_path / "set" / "README.md").read_text()
        assert "eval_fraction 0.3" in card and said in card


def test_a_topic_export_is_indexed_from_its_spool_and_parsed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The turn lines a topic gives are spooled and indexed by position as they are
    (add_revision, no parse), then parsed once each when written: the same dataset as from the
    file, and orjson.loads called once per line (issue 52's hand-over: the topic's values
    were parsed twice)."""
    import io

    from stream_app.datasets import turn_lines
    from stream_app.datasets.files import write_dataset
    from stream_app.datasets.options import Options
    from stream_app.datasets.turn_lines import TurnLines

    turns = verdict_turns()
    spool = io.BytesIO(turns)
    fed = TurnLines(source=spool)
    at = 0
    for offset, line in enumerate(turns.splitlines(keepends=True)):
        key = orjson.loads(line)["key"].encode()
        fed.add_revision(0, offset, key, None, (at, len(line)))
        at += len(line)
    read_file = read_turn_lines(turns.splitlines())
    assert list(fed.entries()) == list(read_file.entries())
    parsed = 0
    real = turn_lines.orjson.loads

    def counting(data: bytes | str) -> object:
        nonlocal parsed
        parsed += isinstance(data, bytes)  # a line (a key is parsed as text)
        return real(data)

    monkeypatch.setattr(turn_lines.orjson, "loads", counting)
    manifest = write_dataset(fed, Options(format="kto"), tmp_path / "k.jsonl", "topic t")
    monkeypatch.undo()
    assert parsed == fed.keys  # each line once
    expected = write_dataset(read_file, Options(format="kto"), tmp_path / "f.jsonl", "topic t")
    assert [f["sha256"] for f in manifest["files"]] == [f["sha256"] for f in expected["files"]]


@pytest.mark.parametrize("parquet", [False, True], ids=["jsonl", "parquet"])
def test_a_large_split_is_written_in_shards_that_load_as_one(
    parquet: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC §9: data/<split>-NNNNN-of-NNNNN; past --shard-bytes a split gets another shard,
    each with its sidecar aligned by line, the card's configs globbing them all."""
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    turns = verdict_turns()
    whole, _ = export(tmp_path, "one", turns, folder=True, format="chat", parquet=parquet)
    manifest, out = export(
        tmp_path, "many", turns, folder=True, format="chat", parquet=parquet, shard_bytes=200_000
    )
    ext = "parquet" if parquet else "jsonl"
    data = sorted(p.name for p in (out / "data").iterdir())
    count = len(data)
    assert count > 2
    assert data == [f"train-{i:05d}-of-{count:05d}.{ext}" for i in range(count)]
    meta = sorted(p.name for p in (out / "metadata").iterdir())
    assert meta == [f"train-{i:05d}-of-{count:05d}.jsonl" for i in range(count)]
    files = [f for f in manifest["files"] if f["role"] == "data"]
    assert sum(f["records"] for f in files) == manifest["split"]["records"]["train"]
    assert [f["records"] for f in manifest["files"] if f["role"] == "metadata"] == [
        f["records"] for f in files
    ]
    if not parquet:
        for f in files:  # a shard past the limit only by the row that opened it
            assert f["bytes"] <= 200_000 or f["records"] == 1
            assert len(lines(out / f["name"])) == f["records"]
        joined = b"".join((out / f["name"]).read_bytes() for f in files)
        assert joined == (tmp_path / "one" / "data" / "train-00000-of-00001.jsonl").read_bytes()
    assert manifest["split"]["records"] == whole["split"]["records"]
    assert "data/train-*." + ext in (out / "README.md").read_text()
    loaded = load(out)
    assert loaded["train"].num_rows == whole["split"]["records"]["train"]
    assert loaded["train"].to_list() == load(tmp_path / "one")["train"].to_list()


def test_a_folder_that_holds_no_set_is_never_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--out DIR/`` swaps the folder whole: a folder of the user's files (the input itself
    among them, or the working directory as ``.``) is refused, not deleted; an export's set,
    or an empty folder, is replaced."""
    work = tmp_path / "work"
    work.mkdir()
    source = work / "turns.jsonl"
    source.write_bytes(verdict_turns())
    (work / "notes.txt").write_text("mine")
    before = snapshot(work)
    for out in (f"{work}/", str(work)):
        capsys.readouterr()
        assert main(["export", "--from", str(source), "--format", "chat", "--out", out]) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith(f"stream-app export: {work} ") and "not replaced" in line
        assert snapshot(work) == before
    monkeypatch.chdir(work)
    assert main(["export", "--from", "turns.jsonl", "--format", "chat", "--out", "."]) == 2
    assert snapshot(work) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["export", "--from", str(source), "--format", "chat", "--out", str(empty)]) == 0
    assert (empty / "manifest.json").exists()
    assert main(["export", "--from", str(source), "--format", "kto", "--out", f"{empty}/"]) == 0
    assert orjson.loads((empty / "manifest.json").read_bytes())["format"] == "kto"
