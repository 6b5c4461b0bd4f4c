"""The engine's catalog: credentials known by their shape (vendor formats, key material in
every wrapping) and by their place (a URL's password, a header, a command's password
argument, a .netrc or .pgpass entry)."""

from __future__ import annotations

import binascii
import re
from collections.abc import Callable
from typing import NamedTuple

from stream_app.core.redaction.common import (
    _AUTH_SCHEME,
    _LINE,
    _SEP,
    REDACTED,
    _lower,
    _occurrences,
    _starts_word,
)

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
        r"(?<![+/])A{20,}[A-Za-z0-9%]{80,}+(?![+/=])",  # Twitter bearer (not base64 of zeros)
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
    _Place(
        ("://", ":\\"),
        # also as JSON escapes it (``https:\/\/``); a password with ``/`` or ``#`` in it when
        # a host follows its ``@`` (not a port and a path: ``host:8443/users/ana@x``)
        re.compile(
            r"(:(?://|\\+/\\+/)[^\s:/@\"'<>\\]*:)(?:[^\s/?#\"'<>\\]*(?=@)"
            r"|(?!\d+/)[^\s@\"'<>\\]*[/#][^\s@\"'<>\\]*(?=@[\w.-]+(?::\d+)?(?:[/?#\s\"'<>\\]|$)))"
        ),
        word=False,
    ),
    _Place(
        ("authorization", "cookie"),
        re.compile(
            # spaces also escaped as a shell writes them (``Authorization:\ Bearer\ …``)
            r"(?i)((?:authorization|cookie)"
            rf"\\?[\"']?(?:[ \t]|\\+[ ])*[:=](?:[ \t]|\\+[ ])*+\\?+[\"'`]?+"
            rf"(?:{_AUTH_SCHEME}(?:[ \t]|\\+[ ])+)?+)"
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
        # ``-u``/``--user``, curl's ``-U``/``--proxy-user``, httpie's ``-a``/``--auth``
        ("-u", "--user", "--proxy-user", "-a", "--auth"),
        re.compile(
            r"(?<![\w-])((?:-[uUa]|--user|--proxy-user|--auth)(?:[ \t]+|=)[\"']?(?!\d+:\d+\b)"
            r"(?!<)[^\s:\"']+:)[^\s\"']+"
        ),
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
            # SQL's upper case, unquoted: ``IDENTIFIED BY pw``; MariaDB's ``IDENTIFIED VIA
            # plugin USING PASSWORD('pw')`` or ``USING 'hash'``
            r"|(IDENTIFIED[ \t]+BY[ \t]+)(?![\"'$:])[^\s;\"']+"
            r"|((?i:identified[ \t]+(?:via|with)[ \t]+\w+[ \t]+using[ \t]+)"
            r"(?i:password[ \t]*\([ \t]*)?')[^'\r\n]*(?=')"
        ),
    ),
    _Place(
        # ``sqlplus user/pass@db`` and Oracle's other tools
        ("sqlplus", "expdp", "impdp", "sqlldr"),
        re.compile(
            r"((?:sqlplus|expdp|impdp|sqlldr)(?:[ \t]+-[A-Za-z]+)*[ \t]+(?:userid=)?[\"']?"
            r"[A-Za-z_][\w$#.]*/)(?![ \t])[^\s@\"']+"
        ),
    ),
    _Place(
        # ``openssl enc … -k PASS`` (``-K`` a key in hex)
        ("openssl",),
        re.compile(rf"(openssl\b{_LINE}[ \t]-[kK][ \t]+)(?!\$)[^\s\"'\\]+"),
    ),
    _Place(
        # ``gh secret set NAME --body VALUE``
        ("gh",),
        re.compile(
            rf"(gh[ \t]+secret[ \t]+set\b{_LINE}[ \t](?:--body|-b)(?:[ \t]+|=)[\"']?)(?!\$)"
            r"[^\s\"']+"
        ),
    ),
    _Place(
        # A password piped to a tool that reads it: ``echo PW | sudo -S``, ``| docker login
        # --password-stdin``, ``| chpasswd``, ``| passwd --stdin``
        ("echo", "printf"),
        re.compile(
            r"((?:echo(?:[ \t]+-[neE]+)?|printf(?:[ \t]+'%s(?:\\n)?')?)[ \t]+[\"']?)"
            r"(?![$%])[^\s\"'|]+(?=[\"']?[ \t]*\|[ \t]*(?:sudo\b[^|\r\n]*[ \t]-S\b"
            r"|[\w/.-]*(?:docker|podman|nerdctl|helm|oras|crane|skopeo)\b[^|\r\n]*--password-stdin"
            r"|chpasswd|passwd[ \t]+--stdin))"
        ),
    ),
    _Place(
        # ``auth=("ana", "…")``, ``HTTPBasicAuth("ana", "…")``, ``login(user, "…")``: the
        # literal after the user
        ("auth", "login", "signin", "sign_in", "credential"),
        re.compile(
            r"((?i:auth|login|log_in|signin|sign_in|authenticate|networkcredential|credentials?)"
            r"[ \t]*(?:[=:][ \t]*)?[(\[][ \t]*[^,()\[\]\r\n\"']*(?:\"[^\"\r\n]*\"|'[^'\r\n]*')?"
            r"[^,()\[\]\r\n]*,[ \t]*[rbuRBU]?\\*[\"'])(?![$%<{])[^\"'\r\n\\]+(?=\\*[\"'])"
        ),
        word=False,
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
