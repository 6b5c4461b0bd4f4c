"""No credential of a decision's ``raw`` is readable anywhere the core writes it (SPEC §3).

Each shape of the corpus is put in a decision's ``raw`` in every place it can sit (a string
value, free text, a nested value, a key name, JSON text, under its own key), and that
decision is driven through every path of the core: waiting for its turn, joined when the
turn arrives, joined late (the turn emitted again), unattributable, joined on a guess and
then ambiguous, left waiting until its session expires (orphaned). Read back: every emitted
Turn, the state of every session after every step (``/sessions/{id}`` serves it and the
changelog stores it), every dead letter written from state, and the session input that
crosses the repartition topic.

With ``STREAM_APP_REDACT_CONTENT`` the same holds for messages: each shape is put in every
part a message can carry and read back from the same places; off, content stays verbatim.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import orjson
import pytest

from stream_app.core.policy import Policy
from stream_app.core.records import SourceRecord, dump_input
from stream_app.core.redaction import REDACTED
from stream_app.state import entries
from tests.core.secret_corpus import (
    ORDINARY_RAW,
    ORDINARY_TEXT,
    SHAPES,
    Shape,
    leaks,
    placements,
)
from tests.factories import ORG, Run, assistant, decision, message, tool_call

POLICY = Policy(org_id=ORG, session_ttl_seconds=600, late_decision_window_seconds=300)
FROM_STATE = {"unattributable_decision", "ambiguous_decision", "orphaned_decision"}


def what_the_state_holds(run: Run, step: str) -> list[tuple[str, bytes]]:
    """Every session's state and changelog records after ``step``, each named."""
    held: list[tuple[str, bytes]] = []
    for sid in run.pipeline.store.session_ids():
        session = run.pipeline.store.get(sid)
        assert session is not None
        held.append((f"state of {sid} after {step}", session.to_json()))
        head, items, bodies = entries.records(session)
        for key, value in [(sid.encode(), head), *items, *bodies]:
            held.append((f"changelog of {sid} after {step}", key + value))
    return held


def everything_written(
    raw: dict[str, Any], file_path: str = "src/a.py"
) -> tuple[Run, list[tuple[str, bytes]]]:
    """The run, and what it wrote where, with ``raw`` as every decision's ``raw`` and
    ``file_path`` as every decision's ``file_path``."""
    run = Run(policy=POLICY)
    path = {"file_path": file_path}
    written: list[tuple[str, bytes]] = []

    def state(step: str) -> None:
        written.extend(what_the_state_holds(run, step))

    early = decision(call_id="toolu_1", decision_id="early", raw=raw, **path)
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
    run.dec(decision(call_id="a1", harness="pi", decision_id="late", raw=raw, **path))
    state("a late decision joins an emitted turn")
    run.dec(decision(call_id=None, harness="pi", decision_id="none", raw=raw, **path))
    state("an unattributable decision")
    run.dec(
        decision(
            call_id="shared",
            decision_id="guess",
            occurred_at="2026-01-01T10:05:00Z",
            raw=raw,
            **path,
        )
    )
    run.msg(assistant(message_id="a2", tool_calls=[tool_call("shared")]))
    state("a decision joins on a guess")
    run.msg(assistant(message_id="a3", tool_calls=[tool_call("shared")]))
    state("a second turn answers to the same id")
    run.dec(decision(session="s2", call_id="never", decision_id="orphan", raw=raw, **path))
    state("a decision waits in another session")
    run.now += POLICY.session_ttl_seconds + 1
    run.tick()

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


# -- file_path: a credential in a path goes on the way in, as one in ``raw`` does ---------


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s.category}: {s.name}")
def test_no_credential_of_a_file_path_is_readable_anywhere(shape: Shape) -> None:
    """Redacted before the natural key is made: not in a Turn, state, the collapse table
    (a session's state holds it), a dead letter or the repartition record. The shape is
    the whole path, and a token (one word) is also a directory of one."""
    token = shape.text == shape.secret and len(shape.text.split()) == 1
    paths = [shape.text, *([f"uploads/{shape.text}/app.py"] if token else [])]
    for path in paths:
        run, written = everything_written({"note": "x"}, file_path=path)
        assert [where for where, blob in written if leaks(shape.secret, blob)] == [], path
        emitted = {d["file_path"] for t in run.revisions for d in t["decisions"]}
        assert emitted and all(REDACTED in p for p in emitted)


def test_a_file_path_without_a_credential_reaches_the_turn_unchanged() -> None:
    paths = [
        "src/auth/token_service.py",
        "config/secrets.example.yml",
        "~/.ssh/id_ed25519",
        "C:\\Users\\ana\\.aws\\credentials",
        "docs/How%20to%20rotate%20a%20token.md",
        "src/\u0441\u0435\u0440\u0432\u0438\u0441/pass_through.py",
        "",
    ]
    for path in paths:
        run, _ = everything_written({"note": "x"}, file_path=path)
        assert {d["file_path"] for t in run.revisions for d in t["decisions"]} == {path}


# -- STREAM_APP_REDACT_CONTENT: the same rules on messages' content -----------------------

CONTENT = replace(POLICY, redact_content=True)


