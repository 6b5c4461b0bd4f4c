"""SPEC §3 Basic redaction: credentials go, other content stays."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from bench.redaction import changed_strings, example_lines
from bench.workload import generate
from stream_app.core.redaction import REDACTED, redact, redact_text
from tests.core import secret_corpus
from tests.core.secret_corpus import (
    CATEGORIES,
    CERT_PEM,
    ORDINARY_RAW,
    ORDINARY_TEXT,
    SHAPES,
    Shape,
    armour,
    b64,
    body,
    leaks,
    pem_lines,
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
    assert len(SHAPES) >= 120 and len(CATEGORIES) >= 20
    assert len({s.text for s in SHAPES}) == len(SHAPES)  # distinct shapes
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


@pytest.mark.parametrize("text", ORDINARY_TEXT)
def test_ordinary_text_is_kept_wherever_it_sits(text: str) -> None:
    """As a value anywhere; not as a key, where words like ``password`` name a secret."""
    for where, raw in placements(Shape("ordinary", "ordinary", text, "")).items():
        if where != "key name":
            assert redact(raw) == raw, where


# -- the negative corpus: the example session and the benchmark's workload -----------------


def test_the_example_session_loses_only_the_credentials_it_plants() -> None:
    lines = example_lines()
    messages = [line["value"] for line in lines if line["topic"] == "messages"]
    assert redact(messages) == messages  # chat content: nothing looks like a credential
    found = changed_strings([line["value"] for line in lines])
    assert found["strings"] > 300
    assert [where.split("/", 1)[1] for where in found["where"]] == [
        "raw/env/ANTHROPIC_API_KEY",
        "raw/env/ANTHROPIC_API_KEY",
        "raw/headers/Authorization",
    ]


def test_the_benchmark_workload_is_kept_exactly() -> None:
    for line in generate(3000, 30, seed=5):
        assert redact(line["value"]) == line["value"]


# -- the second wave of shapes (issue 20): what goes, and what of it stays -----------------


def test_a_key_given_as_lines_goes_whole_and_the_lines_around_it_stay() -> None:
    lines = ["# deploy key", *pem_lines("RSA", 1), "Host github.com"]
    assert redact(lines) == [
        "# deploy key",
        REDACTED,
        *[REDACTED] * 4,
        REDACTED,
        "Host github.com",
    ]


def test_a_key_given_as_lines_without_end_goes_to_the_end() -> None:
    lines = pem_lines("EC", 2, end=False)
    assert redact(lines) == [REDACTED] * len(lines)


def test_a_certificate_in_base64_stays_and_a_key_in_base64_goes() -> None:
    cert, key = b64(CERT_PEM), b64("\n".join(pem_lines("PRIVATE", 3)))
    assert redact({"tls.crt": cert, "tls.key": key}) == {"tls.crt": cert, "tls.key": REDACTED}
    assert (
        redact_text(f"tls.crt: {cert}\ntls.key: {key}") == f"tls.crt: {cert}\ntls.key: {REDACTED}"
    )


def test_a_putty_key_keeps_its_header_and_public_lines() -> None:
    public = body(2, 4, alphabet="ZYXWVUTSRQPONMLKJIHGFEDCBA")
    text = "\n".join(
        [
            "PuTTY-User-Key-File-3: ssh-ed25519",
            "Public-Lines: 2",
            *public,
            "Private-Lines: 2",
            *body(2, 5),
            "Private-MAC: 0a1b",
        ]
    )
    assert redact_text(text) == "\n".join(
        [
            "PuTTY-User-Key-File-3: ssh-ed25519",
            "Public-Lines: 2",
            *public,
            "Private-Lines: 2",
            REDACTED,
            "Private-MAC: 0a1b",
        ]
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "aws configure set aws_secret_access_key wJalrXUtnFEMI0K7MDENG --profile prod",
            f"aws configure set aws_secret_access_key {REDACTED} --profile prod",
        ),
        (
            "machine api.example.com login ana password s3cr3t-pw",
            f"machine api.example.com login ana password {REDACTED}",
        ),
        ("db.example.com:5432:shop:app:s3cr3t-pw", f"db.example.com:5432:shop:app:{REDACTED}"),
        ("htpasswd -nb ana s3cr3t-pw", f"htpasswd -nb ana {REDACTED}"),
        ("htpasswd -b .htpasswd ana s3cr3t-pw", f"htpasswd -b .htpasswd ana {REDACTED}"),
        ("keytool -list -storepass s3cr3t-pw", f"keytool -list -storepass {REDACTED}"),
        ("requirepass s3cr3t-pw", f"requirepass {REDACTED}"),
    ],
)
def test_a_name_and_its_value_as_two_words_lose_only_the_value(text: str, expected: str) -> None:
    assert redact_text(text) == expected


def test_percent_encoded_text_loses_only_the_credential_and_keeps_its_encoding() -> None:
    assert redact_text("q=%7B%22user%22%3A%22ana%22%2C%22password%22%3A%22s3cr3t-pw%22%7D") == (
        f"q=%7B%22user%22%3A%22ana%22%2C%22password%22%3A%22{REDACTED}%22%7D"
    )
    assert redact_text("h=Authorization%3A%20Bearer%20abc123def456ghi789") == (
        f"h=Authorization%3A%20Bearer%20{REDACTED}"
    )


def test_a_token_after_a_line_break_escaped_in_json_text_goes() -> None:
    token = "gh" + "p_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    assert redact_text(f"first line\\n{token}") == f"first line\\n{REDACTED}"
    assert (
        redact_text("cmd\\nmysql -u root -ps3cr3t-pw shop")
        == f"cmd\\nmysql -u root -p{REDACTED} shop"
    )


@pytest.mark.parametrize(
    "text",
    [
        "Authorization: Bearer <token>",
        'curl -H "Authorization: Bearer $GITHUB_TOKEN" https://api.github.com',
        "the bearer token is checked in constant time",
        'CHALLENGE = {"WWW-Authenticate": \'Bearer realm="stream-app"\'}',
        "password: |",
    ],
)
def test_placeholders_references_and_prose_next_to_a_rule_are_kept(text: str) -> None:
    assert redact_text(text) == text


def test_armour_helper_builds_the_pem_line() -> None:
    assert armour("RSA") == "-----" + "BEGIN RSA PRIVATE KEY-----"
