"""Credentials known by their name: the value of something named like a secret (a
key, ``name=value`` in text, a flag, an XML element), names read after a fold of
look-alike letters."""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from collections.abc import Iterable

from stream_app.core.redaction.common import (
    _AUTH_SCHEME,
    _EOL,
    _REMEMBERED,
    _WORD_CHARS,
    REDACTED,
    _cut,
)
from stream_app.core.redaction.engine import _KEY_BEGIN
from stream_app.models.json_types import Json

# -- name: the value of something named like a secret goes -------------------------------

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
# Every secret's name has one of these.
_STEMS = (
    *("pass", "pw", "secret", "tok", "auth", "key", "cred", "cookie", "jwt", "bearer"),
    *("rsa", "dsa", "25519", "ppk", "_pat"),
)
# ``_pat`` finds ``GITHUB_PAT`` in text; a name alone may also be ``pat`` or ``PAT_…``.
_STEM = re.compile("|".join(_STEMS) + r"|(?<![a-z])pat(?![a-z])")
_SECRET_WORDS = frozenset(
    {
        *("password", "passwords", "passwd", "pwd", "pw", "pass", "pswd", "passphrase"),
        *("secret", "secrets", "token", "tokens", "apikey", "apikeys", "privkey", "jwt"),
        *("credential", "credentials", "cred", "creds", "cookie", "cookies"),
        *("authorization", "auth", "bearer", "pat"),
        # the password options of openssl and keytool
        *("passin", "passout", "storepass", "keypass", "srcstorepass", "deststorepass"),
        *("srckeypass", "destkeypass"),
    }
)
# One word may glue several: ``accesstoken``, ``dbpassword``, ``xapikey``.
_SECRET_ENDINGS = (
    *("password", "passwd", "secret", "token", "apikey", "accesskey", "privatekey"),
    *("accountkey", "authkey", "appkey", "adminkey", "masterkey", "hmackey", "secretkey"),
    "signingkey",
)
_KEY_KINDS = (
    *("api", "private", "priv", "access", "secret", "signing", "encryption", "master"),
    *("tls", "ssl", "rsa", "dsa", "ecdsa", "25519", "ssh", "pgp", "gpg", "preshared"),
    # vendors' names: ``ALGOLIA_ADMIN_KEY``, ``DD-APPLICATION-KEY``, ``HMAC_KEY``,
    # ``Ocp-Apim-Subscription-Key``, ``x-functions-key``, Laravel's ``APP_KEY``
    *("app", "admin", "application", "hmac", "subscription", "functions", "write", "auth"),
    *("service", "webhook", "cipher", "crypto", "jwt"),
)
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
        *("updated", "helper", "username", "pub", "public"),
        # settings about a cookie or a session, messages and hints of a form (i18n keys),
        # a page's token (``nextPageToken``), a reference to where a secret is kept
        *("age", "secure", "httponly", "samesite", "domain", "timeout", "placeholder"),
        *("too", "short", "expired", "invalid", "mismatch", "validators", "validator"),
        *("hashers", "hasher", "page", "next", "continuation", "sync", "cursor", "prev"),
        *("ref", "arn"),
    }
)
# Words that make ``tokens`` a count of model tokens: ``max_tokens``, ``prompt_tokens``.
_COUNTED = frozenset(
    {
        *("count", "counts", "max", "min", "limit", "limits", "used", "usage", "total"),
        *("num", "number", "size", "budget", "remaining", "estimate", "estimated", "per"),
        *("input", "output", "prompt", "completion", "reasoning", "cached", "cache", "audio"),
        *("prediction", "accepted", "rejected", "ids", "rate", "index", "thinking", "context"),
        # a tokenizer's special tokens: ``eos_token``, ``pad_token_id``, ``special_tokens``
        *("eos", "bos", "pad", "unk", "mask", "cls", "sep", "special", "added", "tokenizer"),
        "id",
    }
)
# ``bearerAuth``, ``basicAuth``, ``apiKeyAuth``: the name of a scheme (OpenAPI), no secret.
_SCHEME_WORDS = frozenset({"bearer", "basic", "digest", "key", "apikey", "oauth", "jwt", "cookie"})
# The files that hold a private key, by the names tools give them: always key material.
_KEY_NAME = re.compile(
    r"(?:^|[^a-z0-9])(?:id_(?:rsa|dsa|ecdsa|ed25519)(?:_sk)?|(?:tls|ssl)\.key|[\w.-]*\.ppk)$"
)
# Every other ``*.key`` or ``*key.pem``: may be a key file or an object's key (``s3.key``), so
# only a value that looks like key material goes (see _looks_like_key).
_KEY_FILE = re.compile(r"(?:^|[^a-z0-9])[\w-]*(?:\.key|key\.pem)$")
_ORDINARY, _SECRET, _TOKENISH, _MATERIAL = 0, 1, 2, 3


