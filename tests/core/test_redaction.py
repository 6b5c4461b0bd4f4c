"""SPEC §3 Basic redaction: credentials go, other content stays."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from bench.workload import generate
from stream_app.core.redaction import REDACTED, redact, redact_text
from tests.core import secret_corpus
from tests.core.negative_corpus import changed_strings, example_lines
from tests.core.secret_corpus import (
    CATEGORIES,
    CERT_PEM,
    ORDINARY_RAW,
    ORDINARY_TEXT,
    SHAPES,
    Shape,
    armour,
    b64,
    b64url,
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


# -- issue 44: credentials that a structure gives away ------------------------------------


def test_a_pair_named_like_a_secret_loses_only_its_value() -> None:
    env = [{"name": "DB_PASSWORD", "value": "s3cr3t-pw"}, {"name": "LOG_LEVEL", "value": "debug"}]
    assert redact(env) == [
        {"name": "DB_PASSWORD", "value": REDACTED},
        {"name": "LOG_LEVEL", "value": "debug"},
    ]
    assert redact({"KEY": "X-Api-Key", "Value": "abc123", "type": "text"}) == {
        "KEY": "X-Api-Key",
        "Value": REDACTED,
        "type": "text",
    }
    assert redact({"name": "token_count", "value": 12}) == {"name": "token_count", "value": 12}
    assert redact_text('{"value": "s3cr3t-pw", "name": "DB_PASSWORD"}') == (
        f'{{"value": "{REDACTED}", "name": "DB_PASSWORD"}}'
    )
    assert redact_text("- name: DB_PASSWORD\n  value: s3cr3t-pw\n- name: PORT\n  value: 80") == (
        f"- name: DB_PASSWORD\n  value: {REDACTED}\n- name: PORT\n  value: 80"
    )


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["mysql", "--password", "s3cr3t-pw", "shop"], ["mysql", "--password", REDACTED, "shop"]),
        (["sshpass", "-p", "s3cr3t-pw", "ssh", "h"], ["sshpass", "-p", REDACTED, "ssh", "h"]),
        (["mysql", "-uroot", "-ps3cr3t-pw"], ["mysql", "-uroot", f"-p{REDACTED}"]),
        (["cqlsh", "-u", "ana", "-p", "s3cr3t-pw"], ["cqlsh", "-u", "ana", "-p", REDACTED]),
        (
            ["curl", "-u", "ana:s3cr3t-pw", "https://x"],
            ["curl", "-u", f"ana:{REDACTED}", "https://x"],
        ),
        (["--token", "with a space"], ["--token", REDACTED]),
    ],
)
def test_an_argument_list_is_read_as_its_command_line(argv: list[str], expected: list[str]) -> None:
    assert redact(argv) == expected
    assert redact_text(orjson.dumps(argv).decode()) == orjson.dumps(expected).decode()


@pytest.mark.parametrize(
    "argv",
    [
        ["docker", "run", "-u", "1000", "-p", "8080:80", "shop"],
        ["psql", "-U", "app", "-p", "5432", "shop"],
        ["mysql", "-p", "shop"],  # -p alone asks for the password; shop is the database
        ["mkdir", "-p", "a/b"],
        ["--password", "$DB_PASSWORD"],
        ["--token-file", "/run/secrets/token"],
    ],
)
def test_an_argument_list_without_a_password_is_kept(argv: list[str]) -> None:
    assert redact(argv) == argv


def test_base64_that_decodes_to_a_credential_goes_whole_and_other_base64_stays() -> None:
    env, plain = b64("A=1\nDB_PASSWORD=s3cr3t-pw\n"), b64("A=1\nB=2 and more words\n")
    assert redact_text(f"data: {env} {plain}") == f"data: {REDACTED} {plain}"
    assert redact({"a": env, "b": plain}) == {"a": REDACTED, "b": plain}
    doc = b64('{"client_id": "shop", "client_secret": "s3cr3t-pw"}')
    assert redact([doc]) == [REDACTED]


def test_base64_is_decoded_to_a_bounded_depth() -> None:
    blob = "password=s3cr3t-pw"
    for _ in range(3):
        blob = b64(blob)
    assert redact_text(blob) == REDACTED
    for _ in range(3):
        blob = b64(blob)
    assert redact_text(blob) == blob  # six levels: past the bound, kept


def test_a_jwt_split_over_siblings_goes_and_a_lone_header_stays() -> None:
    header = b64url('{"alg":"HS256","typ":"JWT"}')
    payload = b64url('{"sub":"ana","iat":1516239022}')
    signature = "dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    assert redact({"h": header, "p": payload, "s": signature, "n": 1}) == {
        "h": REDACTED,
        "p": REDACTED,
        "s": REDACTED,
        "n": 1,
    }
    assert redact([header, payload, signature]) == [REDACTED] * 3
    assert redact_text(f"h={header}\np={payload}\ns={signature}\nok") == (
        f"h={REDACTED}\np={REDACTED}\ns={REDACTED}\nok"
    )
    assert redact({"h": header, "note": signature}) == {"h": header, "note": signature}


def test_look_alike_letters_are_folded_for_the_name_test_and_kept_in_the_text() -> None:
    cyrillic = "\u0440\u0430ssword"  # Cyrillic er and a
    fullwidth = "\uff41\uff50\uff49\uff3f\uff4b\uff45\uff59"
    assert redact({cyrillic: "s3cr3t-pw", fullwidth: "abc123"}) == {
        cyrillic: REDACTED,
        fullwidth: REDACTED,
    }
    prose = "\u041f\u0430\u0440\u043e\u043b\u044c: "  # Russian, with look-alike letters
    assert redact_text(f"{prose}{cyrillic}=s3cr3t-pw ok") == f"{prose}{cyrillic}={REDACTED} ok"
    assert redact_text(f"{fullwidth}\uff1a abc123") == f"{fullwidth}\uff1a {REDACTED}"
