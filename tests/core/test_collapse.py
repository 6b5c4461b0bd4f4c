"""SPEC §3: redelivered decisions collapse by natural key; the first copy wins."""

from __future__ import annotations

import orjson
import pytest

from stream_app.core.session import SessionState
from tests.factories import Run, assistant, decision, tool_call


def joined(run: Run, key: str = "m1") -> list[dict]:
    return run.final()[key]["decisions"]


def test_first_copy_wins_and_later_copies_are_counted_duplicates_without_reemission() -> None:
    run = Run()
    run.msg(assistant(message_id="m1"))
    run.dec(decision(call_id="m1", decision_id="d1", captured_at="2026-01-01T10:00:01Z"))
    before = len(run.revisions)
    out = run.dec(
        decision(call_id="m1", decision_id="d1-regenerated", captured_at="2026-01-01T10:05:00Z")
    )
    assert out.outcome == "duplicate" and out.counts["duplicate:decision"] == 1
    assert len(run.revisions) == before
    assert [d["decision_id"] for d in joined(run)] == ["d1"]


def test_occurred_at_compares_as_an_instant() -> None:
    run = Run()
    run.msg(assistant(message_id="m1"))
    run.dec(decision(call_id="m1", occurred_at="2026-01-01T10:00:00+02:00"))
    out = run.dec(decision(call_id="m1", decision_id="d2", occurred_at="2026-01-01T08:00:00Z"))
    assert out.outcome == "duplicate"


def test_claude_code_with_call_id_ignores_file_path() -> None:
    run = Run()
    run.msg(assistant(message_id="m1"))
    run.dec(decision(call_id="m1", file_path="a.py"))
    out = run.dec(decision(call_id="m1", decision_id="d2", file_path=""))
    assert out.outcome == "duplicate"


def test_other_harnesses_keep_file_path_in_the_key() -> None:
    run = Run()
    run.msg(assistant(message_id="m1"))
    run.dec(decision(call_id="m1", harness="copilot", file_path="a.py"))
    out = run.dec(decision(call_id="m1", harness="copilot", decision_id="d2", file_path="b.py"))
    assert out.outcome == "contributed"
    assert len(joined(run)) == 2


@pytest.mark.parametrize(
    "field,other",
    [
        ("accepted", False),
        ("explicit", False),
        ("interaction_mode", "inline"),
        ("occurred_at", "2026-01-01T10:00:01Z"),
    ],
)
def test_each_key_field_distinguishes_decisions(field: str, other: object) -> None:
    run = Run()
    run.msg(assistant(message_id="m1"))
    run.dec(decision(call_id="m1"))
    out = run.dec(decision(call_id="m1", decision_id="d2", **{field: other}))
    assert out.outcome == "contributed"


def test_retention_observations_at_different_delays_are_distinct_rows() -> None:
    run = Run()
    run.msg(assistant(message_id="m1"))
    for i, delay in enumerate([1000, 60000, None]):
        out = run.dec(
            decision(
                call_id="m1",
                harness="pi",
                decision_id=f"d{i}",
                edit_retention_score=0.5,
                observation_delay_ms=delay,
            )
        )
        assert out.outcome == "contributed"
    again = run.dec(
        decision(
            call_id="m1",
            harness="pi",
            decision_id="dx",
            edit_retention_score=0.9,
            observation_delay_ms=60000,
        )
    )
    assert again.outcome == "duplicate"
    assert len(joined(run)) == 3


def test_claude_code_without_call_id_uses_the_general_key() -> None:
    run = Run()
    run.dec(decision(call_id=None, file_path="a.py"))
    out = run.dec(decision(call_id=None, decision_id="d2", file_path="b.py"))
    assert [o.outcome for o in run.outputs] == ["dead_lettered", "dead_lettered"]
    assert out.dead_letters[0]["reason"] == "unattributable_decision"


def test_codex_resend_without_file_is_a_duplicate_of_the_stored_row() -> None:
    run = Run()
    run.msg(assistant(message_id="m1", tool_calls=[tool_call("call_9")]))
    run.dec(decision(call_id="call_9", harness="codex", file_path="src/a.py"))
    out = run.dec(decision(call_id="call_9", harness="codex", decision_id="d2", file_path=""))
    assert out.outcome == "duplicate"
    assert [d["file_path"] for d in joined(run)] == ["src/a.py"]


def test_codex_pathless_row_without_sibling_is_a_real_decision() -> None:
    run = Run()
    run.msg(assistant(message_id="m1", tool_calls=[tool_call("call_9")]))
    out = run.dec(decision(call_id="call_9", harness="codex", file_path=""))
    assert out.outcome == "contributed"
    other = run.dec(
        decision(call_id="call_9", harness="codex", decision_id="d2", file_path="", accepted=False)
    )
    assert other.outcome == "contributed"
    assert len(joined(run)) == 2


def test_codex_sibling_must_match_every_key_field() -> None:
    run = Run()
    run.msg(assistant(message_id="m1", tool_calls=[tool_call("call_9")]))
    run.dec(decision(call_id="call_9", harness="codex", file_path="src/a.py"))
    out = run.dec(
        decision(
            call_id="call_9",
            harness="codex",
            decision_id="d2",
            file_path="",
            occurred_at="2026-01-01T10:00:05Z",
        )
    )
    assert out.outcome == "contributed"


def test_redelivery_of_a_dead_lettered_decision_is_a_duplicate() -> None:
    run = Run()
    run.dec(decision(call_id=None))
    out = run.dec(decision(call_id=None, decision_id="d-again"))
    assert out.outcome == "duplicate"
    assert len(run.dead_letters) == 1


@pytest.mark.parametrize("expiry", ["sweep", "next record"])
def test_collapse_entries_expire_with_their_session(expiry: str) -> None:
    run = Run()
    run.dec(decision(call_id="m1", decision_id="d1"))  # waits for its turn
    collapse = run.pipeline.store.collapse
    assert collapse._first  # type: ignore[attr-defined]
    run.now += run.policy.session_ttl_seconds + 1
    if expiry == "sweep":
        run.sweep()
        assert collapse._first == {}  # type: ignore[attr-defined]
    # The session is gone with its entries: the same decision again is a new one.
    out = run.dec(decision(call_id="m1", decision_id="d1-again"))
    assert out.outcome == "contributed"
    entries = collapse._first["s1"]  # type: ignore[attr-defined]
    assert [orjson.loads(first)[0] for first in entries.values()] == ["d1-again"]


def test_a_decision_whose_entry_outlived_its_state_is_applied_when_read_again() -> None:
    # The collapse and the sessions are two changelogs: a worker stopped after writing the
    # entry and before the state left the record unapplied and its entry behind. Read
    # again from the uncommitted offset, it met its own entry: taken for a copy, it was lost.
    run = Run()
    run.msg(assistant(message_id="m1"))
    before_state = run.pipeline.store.get("s1")
    assert before_state is not None
    saved = before_state.to_json()
    offset = run.offset
    run.dec(decision(call_id="m1", decision_id="d1"))
    run.pipeline.store.put(SessionState.from_json(saved))  # the state as the changelog had it
    run.offset = offset  # the same record, read again
    out = run.dec(decision(call_id="m1", decision_id="d1"))
    assert out.outcome == "contributed"
    assert [d["decision_id"] for d in joined(run)] == ["d1"]
    copy = run.dec(decision(call_id="m1", decision_id="d1"))  # a real copy: another record
    assert copy.outcome == "duplicate"
