"""Credential shapes for the redaction tests, and ordinary content that must survive.

The shapes follow the kinds of rules public secret scanners (gitleaks, trufflehog,
detect-secrets) carry: vendor formats, credentials written into text, URLs and commands,
and secrets recognised by the name they are given. Every value is fake: runs of sequential
characters of the right alphabet and length, put together at run time, so this file holds
no contiguous string a scanner would take for a live token.

``secret`` is the part that must not survive redaction anywhere; ``text`` is how the
credential appears in a string. A shape with a ``key`` is also placed as ``{key: value}``;
one with a ``json`` value (a key as a JSON list of lines, a name/value pair, an argument
list, a JWT split over sibling fields) is also placed as that value.

``ORDINARY_TEXT`` and ``ORDINARY_RAW`` are the negative corpus: ordinary code, commands,
paths and prose, many of them next to a rule (a ``config set`` of a region, a path to a key,
a time with colons, a certificate in base64), that must come out exactly as they went in.
"""

from __future__ import annotations

import base64
import string
from dataclasses import dataclass
from typing import Any

import orjson

ALNUM = string.digits + string.ascii_letters
HEX = string.digits + "abcdef"
UPPER = string.digits + string.ascii_uppercase
LOWER = string.digits + string.ascii_lowercase
LETTERS = string.ascii_letters


def run(n: int, alphabet: str = ALNUM, start: int = 0) -> str:
    """``n`` characters of ``alphabet`` in order, from ``start``, wrapping around."""
    return "".join(alphabet[(start + i) % len(alphabet)] for i in range(n))


def j(*parts: str) -> str:
    """A token's prefix and body joined at run time (see the module docstring)."""
    return "".join(parts)


@dataclass(frozen=True)
class Shape:
    name: str
    category: str
    text: str
    secret: str
    key: str | None = None  # also placed as {key: value}
    value: Any = None  # the value under ``key`` (default: ``secret``)
    json: Any = None  # also placed as this JSON value (a list of lines), wherever it sits

    @property
    def keyed_value(self) -> Any:
        return self.secret if self.value is None else self.value


def _token(name: str, category: str, token: str) -> Shape:
    return Shape(name, category, token, token)


def _in(name: str, category: str, secret: str, template: str) -> Shape:
    """A credential written inside text: ``template`` with ``{}`` where the secret goes."""
    return Shape(name, category, template.format(secret), secret)


def _keyed(name: str, key: str, secret: str, value: Any = None) -> Shape:
    return Shape(name, "key name", f"{key}={secret}", secret, key, value)


def _as_key(name: str, key: str, value: Any, secret: str | None = None) -> Shape:
    """A credential used as a dict key (``secret`` defaults to the whole key)."""
    return Shape(name, "token as key", key, key if secret is None else secret, key, value)


PW = j("Pa55", "-", run(10, LOWER, 7))  # a password: no prefix, no shape
PW_AT = j("p@ss", "-w0rd", "@", run(6, LOWER, 3))  # with "@" in it
B64 = ALNUM + "+/"
PUBLIC = B64[::-1]  # for what may stay (public key lines): no window of it is in a secret


def armour(kind: str, end: bool = False) -> str:
    """A PEM armour line, put together at run time."""
    return j("-----", "END " if end else "BEGIN ", kind, " PRIVATE", " KEY-----")


def body(lines: int, start: int, width: int = 64, alphabet: str = B64) -> list[str]:
    """Base64 lines of a key's body, each one different."""
    return [run(width, alphabet, start + 7 * i) for i in range(lines)]


def pem_lines(kind: str, start: int, first: str = "MIIE", end: bool = True) -> list[str]:
    lines = body(4, start)
    lines[0] = first + lines[0][len(first) :]
    return [armour(kind), *lines, *([armour(kind, end=True)] if end else [])]


def pem(kind: str, start: int, first: str = "MIIE") -> str:
    return "\n".join(pem_lines(kind, start, first)) + "\n"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def b64url(text: str) -> str:
    """Unpadded base64url, as the parts of a JWT are."""
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _structured(name: str, category: str, text: str, secret: str, json: Any) -> Shape:
    """A credential that a structure gives away (``json``), and the same written as text."""
    return Shape(name, category, text, secret, json=json)


def _look_alike(name: str, key: str, secret: str) -> Shape:
    """A secret's name written with letters of another script or width."""
    return Shape(name, "look-alike name", f"{key}={secret}", secret, key)


def _lines(name: str, lines: list[str], secret: list[str]) -> Shape:
    """A key given as a JSON list of lines; ``secret`` the lines that must go."""
    return Shape(name, "key as lines", "\n".join(lines), "\n".join(secret), json=lines)


def _key_material(name: str, value: str, template: str, armour: int = 0) -> Shape:
    """Key material written into ``template``; with ``armour``, its first ``armour``
    characters and last ``3 * armour`` need not go (the base64 of ``-----BEGIN`` and
    ``-----END``, which a certificate next to the key shares)."""
    secret = value[armour : len(value) - 3 * armour]
    return Shape(name, "key material", template.format(value), secret)


def _key_file(key: str, secret: str, value: Any = None) -> Shape:
    """Key material under the name of its file: ``{key: value}``, and as YAML text."""
    value = secret if value is None else value
    lines = value if isinstance(value, list) else value.split("\n")
    text = f"{key}: {lines[0]}" if len(lines) == 1 else f"{key}: |\n  " + "\n  ".join(lines)
    return Shape(f"{key} by name", "key file name", text, secret, key, value)


# Bare DER key material in base64, as tools print it (fake past the structure's first bytes).
PKCS8_RSA = j("MIIEvg", "IBADANBgkqhkiG9w0BAQEFAASC", run(120, B64, 3))
PKCS1_RSA = j("MIIEpA", "IBAAKCAQEA", run(120, B64, 5))
SEC1_EC = j("MHcCAQ", "EEI", run(90, B64, 9))
PKCS8_ED25519 = j("MC4CAQ", "AwBQYDK2VwBCIEI", run(40, B64, 11))
OPENSSH_BODY = j("b3BlbnNzaC1rZX", "ktdjE", run(200, B64, 13))
CERT_ARMOUR = (j("-----BEGIN ", "CERTIFICATE-----"), j("-----END ", "CERTIFICATE-----"))
CERT_PEM = "\n".join([CERT_ARMOUR[0], *body(3, 17, alphabet=PUBLIC), CERT_ARMOUR[1]])

# A JWT's header, payload and signature as separate values.
JWT_PARTS = (
    b64url('{"alg":"HS256","typ":"JWT"}'),
    b64url(j('{"sub":"', run(12, LOWER, 221), '","name":"Ana","iat":1516239022}')),
    run(43, ALNUM + "-_", 222),
)
# A .env file in base64, wrapped at 76 columns as ``base64`` writes it.
_ENV64 = b64("\n".join(f"SETTING_{i}=value-{i}" for i in range(8)) + j("\nDB_PASS=", PW, "\n"))
WRAPPED_ENV = [_ENV64[i : i + 76] for i in range(0, len(_ENV64), 76)]

