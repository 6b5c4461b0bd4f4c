"""Issue 41, SPEC §9: ``stream-app export`` writes what trainers load.

Inputs are generated, run through replay's core (``stream_app.cli.replay``, the pipeline the
worker runs) and exported from the TURNS lines it wrote: no broker. Every chat example is
checked as a trainer's loader would check it, independently of ``datasets/formats.py``'s own rule.
"""

from __future__ import annotations

import io
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench.workload import generate
from stream_app.cli.main import main
from stream_app.cli.replay import replay
from stream_app.config import Settings
from stream_app.datasets.content import rfc3339
from stream_app.datasets.files import write_dataset
from stream_app.datasets.layout import sidecar
from stream_app.datasets.options import Options
from stream_app.datasets.skips import SKIPS, SkipReason
from stream_app.datasets.split import split_of
from stream_app.datasets.turn_lines import TurnLines, read_turn_lines
from stream_app.datasets.writers import DatasetError
from tests.contracts import assert_valid_turn, assert_valid_turn_key
from tests.factories import ORG, assistant, message, tool_call
from tests.terminal import on_a_terminal

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "session.jsonl"
ROLES = {"system", "user", "assistant", "tool"}


def replayed(lines: list[dict[str, Any]] | bytes, org: str = ORG) -> bytes:
    """The TURNS lines replay writes for ``lines``, each turn checked against the contract."""
    source = lines if isinstance(lines, bytes) else b"".join(orjson.dumps(x) + b"\n" for x in lines)
    turns, dlq = io.BytesIO(), io.BytesIO()
    replay(io.BytesIO(source).readlines(), Settings(org_id=org), turns, dlq)
    for line in turns.getvalue().splitlines():
        doc = orjson.loads(line)
        assert_valid_turn(doc["value"])
        session = orjson.loads(doc["key"])[0]
        assert_valid_turn_key(doc["key"].encode(), doc["value"], session)
    return turns.getvalue()


def workload(records: int = 1500, sessions: int = 25, seed: int = 41) -> bytes:
    """Sessions with tool loops, streamed-then-final assistant messages, decisions before
    and after their turns, redeliveries and malformed records (``bench/workload.py``)."""
    return b"".join(orjson.dumps(x) + b"\n" for x in generate(records, sessions, seed))


def export(
    turns: bytes, tmp_path: Path, name: str = "ds.jsonl", **options: Any
) -> tuple[dict[str, Any], Path]:
    out = tmp_path / name
    manifest = write_dataset(read_turn_lines(turns.splitlines()), Options(**options), out, "t")
    return dict(manifest), out


def jsonl(path: Path) -> list[dict[str, Any]]:
    """The lines of ``path``; with a metadata sidecar (chat, kto, dpo: issue 52), each with
    its line of the sidecar as ``metadata``, checked aligned."""
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    side = sidecar(path)
    if not side.exists():
        return lines
    metas = [orjson.loads(line) for line in side.read_bytes().splitlines()]
    assert len(metas) == len(lines)
    return [{**line, "metadata": meta} for line, meta in zip(lines, metas, strict=True)]


def unweighted(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in m.items() if k != "weight"} for m in messages]


