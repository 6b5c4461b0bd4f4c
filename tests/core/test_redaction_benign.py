"""What coding agents really see stays exactly as it was (issue 49, 6): the benign corpus
(tests/core/benign_corpus.py), each string as text and as a value of ``raw``."""

from __future__ import annotations

import pytest

from stream_app.core.redaction import redact, redact_text
from tests.core.benign_corpus import BENIGN, GROUPS


def test_the_benign_corpus_is_large_and_made_of_every_group() -> None:
    assert len(BENIGN) >= 400
    assert all(len(group) >= 20 for group in GROUPS.values())


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(text, id=f"{name} {i}")
        for name, group in GROUPS.items()
        for i, text in enumerate(group)
    ],
)
def test_benign_text_is_kept_exactly(text: str) -> None:
    assert redact_text(text) == text


def test_benign_values_are_kept_exactly_in_raw() -> None:
    raw = {"tool_result": {"stdout": BENIGN}, "lines": BENIGN[:50], "note": "\n".join(BENIGN)}
    assert redact(raw) == raw
