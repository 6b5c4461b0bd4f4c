"""Issue 43 item 1: nothing a producer got wrong waits in silence.

A misspelt field is named with the field it most likely meant (an error for a decision,
whose contract has no room for extra fields; a warning for a message event, whose unknown
fields are ignored); publish and replay end with a warning naming the sessions whose last
messages no finishing message closes, and replay the sessions whose decisions wait for a
turn that did not come.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from stream_app.config import Settings
from stream_app.core.fields import near_misses
from stream_app.ingest.publish import Outgoing, check
from tests.factories import ORG, assistant, decision, message
from tests.test_replay import replay


def _line(topic: str, value: Any) -> bytes:
    return orjson.dumps({"topic": topic, "key": None, "value": value})


def _misspelt(session: str) -> dict[str, Any]:
    """An assistant message whose finishReason is misspelt: it closes nothing."""
    event = assistant(session, message_id=f"{session}-a1")
    event["message"]["finsihReason"] = event["message"].pop("finishReason")
    return event


def test_a_misspelt_decision_field_is_named_with_the_one_it_stands_for() -> None:
    d = decision()
    d["occured_at"] = d.pop("occurred_at")
    (rejected,) = check([_line("decisions", d)], Settings(org_id=ORG))
    assert not isinstance(rejected, Outgoing)
    assert rejected.reason == "schema"
    assert rejected.error.startswith(
        "occured_at is not a field of DeveloperDecision; did you mean occurred_at?"
    ), rejected.error


def test_a_near_miss_of_a_message_field_is_a_warning_and_other_extras_are_not() -> None:
    event = _misspelt("s1")
    event["message"]["traceId"] = "t-1"  # unknown and like nothing: ignored, as SPEC §2 says
    event["conversationID"] = "s1"
    assert near_misses(event) == [
        "conversationID is not a field of LLMMessagePublishedEvent; did you mean conversationId?",
        "finsihReason is not a field of Message; did you mean finishReason?",
    ]
    assert near_misses(assistant("s1", message_id="a1")) == []
    (sent,) = check([_line("messages", event)], Settings(org_id=ORG))
    assert isinstance(sent, Outgoing)
    assert not sent.closes and len(sent.warnings) == 2


def test_the_example_session_warns_of_nothing() -> None:
    example = Path(__file__).resolve().parent.parent / "examples" / "session.jsonl"
    checked = list(check(example.read_bytes().splitlines(), Settings(org_id="default")))
    assert [w for c in checked if isinstance(c, Outgoing) for w in c.warnings] == []


def test_replay_ends_naming_sessions_left_waiting(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    lines = [
        _line("messages", message("open", text="please fix")),
        _line("messages", _misspelt("open")),
        _line("messages", message("done", text="hi")),
        _line("messages", assistant("done", message_id="done-a1")),
        _line("decisions", decision("waits", call_id="never")),
    ]
    source.write_bytes(b"\n".join(lines) + b"\n")
    done = replay(tmp_path, source, "--org-id", ORG)
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if ": warning: " in line]
    assert warnings == [
        "stream-app replay: warning: 1 session ends with messages that no finishing message "
        "closes (an assistant message with finishReason): open",
        "stream-app replay: warning: 1 session holds decisions waiting for a turn that has "
        "not come: waits",
    ]