def latest_by_session(turns: bytes) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """Replay's turns as a consumer rebuilds them: each key's last revision, at the place of
    its first, grouped by session in order."""
    latest: dict[str, dict[str, Any]] = {}
    for line in turns.splitlines():
        doc = orjson.loads(line)
        latest[doc["key"]] = doc["value"]
    sessions: dict[str, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    for key, value in latest.items():
        sessions[orjson.loads(key)[0]].append((key, value))
    return dict(sessions)


def assert_chat_example(example: dict[str, Any], reasoning: bool = False) -> None:
    """What OpenAI fine-tuning needs of an example (issue 52: OpenAI's keys only, the
    turn's own message the one target, ``weight: 1``; earlier ones ``weight: 0``)."""
    assert set(example) - {"metadata"} <= {"messages", "tools"}
    messages = example["messages"]
    assert messages and messages[-1]["role"] == "assistant", "the example ends with the turn"
    weights = [m["weight"] for m in messages if m["role"] == "assistant"]
    assert weights == [0] * (len(weights) - 1) + [1]
    waiting: set[str] = set()
    for m in messages:
        assert m["role"] in ROLES and isinstance(m["content"], str)
        allowed = {"role", "content", "tool_calls", "tool_call_id", "weight"}
        assert set(m) <= (allowed | {"reasoning_content"} if reasoning else allowed), m
        if m["role"] == "tool":
            assert m["tool_call_id"] in waiting, "a tool message answers a call just made"
            waiting.discard(m["tool_call_id"])
            continue
        assert not waiting, f"tool calls {waiting} are not answered before a {m['role']}"
        assert "tool_call_id" not in m
        calls = m.get("tool_calls", [])
        assert not calls or m["role"] == "assistant"
        for call in calls:
            assert set(call) == {"id", "type", "function"} and call["type"] == "function"
            assert set(call["function"]) == {"name", "arguments"}
            assert isinstance(orjson.loads(call["function"]["arguments"]), dict)
        waiting = {call["id"] for call in calls}
        assert len(waiting) == len(calls)
    meta = example["metadata"]
    assert set(meta) == {
        "session_id",
        "inference_call_id",
        "agent_harness",
        "accepted_explicit",
        "rejected_explicit",
        "accepted_implicit",
        "rejected_implicit",
        "retention_score",
    }


def test_every_chat_example_of_generated_sessions_is_one_a_trainer_loads(tmp_path: Path) -> None:
    turns = replayed(workload())
    by_session = latest_by_session(turns)
    manifest, out = export(turns, tmp_path, format="chat")
    examples = jsonl(out)
    n_turns = sum(len(t) for t in by_session.values())
    assert len(examples) == n_turns > 300  # a clean input: every turn is an example
    assert manifest["skipped"] == dict.fromkeys([r.value for r in SKIPS["chat"]], 0)
    streamed = tool_loops = 0
    previous: dict[str, list[dict[str, Any]]] = {}
    at: dict[str, int] = defaultdict(int)
    for example in examples:
        assert_chat_example(example)
        meta = example["metadata"]
        session = meta["session_id"]
        _, turn = by_session[session][at[session]]  # the session's turns, in order
        at[session] += 1
        assert meta["inference_call_id"] == turn["inference_call_id"]
        decisions = turn["decisions"]  # the latest revision: decisions after the turn too
        assert meta["accepted_explicit"] + meta["accepted_implicit"] == sum(
            d["accepted"] for d in decisions
        )
        assert meta["rejected_explicit"] + meta["rejected_implicit"] == sum(
            not d["accepted"] for d in decisions
        )
        assert meta["accepted_explicit"] == sum(d["accepted"] and d["explicit"] for d in decisions)
        assert meta["agent_harness"] == (decisions[0]["agent_harness"] if decisions else None)
        # The history: the previous example's messages, then this turn's.
        before = previous.get(session, [])
        assert unweighted(example["messages"][: len(before)]) == before
        previous[session] = unweighted(example["messages"])
        last = example["messages"][-1]
        assert [c["id"] for c in last.get("tool_calls", [])] == [
            c["id"] for c in turn["tool_calls"]
        ]
        tool_loops += bool(turn["tool_calls"])
        streamed += (
            len(turn["new_messages"]) > 1 and turn["new_messages"][-1]["role"] == "assistant"
        )
    assert at == {s: len(t) for s, t in by_session.items()}
    assert tool_loops > 100 and streamed > 50
    # Decisions that arrived before their turn and after it both count.
    assert sum(e["metadata"]["accepted_explicit"] for e in examples) > 50


def test_the_example_session_streamed_then_final_with_decisions_before_and_after(
    tmp_path: Path,
) -> None:
    turns = replayed(EXAMPLE.read_bytes(), org="default")
    _, out = export(turns, tmp_path, format="chat", reasoning=True)
    examples = jsonl(out)
    for example in examples:
        assert_chat_example(example, reasoning=True)
    first, second, _, last, retried = examples  # the retry's msg-a1: msg-a1's example
    # msg-a1 was published streaming, then final: the final copy only, reasoning kept.
    assert first["messages"][-1]["reasoning_content"].endswith("slice bounds of paginate().")
    assert first["messages"][-1]["content"] == "Let me read the pagination helper."
    # dec-100 came before msg-a2 (and again, redelivered); dec-101 after msg-a4: a revision.
    assert second["metadata"] == {
        "session_id": "sess-7f3a",
        "inference_call_id": "msg-a2",
        "agent_harness": "claude-code",
        "accepted_explicit": 1,
        "rejected_explicit": 0,
        "accepted_implicit": 0,
        "rejected_implicit": 0,
        "retention_score": None,
    }
    assert last["metadata"]["inference_call_id"] == "msg-a4"
    # dec-101 is implicit (a retention observation): counted apart from explicit ones.
    assert last["metadata"]["agent_harness"] == "pi"
    assert last["metadata"]["accepted_implicit"] == 1 and last["metadata"]["accepted_explicit"] == 0
    assert last["metadata"]["retention_score"] == 0.92
    assert [m["role"] for m in last["messages"]] == [
        "system",
        "user",
        *["assistant", "tool"] * 3,
        "assistant",
    ]
    assert orjson.loads(second["messages"][-1]["tool_calls"][0]["function"]["arguments"]) == {
        "path": "src/paginate.py",
        "old": "items[start - 1:start + size - 1]",
        "new": "items[start:start + size]",
    }
    # The retry, a fork of the session at the file read: the same history, another edit,
    # explicitly rejected after its turn (dec-110, a revision). The fork's msg-a1 is the
    # same example as the session's (the same history and answer): written once.
    assert unweighted(retried["messages"][:-1]) == unweighted(second["messages"][:-1])
    assert retried["messages"][-1] != second["messages"][-1]
    assert retried["metadata"] == {
        **second["metadata"],
        "session_id": "sess-7f3a-retry",
        "inference_call_id": "msg-b2",
        "accepted_explicit": 0,
        "rejected_explicit": 1,
    }
    # Without --reasoning, no reasoning.
    _, plain = export(turns, tmp_path, "plain.jsonl", format="chat")
    assert "reasoning_content" not in plain.read_text()
    # --only-accepted: the turns with an explicit accepted decision and no rejected one.
    _, only = export(turns, tmp_path, "only.jsonl", format="chat", only_accepted=True)
    assert [e["metadata"]["inference_call_id"] for e in jsonl(only)] == ["msg-a2"]


def _session(sid: str, *items: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"topic": kind, "key": sid, "value": value} for kind, value in items]


