"""Basic redaction of a decision's ``raw`` payload (SPEC §3).

``raw`` is whatever a harness sent: hook payloads, shell commands, code, HTTP snippets. A
credential in it would reach the turn topic, the changelog and ``/sessions/{id}``, so it is
cut out wherever it sits (a value, a line of text, a URL, a dict key), and only it: the rest
is kept so that a translator defect stays debuggable. A credential is found by

- its shape: vendor formats with a fixed prefix (``sk_live_``, ``AIza``, ``npm_``, ...),
  JWTs, private-key blocks, chat webhook URLs;
- its place: the password of a URL, an ``Authorization`` or ``Cookie`` header, ``curl -u
  user:pass``, SQL ``IDENTIFIED BY '…'``, a signature in a query string;
- its name: the value of a dict key, ``name=value``/``name: value`` in text, a ``--flag``
  or an XML element named like a secret. Names are split into words, so ``db_pass``,
  ``apiKeys`` and ``passwords`` name secrets while ``max_tokens``, ``token_count`` and
  ``password_field`` (counts and metadata) do not.

Under a secret's name, values that cannot be one are kept: booleans, nulls, numbers under a
name that may count tokens, and in text code and references (``form.get(...)``, ``$PW``).
There is no entropy guess: a bare random string with no name, prefix or place is kept.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

REDACTED = "[REDACTED]"

# -- shape: the whole token goes ---------------------------------------------------------

_SHAPES = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    + "|".join(
        (
            r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)"
            r"(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            r"AGE-SECRET-KEY-1[0-9A-Z]{50,}",
            r"eyJ[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]*",  # JWT
            r"(?:sk\.|ops_)eyJ[\w+/=.-]{30,}",  # Mapbox secret, 1Password service account
            # AI providers
            r"sk-[\w-]{16,}",
            r"(?:gsk_|xai-|pplx-|pcsk_)[\w-]{32,}",
            r"r8_[A-Za-z0-9]{30,}",
            r"(?:hf_|api_org_)[A-Za-z0-9]{30,}",
            r"lsv2_(?:pt|sk)_[0-9a-f]{32}_[0-9a-f]{10}",
            # cloud
            r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA)[A-Z0-9]{16,}",
            r"AIza[\w-]{35,}",
            r"GOCSPX-[\w-]{24,}",
            r"ya29\.[\w-]{20,}",
            r"1//0[\w-]{40,}",
            r"do[opr]_v1_[0-9a-f]{64}",
            r"[\w~.-]{3}\dQ~[\w~.-]{31,}",  # Azure AD client secret
            r"hv[sbr]\.[\w-]{24,}",
            r"[a-z0-9]{14}\.atlasv1\.[\w-]{60,}",
            r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}",
            r"HRKU-[\w-]{30,}",
            r"sha256~[\w-]{43,}",
            r"tskey-[a-z]+-[\w-]{10,}",
            r"dapi[0-9a-f]{32}(?:-\d+)?",
            r"sbp_[0-9a-f]{40,}",
            # payments
            r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}",
            r"whsec_[A-Za-z0-9+/=]{24,}",
            r"sq0(?:atp|csp)-[\w-]{22,}",
            r"EAA[A-Za-z0-9]{60,}",
            r"shp(?:at|ca|pa|ss)_[0-9a-fA-F]{32,}",
            r"shippo_(?:live|test)_[0-9a-f]{40,}",
            r"FLWSECK(?:_TEST)?-[0-9a-f]{32}-X",
            r"duffel_(?:live|test)_[\w-]{40,}",
            r"EZ[AT]K[A-Za-z0-9]{54,}",
            # package registries
            r"npm_[A-Za-z0-9]{36,}",
            r"pypi-[\w-]{50,}",
            r"rubygems_[0-9a-f]{48,}",
            r"oy2[a-z0-9]{43,}",
            r"dckr_pat_[\w-]{20,}",
            r"AKCp[A-Za-z0-9]{60,}",
            # code hosting and developer tools
            r"gh[pousr]_[A-Za-z0-9]{20,}",
            r"github_pat_\w{20,}",
            r"gl(?:pat|dt|rt|ptt|cbt|soat|ft|imt|oas|agent)-[\w-]{20,}",
            r"GR1348941[\w-]{20,}",
            r"ATBB[\w=.-]{32,}",
            r"ATATT3[\w=-]{50,}",
            r"PMAK-[0-9a-f]{24}-[0-9a-f]{34,}",
            r"lin_api_[A-Za-z0-9]{40,}",
            r"sntry[su]_[\w+/=]{40,}",
            r"gl(?:c|sa)_[\w+/=]{32,}",
            r"NRAK-[A-Z0-9]{27,}",
            r"pscale_(?:tkn|pw|oauth)_[\w.=-]{32,}",
            r"pul-[0-9a-f]{40,}",
            r"dt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}",
            r"CFPAT-[\w-]{43,}",
            r"pnu_[A-Za-z0-9]{36,}",
            r"rdme_[a-z0-9]{70,}",
            r"(?:secret_[A-Za-z0-9]{43}|ntn_[A-Za-z0-9]{40,})",  # Notion
            r"pat[A-Za-z0-9]{14}\.[0-9a-f]{64}",  # Airtable
            # messaging and e-mail
            r"xox[a-z](?:\.xox[a-z])?-[\w-]{12,}",
            r"xapp-\d-[\w-]{10,}",
            r"[MNO][\w-]{23,25}\.[\w-]{6}\.[\w-]{27,}",  # Discord bot
            r"SG\.[\w-]{22}\.[\w-]{43,}",
            r"key-[0-9a-f]{32,}",
            r"[0-9a-f]{32}-us\d{1,2}",
            r"SK[0-9a-f]{32,}",
            r"xkeysib-[0-9a-f]{64}-[A-Za-z0-9]{16,}",
            r"A{20,}[A-Za-z0-9%]{30,}",  # Twitter bearer
        )
    )
    + r")"
    + r"|(?<![0-9])\d{8,10}:AA[\w-]{30,}",  # Telegram bot (in a URL path after "bot")
)


def _has_shape(text: str) -> bool:
    """Cheaper than searching all of ``text``: every shape but a private-key block is 16 or
    more characters without a space, and ordinary text has few such runs."""
    if "-----BEGIN" in text:
        return True
    chunks = text.split()
    return (
        bool(chunks)
        and max(map(len, chunks)) >= 16
        and any(len(chunk) >= 16 and _SHAPES.search(chunk) is not None for chunk in chunks)
    )


# -- place: a prefix that says a credential follows is kept, the credential goes ----------

_AUTH_SCHEME = r"(?:bearer|basic|digest|token|bot|negotiate|ntlm|apikey|sso-key|ssws|oauth)"
_PLACES: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...] = (
    (
        ("://",),
        re.compile(r"(://[^\s:/@\"'<>]*:)[^\s/?#\"'<>]*(?=@)"),
    ),
    (
        ("authoriz", "cookie"),
        re.compile(
            r"(?i)\b((?:proxy-)?authorization|(?:set-)?cookie)"
            rf"(\\?[\"']?[ \t]*[:=][ \t]*\\?[\"']?(?:{_AUTH_SCHEME}[ \t]+)?)"
            r"[^\r\n\"'\\]+"
        ),
    ),
    (("bearer",), re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9\-._~+/]+=*")),
    (
        ("-u",),
        re.compile(r"(?<![\w-])((?:-u|--user)(?:[ \t]+|=)[\"']?(?!\d+:\d+\b)[^\s:\"']+:)[^\s\"']+"),
    ),
    (
        ("mysql", "mariadb", "sshpass", "login"),
        re.compile(
            r"(\b(?:mysql|mysqldump|mysqladmin|mariadb)\b[^\r\n]*?[ \t]-p)[^\s\"']+"
            r"|(\bsshpass[ \t]+-p[ \t]*)\S+"
            r"|(\b(?:docker|podman|nerdctl|helm)[ \t]+(?:registry[ \t]+)?login\b[^\r\n]*?"
            r"[ \t]-p[ \t]+)\S+"
        ),
    ),
    (
        ("identified", "password '", 'password "'),
        re.compile(
            r"(?i)(\b(?:identified[ \t]+by|password)[ \t]+')(?:[^'\r\n]|'')*(?=')"
            r"|(\b(?:identified[ \t]+by|password)[ \t]+\")[^\"\r\n]*(?=\")"
        ),
    ),
    (
        ("hooks", "webhook"),
        re.compile(
            r"(?i)(hooks\.slack\.com/(?:services|workflows|triggers)/)[\w/]+"
            r"|(discord(?:app)?\.com/api/webhooks/)\d+/[\w-]+"
            r"|(\.webhook\.office\.com/webhookb2/)[^\s\"'<>]+"
            r"|(hooks\.zapier\.com/hooks/catch/)[\w/]+"
            r"|(/hooks/)[a-z0-9]{26}\b"
        ),
    ),
    (
        ("sig=", "signature=", "key=", "token="),
        re.compile(
            r"(?i)([?&;](?:sig|signature|key|x-amz-signature|x-goog-signature|x-amz-security-token)=)"
            r"[^&#\s\"'<>]+"
        ),
    ),
)


def _keep_prefix(match: re.Match[str]) -> str:
    return "".join(g for g in match.groups() if g is not None) + REDACTED


# -- name: the value of something named like a secret goes -------------------------------

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
# Every secret's name has one of these.
_STEMS = ("pass", "pw", "secret", "tok", "auth", "key", "cred", "cookie", "jwt", "bearer")
_STEM = re.compile("|".join(_STEMS))
_SECRET_WORDS = frozenset(
    {
        *("password", "passwords", "passwd", "pwd", "pw", "pass", "pswd", "passphrase"),
        *("secret", "secrets", "token", "tokens", "apikey", "apikeys", "privkey", "jwt"),
        *("credential", "credentials", "cred", "creds", "cookie", "cookies"),
        *("authorization", "auth", "bearer"),
    }
)
# One word may glue several: ``accesstoken``, ``dbpassword``, ``xapikey``.
_SECRET_ENDINGS = ("password", "passwd", "secret", "token", "apikey", "accesskey", "privatekey")
_KEY_KINDS = ("api", "private", "priv", "access", "secret", "signing", "encryption", "master")
_SECRET_PAIRS = frozenset(
    a + k
    for a in (*_KEY_KINDS, "account", "shared", "session", "license", "client")
    for k in ("key", "keys")
)
_TOKEN_WORDS = frozenset({"token", "tokens"})
# Metadata about a secret, not the secret: ``password_field``, ``token_type``, ``secret_name``.
_ABOUT_A_SECRET = frozenset(
    {
        *("field", "hint", "policy", "type", "kind", "method", "mode", "provider", "scheme"),
        *("url", "uri", "endpoint", "file", "path", "dir", "name", "label", "stdin"),
        *("required", "enabled", "strength", "format", "version", "length", "len"),
        *("rotation", "rotated", "expiry", "expires", "expiration", "ttl", "at", "created"),
        "updated",
    }
)
# Words that make ``tokens`` a count of model tokens: ``max_tokens``, ``prompt_tokens``.
_COUNTED = frozenset(
    {
        *("count", "counts", "max", "min", "limit", "limits", "used", "usage", "total"),
        *("num", "number", "size", "budget", "remaining", "estimate", "estimated", "per"),
        *("input", "output", "prompt", "completion", "reasoning", "cached", "cache", "audio"),
        *("prediction", "accepted", "rejected", "ids", "rate", "index", "thinking", "context"),
    }
)
_ORDINARY, _SECRET, _TOKENISH = 0, 1, 2


def _kind(name: str) -> int:
    """Whether a name is a secret's, or a name that may also count model tokens."""
    if _STEM.search(name.lower()) is None:
        return _ORDINARY
    words = [w.lower() for w in _WORD.findall(name)]
    hits = {w for w in words if w in _SECRET_WORDS or w.endswith(_SECRET_ENDINGS)}
    hits |= {a + b for a, b in itertools.pairwise(words)} & _SECRET_PAIRS
    if not hits or _ABOUT_A_SECRET.intersection(words):
        return _ORDINARY
    if hits <= _TOKEN_WORDS:
        return _ORDINARY if _COUNTED.intersection(words) else _TOKENISH
    return _SECRET