@functools.lru_cache(maxsize=_REMEMBERED)
def _kind(name: str) -> int:
    """Whether a name is a secret's, or a name that may also count model tokens (names
    repeat: remembered). A name with letters outside ASCII is folded first (_fold_name)."""
    if not name.isascii():
        name = _fold_name(name)
    lower = name.lower()
    if _STEM.search(lower) is None:
        return _ORDINARY
    if _KEY_NAME.search(lower) is not None:
        return _SECRET
    if _KEY_FILE.search(lower) is not None:
        return _MATERIAL
    words = [w.lower() for w in _WORD.findall(name)]
    if len(words) >= 2 and words[-1] == "auth" and words[-2] in _SCHEME_WORDS:
        return _ORDINARY
    hits = {w for w in words if w in _SECRET_WORDS or w.endswith(_SECRET_ENDINGS)}
    hits |= {a + b for a, b in itertools.pairwise(words)} & _SECRET_PAIRS
    if not hits or _ABOUT_A_SECRET.intersection(words):
        return _ORDINARY
    if hits <= _TOKEN_WORDS:
        return _ORDINARY if _COUNTED.intersection(words) else _TOKENISH
    return _SECRET


_HEX = frozenset("0123456789abcdef")
_KEYISH = re.compile(r"(?:[A-Za-z0-9+/=_-]|\s|\\+[nr])+")


def _looks_like_key(value: Json) -> bool:
    """Key material: an armoured block, or 32 characters or more of base64 or hex in mixed
    case with digits (a path, a file name or an object key has dots, or one case)."""
    if isinstance(value, list):
        lines = [v for v in value if isinstance(v, str)]
        return len(lines) == len(value) and _looks_like_key("\n".join(lines))
    if not isinstance(value, str):
        return False
    if _KEY_BEGIN.search(value) or "PuTTY-User-Key-File" in value:
        return True
    return (
        len(value) >= 32
        and _KEYISH.fullmatch(value) is not None
        and any(c.isdigit() for c in value)
        and (value.lower() != value or all(c in _HEX for c in value))
    )