def test_a_message_ordered_after_its_turns_answer_opens_the_next_turns_history(
    tmp_path: Path,
) -> None:
    """A tool result published before the final copy of the assistant message that called
    it, with a later sequence: its turn lists it after the assistant message."""
    sid = "s-order"
    lines = _session(
        sid,
        ("messages", message(sid, "ROLE_USER", "fix it", message_id="u1", sequence=1)),
        ("messages", message(sid, "ROLE_ASSISTANT", "looking", message_id="a1", sequence=2)),
        (
            "messages",
            message(
                sid,
                "ROLE_TOOL",
                None,
                message_id="t1",
                sequence=3,
                content=[{"toolResult": {"toolCallId": "c1", "result": "ok"}}],
            ),
        ),
        (
            "messages",
            assistant(
                sid,
                "looking",
                message_id="a1",
                sequence=2,
                finish="tool_calls",
                tool_calls=[tool_call("c1")],
            ),
        ),
        ("messages", assistant(sid, "done", message_id="a2", sequence=4)),
    )
    turns = replayed(lines)
    first_turn = orjson.loads(turns.splitlines()[0])["value"]
    assert [m["role"] for m in first_turn["new_messages"]] == ["user", "assistant", "tool"]
    _, out = export(turns, tmp_path, format="chat")
    one, two = jsonl(out)
    for example in (one, two):
        assert_chat_example(example)
    assert [m["role"] for m in one["messages"]] == ["user", "assistant"]
    assert [m["role"] for m in two["messages"]] == ["user", "assistant", "tool", "assistant"]


