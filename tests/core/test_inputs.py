"""The input kinds are a seam (``core/inputs.py``): listed there once, and everything that
deals with inputs by kind follows the list, so a third input is one entry and its decoder."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import orjson
import pytest

from stream_app.cli import replay as replay_command
from stream_app.config import Settings
from stream_app.core import inputs
from stream_app.core.counts import Count
from stream_app.core.inputs import INPUTS, InputKind
from stream_app.core.policy import Policy
from stream_app.core.records import SessionInput, SourceRecord
from stream_app.ingest.publish import check
from stream_app.models.json_types import Json
from stream_app.models.turn import TurnDict
from tests.factories import ORG, decision, message

PACKAGE = Path(__file__).resolve().parents[2] / "stream_app"
REGISTRY = PACKAGE / "core" / "inputs.py"

# A kind's name as a JSON value's field, not as a kind: a subscript or a dict's key naming
# it is the field (``turn["decisions"]``, a chat example's ``{"messages": ...}``).
FIELDS = {
    "decisions": "a Turn's decisions (models/turn.TurnDict)",
    "messages": "a chat example's messages (the chat formats of datasets/)",
}
# Other uses of a kind's name that are no input kind, each with what it is.
ALLOWED = {
    ("core/waiting.py", "messages"): "what waits in a session: messages for their finishing one",
    ("core/waiting.py", "decisions"): "what waits in a session: decisions for their turn",
    ("cli/dev.py", "messages"): "the kind of a worker's waiting_too_long line (core/waiting.py)",
    ("app.py", "decisions"): "the collapse table, named in its changelog topic's name",
    ("datasets/files.py", "messages"): "a chat example's column (a Parquet field)",
}


def _uses(tree: ast.Module) -> list[tuple[int, str, str]]:
    """Every place a module names an input kind: (line, what, the name)."""
    names = set(INPUTS)
    words = "|".join(map(re.escape, names))
    in_text = re.compile(rf'"topic":\s*"({words})"|records:({words})\b', re.IGNORECASE)
    settings = {kind.setting: kind.name for kind in INPUTS.values()}
    variables = {kind.variable: kind.name for kind in INPUTS.values()}
    fields: set[int] = set()  # ids of the constants that are a JSON value's field
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            fields.add(id(node.slice))
        elif isinstance(node, ast.Dict):
            fields.update(id(key) for key in node.keys if key is not None)
    found: list[tuple[int, str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if text in names and not (id(node) in fields and text in FIELDS):
                found.append((node.lineno, "the name", text))
            for match in in_text.finditer(text):
                found.append((node.lineno, "in text", match.group(1) or match.group(2)))
            for variable, name in variables.items():
                if variable in text:
                    found.append((node.lineno, variable, name))
        elif isinstance(node, ast.Attribute) and node.attr in settings:
            found.append((node.lineno, f".{node.attr}", settings[node.attr]))
        elif isinstance(node, ast.Attribute | ast.Name):
            named = node.attr if isinstance(node, ast.Attribute) else node.id
            if named.upper() in {f"RECORDS_{n.upper()}" for n in names}:
                found.append((node.lineno, named, named))
    return found


def test_the_registry_is_the_one_place_the_input_kinds_are_listed() -> None:
    """No module but ``core/inputs.py`` names an input kind: a kind named elsewhere is a
    place a third input would have to be added by hand. (``config.py`` declares each
    kind's topic setting, its default and documentation: ``Settings.topic_of`` reads it.)"""
    assert set(FIELDS) <= set(INPUTS) and "decisions" in TurnDict.__annotations__
    named: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == REGISTRY:
            continue
        where = str(path.relative_to(PACKAGE))
        for line, what, name in _uses(ast.parse(path.read_text(), str(path))):
            if (where, name) not in ALLOWED:
                named.append(f"{where}:{line}: {what} ({name})")
    assert not named, (
        "input kinds named outside core/inputs.py (use INPUTS, or a kind's constant there): "
        + "; ".join(named)
    )


def test_each_kind_has_its_setting_and_its_count() -> None:
    settings = Settings(org_id=ORG)
    assert list(settings.input_topics().values()) == list(INPUTS)
    for kind in INPUTS.values():
        assert settings.topic_of(kind.name) == getattr(settings, kind.setting)
        assert kind.setting in Settings.model_fields
        assert kind.read == f"records:{kind.name}" and kind.read not in set(Count)
    assert list(INPUTS.values()) == [inputs.MESSAGES, inputs.DECISIONS]
    assert inputs.names() == '"messages"|"decisions"'


def _pings(doc: Json, record: SourceRecord, counts: Counter[Count], policy: Policy) -> SessionInput:
    """A third kind's decoder, for the test: a ping is a decision under another name."""
    return inputs.DECISIONS.decode(doc, record, counts, policy)


def test_a_third_input_is_one_entry_and_its_decoder(monkeypatch: pytest.MonkeyPatch) -> None:
    """With one entry more (and its topic setting), a line of the new kind is read, decoded,
    published to its topic, counted and summed up, with no other change."""
    ping = InputKind("pings", "topic_dlq", _pings, "ping")  # an existing setting, for the test
    monkeypatch.setitem(INPUTS, ping.name, ping)
    settings = Settings(org_id=ORG)
    assert settings.input_topics()[settings.topic_dlq] == "pings"
    a_decision = decision("s1", "c1")
    lines = [
        orjson.dumps({"topic": "messages", "key": None, "value": message("s1")}),
        orjson.dumps({"topic": "pings", "key": None, "value": a_decision}),
    ]
    (sent_message, sent_ping) = check(lines, settings)
    assert sent_ping.kind == "pings" and sent_ping.topic == settings.topic_dlq  # type: ignore[union-attr]
    assert sent_message.kind == "messages"  # type: ignore[union-attr]

    counts = replay_command.replay(lines, settings, _Sink(), _Sink())
    assert counts["records:pings"] == 1 and counts["records_read"] == 2
    assert "1 message, 0 decisions, 1 ping read" in replay_command.summary(counts)


class _Sink:
    def write(self, data: bytes) -> int:
        return len(data)