SHAPES: list[Shape] = [
    # -- credentials written inside free text ---------------------------------------------
    _in(
        "authorization header",
        "header in text",
        j("dXNlcj", run(20, ALNUM, 5)),
        "Authorization: Basic {}",
    ),
    _in(
        "proxy authorization",
        "header in text",
        j("cHJveHk", run(20, ALNUM, 9)),
        "Proxy-Authorization: Basic {}",
    ),
    _in(
        "cookie header",
        "header in text",
        j("sess", run(24, HEX, 1)),
        "Cookie: theme=dark; sessionid={}; csrftoken=abc",
    ),
    _in(
        "set-cookie header",
        "header in text",
        j("sid", run(24, HEX, 3)),
        "Set-Cookie: sid={}; Path=/; HttpOnly",
    ),
    _in(
        "api key header via curl",
        "header in text",
        run(32, HEX, 5),
        "curl -H 'X-Api-Key: {}' https://api.example.com/v1/items",
    ),
    _in(
        "authorization token scheme",
        "header in text",
        run(30, LOWER, 2),
        'curl -H "Authorization: Token {}" https://api.example.com',
    ),
    _in(
        "aws secret in credentials file",
        "assignment in text",
        run(40, ALNUM, 11),
        "[default]\naws_access_key_id = EXAMPLEID\naws_secret_access_key = {}\n",
    ),
    _in("dotenv password", "assignment in text", PW, "DB_HOST=localhost\nDB_PASSWORD={}\n"),
    _in(
        "export of a generic token",
        "assignment in text",
        run(28, ALNUM, 13),
        "export SERVICE_AUTH_TOKEN='{}'",
    ),
    _in("yaml password", "assignment in text", PW, "database:\n  user: app\n  password: {}\n"),
    _in(
        "json client secret in text",
        "assignment in text",
        run(30, ALNUM, 17),
        '{{"client_id": "app", "client_secret": "{}"}}',
    ),
    _in(
        "npmrc auth token",
        "assignment in text",
        run(36, HEX, 2),
        "//registry.example.com/:_authToken={}",
    ),
    _in(
        "python keyword argument",
        "assignment in text",
        PW,
        'psycopg.connect(host="db", user="app", password="{}")',
    ),
    _in("annotated assignment", "assignment in text", PW, 'password: str = "{}"'),
    _in(
        "azure storage connection string",
        "assignment in text",
        j(run(40, ALNUM, 21), "=="),
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={};EndpointSuffix=core",
    ),
    _in(
        "connection string password",
        "assignment in text",
        PW,
        "Server=db;Database=shop;User Id=sa;Password={};",
    ),
    _in("escaped json in text", "assignment in text", PW, '{{\\"password\\": \\"{}\\"}}'),
    _in("hardcoded comparison", "assignment in text", PW, 'if password == "{}":'),
    # -- command lines ---------------------------------------------------------------------
    _in("curl user and password", "command line", PW, "curl -u deploy:{} https://ci.example.com"),
    _in("mysql attached password", "command line", PW, "mysql -u root -p{} shop"),
    _in("sshpass", "command line", PW, "sshpass -p {} ssh deploy@host"),
    _in("docker login", "command line", PW, "docker login -u ana -p {} registry.example.com"),
    _in("password flag", "command line", PW, "./manage --password {} --verbose"),
    _in("token flag with equals", "command line", run(30, ALNUM, 23), "gh-deploy --token={}"),
    # -- form bodies and URL query parameters ----------------------------------------------
    _in(
        "form body password", "form body", PW, "POST /login\n\nusername=ana&password={}&remember=1"
    ),
    _in(
        "query api_key",
        "url query",
        run(32, HEX, 7),
        "https://api.example.com/v1/data?api_key={}&page=2",
    ),
    _in(
        "query access_token",
        "url query",
        run(40, ALNUM, 29),
        "https://graph.example.com/me?fields=id&access_token={}",
    ),
    _in(
        "s3 presigned signature",
        "url query",
        run(64, HEX, 3),
        "https://b.s3.amazonaws.com/k?X-Amz-Expires=60&X-Amz-Signature={}",
    ),
    _in(
        "azure sas signature",
        "url query",
        j(run(43, ALNUM, 31), "%3D"),
        "https://acct.blob.core.windows.net/c/f?sv=2022&sp=r&sig={}",
    ),
    _in(
        "query key",
        "url query",
        run(39, ALNUM, 37),
        "https://maps.example.com/api/geocode?address=x&key={}",
    ),
    # -- passwords in URLs -----------------------------------------------------------------
    _in("url password", "url password", PW, "git clone https://ana:{}@git.example.com/shop.git"),
    _in("url password with @", "url password", PW_AT, "postgres://app:{}@db.example.com:5432/shop"),
    _in("url password, empty user", "url password", PW, "redis://:{}@cache.example.com:6379/0"),
    # -- vendor formats: payment -----------------------------------------------------------
    _token("stripe secret key", "payment", j("sk", "_live_", run(24, ALNUM, 1))),
    _token("stripe restricted key", "payment", j("rk", "_live_", run(24, ALNUM, 2))),
    _token("stripe test key", "payment", j("sk", "_test_", run(24, ALNUM, 3))),
    _token("stripe webhook secret", "payment", j("whsec", "_", run(32, ALNUM, 4))),
    _token("square secret", "payment", j("sq0", "csp-", run(43, ALNUM, 5))),
    _token("shopify access token", "payment", j("shp", "at_", run(32, HEX, 6))),
    # -- vendor formats: cloud -------------------------------------------------------------
    _token("aws access key id", "cloud", j("AK", "IA", run(16, UPPER, 10))),
    _token("google api key", "cloud", j("AI", "za", "Sy", run(33, ALNUM, 11))),
    _token("google oauth client secret", "cloud", j("GOC", "SPX-", run(28, ALNUM, 12))),
    _token("google oauth access token", "cloud", j("ya", "29.", run(60, ALNUM, 13))),
    _token("digitalocean token", "cloud", j("do", "p_v1_", run(64, HEX, 14))),
    _token("azure ad client secret", "cloud", j("abc", "8Q~", run(34, ALNUM, 15))),
    _token("vault token", "cloud", j("hv", "s.", run(90, ALNUM, 16))),
    _token(
        "terraform cloud token", "cloud", j(run(14, LOWER, 17), ".atlas", "v1.", run(67, ALNUM, 18))
    ),
    _token("doppler token", "cloud", j("dp", ".pt.", run(43, ALNUM, 19))),
    _token("databricks token", "cloud", j("da", "pi", run(32, HEX, 20))),
    _token("tailscale key", "cloud", j("tskey", "-auth-", run(30, ALNUM, 21))),
    # -- vendor formats: package registries ------------------------------------------------
    _token("npm token", "package registry", j("np", "m_", run(36, ALNUM, 22))),
    _token("pypi token", "package registry", j("pyp", "i-", "AgEIcHlwaS5vcmc", run(70, ALNUM, 23))),
    _token("rubygems key", "package registry", j("rubygems", "_", run(48, HEX, 24))),
    _token("nuget key", "package registry", j("oy", "2", run(43, LOWER, 25))),
    _token("docker hub token", "package registry", j("dckr", "_pat_", run(27, ALNUM, 26))),
    # -- vendor formats: chat and webhooks --------------------------------------------------
    _in(
        "slack webhook",
        "chat webhook",
        j("T0", run(8, UPPER), "/B0", run(8, UPPER, 3), "/", run(24, ALNUM, 27)),
        "https://hooks.slack.com/services/{}",
    ),
    _in(
        "discord webhook",
        "chat webhook",
        j("1234567890123", "45678/", run(68, ALNUM, 28)),
        "https://discord.com/api/webhooks/{}",
    ),
    _in(
        "teams webhook",
        "chat webhook",
        j(run(8, HEX), "-aaaa-bbbb@", run(8, HEX, 2), "/IncomingWebhook/", run(32, HEX, 4)),
        "https://acme.webhook.office.com/webhookb2/{}",
    ),
    _in(
        "telegram bot token",
        "chat webhook",
        j("123456789", ":AA", run(33, ALNUM, 29)),
        "https://api.telegram.org/bot{}/sendMessage",
    ),
    _token(
        "discord bot token",
        "chat webhook",
        j("M", run(23, ALNUM, 30), ".", run(6, ALNUM), ".", run(27, ALNUM, 31)),
    ),
    _token("slack bot token", "chat webhook", j("xo", "xb-", "123456789012-", run(24, ALNUM, 32))),
    _token("slack app token", "chat webhook", j("xa", "pp-1-", run(30, ALNUM, 33))),
    # -- vendor formats: developer platforms ------------------------------------------------
    _token("github classic token", "developer platform", j("gh", "p_", run(36, ALNUM, 34))),
    _token(
        "github fine-grained token", "developer platform", j("github", "_pat_", run(82, ALNUM, 35))
    ),
    _token("gitlab token", "developer platform", j("gl", "pat-", run(20, ALNUM, 36))),
    _token("gitlab runner token", "developer platform", j("GR13", "48941", run(20, ALNUM, 37))),
    _token("hugging face token", "developer platform", j("h", "f_", run(34, LETTERS, 38))),
    _token(
        "postman key", "developer platform", j("PM", "AK-", run(24, HEX, 39), "-", run(34, HEX, 40))
    ),
    _token("linear key", "developer platform", j("lin", "_api_", run(40, ALNUM, 41))),
    _token("sentry token", "developer platform", j("sntry", "u_", run(64, HEX, 42))),
    _token(
        "grafana token", "developer platform", j("gl", "sa_", run(32, ALNUM, 43), "_", run(8, HEX))
    ),
    _token("new relic key", "developer platform", j("NR", "AK-", run(27, UPPER, 44))),
    _token("planetscale password", "developer platform", j("pscale", "_pw_", run(43, ALNUM, 45))),
    _token("pulumi token", "developer platform", j("pu", "l-", run(40, HEX, 46))),
    _token("atlassian token", "developer platform", j("ATA", "TT3", run(180, ALNUM, 47))),
    # -- vendor formats: e-mail and messaging APIs ------------------------------------------
    _token(
        "sendgrid key", "email and sms", j("S", "G.", run(22, ALNUM, 48), ".", run(43, ALNUM, 49))
    ),
    _token("mailgun key", "email and sms", j("ke", "y-", run(32, HEX, 50))),
    _token("mailchimp key", "email and sms", j(run(32, HEX, 51), "-us", "12")),
    _token("twilio key", "email and sms", j("S", "K", run(32, HEX, 52))),
    # -- vendor formats: AI providers -------------------------------------------------------
    _token("openai project key", "ai provider", j("s", "k-proj-", run(48, ALNUM, 53))),
    _token("anthropic key", "ai provider", j("s", "k-ant-api03-", run(93, ALNUM, 54))),
    _token("groq key", "ai provider", j("gs", "k_", run(52, ALNUM, 55))),
    _token("replicate token", "ai provider", j("r", "8_", run(37, ALNUM, 56))),
    # -- generic formats ---------------------------------------------------------------------
    _token(
        "jwt",
        "generic format",
        j("ey", "JhbGciOiJIUzI1NiJ9.", "ey", "J", run(30, ALNUM, 57), ".", run(43, ALNUM, 58)),
    ),
    _in(
        "rsa private key",
        "generic format",
        run(64, ALNUM, 59),
        "-----BEGIN RSA PRIVATE KEY-----\nMIIE{}\n-----END RSA PRIVATE KEY-----",
    ),
    _in(
        "pgp private key block",
        "generic format",
        run(64, ALNUM, 60),
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQ{}\n-----END PGP PRIVATE KEY BLOCK-----",
    ),
    _token("age secret key", "generic format", j("AGE-SECRET", "-KEY-1", run(58, UPPER, 61))),
    _in("bearer token", "generic format", run(40, ALNUM, 62), "use Bearer {} for the call"),
    # -- secrets recognised by name: plural and abbreviated keys ------------------------------
    _keyed("plural passwords", "passwords", PW, [PW, "other"]),
    _keyed("plural tokens", "tokens", run(30, ALNUM, 63), {"ci": run(30, ALNUM, 63)}),
    _keyed("plural secrets", "secrets", run(30, ALNUM, 64), [run(30, ALNUM, 64)]),
    _keyed("abbreviated db_pass", "db_pass", PW),
    _keyed("abbreviated db_pw", "db_pw", PW),
    _keyed("abbreviated passwd", "PASSWD", PW),
    _keyed("abbreviated creds", "creds", j("ana:", PW)),
    _keyed("camel apiKeys", "apiKeys", run(32, HEX, 65), [run(32, HEX, 65)]),
    _keyed("camel authToken", "authToken", run(40, ALNUM, 66)),
    _keyed("header-style x-auth-token", "X-Auth-Token", run(40, ALNUM, 67)),
    _keyed("private key name", "privKey", run(44, ALNUM, 68)),
    _keyed("session cookie", "sessionCookie", run(32, HEX, 69)),
    _keyed("passphrase", "ssh_passphrase", PW),
    _keyed("glued accesstoken", "accesstoken", run(40, ALNUM, 70)),
    # -- a credential used as a key name -------------------------------------------------
    _as_key("stripe key as a key name", j("sk", "_live_", run(24, ALNUM, 71)), "prod"),
    _as_key("github token as a key name", j("gh", "p_", run(36, ALNUM, 72)), {"scopes": ["repo"]}),
    _as_key("password url as a key name", f"https://ana:{PW_AT}@host.example.com", 1, PW_AT),
    # -- markup and SQL ------------------------------------------------------------------------
    _in(
        "xml password element",
        "markup and sql",
        PW,
        "<user><name>ana</name><password>{}</password></user>",
    ),
    _in("sql identified by", "markup and sql", PW, "CREATE USER 'app'@'%' IDENTIFIED BY '{}';"),
    _in("sql with password", "markup and sql", PW, "ALTER ROLE app WITH PASSWORD '{}';"),
    # -- keys as a JSON list of lines: every line goes, not only BEGIN (issue 20) ----------
    _lines(
        "rsa key as lines",
        pem_lines("RSA", 101),
        pem_lines("RSA", 101)[1:-1],
    ),
    _lines(
        "openssh key as lines",
        pem_lines("OPENSSH", 102, first="b3Bl"),
        pem_lines("OPENSSH", 102, first="b3Bl")[1:-1],
    ),
    _lines(
        "key as lines, cut before END",
        pem_lines("EC", 103, end=False),
        pem_lines("EC", 103, end=False)[1:],
    ),
    _lines(
        "key as lines after a comment line",
        ["# deploy key", *pem_lines("ENCRYPTED", 104)],
        pem_lines("ENCRYPTED", 104)[1:-1],
    ),
    _lines(
        "bare key material as lines",
        [PKCS8_RSA[:64], *body(3, 105)],
        [PKCS8_RSA[:64], *body(3, 105)],
    ),
    _lines(
        "putty key as lines",
        [
            "PuTTY-User-Key-File-3: ssh-ed25519",
            "Encryption: none",
            "Comment: ed25519-key-20261129",
            "Public-Lines: 2",
            *body(2, 106, alphabet=PUBLIC),
            "Private-Lines: 1",
            run(44, B64, 107),
            "Private-MAC: " + run(64, HEX[::-1], 108),
        ],
        [run(44, B64, 107)],
    ),
    # -- key material in other wrappings -------------------------------------------------
    Shape(
        "pem with escaped newlines",
        "key material",
        "\\n".join(pem_lines("RSA", 110)),
        "\\n".join(pem_lines("RSA", 110)[1:-1]),
    ),
    Shape(
        "ec private key block",
        "key material",
        "\n".join(pem_lines("EC", 111, first="MHcC")),
        "\n".join(pem_lines("EC", 111, first="MHcC")[1:-1]),
    ),
    Shape(
        "encrypted pkcs8 block",
        "key material",
        "\n".join(pem_lines("ENCRYPTED", 112, first="MIIFNTBfBgkqhkiG9w0BBQ0w")),
        "\n".join(pem_lines("ENCRYPTED", 112, first="MIIFNTBfBgkqhkiG9w0BBQ0w")[1:-1]),
    ),
    Shape(
        "openvpn static key",
        "key material",
        "\n".join(
            [
                "#",
                j("-----BEGIN OpenVPN ", "Static key V1-----"),
                *body(4, 113, 32),
                j("-----END OpenVPN ", "Static key V1-----"),
            ]
        ),
        "\n".join(body(4, 113, 32)),
    ),
    Shape(
        "ssh2 encrypted private key",
        "key material",
        "\n".join(
            [
                j("---- BEGIN SSH2 ", "ENCRYPTED PRIVATE KEY ----"),
                'Comment: "ana@laptop"',
                *body(3, 114),
                j("---- END SSH2 ", "ENCRYPTED PRIVATE KEY ----"),
            ]
        ),
        "\n".join(body(3, 114)),
    ),
    Shape(
        "putty v2 key file",
        "key material",
        "\n".join(
            [
                "PuTTY-User-Key-File-2: ssh-rsa",
                "Encryption: none",
                "Comment: rsa-key",
                "Public-Lines: 1",
                run(64, PUBLIC, 115),
                "Private-Lines: 2",
                run(64, B64, 116),
                run(40, B64, 117),
                "Private-MAC: " + run(40, HEX[::-1], 118),
            ]
        ),
        run(64, B64, 116) + "\n" + run(40, B64, 117),
    ),
    Shape(
        "putty v3 key file",
        "key material",
        "\n".join(
            [
                "PuTTY-User-Key-File-3: ssh-ed25519",
                "Encryption: aes256-cbc",
                "Comment: ed25519-key",
                "Public-Lines: 2",
                *body(2, 119, alphabet=PUBLIC),
                "Key-Derivation: Argon2id",
                "Argon2-Memory: 8192",
                "Argon2-Salt: " + run(32, HEX[::-1], 120),
                "Private-Lines: 1",
                run(64, B64, 121),
                "Private-MAC: " + run(64, HEX[::-1], 122),
            ]
        ),
        run(64, B64, 121),
    ),
    _key_material(
        "base64 pem (kubernetes tls secret)",
        b64(pem("PRIVATE", 123)),
        "apiVersion: v1\nkind: Secret\ntype: kubernetes.io/tls\ndata:\n"
        "  tls.crt: " + b64(CERT_PEM) + "\n  tls.key: {}\n",
        armour=16,
    ),
    _key_material(
        "base64 pem wrapped at 76 columns",
        "\n".join(
            b64(pem("RSA", 124))[i : i + 76] for i in range(0, len(b64(pem("RSA", 124))), 76)
        ),
        "{}",
    ),
    _key_material(
        "base64 pem of a certificate and its key",
        b64(CERT_PEM + "\n" + pem("PRIVATE", 125)),
        "bundle.pem: {}",
    ),
    _key_material(
        "ssh-privatekey in yaml (kubernetes ssh-auth secret)",
        b64(pem("OPENSSH", 126, first="b3Bl")),
        "type: kubernetes.io/ssh-auth\ndata:\n  ssh-privatekey: {}\n",
    ),
    _key_material(
        "kubeconfig client-key-data",
        b64(pem("RSA", 127)),
        "users:\n- name: admin\n  user:\n    client-certificate-data: "
        + b64(CERT_PEM)
        + "\n    client-key-data: {}\n",
        armour=16,
    ),
    _key_material(
        "tls.key as a yaml block of bare base64",
        "\n    ".join([PKCS8_RSA[:64], *body(3, 128)]),
        "stringData:\n  tls.key: |\n    {}\n  tls.crt: present\n",
    ),
    _key_material("bare pkcs8 key", PKCS8_RSA, "KEY_DER={}"),
    _key_material("bare pkcs1 key", PKCS1_RSA, "printf '%s' '{}' | base64 -d > key.der"),
    _key_material("bare sec1 ec key", SEC1_EC, "ec: {}"),
    _key_material("bare ed25519 pkcs8 key", PKCS8_ED25519, "{}"),
    _key_material(
        "bare openssh key body",
        OPENSSH_BODY,
        "echo {} | base64 -d > ~/.ssh/id_ed25519",
    ),
    _key_material(
        "base64 pem in a command",
        b64(pem("OPENSSH", 129, first="b3Bl")),
        "echo '{}' | base64 --decode > ~/.ssh/id_ed25519 && chmod 600 ~/.ssh/id_ed25519",
    ),
    _key_material(
        "gcp service account json",
        "\\n".join(pem_lines("PRIVATE", 130)[1:-1]),
        '{{"type": "service_account", "project_id": "shop", "private_key": "'
        + armour("PRIVATE")
        + "\\n{}\\n"
        + armour("PRIVATE", end=True)
        + '\\n", "client_email": "ci@shop.iam.gserviceaccount.com"}}',
    ),
    _key_material(
        "wireguard private key",
        j(run(43, B64, 131), "="),
        "[Interface]\nAddress = 10.0.0.2/32\nPrivateKey = {}\n",
    ),
    # -- key files by name -----------------------------------------------------------------
    _key_file("tls.key", PKCS8_RSA),
    _key_file(
        "id_rsa",
        "\n".join(pem_lines("OPENSSH", 132, first="b3Bl")[1:-1]),
        "\n".join(pem_lines("OPENSSH", 132, first="b3Bl")),
    ),
    _key_file("id_ed25519", "\n".join(body(2, 133, 70)), body(2, 133, 70)),
    _key_file("ssh-privatekey", run(80, B64, 134)),
    _key_file("server.key", run(64, HEX, 135)),
    _key_file("deploy.ppk", run(70, B64, 136)),
    # -- a name and its value as two words -----------------------------------------------
    _in(
        "aws configure set secret",
        "name then value",
        run(40, ALNUM, 140),
        "aws configure set aws_secret_access_key {} --profile prod",
    ),
    _in(
        "aws configure set session token",
        "name then value",
        run(60, ALNUM, 141),
        "aws configure set default.aws_session_token {}",
    ),
    _in(
        "npm config set auth token",
        "name then value",
        run(36, ALNUM, 142),
        "npm config set //registry.npmjs.org/:_authToken {}",
    ),
    _in(
        "yarn config set",
        "name then value",
        run(36, ALNUM, 143),
        "yarn config set npmAuthToken {}",
    ),
    _in(
        "heroku-style config set",
        "name then value",
        run(32, HEX, 144),
        "doppler secrets set STRIPE_SECRET {}",
    ),
    _in("fish set -gx", "name then value", run(32, ALNUM, 145), "set -gx API_TOKEN {}"),
    _in("windows setx", "name then value", run(32, ALNUM, 146), "setx OPENAI_API_KEY {}"),
    _in(
        "secret store --name --value",
        "name then value",
        PW,
        "az keyvault secret set --vault-name kv --name db-password --value {}",
    ),
    _in(
        "netrc on one line",
        "name then value",
        PW,
        "machine api.heroku.com login ana@example.com password {}",
    ),
    _in(
        "netrc over lines",
        "name then value",
        run(36, HEX, 147),
        "machine git.example.com\n  login ana\n  password {}\n",
    ),
    _in("netrc default", "name then value", PW, "default login anonymous password {}"),
    _in("redis requirepass", "name then value", PW, "bind 127.0.0.1\nrequirepass {}\n"),
    _in("redis masterauth", "name then value", PW, "CONFIG SET masterauth {}"),
    _in(
        "yaml block scalar password",
        "name then value",
        PW,
        "db:\n  password: |\n    {}\n  user: app\n",
    ),
    # -- .pgpass ------------------------------------------------------------------------------
    _in("pgpass line", "pgpass", PW, "db.example.com:5432:shop:app:{}"),
    _in("pgpass wildcards", "pgpass", PW, "localhost:*:*:postgres:{}\n"),
    _in("pgpass escaped colon", "pgpass", j(PW, "\\:x"), "10.0.0.5:6432:*:replicator:{}"),
    # -- percent-encoded JSON and headers -----------------------------------------------------
    _in(
        "percent-encoded json",
        "percent-encoded",
        PW,
        "%7B%22user%22%3A%22ana%22%2C%22password%22%3A%22{}%22%7D",
    ),
    _in(
        "percent-encoded bearer header",
        "percent-encoded",
        run(40, ALNUM, 150),
        "Authorization%3A%20Bearer%20{}",
    ),
    _in(
        "percent-encoded basic header with plus",
        "percent-encoded",
        run(28, ALNUM, 151),
        "headers=Authorization%3A+Basic+{}",
    ),
    _in(
        "percent-encoded json in a query",
        "percent-encoded",
        run(32, ALNUM, 152),
        "https://app.example.com/cb?state=%7B%22access_token%22%3A%22{}%22%7D&x=1",
    ),
    _in(
        "double percent-encoded json",
        "percent-encoded",
        run(32, HEX, 153),
        "next=%257B%2522api_key%2522%253A%2522{}%2522%257D",
    ),
    _in(
        "percent-encoded url password",
        "percent-encoded",
        PW,
        "redirect=https%3A%2F%2Fana%3A{}%40db.example.com%2Fshop",
    ),
    # -- password arguments of tools --------------------------------------------------------
    _in("redis-cli -a", "command line", PW, "redis-cli -h cache.example.com -a {} ping"),
    _in("zip -P", "command line", PW, "zip -r -P {} backup.zip data/"),
    _in("7z -p", "command line", PW, "7z a -p{} -mhe=on backup.7z data/"),
    _in("sqlcmd -P", "command line", PW, "sqlcmd -S db -U sa -P {} -Q 'select 1'"),
    _in("mongosh -p", "command line", PW, "mongosh --host db -u admin -p {} shop"),
    _in("ldapsearch -w", "command line", PW, "ldapsearch -x -D cn=admin,dc=acme -w {} -b dc=acme"),
    _in("smbclient user%pass", "command line", PW, "smbclient //nas/share -U ana%{}"),
    _in("htpasswd -b", "command line", PW, "htpasswd -b -c /etc/nginx/.htpasswd ana {}"),
    _in(
        "macos keychain -w",
        "command line",
        PW,
        "security add-generic-password -a ana -s deploy -w {}",
    ),
    _in("plink -pw", "command line", PW, "plink -ssh -pw {} deploy@host.example.com uptime"),
    _in(
        "keytool -storepass",
        "command line",
        PW,
        "keytool -importcert -keystore app.jks -storepass {} -file ca.crt",
    ),
    _in(
        "openssl -passout pass:",
        "command line",
        PW,
        "openssl genrsa -aes256 -passout pass:{} -out server.key 4096",
    ),
    _in("kubectl --token", "command line", run(40, ALNUM, 160), "kubectl --token {} get pods"),
    # -- more places ----------------------------------------------------------------------------
    _in(
        "jdbc url password",
        "url query",
        PW,
        "jdbc:mysql://db.example.com:3306/shop?user=app&password={}&useSSL=true",
    ),
    _in(
        "docker config auth",
        "assignment in text",
        b64(j("ana:", PW)),
        '{{"auths": {{"registry.example.com": {{"auth": "{}"}}}}}}',
    ),
    _in(
        "gradle signing password",
        "assignment in text",
        PW,
        "signing.keyId=24875D73\nsigning.password={}\n",
    ),
    _in(
        "git extraheader",
        "header in text",
        run(40, ALNUM, 161),
        'git -c http.extraheader="AUTHORIZATION: bearer {}" clone https://git.example.com/x',
    ),
    # -- vendor formats: more -------------------------------------------------------------------
    _token("alibaba access key id", "cloud", j("LT", "AI", run(20, ALNUM, 170))),
    _token("tencent secret id", "cloud", j("AK", "ID", run(32, ALNUM, 171))),
    _token(
        "cloudflare origin ca key",
        "cloud",
        j("v1.0-", run(24, HEX, 172), "-", run(146, HEX, 173)),
    ),
    _token("fly.io token", "cloud", j("fo", "1_", run(43, ALNUM, 174))),
    _token("render key", "cloud", j("rn", "d_", run(32, ALNUM, 175))),
    _token("netlify token", "cloud", j("nf", "p_", run(36, ALNUM, 176))),
    _token("neon key", "cloud", j("nap", "i_", run(64, LOWER, 177))),
    _token("deno deploy token", "cloud", j("dd", "p_", run(36, ALNUM, 178))),
    _token("scalingo token", "cloud", j("tk-", "us-", run(48, ALNUM, 179))),
    _token("figma token", "developer platform", j("fig", "d_", run(40, ALNUM, 180))),
    _token("frame.io token", "developer platform", j("fio", "-u-", run(64, ALNUM, 181))),
    _token("clojars token", "package registry", j("CLOJARS", "_", run(60, LOWER, 182))),
    _token("buildkite token", "developer platform", j("bk", "ua_", run(40, HEX, 183))),
    _token(
        "circleci token",
        "developer platform",
        j("CCI", "PAT_", run(22, ALNUM, 184), "_", run(40, HEX, 185)),
    ),
    _token("sourcegraph token", "developer platform", j("sg", "p_", run(40, HEX, 186))),
    _token("octopus deploy key", "developer platform", j("AP", "I-", run(26, UPPER, 187))),
    _token(
        "harness token",
        "developer platform",
        j("pat", ".", run(22, ALNUM, 188), ".", run(24, HEX, 189), ".", run(20, ALNUM, 190)),
    ),
    _token("typeform token", "developer platform", j("tf", "p_", run(59, ALNUM, 191))),
    _token("adafruit io key", "developer platform", j("ai", "o_", run(28, ALNUM, 192))),
    _token("new relic ingest key", "developer platform", j("NR", "II-", run(32, ALNUM, 193))),
    _token("dropbox short-lived token", "developer platform", j("s", "l.", run(140, ALNUM, 194))),
    _token(
        "plaid access token",
        "payment",
        j("access-", "sandbox-", run(8, HEX, 195), "-", run(4, HEX), "-", run(4, HEX, 1), "-")
        + j(run(4, HEX, 2), "-", run(12, HEX, 3)),
    ),
    _token(
        "braintree token",
        "payment",
        j("access_token", "$production$", run(16, LOWER, 196), "$", run(32, HEX, 197)),
    ),
    _token(
        "firebase server key",
        "chat webhook",
        j("AAAA", run(7, ALNUM, 198), ":APA91b", run(134, ALNUM, 199)),
    ),
    _token("elevenlabs key", "ai provider", j("s", "k_", run(48, HEX, 200))),
    _token("openrouter key", "ai provider", j("s", "k-or-v1-", run(64, HEX, 201))),
    _token(
        "1password secret key",
        "generic format",
        j("A3-", run(6, UPPER, 202), "-", run(11, UPPER, 203))
        + j("-", run(5, UPPER, 204), "-", run(5, UPPER, 205), "-", run(5, UPPER, 206)),
    ),
    # -- issue 44: shapes a structure gives away -------------------------------------------
    *[
        _structured(name, "name-value pair", orjson.dumps(pair).decode(), secret, pair)
        for name, pair, secret in [
            ("kubernetes env entry", {"name": "DB_PASSWORD", "value": PW}, PW),
            (
                "har header",
                {"name": "X-Api-Key", "value": run(32, ALNUM, 210)},
                run(32, ALNUM, 210),
            ),
            (
                "har cookie header",
                {"name": "Cookie", "value": j("sid=", run(32, HEX, 211))},
                run(32, HEX, 211),
            ),
            (
                "postman variable",
                {"key": "api_key", "value": run(40, ALNUM, 212), "type": "default"},
                run(40, ALNUM, 212),
            ),
            (
                "ssm parameter",
                {"Name": "/prod/db/password", "Type": "SecureString", "Value": PW},
                PW,
            ),
            (
                "value before its name",
                {"value": run(36, ALNUM, 213), "name": "GITHUB_TOKEN"},
                run(36, ALNUM, 213),
            ),
            ("cloudformation parameter", {"ParameterKey": "DbPassword", "ParameterValue": PW}, PW),
            (
                "netlify env values",
                {
                    "key": "STRIPE_SECRET",
                    "values": [{"value": run(30, ALNUM, 214), "context": "all"}],
                },
                run(30, ALNUM, 214),
            ),
        ]
    ],
    _structured(
        "kubernetes env list as yaml",
        "name-value pair",
        "env:\n  - name: LOG_LEVEL\n    value: debug\n"
        f"  - name: DB_PASSWORD\n    value: {PW}\n  - name: PORT\n    value: '8080'\n",
        PW,
        {"env": [{"name": "LOG_LEVEL", "value": "debug"}, {"name": "DB_PASSWORD", "value": PW}]},
    ),
    *[
        _structured(name, "argument list", " ".join(argv), secret, argv)
        for name, argv, secret in [
            ("--password then its value", ["mysql", "--user", "app", "--password", PW, "shop"], PW),
            ("--db-password then its value", ["--db-password", PW, "--port", "5432"], PW),
            (
                "sshpass -p then its value",
                ["sshpass", "-p", PW, "ssh", "deploy@host.example.com"],
                PW,
            ),
            ("-p after a user flag", ["cqlsh", "-u", "cassandra", "-p", PW, "db.example.com"], PW),
            ("mysql -p glued to its value", ["mysql", "-uroot", j("-p", PW), "shop"], PW),
            (
                "docker login -p",
                ["docker", "login", "--username", "ana", "-p", PW, "registry.example.com"],
                PW,
            ),
        ]
    ],
    _structured(
        "flag and value as yaml list items",
        "argument list",
        f"args:\n  - --api-token\n  - {run(40, ALNUM, 215)}\n  - --verbose\n",
        run(40, ALNUM, 215),
        {"args": ["--api-token", run(40, ALNUM, 215), "--verbose"]},
    ),
    *[
        _structured(name, "base64 text", text.format(blob), blob, {"data": {"config": blob}})
        for name, text, blob in [
            (
                ".env in base64",
                "data:\n  .env: {}\n",
                b64(j("APP_ENV=production\nDB_PASSWORD=", PW, "\nLOG_LEVEL=info\n")),
            ),
            (
                "json in base64",
                "echo {} | base64 -d > ~/.docker/config.json",
                b64(
                    orjson.dumps(
                        {"auths": {"r.example.com": {"username": "ana", "password": PW}}}
                    ).decode()
                ),
            ),
            (
                "base64 url-safe, unpadded",
                "client={}",
                b64url(j('{"client_id": "shop", "client_secret": "', run(40, ALNUM, 216), '"}')),
            ),
            (
                "base64 inside base64",
                "value: {}",
                b64(b64(j("export AWS_SECRET_ACCESS_KEY=", run(40, B64, 217), "\n"))),
            ),
        ]
    ],
    _structured(
        ".env in base64 wrapped at 76 columns",
        "base64 text",
        "data:\n" + "\n".join(WRAPPED_ENV),
        "\n".join(WRAPPED_ENV),
        WRAPPED_ENV,
    ),
    *[
        _structured(name, "split jwt", text, ".".join(JWT_PARTS), json)
        for name, text, json in [
            (
                "jwt split over sibling fields",
                orjson.dumps(
                    dict(zip(("header", "payload", "signature"), JWT_PARTS, strict=True))
                ).decode(),
                dict(zip(("header", "payload", "signature"), JWT_PARTS, strict=True)),
            ),
            (
                "jwt split, signature first",
                "s={2}\nh={0}\np={1}\n".format(*JWT_PARTS),
                {"s": JWT_PARTS[2], "h": JWT_PARTS[0], "p": JWT_PARTS[1]},
            ),
            ("jwt split over list items", " ".join(JWT_PARTS), list(JWT_PARTS)),
        ]
    ],
    # Cyrillic, Greek and fullwidth letters that look like Latin ones.
    _look_alike("cyrillic password", "\u0440\u0430ssword", PW),
    _look_alike("greek token", "api_t\u03bfken", run(40, ALNUM, 218)),
    _look_alike(
        "fullwidth api key", "\uff21\uff30\uff29\uff3f\uff2b\uff25\uff39", run(40, ALNUM, 219)
    ),
    _look_alike("cyrillic secret, upper case", "CLI\u0415NT_S\u0415CR\u0415T", run(40, ALNUM, 220)),
    _structured(
        "cyrillic name of a pair",
        "look-alike name",
        f"DB_\u0420\u0410SSWORD: {PW}",
        PW,
        {"name": "DB_\u0420\u0410SSWORD", "value": PW},
    ),
]
# -- issue 49: classes that leaked (each in decisions and in content) ------------------------