def test_a_tool_result_inside_a_user_message_becomes_a_tool_message_before_it(
    tmp_path: Path,
) -> None:
    sid = "s-anthropic"
    result = {"toolResult": {"toolCallId": "c1", "result": {"lines": 3}}}
    lines = _session(
        sid,
        ("messages", message(sid, "ROLE_USER", "go")),
        (
            "messages",
            assistant(
                sid,
                "",
                message_id="a1",
                finish="tool_calls",
                tool_calls=[tool_call("c1")],
                content=[],
            ),
        ),
        ("messages", message(sid, "ROLE_USER", None, content=[result, {"text": "and then?"}])),
        ("messages", assistant(sid, "done", message_id="a2")),
    )
    _, out = export(replayed(lines), tmp_path, format="chat")
    one, two = jsonl(out)
    assert_chat_example(two)
    assert one["messages"][-1] == {
        "role": "assistant",
        "weight": 1,
        "content": "",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "edit_file", "arguments": '{"path":"a.py"}'},
            }
        ],
    }
    assert two["messages"][2:] == [
        {"role": "tool", "content": '{"lines":3}', "tool_call_id": "c1"},
        {"role": "user", "content": "and then?"},
        {"role": "assistant", "content": "done", "weight": 1},
    ]


def _loop_session(sid: str, calls: int) -> list[dict[str, Any]]:
    """A session of ``calls`` tool calls, each answered, then a final answer."""
    items: list[tuple[str, dict[str, Any]]] = [("messages", message(sid, "ROLE_USER", "go"))]
    for i in range(calls):
        call = f"{sid}-c{i}"
        items.append(
            (
                "messages",
                assistant(
                    sid,
                    f"step {i}",
                    message_id=f"{sid}-a{i}",
                    finish="tool_calls",
                    tool_calls=[tool_call(call)],
                ),
            )
        )
        result = {"toolResult": {"toolCallId": call, "result": "ok"}}
        items.append(("messages", message(sid, "ROLE_TOOL", None, content=[result])))
    items.append(("messages", assistant(sid, "done", message_id=f"{sid}-end")))
    return _session(sid, *items)


def test_a_turn_whose_earlier_turn_is_missing_is_skipped_with_the_reason(tmp_path: Path) -> None:
    turns = replayed(_loop_session("s-gap", 4) + _loop_session("s-whole", 2))
    lines = turns.splitlines()
    keys = [orjson.loads(line)["key"] for line in lines]
    dropped = keys.index('["s-gap","s-gap-a1"]')
    gapped = b"\n".join(line for i, line in enumerate(lines) if i != dropped)
    manifest, out = export(gapped, tmp_path, format="chat")
    for example in jsonl(out):
        assert_chat_example(example)
    written = [e["metadata"]["inference_call_id"] for e in jsonl(out)]
    # s-gap-a2 begins with the result of s-gap-a1's call: its history cannot be rebuilt.
    assert written == ["s-gap-a0", "s-whole-a0", "s-whole-a1", "s-whole-end"]
    assert manifest["skipped"]["missing_earlier_turn"] == 1
    assert manifest["skipped"]["session_broken"] == 2  # s-gap-a3, s-gap-end
    assert manifest["skipped_turns"] == [
        {"key": '["s-gap","s-gap-a2"]', "reason": "missing_earlier_turn"}
    ]
    # Trajectories: the session is written whole or not at all.
    manifest, out = export(gapped, tmp_path, "traj.jsonl", format="trajectories")
    assert [t["session_id"] for t in jsonl(out)] == ["s-whole"]
    assert manifest["skipped"]["missing_earlier_turn"] == 1
    assert manifest["skipped"]["session_broken"] == 3