# ``name = value``, ``name: value``, ``"name": "value"``, ``name: str = value``, ``--name=v``,
# ``$name = value`` (PHP, Perl, PowerShell), ``:name => value`` (Ruby); not a name inside
# ``${NAME:-default}``, and not ``name::`` (a path: Rust, C++, a pytest node id).
_ASSIGNMENT = re.compile(
    r"(?<![\w.])(?<!\$\{)(?P<name>[A-Za-z_][\w.-]*+)"
    r"\\*+[\"']?[ \t]*+(?::[ \t]*+[A-Za-z_][\w\[\]., |]*?[ \t]*+)?(?:=>|={1,3}|!==?|:=|:(?!:))"
    r"[ \t]*+"
)
# A file's name and a line number (``auth/token.py:12:5: error``, ``secret.go:40``): where a
# tool reports something, not a name and its value.
_SOURCE_FILE = re.compile(
    r".*\.(?:py|pyi|pyx|go|ts|tsx|js|jsx|mjs|cjs|rs|rb|java|kt|kts|scala|c|h|cc|cpp|hpp"
    r"|cs|php|swift|m|sh|bash|zsh|ex|exs|erl|lua|pl|pm|vue|svelte|md|rst|txt|json|yaml|yml"
    r"|toml|ini|cfg|conf|html|css|scss|sql|tf|dart|r|jl|ipynb)"
)
_LINE_NUMBER = re.compile(r":\d")
# ``--name value`` and ``-name value`` (openssl's ``-passin``, keytool's ``-storepass``), also
# as two items of a YAML list (``- --token`` then ``- value``).
_FLAG = re.compile(
    r"-(?<![\w-]-)-?(?P<name>[A-Za-z][\w-]*)"
    rf"(?:[ \t]+|\\*[\"']?[ \t]*{_EOL}[ \t]*-[ \t]+)(?=[^\s-])"
)
# A name and its value given as two words: ``aws configure set aws_secret_access_key X``,
# ``npm config set //host/:_authToken X``, ``doppler secrets set NAME X``, fish's
# ``set -gx NAME X``, ``setx NAME X``.
_NAME_THEN_VALUE = re.compile(
    r"(?:configure[ \t]+set|config(?::set|[ \t]+set)?|secrets?[ \t]+set|setx"
    r"|set(?:[ \t]+-[A-Za-z]+)+)(?:[ \t]+--?[\w-]+(?:=[^\s\"']+)?)*+[ \t]+"
    r"(?P<name>[\w.:/@-]+)[ \t]+(?=[^\s-])"
)
_NAME_THEN_NEEDLES = ("config", "secret", "set")
# Space between elements, also as JSON text escapes it.
_XML_GAP = r"(?:\s|\\+[nrt])*"
# ``<password>v</password>``, its value also as CDATA; an element whose ``key``, ``name`` or
# ``id`` attribute names a secret (``<entry key="db.password">v</entry>``, ``<add
# key="ApiKey" value="v"/>``); a ``<value>`` beside a ``<name>`` naming a secret (Hadoop,
# Maven) or inside an element named like one.
_ELEMENT = re.compile(
    r"<(?P<tag>[\w:.-]+)\s[^<>]*?\b(?:key|name|id)=\\*[\"'](?P<aname>[^\"'<>\\]+)\\*[\"']"
    r"(?:[^<>]*?\bvalue=\\*[\"'](?P<avalue>[^\"'<>\\]*)\\*[\"'][^<>]*/>"
    r"|[^<>]*>(?P<atext>[^<]+)</(?P=tag)>)"
    rf"|<name>(?P<pname>[^<]+)</name>{_XML_GAP}<value>(?P<pvalue>[^<]+)</value>"
    rf"|<(?P<outer>[\w:.-]+)>{_XML_GAP}<value>(?P<ovalue>[^<]+)</value>"
    r"|<(?P<name>[\w:.-]+)(?:\s[^<>]*)?>"
    r"(?:<!\[CDATA\[(?P<cdata>(?:(?!\]\]>).)*)\]\]>|(?P<value>[^<]+))</(?P=name)>"
)
_VALUE = re.compile(
    # a scheme (``Bearer``) but before prose, a YAML anchor (``&pw``) or tag (``!!str``)
    rf"(?:(?i:{_AUTH_SCHEME})[ \t]+(?![a-z]+[ \t]+[a-z])|&[\w-]+[ \t]+|!![\w-]+[ \t]+)?+"
    # a literal's prefix: ``b'…'``, ``r"…"``, C#'s ``@"…"``, bash's ``$'…'``
    r"(?:[rRbBuUfF]{1,2}(?=\\*[\"'])|@(?=\\*\")|\$(?='))?"
    r"(?:(?P<tq>(?:\\*\"){3})(?P<v8>(?:(?!\\*\"\\*\"\\*\").)+)(?P=tq)"
    r"|'''(?P<v9>(?:(?!''').)+)'''"
    r"|(?P<bs>\\+)\"(?P<v1>[^\r\n]*?)(?P=bs)\""  # \"escaped\" inside JSON text
    r"|\"(?P<v2>(?:[^\"\\\r\n]|\\.)*)\""
    r"|'(?P<v3>(?:[^'\\\r\n]|\\.)*)'"
    r"|`(?P<v4>[^`\r\n]*)`"
    r"|(?P<v6>\[[^\]\r\n]*\]|\{[^}\r\n]*\})"  # a flat JSON array or object
    # a YAML block scalar (``|`` or ``>``): its lines, as far as they keep the indentation
    rf"|[|>][-+]?[1-9]?[ \t]*{_EOL}(?P<indent>[ \t]+)"
    rf"(?P<v7>[^\r\n\\]*(?:{_EOL}(?P=indent)[^\r\n\\]*)*)"
    # a YAML list of scalars under the name: its items
    rf"|{_EOL}(?P<lindent>[ \t]*)-[ \t]+(?P<v10>(?![^\r\n\\]*:[ \t])[^\r\n\\]+"
    rf"(?:{_EOL}(?P=lindent)-[ \t]+(?![^\r\n\\]*:[ \t])[^\r\n\\]+)*)"
    r"|(?P<v5>(?:[^\s\"'`<>&;\\]|\\(?![nrt\"\\]))+))"  # ends at an escaped newline
)
# Not a literal: code (``form.get(``, ``os.environ[``), references (``$PW``, ``${PW}``,
# ``{{ pw }}``), nulls and type names (``password: str``), what was already redacted, a
# YAML block's indicator with no block after it.
_NOT_A_VALUE = re.compile(
    r"[A-Za-z_][\w.]*(?:\((?:[\w., ]*\))?[),\];]*|\[)|[|>][-+]?[1-9]?|[(\[{]"
    # a call of a function whose name has no digit (``Field(...,``, ``crypt($1,``,
    # ``get_password(prompt=True)``), a name closing one (``arn)``), an empty collection
    r"|[A-Za-z_]+(?:\.[A-Za-z_]\w*)*\(.*|[A-Za-z_]\w*\)+[,;]?|\[\]|\{\}"
    # a placeholder or a special token (``<your-password>``, ``</s>``, ``<|endoftext|>``),
    # YAML's null and aliases, CloudFormation's tags (``!Ref``), format placeholders
    r"|<[^<>\r\n]*>|~|\*[\w-]+|![A-Z]\w*|%\(\w+\)[sdr]|%s"
    # a reference to a setting (``var.db_password``, ``settings.SECRET_KEY``), a variable
    # (``$password``, ``$request->input(…)``, ``$null``)
    r"|(?:var|local|data|module|each|self|this|settings|config|cfg|conf|env|process|os"
    r"|params|props|args|options|opts|ctx|context|request|req|secrets|vars|inputs|steps"
    r"|needs|matrix|github|app|values|Values|spec|item)\.[\w.\[\]'\"]+[),;]*"
    r"|\$[A-Za-z_]\w*(?:->.*|\[.*|\{.*|\.\w.*)?[),;]*"
    # a subscript (``params[:password]``), a tuple of names (``(user, password)``), a
    # keyword (``await``), a PowerShell cmdlet (``Read-Host``), a template's end (``…}}``),
    # a reference after a scheme (``Bearer ${token}``), an escape alone
    r"|[A-Za-z_][\w.]*\[.*|\([A-Za-z_][\w.]*,?|(?:await|new|yield|lambda|not|typeof|require)"
    r"|[A-Z][a-z]+-[A-Z][A-Za-z]+|\S*\}\}[),;'\"]*|\\+"
    rf"|(?i:{_AUTH_SCHEME})[ \t]+(?:\$\{{.*|\$[A-Za-z_]\w*|\{{\{{.*|<[^<>]*>)"
    # a call whose argument is a literal or a collection (``frozenset({``, ``f("``), or of
    # a method (``re.compile(rf"...``): code, while ``Pa55(word`` is a literal
    r"|[A-Za-z_]\w*\((?:[rbfuRBFU]{0,2}[\"']|[\[{(]).*|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\(.*"
    r"|\$(?:[A-Z_][A-Z0-9_]*|\{.*|\(.*)|\{\{.*|\[REDACTED\].*"
    r"|(?i:none|null|nil|true|false|undefined|str|string|bytes|int|number|bool|secretstr)[),\]]*"
)