PW2 = j("Hu", "nter-", run(12, LOWER, 240))  # a second password, for two in one text
TOK = run(40, ALNUM, 241)  # a token with no vendor shape
DSN_PW = j("s3/cr", "#et-", run(8, LOWER, 242))  # a URL password with "/" and "#"

ISSUE_49: list[Shape] = [
    # secret names assigned in code of other languages
    _in("php variable", "code of other languages", PW, "$db_password = '{}';"),
    _in("perl variable", "code of other languages", PW, 'my $api_token = "{}";'),
    _in("powershell variable", "code of other languages", PW, "$Password = '{}'"),
    _in("powershell env", "code of other languages", TOK, '$env:API_TOKEN = "{}"'),
    _in("php define", "code of other languages", PW, "define('DB_PASSWORD', '{}');"),
    _in("os.environ item", "code of other languages", TOK, 'os.environ["X_API_KEY"] = "{}"'),
    _in("config item", "code of other languages", PW, "config['password'] = '{}'"),
    _in("setenv call", "code of other languages", TOK, 'setenv("API_TOKEN", "{}", 1);'),
    _in("go os.Setenv", "code of other languages", TOK, 'os.Setenv("GITHUB_TOKEN", "{}")'),
    _in(
        "java system property",
        "code of other languages",
        PW,
        'System.setProperty("db.password", "{}");',
    ),
    _in(
        "builder call",
        "code of other languages",
        PW,
        'DataSource ds = builder.username("app").password("{}").build();',
    ),
    _in(
        "ruby hash rocket", "code of other languages", PW, "{{ :user => 'app', :password => '{}' }}"
    ),
    _in(
        "localStorage.setItem",
        "code of other languages",
        TOK,
        "localStorage.setItem('token', '{}');",
    ),
    _in(
        "auth tuple",
        "code of other languages",
        PW,
        'requests.get(url, auth=("ana", "{}"))',
    ),
    _in("login call", "code of other languages", PW, 'client.login("ana", "{}")'),
    _in(
        "header tuple",
        "code of other languages",
        TOK,
        'headers = [("X-Api-Key", "{}"), ("Accept", "application/json")]',
    ),
    # prefixed or triple-quoted literals
    _in("bytes literal", "prefixed literal", PW, "password = b'{}'"),
    _in("raw literal", "prefixed literal", TOK, 'API_TOKEN = r"{}"'),
    _in("c# verbatim literal", "prefixed literal", PW, 'var password = @"{}";'),
    _in("bash ansi-c literal", "prefixed literal", PW, "DB_PASSWORD=$'{}'"),
    _in("triple-quoted literal", "prefixed literal", PW, 'SECRET = """{}"""'),
    # names not recognised before
    _in(
        "laravel app key",
        "secret name",
        j("base64:", run(43, B64, 243), "="),
        "APP_ENV=local\nAPP_KEY={}\nAPP_DEBUG=true",
    ),
    _keyed("vendor app key", "ALGOLIA_APP_KEY", run(32, HEX, 244)),
    _keyed("vendor admin key", "ALGOLIA_ADMIN_KEY", run(32, HEX, 245)),
    _in(
        "application key header",
        "secret name",
        run(40, HEX, 246),
        "curl -H 'DD-APPLICATION-KEY: {}' https://api.datadoghq.com/api/v1/validate",
    ),
    _keyed("hmac key", "HMAC_KEY", run(64, HEX, 247)),
    _in(
        "subscription key header",
        "secret name",
        run(32, HEX, 248),
        "Ocp-Apim-Subscription-Key: {}",
    ),
    _in(
        "function key header",
        "secret name",
        j(run(40, ALNUM, 249), "=="),
        "x-functions-key: {}",
    ),
    _in(
        "lower-case accountkey",
        "secret name",
        j(run(60, ALNUM, 250), "=="),
        "defaultendpointsprotocol=https;accountname=acct;accountkey={};endpointsuffix=core",
    ),
    _keyed("personal access token name", "GITHUB_PAT", TOK),
    _in(
        "authkey query",
        "secret name",
        run(36, ALNUM, 251),
        "https://api.example.com/v2/send?authkey={}&to=ana",
    ),
    _in("api key label", "secret name", run(32, ALNUM, 252), "Your new credentials\nAPI Key: {}"),
    _in("secret key label", "secret name", run(40, ALNUM, 253), "Secret Key: {}"),
    _in(
        "secret access key label",
        "secret name",
        run(40, B64, 254),
        "Access key ID: EXAMPLEID\nSecret access key: {}",
    ),
    _in("private key label", "secret name", j("0x", run(64, HEX, 255)), "Private key: {}"),
    _in(
        "aws console credentials csv",
        "secret name",
        run(40, ALNUM, 256),
        "User name,Password,Access key ID,Secret access key,Console login link\n"
        "ana,,EXAMPLEID,{},https://acct.signin.aws.amazon.com/console",
    ),
    # structures
    _in(
        "xml cdata",
        "structure",
        PW,
        "<config><password><![CDATA[{}]]></password></config>",
    ),
    _in(
        "xml entry key",
        "structure",
        PW,
        '<properties><entry key="db.password">{}</entry></properties>',
    ),
    _in(
        "xml value of a secret-named property",
        "structure",
        PW,
        "<property>\n  <name>db.password</name>\n  <value>{}</value>\n</property>",
    ),
    _in(
        "xml value child",
        "structure",
        PW,
        "<password>\n  <value>{}</value>\n</password>",
    ),
    _in("yaml list under a secret name", "structure", PW, "passwords:\n  - {}\n  - other\n"),
    _in("yaml anchor", "structure", PW, "defaults:\n  password: &pw {}\nprod:\n  password: *pw\n"),
    _structured(
        "jwk private member d",
        "structure",
        '{{"kty": "EC", "crv": "P-256", "x": "abc", "y": "def", "d": "{}"}}'.format(
            run(43, ALNUM + "-_", 257)
        ),
        run(43, ALNUM + "-_", 257),
        {"kty": "EC", "crv": "P-256", "x": "abc", "y": "def", "d": run(43, ALNUM + "-_", 257)},
    ),
    _structured(
        "jwk symmetric member k",
        "structure",
        '{{"kty": "oct", "alg": "HS256", "k": "{}"}}'.format(run(43, ALNUM + "-_", 258)),
        run(43, ALNUM + "-_", 258),
        {"kty": "oct", "alg": "HS256", "k": run(43, ALNUM + "-_", 258)},
    ),
    # URLs
    _in("dsn password with / and #", "url password", DSN_PW, "postgres://app:{}@db:5432/shop"),
    _in(
        "escaped url password",
        "url password",
        PW,
        '{{"url": "https:\\/\\/ana:{}@git.example.com\\/shop.git"}}',
    ),
    # commands
    _in("curl -U proxy user", "command line", PW, "curl -U proxy:{} https://example.com"),
    _in("--proxy-user", "command line", PW, "curl --proxy-user ana:{} -x proxy:3128 https://x.io"),
    _in("httpie -a", "command line", PW, "http -a ana:{} GET https://api.example.com/me"),
    _in(
        "escaped-space authorization",
        "command line",
        TOK,
        "curl -H Authorization:\\ Bearer\\ {} https://api.example.com",
    ),
    _in("sqlplus user/pass@", "command line", PW, "sqlplus scott/{}@orcl"),
    _in(
        "openssl -k",
        "command line",
        PW,
        "openssl enc -aes-256-cbc -salt -in a.txt -k {} -out a.enc",
    ),
    _in("gh secret set --body", "command line", TOK, "gh secret set NPM_TOKEN --body {}"),
    _in("sudo -S", "command line", PW, "echo {} | sudo -S apt-get update"),
    _in(
        "docker login --password-stdin",
        "command line",
        PW,
        "echo '{}' | docker login --username ana --password-stdin",
    ),
    _in("chpasswd", "command line", PW, "echo 'ana:{}' | chpasswd"),
    _in(
        "sql identified by, unquoted",
        "markup and sql",
        PW,
        "ALTER USER app IDENTIFIED BY {};",
    ),
    _in(
        "sql using",
        "markup and sql",
        PW,
        "CREATE USER app IDENTIFIED VIA ed25519 USING PASSWORD('{}');",
    ),
    _in(
        "sql using a string",
        "markup and sql",
        PW2,
        "GRANT ALL ON shop.* TO app IDENTIFIED VIA mysql_native_password USING '{}';",
    ),
    # encodings
    _in(
        "html entities",
        "encoding",
        PW,
        "<pre>{{&quot;user&quot;: &quot;ana&quot;, &quot;password&quot;: &quot;{}&quot;}}</pre>",
    ),
    _in("html numeric entities", "encoding", PW, "password&#61;&#34;{}&#34;"),
    _in("unicode-escaped name", "encoding", PW, '{{"\\u0070assword": "{}"}}'),
]
SHAPES += ISSUE_49