# ``name = value``, ``name: value``, ``"name": "value"``, ``name: str = value``, ``--name=v``.
_ASSIGNMENT = re.compile(
    r"(?<![\w.$])(?P<name>[A-Za-z_][\w.-]*+)"
    r"\\*+[\"']?[ \t]*+(?::[ \t]*+[A-Za-z_][\w\[\]., |]*?[ \t]*+)?(?:={1,3}|!==?|:=|=>|:)[ \t]*+"
)
_FLAG = re.compile(r"(?<![\w-])--(?P<name>[A-Za-z][\w-]*)[ \t]+(?=[^\s-])")
_ELEMENT = re.compile(r"<(?P<name>[\w:.-]+)(?:\s[^<>]*)?>(?P<value>[^<]+)</(?P=name)>")
_VALUE = re.compile(
    rf"(?i:{_AUTH_SCHEME}[ \t]+)?"
    r"(?:(?P<bs>\\+)\"(?P<v1>[^\r\n]*?)(?P=bs)\""  # \"escaped\" inside JSON text
    r"|\"(?P<v2>(?:[^\"\\\r\n]|\\.)*)\""
    r"|'(?P<v3>(?:[^'\\\r\n]|\\.)*)'"
    r"|`(?P<v4>[^`\r\n]*)`"
    r"|(?P<v6>\[[^\]\r\n]*\]|\{[^}\r\n]*\})"  # a flat JSON array or object
    r"|(?P<v5>(?:[^\s\"'`<>&;\\]|\\(?![nrt\"\\]))+))"  # ends at an escaped newline
)
# Not a literal: code (``form.get(``, ``os.environ[``), references (``$PW``, ``${PW}``,
# ``{{ pw }}``), nulls and type names (``password: str``), what was already redacted.
_NOT_A_VALUE = re.compile(
    r"[A-Za-z_][\w.]*(?:\((?:[\w., ]*\))?|\[)"
    r"|\$(?:[A-Z_][A-Z0-9_]*|\{.*|\(.*)|\{\{.*|\[REDACTED\].*"
    r"|(?i:none|null|nil|true|false|undefined|str|string|bytes|int|number|bool|secretstr)[),\]]*"
)