def content_written(shape: Shape, policy: Policy) -> tuple[Run, list[tuple[str, bytes]]]:
    """The run, and what it wrote where, with ``shape`` in every part a message can have:
    text, reasoning, tool-call arguments (as JSON text and as an object), tool results (as
    a string and as JSON); through a turn that waits for its tool result, its completion,
    the final turn, and the session's expiry."""
    run = Run(policy=policy)
    written: list[tuple[str, bytes]] = []
    raw = {where.replace(" ", "_"): payload for where, payload in placements(shape).items()}
    text = shape.text

    def state(step: str) -> None:
        written.extend(what_the_state_holds(run, step))

    def send(value: dict[str, Any], step: str) -> None:
        record = SourceRecord("messages", "llm.messages", 0, run.offset, None, orjson.dumps(value))
        item, out = run.pipeline.decode(record)
        assert item is not None, out.dead_letters
        written.append((f"repartition record of {step}", dump_input(item)))
        run.msg(value)
        state(step)

    send(message(message_id="u1", text=text), "the user's message")
    send(
        assistant(
            message_id="a1",
            finish="tool_calls",
            content=[{"reasoning": text}, {"text": text}],
            tool_calls=[
                tool_call("toolu_1", "bash", orjson.dumps({"command": text, **raw}).decode()),
                tool_call("toolu_2", "edit_file", {"command": text, **raw}),
            ],
        ),
        "a turn with tool calls",
    )
    send(
        message(
            role="ROLE_TOOL",
            message_id="t1",
            text=None,
            content=[
                {"toolResult": {"toolCallId": "toolu_1", "result": text}},
                {"toolResult": {"toolCallId": "toolu_2", "result": raw}},
            ],
        ),
        "the tool results",
    )
    send(assistant(message_id="a2", text=text), "the final answer")
    run.now += policy.session_ttl_seconds + 1
    run.tick()
    written += [(f"turn {t['inference_call_id']}", orjson.dumps(t)) for t in run.revisions]
    written += [(f"dead letter {d['reason']}", orjson.dumps(d)) for d in run.dead_letters]
    return run, written


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s.category}: {s.name}")
def test_with_redact_content_no_credential_of_a_message_is_readable(shape: Shape) -> None:
    run, written = content_written(shape, CONTENT)
    assert len(run.final()) == 2 and len(run.pipeline.store) == 0  # both turns; expired
    assert [where for where, blob in written if leaks(shape.secret, blob)] == []
    assert REDACTED in orjson.dumps(run.revisions[-1]["new_messages"]).decode()


@pytest.mark.parametrize("shape", SHAPES[::10], ids=lambda s: f"{s.category}: {s.name}")
def test_without_redact_content_messages_are_kept_verbatim(shape: Shape) -> None:
    """Off by default: the contract redacts ``raw`` only, and content is the dataset."""
    assert POLICY.redact_content is False
    _, written = content_written(shape, POLICY)
    turns = [blob for where, blob in written if where.startswith("turn ")]
    assert all(leaks(shape.secret, blob) for blob in turns)
    assert REDACTED not in b"".join(turns).decode()


def test_with_redact_content_ordinary_content_is_kept_exactly() -> None:
    ordinary = Shape("ordinary", "ordinary", "\n".join(ORDINARY_TEXT), "", "raw", ORDINARY_RAW)
    on, _ = content_written(ordinary, CONTENT)
    off, _ = content_written(ordinary, POLICY)
    assert on.revisions == off.revisions


def test_with_redact_content_the_record_a_dead_letter_would_carry_is_redacted_and_valid() -> None:
    """A message in state keeps its record for a later dead letter (a session limit): with
    content redacted, that copy holds the redacted content, in a form that decodes again."""
    shape = next(s for s in SHAPES if s.name == "rsa key as lines")
    raw = {where.replace(" ", "_"): payload for where, payload in placements(shape).items()}
    value = assistant(
        message_id="a1",
        content=[{"text": shape.text}, {"image": {"uri": "s3://b/k.png"}}],
        tool_calls=[tool_call("c1", "bash", orjson.dumps(raw).decode())],
    )
    record = SourceRecord("messages", "llm.messages", 0, 7, None, orjson.dumps(value))
    kept_as_sent, _ = Run(policy=POLICY).pipeline.decode(record)
    redacted, _ = Run(policy=CONTENT).pipeline.decode(record)
    assert kept_as_sent is not None and kept_as_sent.origin.value is not None
    assert redacted is not None and redacted.origin.value is not None
    assert leaks(shape.secret, kept_as_sent.origin.value)
    assert not leaks(shape.secret, redacted.origin.value)
    kept = orjson.loads(redacted.origin.value)
    assert {k: kept["message"][k] for k in ("messageId", "finishReason", "role")} == {
        "messageId": "a1",
        "finishReason": "stop",
        "role": "ROLE_ASSISTANT",
    }
    again, out = Run(policy=CONTENT).pipeline.decode(
        SourceRecord("messages", "llm.messages", 0, 8, None, redacted.origin.value.encode())
    )
    assert again is not None, out.dead_letters
    assert again.message == redacted.message