def test_a_tool_call_left_unanswered_and_lines_that_are_not_turns_are_skipped(
    tmp_path: Path,
) -> None:
    sid = "s-open"
    lines = _session(
        sid,
        ("messages", message(sid, "ROLE_USER", "go")),
        (
            "messages",
            assistant(
                sid, "calling", message_id="a1", finish="tool_calls", tool_calls=[tool_call("c1")]
            ),
        ),
        ("messages", message(sid, "ROLE_USER", "never mind")),  # c1 has no result
        ("messages", assistant(sid, "ok", message_id="a2")),
        ("messages", message(sid, "ROLE_USER", "again")),
        ("messages", assistant(sid, "ok", message_id="a3")),
    )
    turns = replayed(lines + _loop_session("s-fine", 1))
    good = orjson.loads(turns.splitlines()[-1])
    bad_value = {**good, "key": '["s-fine","other-id"]'}  # the key names another call
    garbage = b"\n".join(
        [turns, b"{not json", orjson.dumps({"value": {}}), orjson.dumps(bad_value)]
    )
    manifest, out = export(garbage, tmp_path, format="chat")
    for example in jsonl(out):
        assert_chat_example(example)
    assert [e["metadata"]["inference_call_id"] for e in jsonl(out)] == [
        "a1",
        "s-fine-a0",
        "s-fine-end",
    ]
    skipped = manifest["skipped"]
    assert (skipped["broken_tool_loop"], skipped["session_broken"]) == (1, 1)  # a2; a3
    assert skipped["not_a_turn"] == 3
    assert {"key": None, "reason": "not_a_turn"} in manifest["skipped_turns"]
    assert manifest["read"] == {"records": len(turns.splitlines()) + 3, "turns": 6, "sessions": 2}
    # The turns format keeps every turn line, and skips only what is not one.
    manifest, out = export(garbage, tmp_path, "turns.jsonl")
    assert len(jsonl(out)) == 5 and manifest["skipped"]["not_a_turn"] == 3


def utc(turn: dict[str, Any]) -> dict[str, Any]:
    """A Turn as a trajectory holds it: its decisions' instants in RFC 3339 UTC with
    microseconds (issue 52: one spelling, so a loader gives them one type)."""
    decisions = [
        {**d, "occurred_at": rfc3339(d["occurred_at"]), "captured_at": rfc3339(d["captured_at"])}
        for d in turn["decisions"]
    ]
    return {**turn, "decisions": decisions}


def test_trajectories_are_replays_turns_in_order_each_its_latest_revision(
    tmp_path: Path,
) -> None:
    turns = replayed(workload(seed=7))
    manifest, out = export(turns, tmp_path, format="trajectories", org_id=ORG)
    trajectories = jsonl(out)
    by_session = latest_by_session(turns)
    assert [t["session_id"] for t in trajectories] == list(by_session)
    for line in trajectories:
        assert set(line) == {"session_id", "org_id", "turns"} and line["org_id"] == ORG
        assert line["turns"] == [utc(value) for _, value in by_session[line["session_id"]]]
    assert manifest["files"][0]["records"] == len(by_session)
    # The org: the one the session's decisions carry, else the export's (--org-id).
    _, out = export(turns, tmp_path, "other.jsonl", format="trajectories", org_id="Other ")
    orgs = {
        t["org_id"] == ("other" if not any(x["decisions"] for x in t["turns"]) else ORG)
        for t in jsonl(out)
    }
    assert orgs == {True}
    # The turns format: replay's lines, each key once with its latest value, by session (in
    # the order of its first turn), then in first-emission order (issue 43 item 4).
    _, out = export(turns, tmp_path, "turns.jsonl")
    expected = [(k, v) for session in by_session.values() for k, v in session]
    assert [(x["key"], x["value"]) for x in jsonl(out)] == expected


def test_the_split_is_by_session_disjoint_and_byte_identical_across_runs(tmp_path: Path) -> None:
    turns = replayed(workload(seed=3))
    sessions = set(latest_by_session(turns))
    runs = []
    for run in ("a", "b"):
        (tmp_path / run).mkdir()
        manifest, out = export(turns, tmp_path / run, format="chat", eval_fraction=0.25)
        assert not out.exists()  # the split files take its place
        names = ["ds.train.jsonl", "ds.eval.jsonl", "ds.manifest.json", "ds.train.metadata.jsonl"]
        runs.append([(tmp_path / run / name).read_bytes() for name in names])
        train, evaluation = (jsonl(tmp_path / run / n) for n in names[:2])
        in_train = {e["metadata"]["session_id"] for e in train}
        in_eval = {e["metadata"]["session_id"] for e in evaluation}
        assert not in_train & in_eval and in_train | in_eval == sessions
        assert 0.1 < len(in_eval) / len(sessions) < 0.4
        data = [f for f in manifest["files"] if f["role"] == "data"]
        for entry, examples in zip(data, (train, evaluation), strict=True):
            assert entry["records"] == len(examples)
    assert runs[0] == runs[1]
    # A session's side depends on its id alone, not on what else the input holds.
    assert all(split_of(s, 0.25) == split_of(s, 0.25) for s in sessions)
    assert {split_of(s, 0.0) for s in sessions} == {"train"}
    assert {split_of(s, 1.0) for s in sessions} == {"eval"}


