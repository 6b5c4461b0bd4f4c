"""No credential of a decision's ``raw`` is readable anywhere the core writes it (SPEC §3).

Each shape of the corpus is put in a decision's ``raw`` in every place it can sit (a string
value, free text, a nested value, a key name, JSON text, under its own key), and that
decision is driven through every path of the core: waiting for its turn, joined when the
turn arrives, joined late (the turn emitted again), unattributable, joined on a guess and
then ambiguous, left waiting until its session expires (orphaned). Read back: every emitted
Turn, the state of every session after every step (``/sessions/{id}`` serves it and the
changelog stores it), every dead letter written from state, and the session input that
crosses the repartition topic.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from stream_app.core.policy import Policy
from stream_app.core.records import SourceRecord, dump_input
from stream_app.core.redaction import REDACTED
from tests.core.secret_corpus import ORDINARY_RAW, SHAPES, Shape, leaks, placements
from tests.factories import ORG, Run, assistant, decision, message, tool_call

POLICY = Policy(org_id=ORG, session_ttl_seconds=600, late_decision_window_seconds=300)
FROM_STATE = {"unattributable_decision", "ambiguous_decision", "orphaned_decision"}


def everything_written(raw: dict[str, Any]) -> tuple[Run, list[tuple[str, bytes]]]:
    """The run, and what it wrote where, with ``raw`` as every decision's ``raw``."""
    run = Run(policy=POLICY)
    written: list[tuple[str, bytes]] = []

    def state(step: str) -> None:
        for sid in run.pipeline.store.session_ids():
            session = run.pipeline.store.get(sid)
            assert session is not None
            written.append((f"state of {sid} after {step}", session.to_json()))
            written.append((f"changelog of {sid} after {step}", session.to_json(bodies=False)))

    early = decision(call_id="toolu_1", decision_id="early", raw=raw)
    item, _ = run.pipeline.decode(
        SourceRecord("decisions", "developer.decisions", 0, 99, None, orjson.dumps(early))
    )
    assert item is not None
    written.append(("repartition record", dump_input(item)))

    run.dec(early)
    state("a decision waits for its turn")
    run.msg(message(text="fix it", message_id="u1"))
    run.msg(assistant(message_id="a1", tool_calls=[tool_call("toolu_1")]))
    state("its turn arrives")
    run.dec(decision(call_id="a1", harness="pi", decision_id="late", raw=raw))
    state("a late decision joins an emitted turn")
    run.dec(decision(call_id=None, harness="pi", decision_id="none", file_path="b", raw=raw))
    state("an unattributable decision")
    run.dec(
        decision(call_id="shared", decision_id="guess", occurred_at="2026-01-01T10:05:00Z", raw=raw)
    )
    run.msg(assistant(message_id="a2", tool_calls=[tool_call("shared")]))
    state("a decision joins on a guess")
    run.msg(assistant(message_id="a3", tool_calls=[tool_call("shared")]))
    state("a second turn answers to the same id")
    run.dec(decision(session="s2", call_id="never", decision_id="orphan", raw=raw))
    state("a decision waits in another session")
    run.now += POLICY.session_ttl_seconds + 1
    run.sweep()

    written += [(f"turn {t['inference_call_id']}", orjson.dumps(t)) for t in run.revisions]
    written += [(f"dead letter {d['reason']}", orjson.dumps(d)) for d in run.dead_letters]
    return run, written


def test_the_scenario_takes_every_path_that_writes_a_decision() -> None:
    run, _ = everything_written({"note": "x"})
    assert {d["reason"] for d in run.dead_letters} == FROM_STATE
    joined = {d["decision_id"] for t in run.revisions for d in t["decisions"]}
    assert joined == {"early", "late", "guess"}
    assert len(run.pipeline.store) == 0  # both sessions expired


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s.category}: {s.name}")
def test_no_credential_is_readable_anywhere(shape: Shape) -> None:
    raw = {where.replace(" ", "_"): payload for where, payload in placements(shape).items()}
    run, written = everything_written(raw)
    assert [where for where, blob in written if leaks(shape.secret, blob)] == []
    (emitted,) = [d["raw"] for t in run.revisions for d in t["decisions"]][:1]
    assert REDACTED in orjson.dumps(emitted).decode()


def test_ordinary_content_reaches_the_turn_unchanged() -> None:
    run, _ = everything_written(ORDINARY_RAW)
    assert {orjson.dumps(d["raw"]) for t in run.revisions for d in t["decisions"]} == {
        orjson.dumps(ORDINARY_RAW)
    }
