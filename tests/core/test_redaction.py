"""SPEC §3 Basic redaction: credentials go, other content stays."""

from __future__ import annotations

import pytest

from stream_app.core.redaction import REDACTED, redact, redact_text


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