def test_the_manifest_names_each_file_with_its_sha256(tmp_path: Path) -> None:
    import hashlib

    turns = replayed(workload(records=400, sessions=6))
    manifest, _ = export(turns, tmp_path, format="trajectories", eval_fraction=0.5)
    on_disk = orjson.loads((tmp_path / "ds.manifest.json").read_bytes())
    assert on_disk == manifest
    assert on_disk["format"] == "trajectories" and on_disk["version"] == 2
    for entry in on_disk["files"]:
        data = (tmp_path / entry["name"]).read_bytes()
        assert entry["sha256"] == hashlib.sha256(data).hexdigest()
        assert entry["bytes"] == len(data) and entry["records"] == len(data.splitlines())
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ds.eval.jsonl",
        "ds.manifest.json",
        "ds.train.jsonl",
    ]


def _filled(example: dict[str, Any], fields: list[str]) -> dict[str, Any]:
    """An example as a columnar reader gives it back: absent fields as nulls, free-form JSON
    (a tool's parameters) as its text."""
    messages = [{f: m.get(f) for f in fields} for m in example["messages"]]
    tools = example.get("tools")
    if tools is not None:
        tools = [
            {"type": t["type"], "function": {**t["function"], "parameters": '{"type":"object"}'}}
            for t in tools
        ]
    return {"messages": messages, "tools": tools}


def test_the_parquet_file_holds_the_chat_lines_columns(tmp_path: Path) -> None:
    """Issue 52 changed the columns (``tools``, ``weight``; metadata in the sidecar) and
    keeps the rule: Parquet holds the JSON lines' values, absent fields null."""
    pq = pytest.importorskip("pyarrow.parquet")
    turns = replayed(workload(records=600, sessions=8))
    _, out = export(turns, tmp_path, format="chat", reasoning=True)
    examples = jsonl(out)
    fields = ["role", "content", "reasoning_content", "tool_calls", "tool_call_id", "weight"]
    manifest, parquet = export(turns, tmp_path, "ds.parquet", format="chat", reasoning=True)
    assert [f["name"] for f in manifest["files"]] == ["ds.parquet", "ds.metadata.jsonl"]
    rows = pq.read_table(parquet).to_pylist()
    assert rows == [_filled(e, fields) for e in examples]
    assert jsonl(tmp_path / "ds.metadata.jsonl") == [e["metadata"] for e in examples]
    again_manifest, _ = export(turns, tmp_path, "ds.parquet", format="chat", reasoning=True)
    assert again_manifest == manifest  # the same bytes again
    # Trajectories and turns: the Turn (free-form JSON inside) as its JSON text.
    _, trajectories = export(turns, tmp_path, "t.parquet", format="trajectories")
    _, lines = export(turns, tmp_path, "t.jsonl", format="trajectories")
    for row, line in zip(pq.read_table(trajectories).to_pylist(), jsonl(lines), strict=True):
        assert [orjson.loads(t) for t in row["turns"]] == line["turns"]
    _, lines = export(turns, tmp_path, "l.parquet")
    assert pq.read_table(lines).column_names == ["key", "value"]


def test_an_export_that_fails_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stream_app.datasets.writers import JsonLinesWriter

    turns = replayed(workload(records=300, sessions=4))
    real = JsonLinesWriter.write
    written = 0

    def failing(self: Any, record: Any, line: bytes) -> None:
        nonlocal written
        written += 1
        if written == 5:
            raise OSError(28, "No space left on device", "x")
        real(self, record, line)

    monkeypatch.setattr(JsonLinesWriter, "write", failing)
    with pytest.raises(OSError):
        export(turns, tmp_path, format="chat", eval_fraction=0.5)
    assert list(tmp_path.iterdir()) == []