CATEGORIES = sorted({s.category for s in SHAPES})


def placements(shape: Shape) -> dict[str, dict[str, Any]]:
    """The ``raw`` payloads that carry ``shape``, by where in them it sits."""
    text = shape.text
    out: dict[str, dict[str, Any]] = {
        "string value": {"note": text},
        "free text": {"log": f"step 3: {text} (exit 0)\nstep 4: done"},
        "nested value": {"tool_input": {"args": [{"value": text}]}},
        "key name": {"headers": {text: "present"}},
        "json text": {"body": orjson.dumps({"data": text}).decode()},
    }
    if shape.json is not None:
        out["json value"] = {"lines": shape.json}
        out["json value, nested"] = {"tool_input": {"files": [{"content": shape.json}]}}
        out["json value, json text"] = {"body": orjson.dumps({"lines": shape.json}).decode()}
    if shape.key is not None:
        out["under its key"] = {shape.key: shape.keyed_value}
        out["under its key, nested"] = {"env": [{shape.key: shape.keyed_value}]}
        out["under its key, json text"] = {
            "body": orjson.dumps({"data": {shape.key: shape.keyed_value}}).decode()
        }
    return out


def leaks(secret: str, blob: str | bytes, window: int = 12) -> bool:
    """Whether ``blob`` holds ``window`` consecutive characters of ``secret`` (a credential
    cut short is still a leak), as they are, JSON-escaped, or escaped twice."""
    text = blob.decode() if isinstance(blob, bytes) else blob
    once = orjson.dumps(secret).decode()[1:-1]
    twice = orjson.dumps(once).decode()[1:-1]
    return any(
        form[i : i + window] in text
        for form in (secret, once, twice)
        for i in range(max(len(form) - window, 0) + 1)
    )