_NAME_CHARS = frozenset(_WORD_CHARS | {".", "-"})
_NAME_FIRST = frozenset(_WORD_CHARS - set("0123456789"))
_FLAG_CHARS = frozenset(_WORD_CHARS | {"-"})
_DASH = frozenset("-")


def _name_starts(
    text: str, stems: list[int], chars: frozenset[str], first: frozenset[str]
) -> list[int]:
    """Where a name with a secret's stem in it may start: from each stem back over the
    name's characters to its ``first`` one. Patterns are tried there, not at every
    position: the names of secrets are few in a text, its characters many."""
    starts: set[int] = set()
    for at in stems:
        start = at
        while start > 0 and at - start < 80 and text[start - 1] in chars:
            start -= 1
        while start < at and text[start] not in first:
            start += 1
        starts.add(start)
    return sorted(starts)


def _named_values(pattern: re.Pattern[str], text: str, starts: Iterable[int]) -> str:
    """``text`` with the value after each secret-named match of ``pattern`` redacted, the
    pattern tried at ``starts``."""
    spans: list[tuple[int, int]] = []
    for at in starts:
        m = pattern.match(text, at)
        if m is None or (
            text.startswith(":", m.end("name"))
            and _LINE_NUMBER.match(text, m.end("name"))
            and _SOURCE_FILE.fullmatch(m["name"])
        ):
            continue
        kind = _kind(m["name"])
        span = None if kind == _ORDINARY else _value_span(text, m.end(), kind)
        if span is None:
            continue
        start, end = span
        if spans and start <= spans[-1][1]:  # a name inside the value redacted before it
            before, after = spans.pop()
            start, end = before, max(end, after)
        spans.append((start, end))
    return _cut(text, spans)


