"""SPEC §1: a turn's record key names its session and its inference call, unambiguously."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stream_app.core.records import turn_key
from tests.contracts import assert_valid_turn_key, validator
from tests.factories import Run, assistant, decision, message, tool_call


def test_two_sessions_reusing_a_message_id_give_two_keys() -> None:
    run = Run()
    run.msg(message("sess-A", text="from A", message_id="A-u"))
    run.msg(assistant("sess-A", "answer A", message_id="A-final", tool_calls=[tool_call("t1")]))
    run.msg(message("sess-B", text="from B", message_id="B-u"))
    run.msg(assistant("sess-B", "answer B", message_id="A-final", tool_calls=[tool_call("t1")]))
    run.dec(decision("sess-A", "t1"))  # a late decision re-emits sess-A's turn only
    keys = [r.key for out in run.outputs for r in out.turns]
    assert keys == ['["sess-A","A-final"]', '["sess-B","A-final"]', '["sess-A","A-final"]']
    # what the compacted turn topic keeps: the latest revision of each key
    compacted = {r.key_bytes: r.turn for out in run.outputs for r in out.turns}
    assert [t["completion"] for t in compacted.values()] == ["answer A\na.py", "answer B\na.py"]
    assert [len(t["decisions"]) for t in compacted.values()] == [1, 0]


def test_the_key_is_the_json_pair_and_the_session_is_a_header() -> None:
    run = Run()
    (revision,) = run.msg(assistant("s\x00:\"'é", message_id='m:"1\\')).turns
    assert revision.key_bytes == orjson.dumps(["s\x00:\"'é", 'm:"1\\'])
    assert revision.key.encode() == revision.key_bytes
    assert orjson.loads(revision.key_bytes) == ["s\x00:\"'é", 'm:"1\\']
    assert revision.headers[0] == ("session_id", "s\x00:\"'é".encode())
    assert [name for name, _ in revision.headers] == ["session_id", "revision", "final_after"]


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (("a:b", "c"), ("a", "b:c")),
        (("a\x00b", "c"), ("a", "b\x00c")),
        (('a","b', "c"), ("a", 'b","c')),
        (("a", "b:seq:1"), ("a:b", "seq:1")),
        (("a\\", "b"), ("a", "\\b")),
    ],
)
def test_ids_that_concatenate_alike_still_give_distinct_keys(
    a: tuple[str, str], b: tuple[str, str]
) -> None:
    assert turn_key(*a) != turn_key(*b)
    assert orjson.loads(turn_key(*a)) == list(a)


ids = st.text(min_size=1, max_size=12) | st.sampled_from(["", ":", '"', "\\", "\x00", "a:b", "é"])


@given(st.tuples(ids, ids), st.tuples(ids, ids))
def test_keys_of_distinct_pairs_never_collide(a: tuple[str, str], b: tuple[str, str]) -> None:
    assert (turn_key(*a) == turn_key(*b)) == (a == b)
    assert orjson.loads(turn_key(*a)) == list(a)
    assert validator("turn-key.v1.json").is_valid(list(a)) == all(a)


@given(st.text(min_size=1, max_size=20), st.text(min_size=1, max_size=20))
def test_every_emitted_key_is_valid_and_names_its_session_and_call(
    session: str, message_id: str
) -> None:
    run = Run()
    (revision,) = run.msg(assistant(session, message_id=message_id)).turns
    assert_valid_turn_key(revision.key_bytes, revision.turn, session)


def test_a_producer_id_in_the_derived_form_cannot_take_another_turns_key() -> None:
    """Issue 49 item 3: a finishing message whose messageId is ``s2:seq:4``, then one with no
    id and sequence 4: the derived id equalled the producer's, the second turn was never
    emitted and its user message waited forever. A producer's id in the derived form of its
    session is refused (a dead letter naming the field), so the two never meet."""
    run = Run()
    out = run.msg(assistant("s2", "first", message_id="s2:seq:4"))
    assert out.turns == []
    (letter,) = out.dead_letters
    assert letter["reason"] == "schema" and "message.messageId" in letter["error"]
    run.msg(message("s2", text="the question", sequence=3))
    later = run.msg(message("s2", "ROLE_ASSISTANT", "second", sequence=4, finish="stop"))
    (revision,) = later.turns
    assert revision.turn["inference_call_id"] == "s2:seq:4"
    assert [m["parts"][0]["content"] for m in revision.turn["new_messages"]] == [
        "the question",
        "second",
    ]


@pytest.mark.parametrize(
    "message_id",
    ["s2:seq:04", "s2:seq:+4", "s2:sha256:ABCDEF0123456789", "s2:sha256:0123", "s1:seq:4", "seq:4"],
)
def test_ids_not_in_a_derived_form_of_the_session_are_kept(message_id: str) -> None:
    run = Run()
    (revision,) = run.msg(assistant("s2", message_id=message_id)).turns
    assert revision.turn["inference_call_id"] == message_id


def test_a_message_that_finishes_nothing_may_use_any_id() -> None:
    run = Run()
    assert run.msg(message("s2", message_id="s2:seq:4")).dead_letters == []