# -- ordinary content: kept exactly --------------------------------------------------------

ORDINARY_TEXT: list[str] = [
    "The user forgot their password and asked for a reset link.",
    "Tokens are counted per request; the token limit was reached.",
    "Fix token refresh when the secret rotates (#123)",
    'password_field = form.get("password")',
    'token = os.environ["GITHUB_TOKEN"]',
    "api_key = load_key(settings)",
    "password = getpass.getpass()",
    "DB_PASSWORD=${DB_PASSWORD}",
    "export GITHUB_TOKEN=$GH_TOKEN",
    "def login(username: str, password: str) -> bool:",
    "password: string;",
    "token_type=bearer",
    "max_tokens=4096 temperature=0.2",
    "tokens: 4096",
    "/home/dev/.aws/credentials",
    "src/auth/token_service.py",
    "~/.ssh/id_ed25519",
    "config/secrets.example.yml",
    "https://example.com/search?q=redaction&page=2&sort=desc",
    "https://github.com/acme/shop/pull/42#discussion_r1",
    "https://docs.python.org/3/library/re.html#re.sub",
    "https://host.example.com:8443/users/ana@example.com",
    "ssh://git@github.com/acme/shop.git",
    "3f2504e0-4f89-11d3-9a0c-0305e82c3301",
    "da39a3ee5e6b4b0d3255bfef95601890afd80709",
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "git push -u origin feature/redaction",
    "docker run -u 1000:1000 -p 8080:80 shop",
    "pytest -q tests/core --maxfail=1",
    "<input type='password' name='password'>",
    "toolu_01ABCdefGHIjklMNOpqrSTU",
    "Let me read the pagination helper.",
    # near the rules of the second wave, and ordinary
    "git config --global credential.helper store",
    "git config --global user.name 'Ana Lima'",
    "aws configure set region eu-west-1",
    "npm config set registry https://registry.npmjs.org/",
    "set -euo pipefail",
    "set -x",
    "setx PATH C:\\tools",
    "ssh -i ~/.ssh/id_rsa deploy@host.example.com",
    "ssh-keygen -t ed25519 -f ~/.ssh/id_ed25519 -C ana@laptop",
    "chmod 600 ~/.ssh/id_rsa && ssh-add ~/.ssh/id_rsa",
    "openssl req -new -key server.key -out server.csr",
    "openssl x509 -in tls.crt -noout -subject",
    "kubectl create secret tls web --cert=tls.crt --key=tls.key",
    "kubectl get secret web -o yaml",
    "cat ~/.pgpass ~/.netrc",
    "the machine learning model was retrained",
    "redis-cli -h cache.example.com ping",
    "zip -r backup.zip data/",
    "7z x archive.7z -o/tmp/out",
    "htpasswd -c /etc/nginx/.htpasswd ana",
    "ldapsearch -x -b dc=example,dc=com '(uid=ana)'",
    "mongosh --host db shop --eval 'db.stats()'",
    "sqlcmd -S db -Q 'select 1'",
    "docker run -p 127.0.0.1:8080:80 shop",
    "12:30:45 job started",
    "00:11:22:33:44:55",
    "fe80::1ff:fe23:4567:890a",
    "2001:0db8:85a3:0000:0000:8a2e:0370:7334",
    "src/app.py:10:5: E501 line too long (103 > 100 characters)",
    "at com.example.Shop.main(Shop.java:42)",
    "https://example.com/search?q=caf%C3%A9%20menu&page=2",
    "https://example.com/docs/How%20to%20rotate%20a%20token",
    "printf '%s has %d tokens, 100%% done' \"$name\" 3",
    "progress: 42%",
    "password: |",
    "Private-Lines are the private half of a PuTTY key file.",
    "-----BEGIN CERTIFICATE----- is public.",
    "id_rsa.pub",
    "s3.key",
    "tls.crt: present",
    # a certificate in base64, as a Kubernetes secret's tls.crt holds it: public
    "tls.crt: " + b64(CERT_PEM),
    "ca.crt: " + b64(CERT_PEM + "\n" + CERT_PEM),
    # near the rules of issue 44 (pairs, argument lists, base64, JWT parts, look-alikes)
    '{"name": "LOG_LEVEL", "value": "debug"}',
    '[{"name": "Content-Type", "value": "application/json"}, {"Key": "Name", "Value": "web"}]',
    "env:\n  - name: DB_PASSWORD\n    valueFrom:\n      secretKeyRef:\n        name: db\n"
    "        key: password\n  - name: PORT\n    value: '8080'\n",
    '["docker", "run", "-u", "1000", "-p", "8080:80", "shop"]',
    '["psql", "-h", "db", "-U", "app", "-p", "5432", "shop"]',
    "ssh -l ana -p 2222 host.example.com",
    "psql -h db -U app -p 5432 shop",
    "docker run -u app -p 127.0.0.1:8080:80/tcp shop",
    "args:\n  - --port\n  - '8080'\n  - --token-file\n  - /run/secrets/token\n",
    "echo " + b64("build passed: 42 tests, 0 failures\n") + " | base64 -d",
    "data:\n  config.yaml: " + b64("log_level: info\nport: 8080\nname: shop\n"),
    "JOSE header " + b64url('{"alg":"RS256","kid":"2026-11"}') + " (public)",
    "\u041f\u0430\u0440\u043e\u043b\u044c \u0441\u0431\u0440\u043e\u0448\u0435\u043d.",
    "\u03a4\u03bf \u03ba\u03bb\u03b5\u03b9\u03b4\u03af \u03ac\u03bb\u03bb\u03b1\u03be\u03b5.",
    "\u30d1\u30b9\u30ef\u30fc\u30c9\uff08\uff29\uff24\uff1a\uff11\uff12\uff13\uff09",
    "\uff50\uff41\uff53\uff53\uff57\uff4f\uff52\uff44\uff3f\uff46\uff49\uff45\uff4c\uff44"
    "\uff1a\uff4e\uff41\uff4d\uff45",
]