# The groups of _ELEMENT: (the name, the value it names).
_ELEMENT_NAMES: tuple[tuple[str, str], ...] = (
    *(("name", "cdata"), ("name", "value"), ("aname", "avalue"), ("aname", "atext")),
    *(("pname", "pvalue"), ("outer", "ovalue")),
)


def _named_elements(text: str) -> str:
    spans: list[tuple[int, int]] = []
    for m in _ELEMENT.finditer(text):
        for name, value in _ELEMENT_NAMES:
            if m[value] is not None:
                if m[value].strip() and _kind(m[name].strip()) != _ORDINARY:
                    spans.append(m.span(value))
                break
    return _cut(text, spans)


# -- a name given as a string and its value beside it: arguments, tuples, subscripts ---------

# ``define('DB_PASSWORD', '…')``, ``setenv("API_TOKEN", "…")``, ``os.Setenv(…)``,
# ``System.setProperty("db.password", "…")``, ``localStorage.setItem('token', '…')``,
# ``headers.set("X-Api-Key", "…")``: a call that sets a named value; a header as a tuple
# (``("X-Api-Key", "…")``); a subscript assigned (``os.environ["X_API_KEY"] = "…"``,
# ``config['password'] = '…'``).
_SETTERS = (
    r"(?:define|setenv|putenv|Setenv|setProperty|setItem|set|put|add|setdefault|header"
    r"|setHeader|set_header|add_header|addHeader|setRequestHeader|append|insert|Add"
    r"|SetEnvironmentVariable|setEnv|set_env|add_secret|setSecret)"
)
_NAMED_ARGUMENT = re.compile(
    rf"(?:\b{_SETTERS}[ \t]*\([ \t]*|(?<=[(\[,{{])[ \t]*\([ \t]*(?=\\*[\"'][\w]+-)"
    r"|\[[ \t]*(?=\\*[\"'][^\"'\r\n]+\\*[\"'][ \t]*\][ \t]*=(?!=)))"
    r"(?P<q>\\*[\"'])(?P<name>[\w.:/@-]{1,80})(?P=q)[ \t]*(?:,|\][ \t]*=)[ \t]*"
)
# A builder's or a setter's method named like a secret, given a literal: ``.password("…")``,
# ``.apiKey('…')``, ``.setPassword("…")``, ``->withToken('…')``.
_METHOD_VALUE = re.compile(
    r"(?:\.|->)(?:set|with)?_?(?P<name>[A-Za-z][A-Za-z0-9_]*)[ \t]*\([ \t]*"
    r"(?=[rbuRBU]?\\*[\"'])"
)
# A method whose name says it reads, checks or makes a secret, not that it sets one.
_NOT_A_SETTER = re.compile(
    r"(?i)(?:get|load|read|fetch|delete|remove|has|is|find|lookup|describe|list|create"
    r"|validate|verify|check|generate|gen|new|make|revoke|rotate|hash|encrypt|decrypt"
    r"|reset|clear|update|count|compare|request|require|mask|print|log|format)"
)