def _named_values(pattern: re.Pattern[str], text: str) -> str:
    """``text`` with the value after each secret-named match of ``pattern`` redacted."""
    spans: list[tuple[int, int]] = []
    for m in pattern.finditer(text):
        kind = _kind(m["name"])
        v = None if kind == _ORDINARY else _VALUE.match(text, m.end())
        group = None if v is None else v.lastgroup
        if v is None or group is None:
            continue
        value = v[group]
        if not value or _NOT_A_VALUE.fullmatch(value) or (kind == _TOKENISH and value.isdigit()):
            continue
        start, end = v.span(group)
        if spans and start <= spans[-1][1]:  # a name inside the value redacted before it
            before, after = spans.pop()
            start, end = before, max(end, after)
        spans.append((start, end))
    return _cut(text, spans)


def _named_elements(text: str) -> str:
    spans = [m.span("value") for m in _ELEMENT.finditer(text) if _kind(m["name"]) != _ORDINARY]
    return _cut(text, spans)


def _cut(text: str, spans: list[tuple[int, int]]) -> str:
    if not spans:
        return text
    parts: list[str] = []
    at = 0
    for start, end in spans:
        parts += (text[at:start], REDACTED)
        at = end
    parts.append(text[at:])
    return "".join(parts)


# A rule of place or name needs one of these; most ids, paths and words have none.
_HINT = re.compile(r"[\s:=<'\"]|-[-up]|(?i:hook)")