ORDINARY_RAW: dict[str, Any] = {
    "hook": "PostToolUse",
    "tool_use_id": "toolu_01",
    "session_id": "sess-42",
    "cwd": "/home/dev/shop",
    "max_tokens": 4096,
    "token_count": 12,
    "tokens_used": "value 123",
    "usage": {"input_tokens": 10, "output_tokens": 20, "cache_read_input_tokens": 0},
    "token_type": "bearer",
    "password_field": "pw",
    "secret_name": "db-creds",
    "token_file": "/run/secrets/token",
    "authorization_url": "https://accounts.example.com/o/oauth2/auth",
    "password_set": True,
    "author": "ana",
    "keyboard": "us",
    "path": "src/auth/token_service.py",
    "commit": "da39a3ee5e6b4b0d3255bfef95601890afd80709",
    "id": "3f2504e0-4f89-11d3-9a0c-0305e82c3301",
    "tool_input": {"command": "pytest -q", "description": "run the tests"},
    "s3.key": "uploads/2026/11/29/screenshot.png",
    "cache.key": "sess-42:page-2",
    "ssh_key_path": "~/.ssh/id_ed25519",
    "identity_file": "~/.ssh/id_rsa",
    "tls.crt": b64(CERT_PEM),
    "id_rsa.pub": "ssh-ed25519 " + run(68, PUBLIC) + " ana@laptop",
    "lines": ["first line", "-----BEGIN CERTIFICATE-----", "not a key", "last line"],
    "git": {"credential.helper": "store", "user.name": "ana"},
    "env": [
        {"name": "LOG_LEVEL", "value": "debug"},
        {
            "name": "DB_PASSWORD",
            "valueFrom": {"configMapKeyRef": {"name": "db", "key": "password"}},
        },
    ],
    "headers": [{"name": "Content-Type", "value": "application/json"}],
    "tags": [{"Key": "Name", "Value": "web"}, {"key": "token_count", "value": 12}],
    "psql": ["psql", "-h", "db", "-U", "app", "-p", "5432", "shop"],
    "docker": ["docker", "run", "-u", "1000", "-p", "8080:80", "shop"],
    "flags": ["--token-file", "/run/secrets/token", "--max-tokens", "4096"],
    "jose_header": b64url('{"alg":"RS256","kid":"2026-11"}'),
    "claims": [b64url('{"alg":"RS256"}'), "plain words"],
    "notes64": b64("user guide: run make test, then make lint\n"),
    "png64": base64.b64encode(bytes(range(256)) * 2).decode(),
    "\u041f\u0430\u0440\u043e\u043b\u044c": "\u0441\u0431\u0440\u043e\u0448\u0435\u043d",
}