def test_parquet_without_pyarrow_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "t.jsonl"
    source.write_bytes(replayed(EXAMPLE.read_bytes(), org="default"))
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(DatasetError):
        write_dataset(TurnLines(), Options(), tmp_path / "x.parquet", "t")
    assert main(["export", "--from", str(source), "--out", str(tmp_path / "x.parquet")]) == 2
    err = capsys.readouterr().err
    assert err == (
        "stream-app export: writing Parquet needs pyarrow: pip install 'stream-app[parquet]'\n"
    )
    assert list(tmp_path.iterdir()) == [source]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--from", "t.jsonl", "--include-open"], "--from reads a file: --include-open only"),
        (["--from", "t.jsonl", "--topic", "x"], "--from reads a file: --topic only apply"),
        (["--only-accepted"], "--reasoning and --only-accepted apply to --format chat"),
        (["--format", "trajectories", "--reasoning"], "--reasoning and --only-accepted apply"),
    ],
)
def test_options_that_do_not_go_together_are_one_line_and_exit_2(
    args: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", "--out", str(tmp_path / "o.jsonl"), *args]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"stream-app export: {said}") and line.endswith(
        "; see stream-app export --help"
    )


def test_a_bad_fraction_and_a_missing_file_are_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["export", "--out", "o.jsonl", "--eval-fraction", "1.5"])
    assert stop.value.code == 2
    assert "argument --eval-fraction: must be a number from 0 to 1 (got '1.5')" in (
        capsys.readouterr().err
    )
    missing = tmp_path / "nope.jsonl"
    assert main(["export", "--from", str(missing), "--out", str(tmp_path / "o.jsonl")]) == 2
    assert capsys.readouterr().err == (
        f"stream-app export: cannot read {missing}: No such file or directory\n"
    )


