"""Basic redaction of a decision's ``raw`` payload (SPEC §3).

``raw`` is whatever a harness sent: hook payloads, shell commands, code, HTTP snippets. A
credential in it would reach the turn topic, the changelog and ``/sessions/{id}``, so it is
cut out wherever it sits (a value, a line of text, a URL, a dict key), and only it: the rest
is kept so that a translator defect stays debuggable. A credential is found by

- its shape: vendor formats with a fixed prefix (``sk_live_``, ``AIza``, ``npm_``, ...),
  JWTs, chat webhook URLs, and key material in every wrapping a harness hands over: PEM
  blocks (also as a JSON list of lines), PEM encoded again in base64 (Kubernetes secrets),
  bare base64 DER and OpenSSH key bodies, PuTTY key files;
- its place: the password of a URL, an ``Authorization`` or ``Cookie`` header, ``curl -u
  user:pass``, SQL ``IDENTIFIED BY '…'``, a signature in a query string, the password of a
  ``.netrc`` entry or a ``.pgpass`` line, and the password arguments of common tools
  (``mysql -p``, ``sshpass``, ``redis-cli -a``, ``zip -P``, ``ldapsearch -w``, ...);
- its name: the value of a dict key, ``name=value``/``name: value`` in text (YAML block
  scalars too), ``config set name value``, a ``--flag`` or ``-flag`` or an XML element named
  like a secret. Names are split into words, so ``db_pass``, ``apiKeys`` and ``passwords``
  name secrets while ``max_tokens``, ``token_count`` and ``password_field`` (counts and
  metadata) do not; key files (``tls.key``, ``id_rsa``) are names of key material. A name
  is tested after NFKC and a fold of look-alike letters (Cyrillic, Greek, Armenian), so
  ``password`` with a Cyrillic er and a (U+0440, U+0430), or in fullwidth letters, names a
  secret too;
- its structure, as values and as JSON or YAML text: the value of a name/value pair whose
  name names a secret (``{"name": "DB_PASSWORD", "value": …}``, ``{"key": …, "value": …}``),
  an argument list read as the command line it is (``["sshpass", "-p", …]``), the parts of
  a JWT given as sibling values (header, payload, signature).

Text that is encoded is decoded and searched again: percent-encoded text (a URL, a form
body, a logged header), so ``%22password%22%3A%22…%22`` goes as ``"password":"…"`` would;
base64 that decodes to text (a ``.env`` file, JSON), which goes whole when that text holds a
credential, to a bounded depth and length.

Under a secret's name, values that cannot be one are kept: booleans, nulls, numbers under a
name that may count tokens, and in text code and references (``form.get(...)``, ``$PW``).
There is no entropy guess: a bare random string with no name, prefix or place is kept.

Most values are ids, paths and prose with no credential: each rule is behind a screen (a
substring or one small regex) so that they pay for a few ``in`` tests, not for the rules.
"""

from __future__ import annotations

import binascii
import functools
import itertools
import re
import unicodedata
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple
from urllib.parse import quote, unquote

import orjson

REDACTED = "[REDACTED]"

# Short texts are redacted once and remembered: names and values repeat from record to
# record (keys of ``raw``, hook names, paths), and every rule is a pure function of the
# text. At most this many of at most this many characters: a few MiB.
_REMEMBERED = 8192
_REMEMBERED_CHARS = 256

# -- shape: the whole token goes ---------------------------------------------------------

# The armour of key material: PEM private keys, PGP private key blocks, OpenVPN static
# keys, SSH2 (RFC 4716) private keys. A block with no END runs to the end of the text.
_KEY_ARMOUR = (
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|-----BEGIN OpenVPN Static key V1-----"
    r"|---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----"
)
_KEY_ARMOUR_END = (
    r"-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|-----END OpenVPN Static key V1-----"
    r"|---- END SSH2 ENCRYPTED PRIVATE KEY ----"
)
_KEY_BEGIN = re.compile(_KEY_ARMOUR)
_KEY_END = re.compile(_KEY_ARMOUR_END)
# A line break as text carries it: itself, or escaped once or more inside JSON text.
_EOL = r"(?:\r?\n|(?:\\+r)?\\+n)"
# What separates the lines of a wrapped block: a line break (then an indented YAML value
# goes on), or the end of one string of a JSON list and the start of the next.
_SEP = rf"(?:[ \t]*{_EOL}[ \t]*|\\*\"[ \t]*,(?:\s|{_EOL})*\\*\")"
# The lines of base64 that follow the first one of a wrapped block, each a whole line.
_MORE_BASE64 = rf"(?:{_SEP}[A-Za-z0-9+/=]{{4,}}+(?![-:.\w]))*"
# Bare key material in base64: DER whose first field is a version number (PKCS#1 RSA and
# DSA, PKCS#8, SEC1 EC, PKCS#12), encrypted PKCS#8, the body of an OpenSSH private key.
# Certificates and public keys start otherwise.
_KEY_BASE64 = (
    r"(?:MII[A-Za-z0-9+/]{3}IBA[ADz]|MI[GH][A-Za-z0-9+/]AgE[AB]|M[A-Za-z0-9+/]{2}CAQ(?:Aw|EE)"
    r"|MII[A-Za-z0-9+/]{5}BgkqhkiG9w0BBQ[0-9A-Za-z]|b3BlbnNzaC1rZXktdjE)"
)
# Not inside a word, but may follow a line break escaped in JSON text (``\ntoken``).
_SHAPE_START = r"(?:(?<![A-Za-z0-9])|(?<=\\[nrt]))"
_SHAPE_FORMATS = "|".join(
    (
        rf"(?:{_KEY_ARMOUR})(?s:.*?)(?:{_KEY_ARMOUR_END}|\Z)",
        # A PEM encoded again in base64, as a Kubernetes secret's ``data`` holds it:
        # checked when found (a certificate is public, see _shape).
        rf"(?P<pem64>LS0tLS1CRUdJTi[A-Za-z0-9+/=]*{_MORE_BASE64})",
        rf"{_KEY_BASE64}[A-Za-z0-9+/=]{{40,}}{_MORE_BASE64}",
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
        # more cloud, platform and service formats
        r"LTAI[A-Za-z0-9]{20,}",  # Alibaba Cloud access key id
        r"AKID[A-Za-z0-9]{32,}",  # Tencent Cloud secret id
        r"v1\.0-[0-9a-f]{24}-[0-9a-f]{140,}",  # Cloudflare origin CA key
        r"figd_[\w-]{40,}",
        r"fio-u-[\w-]{60,}",
        r"access-(?:sandbox|development|production)-[0-9a-f]{8}-[0-9a-f-]{27,}",  # Plaid
        r"aio_[A-Za-z0-9]{28,}",  # Adafruit IO
        r"CLOJARS_[a-z0-9]{60,}",
        r"tk-us-[\w-]{48,}",  # Scalingo
        r"tfp_[\w.-]{50,}",  # Typeform
        r"fo1_[\w-]{40,}",  # Fly.io
        r"rnd_[A-Za-z0-9]{32,}",  # Render
        r"nfp_[A-Za-z0-9]{36,}",  # Netlify
        r"napi_[a-z0-9]{60,}",  # Neon
        r"ddp_[A-Za-z0-9]{36,}",  # Deno Deploy
        r"bkua_[0-9a-f]{40,}",  # Buildkite
        r"CCIPAT_[A-Za-z0-9]{20,}_[0-9a-f]{40,}",  # CircleCI
        r"sgp_(?:local_)?[0-9a-f]{40,}",  # Sourcegraph
        r"API-[A-Z0-9]{26,}",  # Octopus Deploy
        r"pat\.[A-Za-z0-9_-]{22}\.[0-9a-f]{24}\.[A-Za-z0-9]{20}",  # Harness
        r"sk_[0-9a-f]{48}",  # ElevenLabs
        r"NR(?:II|JS|RA)-[A-Za-z0-9]{27,}",  # New Relic ingest, browser, REST keys
        r"access_token\$production\$[0-9a-z]{16}\$[0-9a-f]{32}",  # Braintree
        r"AAAA[\w-]{7}:APA91b[\w-]{100,}",  # Firebase Cloud Messaging server key
        # 1Password secret key
        r"A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})(?:-[A-Z0-9]{5}){3}",
        r"glsa_[A-Za-z0-9]{32}_[0-9a-f]{8}",
        r"sl\.[\w-]{130,}",  # Dropbox short-lived
    )
)
_TELEGRAM = r"(?<![0-9])\d{8,10}:AA[\w-]{30,}"  # a bot's token (in a URL path after "bot")
_SHAPES = re.compile(rf"{_SHAPE_START}(?:{_SHAPE_FORMATS})|{_TELEGRAM}")