def _named_arguments(text: str) -> str:
    """``text`` with the literal given beside a secret's name (see _NAMED_ARGUMENT and
    _METHOD_VALUE) redacted."""
    spans: list[tuple[int, int]] = []
    if "(" in text or "[" in text:
        for m in _NAMED_ARGUMENT.finditer(text):
            kind = _kind(m["name"])
            if kind != _ORDINARY and (span := _literal_span(text, m.end(), kind)) is not None:
                spans.append(span)
    if "(" in text and ("." in text or "->" in text):
        for m in _METHOD_VALUE.finditer(text):
            name = m["name"]
            if _NOT_A_SETTER.match(name) and not name.lower().startswith("pass"):
                continue
            kind = _kind(name)
            if kind != _ORDINARY and (span := _literal_span(text, m.end(), kind)) is not None:
                spans.append(span)
    if not spans:
        return text
    kept: list[tuple[int, int]] = []
    for span in sorted(set(spans)):
        if not kept or span[0] >= kept[-1][1]:
            kept.append(span)
    return _cut(text, kept)


def _literal_span(text: str, at: int, kind: int) -> tuple[int, int] | None:
    """The span of a quoted literal at ``at`` that is a value (see _value_span)."""
    span = _value_span(text, at, kind)
    if span is None or span[0] == at:  # a bare word there is code: a variable, a call
        return None
    return span


# -- a label and its value: ``API Key: …``, ``Secret access key: …`` ---------------------------

# A label of two to four words at the start of a line, then a colon and the value.
_LABEL = re.compile(
    r"[ \t]*(?P<name>[A-Za-z][A-Za-z0-9-]*(?:[ \t][A-Za-z][A-Za-z0-9-]*){1,3})[ \t]*:[ \t]+"
)
# What a label follows: a line break (also escaped), a tag, a quote, another label's colon.
_LABEL_EDGES = ("\n", "\\n", "\\r", ">", ": ", '"')
_LABEL_REACH = 60


def _line_start(text: str, at: int, reach: int) -> int:
    """Where the line (also of JSON text: after an escaped break) holding ``at`` starts,
    looked for ``reach`` characters back at most."""
    lo = max(at - reach, 0)
    edge = max(text.rfind("\n", lo, at), text.rfind("\\n", lo, at) + 1)
    return lo if edge < lo else edge + 1