def test_export_from_a_replay_file_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The backfill path of the README: replay, then export, no broker."""
    turns = tmp_path / "turns.jsonl"
    assert main(["replay", str(EXAMPLE), "--out", str(turns), "--dlq", str(tmp_path / "d")]) == 0
    out = tmp_path / "ds.jsonl"
    code = main(
        [
            "export",
            "--from",
            str(turns),
            "--format",
            "chat",
            "--eval-fraction",
            "0",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    summary = capsys.readouterr().err.splitlines()[-1]
    assert summary == (
        f"stream-app export: 8 records read from {turns}, 6 turns of 2 sessions; 5 chat "
        f"examples written to {tmp_path / 'ds.train.jsonl'} (5); validation empty, not "
        f"written; 1 turn skipped (duplicate_example 1); manifest {tmp_path / 'ds.manifest.json'}"
    )
    assert not (tmp_path / "ds.eval.jsonl").exists()  # issue 52: no empty split file
    assert len(jsonl(tmp_path / "ds.train.jsonl")) == 5


def test_export_from_a_file_draws_a_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    turns = tmp_path / "turns.jsonl"
    turns.write_bytes(replayed(EXAMPLE.read_bytes(), org="default"))
    args = ["export", "--from", str(turns), "--format", "chat", "--out", str(tmp_path / "o.jsonl")]
    status, text = on_a_terminal(args)
    assert status == 0
    assert "reading" in text and "━" in text
    assert "5 chat examples written" in text


def test_a_topic_export_keeps_each_turn_at_the_place_of_its_first_emission() -> None:
    """A turn revised after a later turn of its session (a late decision) is written where
    it was first emitted, as on the final topic: the chat history comes in that order."""
    from stream_app.core.revisions import RevisionHeaders

    read = TurnLines()
    for offset, key, revision in [(0, b"a", 1), (1, b"b", 1), (2, b"a", 2), (3, b"c", 1)]:
        read.add_revision(0, offset, key, RevisionHeaders("s", revision, 1.0), (offset, 1))
    assert list(read.entries()) == [("a", (2, 1)), ("b", (1, 1)), ("c", (3, 1))]


def test_docs_name_every_field_and_reason_and_the_readme_command_parses() -> None:
    import re
    import shlex
    from typing import get_type_hints

    from stream_app.cli.main import _parser
    from stream_app.datasets.manifest import Manifest, ManifestFile
    from stream_app.datasets.record_types import ChatMessage, ExampleMetadata

    docs = (ROOT / "docs" / "records.md").read_text().split("## Datasets", 1)[1]
    for reason in SkipReason:
        assert f"| `{reason.value}` |" in docs, reason
    for name in get_type_hints(ChatMessage):
        assert f"`messages[].{name}`" in docs, name
    for name in get_type_hints(ExampleMetadata):
        assert f"`metadata.{name}`" in docs, name
    for name in get_type_hints(Manifest):
        assert f"| `{name}" in docs, name
    for name in get_type_hints(ManifestFile):
        assert f"`{name}`" in docs, name
    # Issue 52: one command per use (SFT for OpenAI and TRL, KTO, DPO), each parsed.
    readme = (ROOT / "README.md").read_text().split("## Build a dataset", 1)[1]
    readme = readme.split("## ", 1)[0]
    lines = re.findall(r"^(stream-app export .+)$", readme, re.MULTILINE)
    commands = [c.strip() for line in lines for c in line.split("&&")]
    parsed = [_parser().parse_args(shlex.split(c)[1:]) for c in commands]
    assert [(a.format, a.profile, a.from_file) for a in parsed] == [
        ("chat", None, "turns.jsonl"),
        ("chat", "trl", "turns.jsonl"),
        ("kto", None, "turns.jsonl"),
        ("dpo", None, "turns.jsonl"),
    ]


def test_a_turn_nested_deeper_than_any_the_worker_writes_is_not_a_turn(tmp_path: Path) -> None:
    """orjson writes at most 255 levels: such a line from a hand-made file is skipped, not a
    crash halfway through the files."""
    lines = replayed(EXAMPLE.read_bytes(), org="default").splitlines()
    doc = orjson.loads(lines[1])  # msg-a2, which carries a decision
    doc["value"]["decisions"][0]["raw"] = {"d": "here"}
    deep = b'{"d":' * 300 + b'"bottom"' + b"}" * 300  # more than orjson writes
    lines[1] = orjson.dumps(doc).replace(b'{"d":"here"}', deep)
    for form in ("turns", "chat", "trajectories"):
        manifest, _ = export(b"\n".join(lines), tmp_path, f"{form}.jsonl", format=form)
        assert manifest["skipped"]["not_a_turn"] == 1, form


def test_a_turn_whose_key_is_spelled_two_ways_is_one_turn(tmp_path: Path) -> None:
    """Issue 49 item 5: a later revision keyed ``["s", "a1"]`` (``json.dumps`` spacing) and an
    earlier one ``["s","a1"]`` are one turn, the later revision: a turn is known by its parsed
    key (session id, inference call id), never by the key's text."""
    import json

    turns = replayed(EXAMPLE.read_bytes(), org="default")
    seen: set[str] = set()
    respelt = []
    for line in turns.splitlines():
        doc = orjson.loads(line)
        if doc["key"] in seen:  # a revision: its key written as json.dumps writes it
            doc["key"] = json.dumps(orjson.loads(doc["key"]))
            assert doc["key"].encode() not in turns
        seen.add(doc["key"])
        respelt.append(orjson.dumps(doc))
    assert len(respelt) == 8 and len(seen) == 8  # six turns, two of them revised
    source = b"\n".join(respelt) + b"\n"
    manifest, out = export(source, tmp_path, format="chat")
    assert manifest["read"] == {"records": 8, "turns": 6, "sessions": 2}
    examples = jsonl(out)
    assert [e["metadata"]["inference_call_id"] for e in examples] == [
        "msg-a1",
        "msg-a2",
        "msg-a3",
        "msg-a4",
        "msg-b2",
    ]
    _, original = export(turns, tmp_path, "original.jsonl", format="chat")
    assert examples == jsonl(original)  # the later revision, the history not repeated
    manifest, out = export(source, tmp_path, "lines.jsonl", format="turns")
    assert [d["key"] for d in jsonl(out)] == [
        k for k in dict.fromkeys(orjson.loads(x)["key"] for x in turns.splitlines())
    ]  # written as the worker spells the key
    trajectories = jsonl(export(source, tmp_path, "traj.jsonl", format="trajectories")[1])
    assert [len(t["turns"]) for t in trajectories] == [4, 2]
