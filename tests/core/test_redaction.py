"""SPEC §3 Basic redaction: credentials go, other content stays."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from stream_app.core.redaction import REDACTED, redact, redact_text
from tests.core import secret_corpus
from tests.core.secret_corpus import (
    CATEGORIES,
    ORDINARY_RAW,
    ORDINARY_TEXT,
    SHAPES,
    Shape,
    leaks,
    placements,
)


@pytest.mark.parametrize(
    "secret",
    [
        "sk-ant-api03-AbCdEfGhIjKlMnOpQrSt",
        "sk-proj-abcdefghijklmnopqrstuv",
        "AKIAIOSFODNN7EXAMPLE",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuv",
        "xoxb-123456789012-abcdefghij",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----",
    ],
)
def test_credential_looking_values_are_replaced_inside_text(secret: str) -> None:
    assert redact_text(f"before {secret} after") == f"before {REDACTED} after"


def test_bearer_tokens_keep_the_scheme_word() -> None:
    assert redact_text("Authorization: Bearer abc.DEF-123=") == f"Authorization: Bearer {REDACTED}"


def test_passwords_in_urls_keep_user_and_host() -> None:
    assert (
        redact_text("git clone https://ana:s3cr3t@git.example.com/shop.git")
        == f"git clone https://ana:{REDACTED}@git.example.com/shop.git"
    )


@pytest.mark.parametrize(
    "key",
    [
        "password",
        "db_password",
        "Secret",
        "client_secret",
        "token",
        "access_token",
        "githubToken",
        "api_key",
        "apiKey",
        "X-Api-Key",
        "authorization",
        "Authorization",
    ],
)
def test_values_of_secret_named_keys_are_replaced(key: str) -> None:
    assert redact({"outer": {key: {"nested": "anything"}}}) == {"outer": {key: REDACTED}}


@pytest.mark.parametrize("key", ["max_tokens", "tokens_used", "path", "keyboard", "author"])
def test_ordinary_keys_are_kept(key: str) -> None:
    assert redact({key: "value 123"}) == {key: "value 123"}


def test_other_content_and_shape_are_kept() -> None:
    raw = {
        "tool": "edit_file",
        "lines": [1, 2, {"text": "plain words"}],
        "ok": True,
        "score": 0.5,
        "none": None,
        "password": None,
    }
    assert redact(raw) == raw


def test_redaction_does_not_touch_its_input() -> None:
    raw = {"token": "t", "cmd": "sk-abcdefghijklmnopqrstuvwx"}
    redact(raw)
    assert raw == {"token": "t", "cmd": "sk-abcdefghijklmnopqrstuvwx"}


# -- the corpus: every credential shape goes, wherever it sits in ``raw`` ------------------


def test_the_corpus_is_broad_and_its_source_holds_no_token() -> None:
    assert len(SHAPES) >= 60 and len(CATEGORIES) >= 15
    source = Path(secret_corpus.__file__).read_text()
    assert [s.name for s in SHAPES if s.secret in source] == []


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s.category}: {s.name}")
def test_every_shape_is_redacted_wherever_it_sits(shape: Shape) -> None:
    leaked = [
        where
        for where, raw in placements(shape).items()
        if leaks(shape.secret, orjson.dumps(redact(raw)))
    ]
    assert leaked == []


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s.category}: {s.name}")
def test_redacting_again_changes_nothing(shape: Shape) -> None:
    for raw in placements(shape).values():
        once = redact(raw)
        assert redact(once) == once


@pytest.mark.parametrize("text", ORDINARY_TEXT)
def test_ordinary_text_is_kept_exactly(text: str) -> None:
    assert redact_text(text) == text


def test_ordinary_keys_and_values_are_kept_exactly() -> None:
    assert redact(ORDINARY_RAW) == ORDINARY_RAW


def test_only_the_credential_is_cut_out_of_text() -> None:
    text = (
        "curl -u deploy:Pa55word -H 'X-Trace: 42' "
        "'https://api.example.com/v1/items?page=2&api_key=0123456789abcdef'"
    )
    assert redact_text(text) == (
        f"curl -u deploy:{REDACTED} -H 'X-Trace: 42' "
        f"'https://api.example.com/v1/items?page=2&api_key={REDACTED}'"
    )


def test_a_url_password_with_an_at_sign_goes_whole() -> None:
    assert (
        redact_text("postgres://app:p@ss@db.example.com/shop")
        == f"postgres://app:{REDACTED}@db.example.com/shop"
    )


@pytest.mark.parametrize(
    "key", ["passwords", "tokens", "secrets", "db_pass", "db_pw", "creds", "apiKeys", "privKey"]
)
def test_plural_and_abbreviated_names_are_secret(key: str) -> None:
    assert redact({key: ["x1y2z3"]}) == {key: REDACTED}


@pytest.mark.parametrize(
    "raw",
    [
        {"max_tokens": 4096},
        {"tokens": 4096},
        {"usage": {"prompt_tokens": 10, "completion_tokens": 2}},
        {"password_reset": True},
        {"token_type": "bearer"},
    ],
)
def test_values_that_cannot_be_a_credential_are_kept(raw: dict[str, Any]) -> None:
    assert redact(raw) == raw


def test_credentials_used_as_keys_are_replaced_without_losing_a_key() -> None:
    a, b = "ghp_" + "A" * 36, "ghp_" + "B" * 36
    assert redact({a: 1, b: 2, "path": "a.py"}) == {
        REDACTED: 1,
        f"{REDACTED} (2)": 2,
        "path": "a.py",
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("password=Pa55(word", f"password={REDACTED}"),  # a literal, not a call
        ("password=Hunter2(!)", f"password={REDACTED}"),
        ("hooks.slack.com/services/T0/B0/abcdefghijklmnopqrstuvwx", "hooks.slack.com/services/"),
        ("acme.webhook.office.com/webhookb2/ab@cd/IncomingWebhook/ef", "acme.webhook.office.com/"),
    ],
)
def test_credentials_that_look_like_code_or_lack_a_scheme_go(text: str, expected: str) -> None:
    assert redact_text(text).startswith(expected) and REDACTED in redact_text(text)
