"""Credential shapes for the redaction tests, and ordinary content that must survive.

The shapes follow the kinds of rules public secret scanners (gitleaks, trufflehog,
detect-secrets) carry: vendor formats, credentials written into text, URLs and commands,
and secrets recognised by the name they are given. Every value is fake: runs of sequential
characters of the right alphabet and length, put together at run time, so this file holds
no contiguous string a scanner would take for a live token.

``secret`` is the part that must not survive redaction anywhere; ``text`` is how the
credential appears in a string. A shape with a ``key`` is also placed as ``{key: value}``.
"""

from __future__ import annotations

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
]
CATEGORIES = sorted({s.category for s in SHAPES})


def placements(shape: Shape) -> dict[str, dict[str, Any]]:
    """The ``raw`` payloads that carry ``shape``, by where in them it sits."""
    text = shape.text
    out = {
        "string value": {"note": text},
        "free text": {"log": f"step 3: {text} (exit 0)\nstep 4: done"},
        "nested value": {"tool_input": {"args": [{"value": text}]}},
        "key name": {"headers": {text: "present"}},
        "json text": {"body": orjson.dumps({"data": text}).decode()},
    }
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
}