def _labels(text: str, stems: list[int]) -> str:
    """``text`` with the value of each label naming a secret (``API Key: …``, ``Secret
    access key: …``) redacted: a label of two to four words that starts a line or follows
    a tag, a quote or another label."""
    spans: list[tuple[int, int]] = []
    tried: set[int] = set()
    for at in stems:
        colon = text.find(":", at, at + _LABEL_REACH)
        if colon < 0 or text[colon + 1 : colon + 2] not in (" ", "\t"):
            continue
        lo = max(at - _LABEL_REACH, 0)
        found = [i + len(e) for e in _LABEL_EDGES if (i := text.rfind(e, lo, at)) >= 0]
        if found:
            start = max(found)
        elif lo == 0:
            start = 0  # the text's first line
        else:
            continue
        if start in tried:
            continue
        tried.add(start)
        m = _LABEL.match(text, start)
        if m is None or m.end("name") < at:
            continue
        kind = _kind("_".join(m["name"].split()))
        if kind != _ORDINARY and (span := _value_span(text, m.end(), kind)) is not None:
            spans.append(span)
    return _cut(text, sorted(set(spans)))


# -- a table: the column of a header named like a secret (the AWS console's CSV) ----------

_ROW = re.compile(rf"(?:(?!{_EOL}).)+")


def _columns(text: str, stems: list[int]) -> str:
    """``text`` with the fields, under a comma-separated header naming a secret, of the rows
    that follow it (as many fields as the header) redacted. Only a line with a stem and a
    comma is read as a header."""
    headers: list[int] = []
    line_end = -1
    for at in stems:
        if at < line_end:
            continue  # a stem of the line just looked at
        ends = [e for e in (text.find("\n", at), text.find("\\n", at)) if e >= 0]
        line_end = min(ends) if ends else len(text)
        start = _line_start(text, at, 400)
        if text.find(",", start, line_end) >= 0:
            headers.append(start)
    spans: list[tuple[int, int]] = []
    for start in headers:
        secret: list[int] = []
        width = 0
        for row in _ROW.finditer(text, start):
            fields = row[0].split(",")
            if not secret:
                # the header's first field may follow what a line starts with (``log: ``)
                names = [_LEAD.split(fields[0])[-1], *fields[1:]]
                if len(fields) < 2 or not all(_HEADER_FIELD.fullmatch(f.strip()) for f in names):
                    break
                width = len(fields)
                secret = [
                    i
                    for i, f in enumerate(names)
                    if _kind("_".join(f.strip().split())) != _ORDINARY
                ]
                if not secret:
                    break
                continue
            if len(fields) != width:
                break
            at = row.start()
            for i, f in enumerate(fields):
                if i in secret and f.strip():
                    begin = at + sum(len(x) + 1 for x in fields[:i])
                    spans.append((begin, begin + len(f)))
    return _cut(text, sorted(set(spans)))


_HEADER_FIELD = re.compile(r"[A-Za-z][A-Za-z0-9 _-]{0,40}")
_LEAD = re.compile(r"[:\"]\s*")


# -- look-alike letters: folded before a name is tested -----------------------------------

# Letters of other scripts that read as Latin ones (after Unicode's confusables): a name
# written with them (``password`` with a Cyrillic er and a, U+0440 and U+0430) names what
# the Latin one does. Cyrillic, Greek, Armenian and Latin look-alikes, each to its letter.
_LOOK_ALIKES = {
    "a": "\u0430\u03b1\u0251",  # Cyrillic a, Greek alpha, Latin alpha
    "c": "\u0441\u03f2",  # Cyrillic es, Greek lunate sigma
    "d": "\u0501",
    "e": "\u0435",
    "h": "\u04bb\u0570",  # Cyrillic shha, Armenian ho
    "i": "\u0456\u03b9\u0131\u0269",  # Ukrainian i, Greek iota, dotless i, Latin iota
    "j": "\u0458\u03f3",
    "k": "\u043a\u03ba",
    "l": "\u04cf",
    "n": "\u0578",
    "o": "\u043e\u03bf\u0585",
    "p": "\u0440\u03c1",  # Cyrillic er, Greek rho
    "q": "\u051b",
    "s": "\u0455",
    "u": "\u03c5\u057d",
    "v": "\u03bd",
    "w": "\u051d",
    "x": "\u0445\u03c7",
    "y": "\u0443",
    "A": "\u0410\u0391",
    "B": "\u0412\u0392",
    "C": "\u0421",
    "E": "\u0415\u0395",
    "H": "\u041d\u0397\u04ba",
    "I": "\u0406\u04c0\u0399",
    "J": "\u0408",
    "K": "\u041a\u039a",
    "M": "\u041c\u039c",
    "N": "\u039d",
    "O": "\u041e\u039f",
    "P": "\u0420\u03a1",
    "Q": "\u051a",
    "S": "\u0405",
    "T": "\u0422\u03a4",
    "W": "\u051c",
    "X": "\u0425\u03a7",
    "Y": "\u0423\u03a5",
    "Z": "\u0396",
}
_CONFUSABLES = {ord(c): latin for latin, chars in _LOOK_ALIKES.items() for c in chars}


