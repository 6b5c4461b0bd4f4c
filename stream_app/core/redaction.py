"""Basic redaction of a decision's ``raw`` payload (SPEC §3).

Credentials are cut out of string values in place (the rest of the text is kept, so a
translator defect stays debuggable), and the whole value of a key named like a secret is
replaced. Key names are split into words, so ``access_token`` and ``apiKey`` are secrets
while ``max_tokens`` is not.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

REDACTED = "[REDACTED]"

_CREDENTIALS = re.compile(
    "|".join(
        (
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
            r"\bsk-[A-Za-z0-9_\-]{16,}",
            r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
            r"\bgh[pousr]_[A-Za-z0-9]{20,}",
            r"\bgithub_pat_[A-Za-z0-9_]{20,}",
            r"\bxox[abposr]-[A-Za-z0-9\-]{10,}",
            r"\beyJ[A-Za-z0-9_\-]+\.eyJ[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+",
        )
    ),
    re.DOTALL,
)
_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9\-._~+/]+=*")
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://[^\s:/@]+:)[^\s/@]+@")

_SECRET_WORDS = frozenset(
    {
        "password",
        "passwd",
        "pwd",
        "secret",
        "token",
        "authorization",
        "apikey",
        "credential",
        "credentials",
        "passphrase",
        "privatekey",
        "cookie",
    }
)
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def _is_secret_key(name: str) -> bool:
    words = [w.lower() for w in _WORD.findall(name)]
    if any(w in _SECRET_WORDS for w in words):
        return True
    pairs = {a + b for a, b in itertools.pairwise(words)}
    return bool(pairs & {"apikey", "privatekey", "accesskey", "secretkey", "authtoken"})


def redact_text(text: str) -> str:
    text = _CREDENTIALS.sub(REDACTED, text)
    text = _BEARER.sub(lambda m: m[1] + REDACTED, text)
    return _URL_PASSWORD.sub(lambda m: m[1] + REDACTED + "@", text)


def redact(value: Any) -> Any:
    """A redacted copy of a JSON value; the input is left untouched."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {
            k: REDACTED if v is not None and _is_secret_key(k) else redact(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value
