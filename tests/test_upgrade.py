"""Upgrades and rollbacks (issue 54): today's code reads the state an earlier release wrote,
files it in the due index, and refuses state of a newer format without changing a byte.

The earlier release's stored bytes are ``tests/fixtures/state-<commit>.json``, written once
by ``tests/fixtures/make_state.py`` run in a checkout of that release.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from stream_app.observability import metrics
from stream_app.state.due import due_key, session_of_due
from stream_app.state.entries import STATE_FORMAT, StateFormatNewer
from tests.finality_model import ModelWorker, Tables
from tests.fixtures import make_state

FIXTURES = Path(__file__).parent / "fixtures"
RELEASES = ["31bff95"]


def stored(release: str) -> tuple[Tables, dict[str, Any]]:
    """The release's tables, as its worker left them, and what it noted beside them."""
    doc = json.loads((FIXTURES / f"state-{release}.json").read_text())
    assert doc["commit"].startswith(release)
    tables = Tables()
    for name, records in doc["tables"].items():
        table = getattr(tables, name)
        for key, value in records.items():
            table.data[base64.b64decode(key)] = base64.b64decode(value)
            table.order.add(base64.b64decode(key))
    tables.committed.update(doc["committed"])
    return tables, doc


def finish(worker: ModelWorker, clock: list[float], records: list[Any]) -> None:
    """Today's part of the workload, then every window and session passed."""
    for record in records:
        if worker.applied.get(record.topic, 0) == record.offset:
            worker.apply(record)
            clock[0] += 1
    worker.checkpoint()
    policy = worker.pipeline.policy
    clock[0] += policy.late_decision_window_seconds + policy.session_ttl_seconds + 1
    for _ in range(3):
        worker.tick()
        worker.checkpoint()


@pytest.mark.parametrize("release", RELEASES)
def test_state_of_an_earlier_release_is_read_and_goes_on_as_if_never_upgraded(
    release: str,
) -> None:
    records = make_state.records()
    # The control: today's code all along, the same clock and checkpoints.
    clock, control = [make_state.T0], Tables()
    worker = ModelWorker(control, make_state.policy(), clock)
    make_state.apply_first(worker, clock)
    finish(worker, clock, records[make_state.SPLIT :])

    tables, doc = stored(release)
    unreadable = metrics.STATE_UNREADABLE._value.get()
    clock = [doc["clock"]]
    worker = ModelWorker(tables, make_state.policy(), clock)
    finish(worker, clock, records[make_state.SPLIT :])

    assert metrics.STATE_UNREADABLE._value.get() == unreadable, "a session did not read"
    written_before = {base64.b64decode(k) for k in doc["finals"]}
    upgraded = {f.key_bytes: f.value for f in tables.finals}
    want = {f.key_bytes: f.value for f in control.finals}
    # Every turn final once: the release's before the upgrade, today's after, none twice.
    assert written_before.isdisjoint(upgraded)
    assert set(want) == written_before | set(upgraded)
    assert {k: v for k, v in want.items() if k in upgraded} == upgraded
    assert sorted(d["reason"] for d in tables.dead_letters) == sorted(
        d["reason"] for d in control.dead_letters
    )
    assert tables.heads.data == {} and control.heads.data == {}


@pytest.mark.parametrize("release", RELEASES)
def test_heads_written_before_the_due_index_are_filed_at_recovery(release: str) -> None:
    """Issue 54 item 1: state with no instant in its heads went final only at the first
    sweep, a minute after its final_after, and the gauge read 0 meanwhile."""
    tables, doc = stored(release)
    for key, data in list(tables.heads.data.items()):
        head = orjson.loads(data)
        head.pop("due", None)  # as heads were written before the due index
        tables.heads.data[key] = orjson.dumps(head)
    tables.due.data.clear()
    policy = make_state.policy()
    worker = ModelWorker(tables, policy, [doc["clock"]])
    filed = asyncio.run(worker.store.index_held([0], doc["clock"]))
    heads = {k.decode(): orjson.loads(v) for k, v in tables.heads.data.items()}
    assert filed == len(heads)  # every session: its turns' instant, else its expiry
    many = heads["s-many"]
    want = {due_key(many["oldest"] + make_state.WINDOW, "s-many")} | {
        due_key(head["last_seen"] + policy.session_ttl_seconds, sid)
        for sid, head in heads.items()
        if sid != "s-many"
    }
    assert set(tables.due.data) == want


def newer(tables: Tables, session: bytes) -> None:
    head = orjson.loads(tables.heads.data[session])
    tables.heads.data[session] = orjson.dumps({"format": STATE_FORMAT + 1, **head})


@pytest.mark.parametrize("release", RELEASES)
def test_state_of_a_newer_format_is_refused_and_not_a_byte_changes(release: str) -> None:
    """Issue 54 item 2: the release before read a newer head as unreadable, deleted it and
    carried on. Today's refuses it, at recovery and at a record of its session alike."""
    tables, doc = stored(release)
    newer(tables, b"s-many")
    before = {n: dict(getattr(tables, n).data) for n in (*make_state.TABLES, "final_keys")}
    worker = ModelWorker(tables, make_state.policy(), [doc["clock"]])

    with pytest.raises(StateFormatNewer) as refused:
        asyncio.run(worker.store.index_held([0], doc["clock"]))
    assert refused.value.key == b"s-many" and refused.value.found == STATE_FORMAT + 1

    later = make_state.records()[make_state.SPLIT :]
    record = next(r for r in later if b"s-many" in r.value)
    worker.applied[record.topic] = record.offset  # the session's next record, read now
    with pytest.raises(StateFormatNewer):
        worker.apply(record)
    assert {n: dict(getattr(tables, n).data) for n in before} == before


def keys_of(tables: Tables, session_id: str) -> list[bytes]:
    """The session's keys in the due index (the others hold their sessions' expiries)."""
    return sorted(k for k in tables.due.data if session_of_due(k) == session_id.encode())


@pytest.mark.parametrize("window", [60.0, 6000.0])
def test_a_changed_window_refiles_the_held_sessions_at_their_new_instant(window: float) -> None:
    """Issue 55: the index kept the instant the old window gave; a shorter window left held
    turns to the next sweep, a longer one would have them read at every tick until then."""
    clock, tables = [make_state.T0], Tables()
    first = make_state.policy()
    worker = ModelWorker(tables, first, clock)
    make_state.apply_first(worker, clock)
    many = orjson.loads(tables.heads.data[b"s-many"])
    assert many["window"] == first.late_decision_window_seconds
    assert keys_of(tables, "s-many") == [due_key(many["due"], "s-many")]

    changed = dataclasses.replace(first, late_decision_window_seconds=window)
    worker = ModelWorker(tables, changed, clock)
    assert asyncio.run(worker.store.index_held([0], clock[0])) == 1
    instant = many["oldest"] + window
    assert keys_of(tables, "s-many") == [due_key(instant, "s-many")]
    assert asyncio.run(worker.store.index_held([0], clock[0])) == 1  # the head: at a write

    # Its turns go final at the new instant, not before, and the head then names it.
    clock[0] = max(clock[0], instant - 1)
    worker.tick()
    worker.checkpoint()
    assert not [f for f in tables.finals if f.inference_call_id in ("m-a2", "m-a3")]
    clock[0] = instant + 1
    worker.tick()
    worker.checkpoint()
    worker.checkpoint()
    (final,) = [f for f in tables.finals if f.inference_call_id == "m-a2"]
    assert final.final_after == many["oldest"] + window
    assert asyncio.run(worker.store.index_held([0], clock[0])) == 0