def _compatibility_letters() -> dict[int, str]:
    """Characters that NFKC turns into one ASCII character (fullwidth forms, mathematical
    and circled letters, super- and subscripts, odd spaces), from the blocks that hold
    them: one character for one, so a folded text keeps every position."""
    table: dict[int, str] = {}
    blocks = ((0xA0, 0x250), (0x2000, 0x2200), (0x2460, 0x2500), (0xFF00, 0xFFF0))
    for lo, hi in (*blocks, (0x1D400, 0x1D800), (0x1F130, 0x1F190)):
        for code in range(lo, hi):
            folded = unicodedata.normalize("NFKC", chr(code))
            if len(folded) == 1 and folded.isascii():
                table[code] = folded
    return table


_FOLD: dict[int, str] = {**_compatibility_letters(), **_CONFUSABLES}
_NOT_ASCII = re.compile(r"[^\x00-\x7f]")


def _foldable(text: str) -> bool:
    """Whether ``text`` has a letter that _FOLD folds (found among its few letters outside
    ASCII: a regex of all of them is slow on every letter)."""
    return any(ord(c) in _FOLD for c in _NOT_ASCII.findall(text))


def _fold_name(name: str) -> str:
    """A name as the name test reads it: NFKC, look-alike letters as Latin ones, and no
    invisible characters (zero-width spaces and joiners, soft hyphens)."""
    folded = unicodedata.normalize("NFKC", name).translate(_CONFUSABLES)
    return "".join(c for c in folded if unicodedata.category(c) != "Cf")


def _unfold(text: str, folded: str, clean: str) -> str:
    """``text`` with what redaction cut out of ``folded`` (``text`` folded letter for
    letter, so of the same length) cut out at the same places: the letters around stay
    as they were written. ``clean`` is ``folded`` redacted: its pieces between two
    ``[REDACTED]`` are pieces of ``folded``, in order."""
    pieces = clean.split(REDACTED)
    out = [text[: len(pieces[0])]]
    at = len(pieces[0])
    if not folded.startswith(pieces[0]):
        return clean
    for i, piece in enumerate(pieces[1:], 1):
        if i == len(pieces) - 1:
            found = len(folded) - len(piece) if folded.endswith(piece) else -1
        else:
            found = folded.find(piece, at + 1)
        if found <= at:
            return clean  # not a text cut at places: the folded one, redacted
        out += (REDACTED, text[found : found + len(piece)])
        at = found + len(piece)
    return "".join(out)


_PROSE_NEXT = re.compile(r"[ \t]+[a-z]+\b")


def _value_span(text: str, at: int, kind: int) -> tuple[int, int] | None:
    """The span of a value at ``at`` that a name of this kind makes a secret, or None."""
    v = _VALUE.match(text, at)
    group = None if v is None else v.lastgroup
    if v is None or group is None:
        return None
    value = v[group]
    if group == "v5" and value.isalpha() and value.islower() and _PROSE_NEXT.match(text, v.end()):
        return None  # a word of prose (``auth: token refreshed for``), not a value
    if (
        not value
        or _NOT_A_VALUE.fullmatch(value)
        or (kind == _TOKENISH and value.isdigit())
        or (kind == _MATERIAL and not _looks_like_key(value))
    ):
        return None
    return v.span(group)
