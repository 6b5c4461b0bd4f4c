"""SPEC §3: redelivered decisions collapse by natural key; the first copy wins."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from stream_app.core.policy import Policy
from stream_app.core.session import SessionState
from tests.factories import ORG, Run, assistant, decision, tool_call


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


@pytest.mark.parametrize("expiry", ["tick", "next record"])
def test_collapse_entries_expire_with_their_session(expiry: str) -> None:
    run = Run()
    run.dec(decision(call_id="m1", decision_id="d1"))  # waits for its turn
    collapse = run.pipeline.store.collapse
    assert collapse._first  # type: ignore[attr-defined]
    run.now += run.policy.session_ttl_seconds + 1
    if expiry == "tick":
        run.tick()
        assert collapse._first == {}  # type: ignore[attr-defined]
    # The session is gone with its entries: the same decision again is a new one.
    out = run.dec(decision(call_id="m1", decision_id="d1-again"))
    assert out.outcome == "contributed"
    entries = collapse._first["s1"]  # type: ignore[attr-defined]
    # Its natural key and its decision_id, each naming the new copy.
    assert [orjson.loads(first)[0] for first in entries.values()] == ["d1-again"] * 2


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


# -- arrival order: the Codex pair, and one act per decision_id ------------------------

CODEX_TURN = assistant(message_id="m1", tool_calls=[tool_call("call_9")])
WITH_PATH = decision(call_id="call_9", harness="codex", decision_id="d-path", file_path="a.py")


def fed(records: list[tuple[str, dict[str, Any]]]) -> Run:
    run = Run()
    for kind, value in records:
        run.feed(kind, value)
    return run


def around(turn: dict[str, Any], decisions: list[dict[str, Any]], at: int) -> list[Any]:
    """The decisions in order, with the turn's message before the ``at``-th of them."""
    records: list[tuple[str, dict[str, Any]]] = [("decisions", d) for d in decisions]
    records.insert(at, ("messages", turn))
    return records


def waiting(run: Run) -> list[str]:
    state = run.pipeline.store.get("s1")
    return [] if state is None else [d.decision["decision_id"] for d in state.waiting]


@pytest.mark.parametrize("at", [0, 1, 2], ids=["turn first", "turn between", "turn last"])
@pytest.mark.parametrize("resend_id", ["d-path", "d-resend"])
@pytest.mark.parametrize("path_first", [True, False], ids=["path first", "pathless first"])
def test_a_codex_resend_collapses_into_the_copy_with_its_path_in_either_order(
    path_first: bool, resend_id: str, at: int
) -> None:
    # The pathless resend used to collapse only when the copy with the path came first; in
    # the other order (a detour, a producer retry) the turn carried both.
    pathless = WITH_PATH | {"decision_id": resend_id, "file_path": ""}
    pair = [WITH_PATH, pathless] if path_first else [pathless, WITH_PATH]
    run = fed(around(CODEX_TURN, pair, at))
    assert [d["file_path"] for d in joined(run)] == ["a.py"]
    assert [d["decision_id"] for d in joined(run)] == ["d-path"]
    assert run.counts["duplicate:decision"] == 1
    assert run.dead_letters == [] and waiting(run) == []
    # Later copies of either, under new ids, are duplicates and emit nothing.
    before = len(run.revisions)
    for copy in (pathless | {"decision_id": "again-1"}, WITH_PATH | {"decision_id": "again-2"}):
        assert run.dec(copy).outcome == "duplicate"
    assert len(run.revisions) == before


def test_a_codex_resend_already_on_an_emitted_turn_is_taken_out_in_one_revision() -> None:
    run = Run()
    run.msg(CODEX_TURN)
    run.dec(WITH_PATH | {"decision_id": "d-resend", "file_path": ""})
    out = run.dec(WITH_PATH)
    assert out.outcome == "contributed" and out.counts["duplicate:decision"] == 1
    (revision,) = out.turns  # the resend out and the copy with its path in, at once
    assert [d["decision_id"] for d in revision.turn["decisions"]] == ["d-path"]
    assert [r.revision for r in out.turns] == [3]


def test_codex_resends_of_one_act_at_several_delays_all_give_way_to_the_copy_with_a_path() -> None:
    resends = [
        WITH_PATH | {"decision_id": f"r{delay}", "file_path": "", "observation_delay_ms": delay}
        for delay in (1000, 2000)
    ]
    for records in (
        [("messages", CODEX_TURN), *[("decisions", d) for d in [*resends, WITH_PATH]]],
        [("messages", CODEX_TURN), *[("decisions", d) for d in [WITH_PATH, *resends]]],
    ):
        run = fed(records)
        assert [d["decision_id"] for d in joined(run)] == ["d-path"]
        assert run.counts["duplicate:decision"] == 2


ACCEPT = decision(call_id="m1", decision_id="d1", accepted=True)
REJECT = decision(call_id="m1", decision_id="d1", accepted=False)


def reasons(run: Run) -> list[tuple[str, bool]]:
    """Each dead letter's reason and the ``accepted`` of the decision it carries."""
    return sorted((d["reason"], orjson.loads(d["value"])["accepted"]) for d in run.dead_letters)