_CHUNK = re.compile(r"\S{16,}")


def _first_shape(text: str) -> int | None:
    """Where the first shape may start, or None: cheaper than searching all of ``text``,
    since every shape but an armoured block is 16 or more characters without a space, and
    ordinary text has few such runs."""
    armour = [i for i in (text.find("-----BEGIN"), text.find("---- BEGIN")) if i >= 0]
    for chunk in _CHUNK.finditer(text):
        if armour and chunk.start() > armour[0]:
            break
        if _SHAPES.search(text, chunk.start(), chunk.end()) is not None:
            return chunk.start()
    return armour[0] if armour else None


def _shapes(text: str, start: int) -> str:
    """``text`` with every shape from ``start`` on replaced."""
    parts: list[str] = []
    at = 0
    for m in _SHAPES.finditer(text, start):
        parts += (text[at : m.start()], _shape(m))
        at = m.end()
    parts.append(text[at:])
    return "".join(parts)


_BASE64_NOISE = re.compile(r"\\+[rn]|[^A-Za-z0-9+/]")
# What the decoded PEM holds when it is key material (a certificate bundle may hold its key).
_KEY_MARKERS = (b"PRIVATE KEY", b"OpenVPN Static key", b"PuTTY-User-Key-File")


def _shape(match: re.Match[str]) -> str:
    """A shape's replacement; a base64 PEM is kept when it decodes to no key (a CA bundle)."""
    pem64 = match["pem64"]
    if pem64 is not None:
        data = _BASE64_NOISE.sub("", pem64)
        try:
            decoded = binascii.a2b_base64(data[: len(data) // 4 * 4])
        except binascii.Error:
            return REDACTED  # not even base64 after the armour: not worth keeping
        if not any(marker in decoded for marker in _KEY_MARKERS):
            return pem64
    return REDACTED


# A PuTTY key file: the lines after ``Private-Lines: N`` are the private key.
_PUTTY_LINES = re.compile(r"Private-Lines:[ \t]*(\d{1,4})[ \t]*")


# -- place: a prefix that says a credential follows is kept, the credential goes ----------
#
# A rule is tried only where one of its needles (lower case) occurs, and its pattern
# matches from there: a scan for a few literals costs far less than a regex tried at every
# position of a long text. A rule of a command or a keyword also needs the needle to start
# a word (see _starts_word).

# The rest of a line, which in JSON text ends at an escaped line break too.
_LINE = r"(?:[^\r\n\\]|\\(?![nr]))*?"
_AUTH_SCHEME = r"(?:bearer|basic|digest|token|bot|negotiate|ntlm|apikey|sso-key|ssws|oauth)"


def _keep_prefix(match: re.Match[str]) -> str:
    return "".join(g for g in match.groups() if g is not None) + REDACTED


# A user name after a user flag: a word that is no other flag.
_USER = r"[^\s\"'\\-][^\s\"'\\]*"
# A port or a port mapping, as ``-p`` takes them (``5432``, ``127.0.0.1:8080:80/tcp``).
_NOT_PORT = r"(?!\d+(?:[.:]\d+)*(?:/(?:tcp|udp|sctp))?(?![^\s\"'\\]))"

# ``htpasswd -b FILE USER PASSWORD``, or with ``-n`` (no file) ``htpasswd -nb USER PASSWORD``.
_ARG = r"[ \t]+([^\s\"'\\]+)"


def _htpasswd(match: re.Match[str]) -> str:
    flags = match[1]
    which = 3 if "n" in flags else 4
    if "b" not in flags or match[which] is None:
        return match[0]  # without -b the password is asked for, not given
    start, end = match.start(which) - match.start(), match.end(which) - match.start()
    return match[0][:start] + REDACTED + match[0][end:]


class _Place(NamedTuple):
    needles: tuple[str, ...]
    pattern: re.Pattern[str]
    word: bool = True  # the needle starts a word
    replace: Callable[[re.Match[str]], str] = _keep_prefix


_PLACES: tuple[_Place, ...] = (
    _Place(("://",), re.compile(r"(://[^\s:/@\"'<>]*:)[^\s/?#\"'<>]*(?=@)"), word=False),
    _Place(
        ("authorization", "cookie"),
        re.compile(
            r"(?i)((?:authorization|cookie)"
            rf"\\?[\"']?[ \t]*[:=][ \t]*+\\?+[\"']?+(?:{_AUTH_SCHEME}[ \t]+)?+)"
            # not a placeholder (``<token>``) or a reference (``$TOKEN``)
            r"(?!<[^<>\r\n]*>|\$\{?[A-Za-z_])"
            r"[^\r\n\"'\\]+"
        ),
    ),
    _Place(
        ("bearer",),
        # not a word of prose after it (``bearer token``, ``Bearer realm=``)
        re.compile(r"((?i:bearer)[ \t]+)(?!(?:[a-z]+|[A-Z][a-z]+)\b)[A-Za-z0-9\-._~+/]+=*"),
    ),
    _Place(
        ("-u", "--user"),
        re.compile(r"(?<![\w-])((?:-u|--user)(?:[ \t]+|=)[\"']?(?!\d+:\d+\b)[^\s:\"']+:)[^\s\"']+"),
        word=False,
    ),
    _Place(
        # ``-p VALUE`` next to a user flag (``cqlsh -u ana -p …``, ``mosquitto_pub -u ana -P
        # …``), either order; not a port (``psql -U app -p 5432``, ``docker run -u 1000 -p
        # 8080:80``), and ``-p`` with no value (``mkdir -p``) has no user flag beside it.
        ("-u", "--user", "-p"),
        re.compile(
            rf"(?<![\w-])((?:-[uU]|--user(?:name)?)(?:[ \t]+|=){_USER}{_LINE}[ \t]-[pP][ \t]+)"
            rf"{_NOT_PORT}[^\s\"'\\]+"
            rf"|(?<![\w-])(-[pP][ \t]+){_NOT_PORT}[^\s\"'\\]+"
            rf"(?={_LINE}[ \t](?:-[uU]|--user(?:name)?)(?:[ \t]+|=){_USER})"
        ),
        word=False,
    ),
    _Place(
        ("mysql", "mariadb", "sshpass", "docker", "podman", "nerdctl", "helm"),
        re.compile(
            rf"((?:mysql|mysqldump|mysqladmin|mariadb)\b{_LINE}[ \t]-p)[^\s\"']+"
            r"|(sshpass[ \t]+-p[ \t]*)\S+"
            rf"|((?:docker|podman|nerdctl|helm)[ \t]+(?:registry[ \t]+)?login\b{_LINE}"
            r"[ \t]-p[ \t]+)\S+"
        ),
    ),
    _Place(
        ("identified", "password"),
        re.compile(
            r"(?i)((?:identified[ \t]+by|password)[ \t]+')(?:[^'\r\n]|'')*(?=')"
            r"|((?:identified[ \t]+by|password)[ \t]+\")[^\"\r\n]*(?=\")"
        ),
    ),
    _Place(
        (
            *("hooks.slack.com/", "discord.com/api/webhooks/", "discordapp.com/api/webhooks/"),
            *(".webhook.office.com/webhookb2/", "hooks.zapier.com/hooks/catch/", "/hooks/"),
        ),
        re.compile(
            r"(?i)(hooks\.slack\.com/(?:services|workflows|triggers)/)[\w/]+"
            r"|(discord(?:app)?\.com/api/webhooks/)\d+/[\w-]+"
            r"|(\.webhook\.office\.com/webhookb2/)[^\s\"'<>]+"
            r"|(hooks\.zapier\.com/hooks/catch/)[\w/]+"
            r"|(/hooks/)[a-z0-9]{26}\b"
        ),
        word=False,
    ),
    _Place(
        (
            *("sig=", "signature=", "key=", "x-amz-signature=", "x-goog-signature="),
            "x-amz-security-token=",
        ),
        re.compile(
            r"(?i)(?<=[?&;])((?:sig|signature|key|x-amz-signature|x-goog-signature"
            r"|x-amz-security-token)=)[^&#\s\"'<>]+"
        ),
        word=False,
    ),
    _Place(
        # Tools that take a password as a positional or single-letter argument.
        (
            *("redis-cli", "zip", "unzip", "7z", "sqlcmd", "bcp", "mongo", "ldap"),
            *("smbclient", "smbmap", "rpcclient"),
        ),
        re.compile(
            rf"(redis-cli\b{_LINE}[ \t]-a[ \t]+)[^\s\"'\\]+"
            rf"|((?:un)?zip\b{_LINE}[ \t]-P[ \t]+)[^\s\"'\\]+"
            rf"|(7z[az]?\b{_LINE}[ \t]-p)[^\s\"'\\]+"
            rf"|((?:sqlcmd|bcp)\b{_LINE}[ \t]-P[ \t]*)[^\s\"'\\]+"
            rf"|(mongo(?:sh|dump|restore|import|export)?\b{_LINE}[ \t]-p[ \t]+)[^\s\"'\\]+"
            rf"|(ldap(?:search|add|modify|delete|passwd|whoami|compare|modrdn)\b{_LINE}"
            r"[ \t]-w[ \t]+)[^\s\"'\\]+"
            rf"|((?:smbclient|smbmap|rpcclient)\b{_LINE}[ \t](?:-U|--user(?:name)?)[ =\t]*"
            r"[^\s%\"'\\]+%)[^\s\"'\\]+"
        ),
    ),
    _Place(
        ("add-generic-password", "add-internet-password", "requirepass", "masterauth"),
        re.compile(
            rf"(add-(?:generic|internet)-password\b{_LINE}[ \t]-w[ \t]+)[^\s\"'\\]+"
            r"|((?:requirepass|masterauth)[ \t]+)[^\s\"'\\]+"
        ),
    ),
    _Place(
        # .netrc: ``machine HOST login USER password PASS``, on one line or several.
        ("machine", "default"),
        re.compile(
            r"((?:machine(?:\s|\\+[nrt])+[^\s\"'\\]+|default)"
            r"(?:(?:\s|\\+[nrt])+(?:login|account|port|protocol|force)(?:\s|\\+[nrt])+[^\s\"'\\]+)*"
            r"(?:\s|\\+[nrt])+password(?:\s|\\+[nrt])+)(?:\"[^\"\r\n]*\"|[^\s\"'\\]+)"
        ),
    ),
    _Place(
        # ``--name NAME ... --value VALUE`` of a secret store (``az keyvault secret set``,
        # ``aws ssm put-parameter``), when NAME names a secret.
        ("--name",),
        re.compile(
            r"(?i)(--name[ \t=]+[\"']?[\w./:-]*(?:pass|pwd|secret|token|key|cred)[\w./:-]*[\"']?"
            rf"{_LINE}[ \t]--value[ \t=]+[\"']?)[^\s\"']+"
        ),
        word=False,
    ),
    _Place(
        ("htpasswd",),
        re.compile(rf"htpasswd((?:[ \t]+-[A-Za-z]+)+){_ARG}{_ARG}(?:{_ARG})?"),
        replace=_htpasswd,
    ),
    _Place(
        ("private-lines",),  # a PuTTY key file
        re.compile(
            rf"(Private-Lines:[ \t]*\d+{_SEP})[A-Za-z0-9+/=]{{4,}}+(?![-:.\w]){_MORE_BASE64}"
        ),
        word=False,
    ),
)
_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _starts_word(text: str, at: int) -> bool:
    """Whether a word starts at ``at``: after no word character, or after a line break
    escaped in JSON text (``...\\nmysql -p...``)."""
    return (
        at == 0
        or text[at - 1] not in _WORD_CHARS
        or (at >= 2 and text[at - 2] == "\\" and text[at - 1] in "nrt")
    )


def _occurrences(lower: str, needles: tuple[str, ...]) -> list[int]:
    """Where the needles occur, in order (``str.find`` per needle: faster than one regex
    of them all, which CPython tries branch by branch at every position)."""
    found: list[int] = []
    for needle in needles:
        at = lower.find(needle)
        while at >= 0:
            found.append(at)
            at = lower.find(needle, at + 1)
    if len(found) > 1:
        found = sorted(set(found))
    return found


def _apply(place: _Place, text: str, starts: list[int]) -> str:
    parts: list[str] = []
    at = 0
    for start in starts:
        if start < at or (place.word and not _starts_word(text, start)):
            continue
        m = place.pattern.match(text, start)
        if m is None:
            continue
        clean = place.replace(m)
        if clean != m[0]:
            parts += (text[at:start], clean)
            at = m.end()
    if not parts:
        return text
    parts.append(text[at:])
    return "".join(parts)


def _places(text: str, lower: str) -> str:
    for place in _PLACES:
        starts = _occurrences(lower, place.needles)
        if starts:
            clean = _apply(place, text, starts)
            if clean != text:
                text, lower = clean, _lower(clean)
    return text


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _lower(text: str) -> str:
    """``text`` in lower case, each character where it was (``str.lower`` may turn one
    character into two, and the needles' positions must be the text's)."""
    lower = text.lower()
    return lower if len(lower) == len(text) else text.translate(_ASCII_LOWER)


# .pgpass: ``host:port:database:user:password``, the host a name (not a number, so a MAC
# address or a time is no host), the port a number or ``*``, ``\:`` an escaped colon. Found
# from its ``:port:``, then matched from the start of its host.
_PGPASS_FIELD = r"(?:[^:\s\"'\\]|\\[:\\])+"
_PGPASS_PORT = re.compile(r":(?:\d{1,5}|\*):")
_PGPASS = re.compile(
    r"((?:\*|[\w.-]*[A-Za-z_.][\w.-]*):(?:\d{1,5}|\*):"
    rf"{_PGPASS_FIELD}:{_PGPASS_FIELD}:){_PGPASS_FIELD}(?![^\s\"'\\])"
)
_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-*")


def _pgpass(text: str) -> str:
    starts = []
    for port in _PGPASS_PORT.finditer(text):
        start = port.start()
        while start > 0 and text[start - 1] in _HOST_CHARS:
            start -= 1
        before = text[max(start - 2, 0) : start]
        if not before or before[-1] in " \t\r\n\"'" or before in ("\\n", "\\r", "\\t"):
            starts.append(start)
    return _apply(_Place((), _PGPASS, word=False), text, starts) if starts else text


# -- name: the value of something named like a secret goes -------------------------------

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
# Every secret's name has one of these.
_STEMS = (
    *("pass", "pw", "secret", "tok", "auth", "key", "cred", "cookie", "jwt", "bearer"),
    *("rsa", "dsa", "25519", "ppk"),
)
_STEM = re.compile("|".join(_STEMS))
_SECRET_WORDS = frozenset(
    {
        *("password", "passwords", "passwd", "pwd", "pw", "pass", "pswd", "passphrase"),
        *("secret", "secrets", "token", "tokens", "apikey", "apikeys", "privkey", "jwt"),
        *("credential", "credentials", "cred", "creds", "cookie", "cookies"),
        *("authorization", "auth", "bearer"),
        # the password options of openssl and keytool
        *("passin", "passout", "storepass", "keypass", "srcstorepass", "deststorepass"),
        *("srckeypass", "destkeypass"),
    }
)
# One word may glue several: ``accesstoken``, ``dbpassword``, ``xapikey``.
_SECRET_ENDINGS = ("password", "passwd", "secret", "token", "apikey", "accesskey", "privatekey")
_KEY_KINDS = (
    *("api", "private", "priv", "access", "secret", "signing", "encryption", "master"),
    *("tls", "ssl", "rsa", "dsa", "ecdsa", "25519", "ssh", "pgp", "gpg", "preshared"),
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
# The files that hold a private key, by the names tools give them: always key material.
_KEY_NAME = re.compile(
    r"(?:^|[^a-z0-9])(?:id_(?:rsa|dsa|ecdsa|ed25519)(?:_sk)?|(?:tls|ssl)\.key|[\w.-]*\.ppk)$"
)
# Any other ``*.key`` or ``*key.pem``: may be a key file or an object's key (``s3.key``), so
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
    hits = {w for w in words if w in _SECRET_WORDS or w.endswith(_SECRET_ENDINGS)}
    hits |= {a + b for a, b in itertools.pairwise(words)} & _SECRET_PAIRS
    if not hits or _ABOUT_A_SECRET.intersection(words):
        return _ORDINARY
    if hits <= _TOKEN_WORDS:
        return _ORDINARY if _COUNTED.intersection(words) else _TOKENISH
    return _SECRET


_HEX = frozenset("0123456789abcdef")
_KEYISH = re.compile(r"(?:[A-Za-z0-9+/=_-]|\s|\\+[nr])+")


def _looks_like_key(value: Any) -> bool:
    """Key material: an armoured block, or 32 characters or more of base64 or hex in mixed
    case with digits (a path, a file name or an object key has dots, or one case)."""
    if isinstance(value, list):
        return all(isinstance(v, str) for v in value) and _looks_like_key("\n".join(value))
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


# ``name = value``, ``name: value``, ``"name": "value"``, ``name: str = value``, ``--name=v``.
_ASSIGNMENT = re.compile(
    r"(?<![\w.$])(?P<name>[A-Za-z_][\w.-]*+)"
    r"\\*+[\"']?[ \t]*+(?::[ \t]*+[A-Za-z_][\w\[\]., |]*?[ \t]*+)?(?:={1,3}|!==?|:=|=>|:)[ \t]*+"
)
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
_ELEMENT = re.compile(r"<(?P<name>[\w:.-]+)(?:\s[^<>]*)?>(?P<value>[^<]+)</(?P=name)>")
_VALUE = re.compile(
    rf"(?i:{_AUTH_SCHEME}[ \t]+)?+"
    r"(?:(?P<bs>\\+)\"(?P<v1>[^\r\n]*?)(?P=bs)\""  # \"escaped\" inside JSON text
    r"|\"(?P<v2>(?:[^\"\\\r\n]|\\.)*)\""
    r"|'(?P<v3>(?:[^'\\\r\n]|\\.)*)'"
    r"|`(?P<v4>[^`\r\n]*)`"
    r"|(?P<v6>\[[^\]\r\n]*\]|\{[^}\r\n]*\})"  # a flat JSON array or object
    # a YAML block scalar (``|`` or ``>``): its lines, as far as they keep the indentation
    rf"|[|>][-+]?[1-9]?[ \t]*{_EOL}(?P<indent>[ \t]+)"
    rf"(?P<v7>[^\r\n\\]*(?:{_EOL}(?P=indent)[^\r\n\\]*)*)"
    r"|(?P<v5>(?:[^\s\"'`<>&;\\]|\\(?![nrt\"\\]))+))"  # ends at an escaped newline
)
# Not a literal: code (``form.get(``, ``os.environ[``), references (``$PW``, ``${PW}``,
# ``{{ pw }}``), nulls and type names (``password: str``), what was already redacted, a
# YAML block's indicator with no block after it.
_NOT_A_VALUE = re.compile(
    r"[A-Za-z_][\w.]*(?:\((?:[\w., ]*\))?[),\];]*|\[)|[|>][-+]?[1-9]?|[(\[{]"
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
        if m is None:
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


# -- percent-encoded text: decoded, searched, and encoded again where a credential went ---

_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
_RUN_REST = re.compile(r"[^\s\"'<>\\]*")
_RUN_STOP = frozenset(" \t\r\n\f\v\"'<>\\")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~%")


def _percent_runs(text: str, depth: int) -> str:
    """``text`` with each run of percent-encoded characters (no space, quote or bracket in
    it) searched once decoded."""
    parts: list[str] = []
    at = scanned = 0
    for m in _PERCENT.finditer(text):
        if m.start() < scanned:
            continue
        start = m.start()
        while start > scanned and text[start - 1] not in _RUN_STOP:
            start -= 1
        rest = _RUN_REST.match(text, m.end())
        end = m.end() if rest is None else rest.end()
        scanned = end
        run = text[start:end]
        clean = _percent_decoded(run, depth)
        if clean != run:
            parts += (text[at:start], clean)
            at = end
    if not parts:
        return text
    parts.append(text[at:])
    return "".join(parts)


def _percent_decoded(run: str, depth: int) -> str:
    """A run of percent-encoded text, unchanged unless its decoded text holds a credential.

    The redacted text is encoded again as the run was: what the run had literally stays
    literal, the rest is encoded; so the run reads as before but for ``[REDACTED]``. A run
    encoded twice is decoded twice, by the search of the decoded text.
    """
    plain = unquote(run)
    if plain == run:
        return run
    clean = _redact_text(plain, depth)
    if clean == plain:
        return run
    literal = "".join({c for c in run if c not in _UNRESERVED})
    return REDACTED.join(quote(piece, safe=literal) for piece in clean.split(REDACTED))


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


# -- base64: decoded, and gone whole when what it holds is a credential -------------------

# A whole run of base64, standard or URL-safe, long enough to hold ``name=value`` (16
# characters), whose first 12 bytes are ASCII: the first of every 4 characters then codes
# a byte under 128, a letter in A-Z or a-f. Most ids and words fail there, undecoded.
_BASE64_BODY = r"(?:[A-Za-f][A-Za-z0-9+/_-]{3}){4}[A-Za-z0-9+/_-]*={0,2}"
_BASE64_RUN = re.compile(rf"(?:(?<![A-Za-z0-9+/_-])|(?<=\\[nrt])){_BASE64_BODY}")
# The shapes or a run of base64, in one search: most texts have neither.
_SHAPES_OR_BASE64 = re.compile(
    rf"{_SHAPE_START}(?:{_SHAPE_FORMATS}|(?P<b64>(?<![+/_-]){_BASE64_BODY}))|{_TELEGRAM}"
)
_BASE64_ANY = re.compile(r"[A-Za-z0-9+/_-]+={0,2}")
# Base64 in base64 in ... is decoded this many levels deep; longer runs are not decoded.
_BASE64_DEPTH = 4
_BASE64_MAX = 1 << 20
# Bytes that text does not hold (tab, line breaks and form feed aside).
_NOT_TEXT = re.compile(rb"[\x00-\x08\x0e-\x1f\x7f]")
_URLSAFE = str.maketrans("-_", "+/")
_WRAP = re.compile(_SEP)


def _base64_text(run: str) -> str | None:
    """What a run of base64 decodes to when that is text (UTF-8, no control characters),
    else None. Its first bytes are decoded first: most runs are ids, hashes, words or
    binary data, and say so there."""
    if len(run) > _BASE64_MAX or run.islower() or run.isupper() or run.isdigit():
        return None  # one case or digits only: a word, a hex hash, an id
    body = run.rstrip("=")
    if "-" in body or "_" in body:
        if "+" in body or "/" in body:
            return None  # both alphabets: a path or a name, not base64
        body = body.translate(_URLSAFE)
    if len(body) % 4 == 1:
        return None
    body += "=" * (-len(body) % 4)
    try:
        if _NOT_TEXT.search(binascii.a2b_base64(body[:24])):
            return None
        data = binascii.a2b_base64(body)
        text = data.decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    return None if _NOT_TEXT.search(data) else text


def _scan(text: str, depth: int) -> tuple[str, int | None]:
    """One pass over the runs of 16 or more characters without a space, where every shape
    but an armoured block and every run of base64 worth decoding are: ``text`` without
    the runs of base64 that hold a credential (_base64_blobs), and where its first shape
    may start (_first_shape)."""
    armour = [i for i in (text.find("-----BEGIN"), text.find("---- BEGIN")) if i >= 0]
    first = None
    shapes = True  # still looking for the first shape
    decode = depth < _BASE64_DEPTH
    spans: list[tuple[int, int]] = []
    done = 0  # where the last run of base64 ended
    for chunk in _CHUNK.finditer(text):
        start, end = chunk.span()
        if shapes and armour and start > armour[0]:
            shapes = False
        run = None
        if shapes and decode:
            found = _SHAPES_OR_BASE64.search(text, start, end)
            if found is None:
                continue
            if found["b64"] is None or _SHAPES.search(text, start, end) is not None:
                first, shapes = start, False
            if found["b64"] is not None and found.start() >= done:
                run = found
        elif shapes:
            if _SHAPES.search(text, start, end) is not None:
                first, shapes = start, False
            continue
        elif not decode:
            break
        if run is None and end > done:
            run = _BASE64_RUN.search(text, max(start, done), end)
        if run is not None:
            done = _base64_blobs(text, run, end, depth, spans)
    if spans:  # the text changed: look for its first shape again
        text = _cut(text, spans)
        return text, _first_shape(text)
    return text, first if first is not None else armour[0] if armour else None


def _base64_blobs(
    text: str, first: re.Match[str], end: int, depth: int, spans: list[tuple[int, int]]
) -> int:
    """The runs of base64 from ``first`` to ``end`` (a line, or lines of one width as
    ``base64`` wraps them, which may go past ``end``) whose decoded text holds a
    credential, added to ``spans``: each goes whole. Returns where the last run ended."""
    done = first.start()
    for m in itertools.chain((first,), _BASE64_RUN.finditer(text, first.end(), end)):
        begin, stop = m.span()
        stop, run = _wrapped(text, begin, stop)
        done = stop
        decoded = _base64_text(run)
        if decoded is not None and _redact_text(decoded, depth + 1) != decoded:
            spans.append((begin, stop))
    return done


def _wrapped(text: str, start: int, end: int) -> tuple[int, str]:
    """Where a run of base64 ends that goes on over lines of its width (the last one may
    be shorter; lines of a text, or strings of a JSON list in it), and the run."""
    run = [text[start:end]]
    width = end - start
    if width < 60 or width % 4:
        return end, run[0]
    while (gap := _WRAP.match(text, end)) is not None:
        line = _BASE64_ANY.match(text, gap.end())
        if line is None or line.end() - line.start() > width:
            break
        if line.end() < len(text) and text[line.end()] not in " \t\r\n\\\"',":
            break
        end = line.end()
        run.append(line[0])
        if line.end() - line.start() < width:
            break
    return end, "".join(run)


def _wrapped_lines(values: list[Any], out: list[Any]) -> None:
    """The lines of a list that make one run of base64 (``base64``'s output as lines) go
    when it holds a credential."""
    i = 0
    while i < len(values):
        v = values[i]
        if isinstance(v, str) and len(v) >= 60 and len(v) % 4 == 0 and _BASE64_ANY.fullmatch(v):
            j = i + 1
            while j < len(values) and isinstance(values[j], str):
                line = values[j]
                if len(line) > len(v) or not _BASE64_ANY.fullmatch(line):
                    break
                j += 1
                if len(line) < len(v):
                    break
            decoded = _base64_text("".join(values[i:j]))
            if j > i + 1 and decoded is not None and redact_text(decoded) != decoded:
                out[i:j] = [REDACTED] * (j - i)
            i = j
        else:
            i += 1


# -- a JWT given in parts: header, payload and signature as separate values ---------------

# A part of a JWT: base64url of a JSON object; a signature: a long run of base64url.
_JWT_PART = re.compile(r"(?:(?<![A-Za-z0-9_-])|(?<=\\[nrt]))eyJ[A-Za-z0-9_-]{8,}(?![\w=-])")
_SIGNATURE = re.compile(r"(?:(?<![A-Za-z0-9_-])|(?<=\\[nrt]))[A-Za-z0-9_-]{32,}={0,2}(?![\w=-])")
_NOT_JOSE, _JOSE_HEADER, _JOSE_CLAIMS = 0, 1, 2
# How far apart the parts of one JWT may be written.
_JWT_GAP = 200


def _jose(part: str) -> int:
    """Whether ``part`` is a JWT's header (a JSON object with ``alg``), another of its
    parts (a JSON object: the claims), or neither."""
    body = part.translate(_URLSAFE)
    try:
        doc = orjson.loads(binascii.a2b_base64(body + "=" * (-len(body) % 4)))
    except (binascii.Error, orjson.JSONDecodeError):
        return _NOT_JOSE
    if not isinstance(doc, dict):
        return _NOT_JOSE
    return _JOSE_HEADER if isinstance(doc.get("alg"), str) else _JOSE_CLAIMS


def _split_jwts(text: str) -> str:
    """``text`` without the parts of a JWT written apart (``h=eyJ…`` then ``p=eyJ…`` then
    ``s=…``): a header with a JSON object next to it, and the signature nearest them."""
    parts = [(m.start(), m.end(), _jose(m[0])) for m in _JWT_PART.finditer(text)]
    spans: set[tuple[int, int]] = set()
    for start, end, kind in parts:
        if kind != _JOSE_HEADER:
            continue
        near = [
            (max(s - end, start - e), s, e)
            for s, e, k in parts
            if k == _JOSE_CLAIMS and max(s - end, start - e) <= _JWT_GAP
        ]
        if not near:
            continue  # a header alone is public
        _, s, e = min(near)
        lo, hi = min(start, s), max(end, e)
        spans |= {(start, end), (s, e)}
        after = _SIGNATURE.search(text, hi)
        before = [
            m for m in _SIGNATURE.finditer(text, max(lo - _JWT_GAP, 0), lo) if m[0][:3] != "eyJ"
        ]
        if after is not None and after.start() - hi <= _JWT_GAP and after[0][:3] != "eyJ":
            spans.add(after.span())
        elif before:
            spans.add(before[-1].span())
    return _cut(text, sorted(spans))


def _jwt_parts(values: list[Any]) -> list[int]:
    """Which of sibling values (an object's, a list's) are the parts of a JWT given apart:
    a header and other parts as strings, and the signature beside them."""
    kinds = {
        i: _jose(v)
        for i, v in enumerate(values)
        if isinstance(v, str) and v[:3] == "eyJ" and _JWT_PART.fullmatch(v)
    }
    found = set(kinds.values())
    if _JOSE_HEADER not in found or _JOSE_CLAIMS not in found:
        return []
    return [
        i
        for i, v in enumerate(values)
        if kinds.get(i) or (i not in kinds and isinstance(v, str) and _SIGNATURE.fullmatch(v))
    ]


# -- a name and its value as two members: ``{"name": "DB_PASSWORD", "value": …}`` --------

# Members that name another member's value, and the members that hold it: Kubernetes, ECS
# and HAR ``name``/``value``, Postman and GitLab ``key``/``value``, CloudFormation's
# ``ParameterKey``/``ParameterValue``, Netlify's ``values``.
_PAIR_NAMES = frozenset(
    {"name", "key", "parametername", "parameterkey", "optionname", "variable", "header"}
)
_PAIR_VALUES = frozenset({"value", "values", "parametervalue", "optionvalue"})
_NAMES_A_VALUE, _HOLDS_A_VALUE = 1, 2
_PAIR_NEEDLES = ("name", "key", "variable", "header")
_PAIR_PREFIXES = ("parameter", "option", "header")
_PAIR_NAME = re.compile(
    r"(?i:name|key|variable|header)\\*[\"']?[ \t]*[:=][ \t]*"
    r"(?P<q>\\*[\"']?)(?P<name>[\w.:/@-]+)(?P=q)(?![\w.:/@-])"
)
_PAIR_VALUE = re.compile(r"(?i:(?:parameter|option)?values?)\\*[\"']?[ \t]*[:=][ \t]*")
# What ends one object of a text: a brace or bracket, or the next item of a YAML list.
_RECORD_EDGE = re.compile(r"[{}\[\]]|(?:\r?\n|\\+n)[ \t]*-[ \t]")
_RECORD_REACH = 300


def _pair_start(text: str, lower: str, at: int) -> int | None:
    """Where a member's name that holds ``at`` starts, if it starts a word (or follows
    one of the prefixes: ``ParameterKey``)."""
    for prefix in _PAIR_PREFIXES:
        if lower.endswith(prefix, 0, at) and _starts_word(text, at - len(prefix)):
            return at - len(prefix)
    return at if _starts_word(text, at) else None


def _pairs(text: str, lower: str) -> str:
    """``text`` with the value of each name/value pair whose name names a secret redacted:
    the value member found in the same object (JSON text, or one item of a YAML list)."""
    spans: list[tuple[int, int]] = []
    for at in _occurrences(lower, _PAIR_NEEDLES):
        m = _PAIR_NAME.match(text, at)
        if m is None or _pair_start(text, lower, at) is None:
            continue
        kind = _kind(m["name"])
        if kind == _ORDINARY:
            continue
        lo, hi = max(at - _RECORD_REACH, 0), m.end() + _RECORD_REACH
        for edge in _RECORD_EDGE.finditer(text, lo, min(hi, len(text))):
            if edge.end() <= at:
                lo = edge.end()
            elif edge.start() >= m.end():
                hi = edge.start()
                break
        at_value = lower.find("value", lo, hi)
        while at_value >= 0:
            v_start = _pair_start(text, lower, at_value)
            vm = None if v_start is None else _PAIR_VALUE.match(text, v_start)
            span = None if vm is None else _value_span(text, vm.end(), kind)
            if span is not None:
                spans.append(span)
            at_value = lower.find("value", at_value + 5, hi)
    kept: list[tuple[int, int]] = []
    for span in sorted(set(spans)):
        if not kept or span[0] >= kept[-1][1]:
            kept.append(span)
    return _cut(text, kept)


def _value_span(text: str, at: int, kind: int) -> tuple[int, int] | None:
    """The span of a value at ``at`` that a name of this kind makes a secret, or None."""
    v = _VALUE.match(text, at)
    group = None if v is None else v.lastgroup
    if v is None or group is None:
        return None
    value = v[group]
    if (
        not value
        or _NOT_A_VALUE.fullmatch(value)
        or (kind == _TOKENISH and value.isdigit())
        or (kind == _MATERIAL and not _looks_like_key(value))
    ):
        return None
    return v.span(group)


# -- an argument list: read as the command line it is -------------------------------------

# An argument that stands for itself in the line: no space, quote, backslash or bracket (a
# rule would read those across arguments) but in what was redacted already.
_ARG_WORD = re.compile(r"(?:[^\s\"'`\\\[\]{}()<>]|\[REDACTED\])+")


def _command_line(args: list[str | None]) -> dict[int, str]:
    """What redaction takes out of an argument list (``["mysql", "-u", "app",
    "--password", "…"]``) read as one command line, by index: the rules of a command's
    place and of a flag's name see each argument beside the ones before it. Any other
    argument (a space, a quote or a bracket in it) stands in the line as one word, and
    goes whole if that word goes; ``None`` (not a string) is never taken."""
    words = [a if a and _ARG_WORD.fullmatch(a) else "_" for a in args]
    line = " ".join(words)
    clean = redact_text(line)
    if clean == line:
        return {}
    got = clean.split(" ")
    if len(got) != len(words):  # a rule took more than one word: those differing go whole
        n = min(len(got), len(words))
        a = next((i for i in range(n) if got[i] != words[i]), n)
        b = next((i for i in range(n - a) if got[-1 - i] != words[-1 - i]), n - a)
        return {i: REDACTED for i in range(a, len(words) - b) if args[i]}
    return {
        i: word if words[i] == args[i] else REDACTED
        for i, word in enumerate(got)
        if word != words[i] and args[i]
    }


def _argv(values: list[Any], out: list[Any]) -> None:
    """A list's strings read as a command line (see _command_line) lose what it takes."""
    taken = _command_line([v if isinstance(v, str) else None for v in values])
    for i, word in taken.items():
        # the element alone lost something already (a key's lines): then it goes whole
        out[i] = word if out[i] == values[i] else REDACTED


_ARRAY_OPEN = re.compile(r"\[[ \t]*(?=\\*[\"'])")
_ARRAY_ITEM = re.compile(
    r"(?P<q>\\*[\"'])(?P<item>(?:(?!(?P=q))[^\r\n])*?)(?P=q)[ \t]*(?P<sep>,[ \t]*|\])"
)


def _argv_arrays(text: str) -> str:
    """``text`` with each array of strings written in it (JSON, a Python list) that holds
    a flag read as a command line (see _command_line)."""
    spans: list[tuple[int, int]] = []
    words: list[str] = []
    for opening in _ARRAY_OPEN.finditer(text):
        items: list[re.Match[str]] = []
        at = opening.end()
        while (item := _ARRAY_ITEM.match(text, at)) is not None:
            items.append(item)
            at = item.end()
            if item["sep"] == "]":
                break
        else:
            continue
        if len(items) < 2 or not any(i["item"][:1] == "-" for i in items):
            continue
        for index, word in _command_line([i["item"] for i in items]).items():
            spans.append(items[index].span("item"))
            words.append(word)
    if not spans:
        return text
    parts: list[str] = []
    at = 0
    for (start, end), word in sorted(zip(spans, words, strict=True)):
        if start >= at:
            parts += (text[at:start], word)
            at = end
    parts.append(text[at:])
    return "".join(parts)


# Every rule of place or name needs one of these: most ids, paths and words have none.
_HINT = re.compile(r"[\s:=<'\"%]|-[-up]|(?i:hook)")
# Prose (letters, digits, spaces and the commonest punctuation) can only be what one of
# these rules finds, each with a word of its own; everything else needs a character that
# prose lacks.
_PROSE = re.compile(r"[A-Za-z0-9 \t\r\n.,!?;()]*")
_PROSE_NEEDLES = (
    *("bearer", "machine", "default", "requirepass", "masterauth", "config", "secret"),
    "setx",
)


def redact_text(text: str) -> str:
    """``text`` with its credentials replaced by ``[REDACTED]``."""
    if len(text) <= _REMEMBERED_CHARS:
        return _redact_short(text)
    return _redact_text(text)


@functools.lru_cache(maxsize=_REMEMBERED)
def _redact_short(text: str) -> str:
    return _redact_text(text)


def _redact_text(text: str, depth: int = 0) -> str:
    """``text`` redacted; ``depth``: how many levels of base64 it was decoded from. Then
    again with look-alike letters folded (a name in Cyrillic or fullwidth letters), what
    that finds cut out of the text as it was written."""
    text = _redact_written(text, depth)
    if not text.isascii() and _foldable(text):
        folded = text.translate(_FOLD)
        clean = _redact_written(folded, depth)
        if clean != folded:
            text = _unfold(text, folded, clean)
    return text


def _redact_written(text: str, depth: int) -> str:
    if len(text) >= 16:
        text, first = _scan(text, depth)
        if first is not None:
            text = _shapes(text, first)
        if "eyJ" in text:
            text = _split_jwts(text)
    if _HINT.search(text) is None:
        return text
    lower = _lower(text)
    if _PROSE.fullmatch(text) and not any(n in lower for n in _PROSE_NEEDLES):
        return text
    text = _places(text, lower)
    if ":" in text:
        text = _pgpass(text)
    if "%" in text:
        text = _percent_runs(text, depth)
    if ('"-' in text or "'-" in text) and "[" in text:
        text = _argv_arrays(text)
    lower = _lower(text)
    stems = _occurrences(lower, _STEMS)
    if not stems:
        return text
    if "=" in text or ":" in text:
        clean = _named_values(
            _ASSIGNMENT, text, _name_starts(text, stems, _NAME_CHARS, _NAME_FIRST)
        )
        if clean != text:
            text, lower = clean, _lower(clean)
            stems = _occurrences(lower, _STEMS)
    if "-" in text:
        text = _named_values(_FLAG, text, _name_starts(text, stems, _FLAG_CHARS, _DASH))
        lower = _lower(text)
    if "set" in lower or "config" in lower or "secret" in lower:
        text = _named_values(_NAME_THEN_VALUE, text, _occurrences(lower, _NAME_THEN_NEEDLES))
        lower = _lower(text)
    if "value" in lower:
        text = _pairs(text, lower)
    if "</" in text:
        text = _named_elements(text)
    return text


def redact(value: Any) -> Any:
    """A redacted copy of a JSON value; the input is left untouched."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return _members(value)
    if isinstance(value, list):
        return _lines(value)
    return value


@functools.lru_cache(maxsize=_REMEMBERED)
def _member(key: str) -> tuple[str, int, int]:
    """A dict key as ``redact`` takes it: redacted (a key may itself be a credential), the
    kind of name it is, and its part in a name/value pair (keys repeat: remembered)."""
    name = redact_text(key)
    role = (name if name.isascii() else _fold_name(name)).lower()
    pair = _NAMES_A_VALUE if role in _PAIR_NAMES else _HOLDS_A_VALUE if role in _PAIR_VALUES else 0
    return name, _kind(name), pair


def _members(value: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    pairs = parts = 0
    for k, v in value.items():
        name, kind, pair = _member(k) if len(k) <= _REMEMBERED_CHARS else _member.__wrapped__(k)
        if name in out:  # two keys were, and now read the same
            n, base = 1, name
            while name in out:
                n += 1
                name = f"{base} ({n})"
        if kind == _ORDINARY and type(v) is str:  # the commonest: redact_text, inlined
            out[name] = _redact_short(v) if len(v) <= _REMEMBERED_CHARS else _redact_text(v)
            if v[:3] == "eyJ":
                parts += 1
        else:
            out[name] = _under(kind, v)
        pairs |= pair
    if pairs == _NAMES_A_VALUE | _HOLDS_A_VALUE:
        _pair_value(value, out)
    if parts > 1:
        names = list(out)
        for i in _jwt_parts(list(value.values())):
            out[names[i]] = REDACTED
    return out


def _pair_value(value: dict[str, Any], out: dict[str, Any]) -> None:
    """The value member of a name/value pair goes as the name it is given says (the
    members of ``out`` are those of ``value``, in order)."""
    members = list(zip(out, value.items(), strict=True))
    kind = next(
        (
            _kind(v)
            for _, (k, v) in members
            if isinstance(v, str)
            and _member.__wrapped__(k)[2] == _NAMES_A_VALUE
            and _kind(v) != _ORDINARY
        ),
        _ORDINARY,
    )
    if kind == _ORDINARY:
        return
    for name, (k, v) in members:
        if _member.__wrapped__(k)[2] == _HOLDS_A_VALUE:
            out[name] = _under(kind, v)


def _under(kind: int, value: Any) -> Any:
    """The value of a key of this kind."""
    if kind == _ORDINARY or value is None or value == "" or isinstance(value, bool):
        return redact(value)
    if kind == _TOKENISH and isinstance(value, int | float):
        return value
    if kind == _MATERIAL and not _looks_like_key(value):
        return redact(value)
    return REDACTED


_BASE64_LINE = re.compile(r"[A-Za-z0-9+/=]{4,}")
_KEY_BASE64_LINE = re.compile(rf"(?:{_KEY_BASE64}|LS0tLS1CRUdJTi)[A-Za-z0-9+/=]*")


def _lines(values: list[Any]) -> list[Any]:
    """A redacted list; a key given as a list of lines goes whole, not only the line that
    names it: the lines after a PEM BEGIN up to its END, the ``Private-Lines`` of a PuTTY
    key file, the base64 lines that follow a line of bare key material, lines of base64 of
    one width that together decode to a credential. A list with a flag in it is also read
    as a command line (_argv); the parts of a JWT as items go with their signature."""
    out: list[Any] = []
    pem = False  # inside a PEM block
    lines = 0  # PuTTY private lines to go
    base64 = False  # after a line of bare key material
    flags = parts = wide = 0  # what the list as a whole may be: a command line, a JWT, base64
    for v in values:
        if not isinstance(v, str):
            out.append(redact(v))
            base64 = False
            continue
        if v[:1] == "-":
            flags += 1
        elif v[:3] == "eyJ":
            parts += 1
        elif len(v) >= 60:
            wide += 1
        if pem:
            end = _KEY_END.search(v)
            pem = end is None
            out.append(REDACTED if end is None else REDACTED + redact_text(v[end.end() :]))
            continue
        if lines:
            lines -= 1
            out.append(REDACTED)
            continue
        if base64 and _BASE64_LINE.fullmatch(v.strip()):
            out.append(REDACTED)
            continue
        base64 = False
        begin = _KEY_BEGIN.search(v) if "BEGIN" in v else None
        if begin is not None and _KEY_END.search(v, begin.end()) is None:
            pem = True
            out.append(redact_text(v[: begin.start()]) + REDACTED)
            continue
        putty = _PUTTY_LINES.fullmatch(v.strip()) if "Private-Lines" in v else None
        if putty is not None:
            lines = int(putty[1])
            out.append(v)
            continue
        clean = redact_text(v)
        base64 = clean != v and _KEY_BASE64_LINE.fullmatch(v.strip()) is not None
        out.append(clean)
    if flags and len(values) > 1:
        _argv(values, out)
    if parts > 1:
        for i in _jwt_parts(values):
            out[i] = REDACTED
    if wide > 1:
        _wrapped_lines(values, out)
    return out