def redact_text(text: str) -> str:
    """``text`` with its credentials replaced by ``[REDACTED]``."""
    if len(text) >= 16 and _has_shape(text):
        text = _SHAPES.sub(REDACTED, text)
    if _HINT.search(text) is None:
        return text
    lower = text.lower()
    for needles, pattern in _PLACES:
        for needle in needles:
            if needle in lower:
                text = pattern.sub(_keep_prefix, text)
                break
    if not any(stem in lower for stem in _STEMS):
        return text
    if "=" in text or ":" in text:
        text = _named_values(_ASSIGNMENT, text)
    if "--" in text:
        text = _named_values(_FLAG, text)
    if "</" in text:
        text = _named_elements(text)
    return text


def redact(value: Any) -> Any:
    """A redacted copy of a JSON value; the input is left untouched."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            name = base = redact_text(k)  # a key may itself be a credential
            n = 1
            while name in out:  # two keys were, and now read the same
                n += 1
                name = f"{base} ({n})"
            out[name] = _under(_kind(name), v)
        return out
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def _under(kind: int, value: Any) -> Any:
    """The value of a key of this kind."""
    if kind == _ORDINARY or value is None or value == "" or isinstance(value, bool):
        return redact(value)
    if kind == _TOKENISH and isinstance(value, int | float):
        return value
    return REDACTED