@pytest.mark.parametrize("at", [0, 1, 2], ids=["turn first", "turn between", "turn last"])
@pytest.mark.parametrize("accept_first", [True, False], ids=["accept first", "reject first"])
def test_one_decision_id_for_two_acts_joins_no_turn_and_both_copies_are_dead_lettered(
    accept_first: bool, at: int
) -> None:
    # A stable id names one act. Both copies used to end up on the turn; which of an accept
    # and a reject is true is not the processor's to guess, so neither joins.
    pair = [ACCEPT, REJECT] if accept_first else [REJECT, ACCEPT]
    run = fed(around(assistant(message_id="m1"), pair, at))
    assert joined(run) == [] and waiting(run) == []
    assert reasons(run) == [("ambiguous_decision", False), ("ambiguous_decision", True)]
    for letter in run.dead_letters:
        assert "decision_id: 'd1'" in letter["error"] and "session 's1'" in letter["error"]
    assert run.counts["dead_letter:ambiguous_decision"] == 2
    assert run.counts["duplicate:decision"] == 0


def test_a_conflicted_id_stays_conflicted_and_copies_of_either_act_are_duplicates() -> None:
    run = fed(
        [("messages", assistant(message_id="m1")), ("decisions", ACCEPT), ("decisions", REJECT)]
    )
    third = run.dec(ACCEPT | {"interaction_mode": "inline"})  # a third act under the id
    assert third.outcome == "dead_lettered"
    assert third.dead_letters[0]["reason"] == "ambiguous_decision"
    for copy in (ACCEPT | {"decision_id": "d1-retry"}, REJECT | {"captured_at": None}):
        assert run.dec(copy).outcome == "duplicate"
    assert joined(run) == []
    assert len(run.dead_letters) == 3


@pytest.mark.parametrize("unattributable_first", [True, False])
def test_an_id_conflict_with_an_unattributable_copy_ends_alike_in_either_order(
    unattributable_first: bool,
) -> None:
    unattributable = REJECT | {"call_id": None}
    pair = [unattributable, ACCEPT] if unattributable_first else [ACCEPT, unattributable]
    run = fed(around(assistant(message_id="m1"), pair, 0))
    assert joined(run) == []
    assert reasons(run) == [("ambiguous_decision", True), ("unattributable_decision", False)]


def test_one_decision_id_in_two_sessions_is_two_decisions() -> None:
    run = Run()
    for session in ("s1", "s2"):
        run.msg(assistant(session, message_id="m1"))
    run.dec(ACCEPT)
    run.dec(decision("s2", call_id="m1", decision_id="d1", accepted=False))
    assert run.dead_letters == []
    assert len(joined(run)) == 1  # the final() of m1 is one of the two; each has its own
    assert [o.outcome for o in run.outputs[-2:]] == ["contributed", "contributed"]


def test_two_pathless_resends_under_one_id_at_different_delays_are_two_acts() -> None:
    resend = WITH_PATH | {"file_path": "", "observation_delay_ms": 1000}
    run = fed([("messages", CODEX_TURN), ("decisions", resend)])
    out = run.dec(resend | {"observation_delay_ms": 2000})
    assert out.outcome == "dead_lettered"
    assert joined(run) == []
    assert [d["reason"] for d in run.dead_letters] == ["ambiguous_decision"] * 2


@pytest.mark.parametrize("accept_first", [True, False])
def test_a_second_act_under_an_id_takes_no_room_it_is_a_conflict_not_a_session_limit(
    accept_first: bool,
) -> None:
    run = Run(policy=Policy(org_id=ORG, max_waiting_decisions=1))
    for d in [ACCEPT, REJECT] if accept_first else [REJECT, ACCEPT]:
        run.dec(d)  # both wait: no turn m1 yet
    assert reasons(run) == [("ambiguous_decision", False), ("ambiguous_decision", True)]
    assert waiting(run) == []


def test_paths_that_redact_alike_stay_distinct_decisions() -> None:
    """Issue 49 item 1: one Codex apply_patch, four decisions on four files whose paths look
    like credentials to redaction. Redaction may change what a path reads as, never which
    decisions are the same: the natural key is made of the path as it came."""
    paths = [
        "scripts/sk-openai-migration-guide.md",
        "scripts/sk-anthropic-migration-guide.md",
        "cache/key-5d41402abc4b2a76b9719d911017c592.json",
        "cache/key-7d793037a0760186574b0282f2f435e7.json",
    ]
    run = Run()
    run.msg(assistant(message_id="m1", tool_calls=[tool_call("call-1", "apply_patch")]))
    for n, path in enumerate(paths):
        out = run.dec(
            decision(call_id="call-1", decision_id=f"d{n}", harness="codex", file_path=path)
        )
        assert out.outcome == "contributed", path
    assert [d["decision_id"] for d in joined(run)] == ["d0", "d1", "d2", "d3"]
    assert run.counts["duplicate:decision"] == 0
    # A copy of one of them, under a regenerated id, is still a duplicate.
    again = decision(call_id="call-1", decision_id="d0-again", harness="codex", file_path=paths[0])
    assert run.dec(again).outcome == "duplicate"
