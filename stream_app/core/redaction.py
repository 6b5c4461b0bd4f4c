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
  metadata) do not; key files (``tls.key``, ``id_rsa``) are names of key material.

Text that is percent-encoded (a URL, a form body, a logged header) is decoded and searched
again, so ``%22password%22%3A%22…%22`` goes as ``"password":"…"`` would.

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
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple
from urllib.parse import quote, unquote

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
_SHAPES = re.compile(
    # Not inside a word, but may follow a line break escaped in JSON text (``\ntoken``).
    r"(?:(?<![A-Za-z0-9])|(?<=\\[nrt]))(?:"
    + "|".join(
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
    + r")"
    + r"|(?<![0-9])\d{8,10}:AA[\w-]{30,}",  # Telegram bot (in a URL path after "bot")
)


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
    repeat: remembered)."""
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
# ``--name value`` and ``-name value`` (openssl's ``-passin``, keytool's ``-storepass``).
_FLAG = re.compile(r"-(?<![\w-]-)-?(?P<name>[A-Za-z][\w-]*)[ \t]+(?=[^\s-])")
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
        v = None if kind == _ORDINARY else _VALUE.match(text, m.end())
        group = None if v is None else v.lastgroup
        if v is None or group is None:
            continue
        value = v[group]
        if (
            not value
            or _NOT_A_VALUE.fullmatch(value)
            or (kind == _TOKENISH and value.isdigit())
            or (kind == _MATERIAL and not _looks_like_key(value))
        ):
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


# -- percent-encoded text: decoded, searched, and encoded again where a credential went ---

_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
_RUN_REST = re.compile(r"[^\s\"'<>\\]*")
_RUN_STOP = frozenset(" \t\r\n\f\v\"'<>\\")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~%")


def _percent_runs(text: str) -> str:
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
        clean = _percent_decoded(run)
        if clean != run:
            parts += (text[at:start], clean)
            at = end
    if not parts:
        return text
    parts.append(text[at:])
    return "".join(parts)


def _percent_decoded(run: str) -> str:
    """A run of percent-encoded text, unchanged unless its decoded text holds a credential.

    The redacted text is encoded again as the run was: what the run had literally stays
    literal, the rest is encoded; so the run reads as before but for ``[REDACTED]``. A run
    encoded twice is decoded twice, by the search of the decoded text.
    """
    plain = unquote(run)
    if plain == run:
        return run
    clean = redact_text(plain)
    if clean == plain:
        return run
    literal = "".join({c for c in run if c not in _UNRESERVED})
    return REDACTED.join(quote(piece, safe=literal) for piece in clean.split(REDACTED))


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


def _redact_text(text: str) -> str:
    if len(text) >= 16 and (first := _first_shape(text)) is not None:
        text = _shapes(text, first)
    if _HINT.search(text) is None:
        return text
    lower = _lower(text)
    if _PROSE.fullmatch(text) and not any(n in lower for n in _PROSE_NEEDLES):
        return text
    text = _places(text, lower)
    if ":" in text:
        text = _pgpass(text)
    if "%" in text:
        text = _percent_runs(text)
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
        return _lines(value)
    return value


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
    key file, the base64 lines that follow a line of bare key material."""
    out: list[Any] = []
    pem = False  # inside a PEM block
    lines = 0  # PuTTY private lines to go
    base64 = False  # after a line of bare key material
    for v in values:
        if not isinstance(v, str):
            out.append(redact(v))
            base64 = False
            continue
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
    return out
