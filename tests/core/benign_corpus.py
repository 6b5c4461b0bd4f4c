"""What coding agents really see, with no credential in it: redaction keeps it exactly.

Built deterministically at import (no randomness at test time): the output of the tools an
agent runs (pytest, mypy, ruff, eslint, go vet, ``grep -n``) on files named like secrets,
tokenizer special tokens, code that names a password or a token without giving one, long
dotted Python names, base64 of binary files, hashes, UUIDs, integrity strings, public keys,
and references to secrets (``${VAR}``, ``${{ secrets.X }}``). ``BENIGN`` holds every string
once; each group is also a name of its own for the tests' ids.
"""

from __future__ import annotations

import base64
import hashlib
import struct
import uuid

# -- path:line locations in tool output, for files named like a secret ----------------------

FILES = [
    "src/auth/token.py",
    "app/secrets.py",
    "secret.py",
    "auth.py",
    "token.py",
    "key.py",
    "credentials.py",
    "cookie.py",
    "src/api/keys.py",
    "lib/password_reset.py",
    "services/api_key_service.py",
    "tests/test_auth_token.py",
]
GO_FILES = ["./internal/auth/token.go", "auth.go", "pkg/secret/secret.go", "cmd/key.go"]
TS_FILES = ["src/auth/token.ts", "src/lib/cookie.ts", "secret.js", "src/credentials.tsx"]


def _tool_lines() -> list[str]:
    out: list[str] = []
    for i, f in enumerate(FILES):
        n, col = 10 + 7 * i, 1 + i % 9
        stem = f.rsplit("/", 1)[-1].removesuffix(".py")
        out += [
            # pytest
            f"{f}::test_{stem}_refresh PASSED                                   [ {i + 3}%]",
            f"FAILED {f}::test_{stem}_expired - AssertionError: assert 401 == 200",
            f"{f}:{n}: AssertionError",
            f"{f}:{n}: in test_{stem}_rotation",
            f"E       assert response.status_code == 200  ({f}:{n})",
            f"{f} ..F.                                                     [ 40%]",
            # mypy
            f'{f}:{n}: error: Incompatible return value type (got "str | None", expected '
            f'"str")  [return-value]',
            f'{f}:{n}: note: Revealed type is "builtins.str"',
            f'{f}:{n}:{col}: error: Name "{stem}_value" is not defined  [name-defined]',
            # ruff
            f"{f}:{n}:{col}: F401 [*] `os` imported but unused",
            f"{f}:{n}:{col}: E501 Line too long (112 > 100)",
            f'{f}:{n + 1}:{col + 4}: S105 Possible hardcoded password assigned to: "{stem}"',
            # grep -n, a code line without a value
            f"{f}:{n}:def {stem}_for(user: User) -> str:",
            f"{f}:{n}:    return self._{stem}s.get(user.id)",
            f"{f}:{n}:from .{stem} import load",
            # coverage and tracebacks
            f'  File "/home/dev/shop/{f}", line {n}, in {stem}_for',
            f"{f:<40} {n * 3:>5} {n:>5} {80 - i}%",
        ]
    for i, f in enumerate(GO_FILES):
        n = 20 + 11 * i
        out += [
            f"{f}:{n}:2: unreachable code",
            f"{f}:{n}:14: printf: fmt.Sprintf format %d has arg name of wrong type string",
            f"# example.com/shop/{f.rsplit('/', 1)[0].lstrip('./')}",
            f"{f}:{n}:6: declared and not used: tok",
            f"--- FAIL: TestRotate{i} (0.00s)\n    {f.rsplit('/', 1)[-1]}:{n}: got 401, want 200",
            f'{f}:{n}:\treturn nil, fmt.Errorf("token expired")',
        ]
    for i, f in enumerate(TS_FILES):
        n = 12 + 5 * i
        out += [
            f"/home/dev/app/{f}\n  {n}:7  error  'secret' is assigned a value but never used  "
            "no-unused-vars",
            f"  {n}:3  warning  Unexpected console statement  no-console",
            f"{f}({n},5): error TS2322: Type 'string | undefined' is not assignable to type "
            "'string'.",
            f"{f}:{n}:5 - error TS2339: Property 'token' does not exist on type 'Session'.",
            f"{f}:{n}:  const token = await getToken(req);",
            f"✖ {f}:{n}:9 prettier/prettier",
        ]
    return out


# -- tokenizer special tokens ------------------------------------------------------------

SPECIAL_TOKENS = [
    '"eos_token": "</s>"',
    '"bos_token": "<s>"',
    '"unk_token": "<unk>"',
    '"pad_token": "<pad>"',
    '"mask_token": "<mask>"',
    '"cls_token": "[CLS]"',
    '"sep_token": "[SEP]"',
    '"pad_token": "[PAD]"',
    '"eos_token": "<|endoftext|>"',
    '"bos_token": "<|begin_of_text|>"',
    '"eos_token": "<|eot_id|>"',
    '"pad_token": "<|finetune_right_pad_id|>"',
    '"eos_token": "<|im_end|>"',
    '"eos_token": "<end_of_turn>"',
    "tokenizer.pad_token = tokenizer.eos_token",
    'tokenizer.eos_token = "</s>"',
    'tokenizer.add_special_tokens({"pad_token": "[PAD]"})',
    '"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]',
    'special_tokens_map.json: {"bos_token": "<s>", "eos_token": "</s>"}',
    "eos_token: </s>",
    "pad_token: <pad>",
    "bos_token_id: 1\neos_token_id: 2\npad_token_id: 0",
    '{"eos_token_id": 128001, "bos_token_id": 128000}',
    "unk_token=<unk> eos_token=</s>",
    '"sep_token": "</s>", "cls_token": "<s>"',
    'tokenizer("hello", return_tensors="pt").input_ids',
]

# -- code that names a password, a token or a key without giving one ---------------------

CODE = [
    "password: str = Field(..., min_length=8)",
    "password: str = Field(..., min_length=8, max_length=128)",
    "new_password: SecretStr = Field(..., min_length=12)",
    "token: str = Field(default_factory=lambda: secrets.token_urlsafe(32))",
    "password = forms.CharField(widget=forms.PasswordInput)",
    "password = models.CharField(max_length=128)",
    "AUTH_PASSWORD_VALIDATORS = [",
    "AUTH_PASSWORD_VALIDATORS = []",
    '    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},',
    "PASSWORD_HASHERS = ['django.contrib.auth.hashers.Argon2PasswordHasher']",
    "SESSION_COOKIE_SECURE = True",
    "CSRF_COOKIE_HTTPONLY = True",
    "SESSION_COOKIE_AGE = 1209600",
    "UPDATE users SET pw = crypt($1, password) WHERE id = $2;",
    "SELECT crypt($1, password) = password FROM users WHERE email = $2",
    "password_hash = crypt(password, gen_salt('bf'))",
    "securitySchemes:\n  bearerAuth:\n    type: http\n    scheme: bearer\n    bearerFormat: JWT",
    "security:\n  - bearerAuth: []",
    '"securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}}',
    '"security": [{"bearerAuth": []}]',
    "  apiKeyAuth:\n    type: apiKey\n    in: header\n    name: X-API-Key",
    '"password_placeholder": "Enter your password"',
    '"auth.password.label": "Password"',
    '"token_expired": "Your session token has expired. Please sign in again."',
    '"password_too_short": "Password must be at least {min} characters"',
    '"secret_hint": "Keep your recovery key somewhere safe"',
    "password_label=Mot de passe",
    'msgid "Password"\nmsgstr "Passwort"',
    '"nextPageToken": "CAUQAA"',
    '"nextPageToken": "CiAKGjBpNDd2Nmp2Zml2cXRwYjBpOXA"',
    '{"items": [], "nextPageToken": "EAEaAggB"}',
    "pageToken=CAoQAA&maxResults=10",
    '"continuationToken": "eyJvZmZzZXQiOjUwfQ"',
    '"syncToken": "CPDAlvWDx70CEPDAlvWDx70CGAU"',
    "next_page_token: CAUQAQ",
    "resp = client.list(page_token=resp.next_page_token)",
    'request.page_token = "CAIQAA"',
    "password = request.form['password']",
    "token = jwt.encode(payload, settings.SECRET_KEY, algorithm='HS256')",
    "api_key = os.getenv('OPENAI_API_KEY')",
    "secret = boto3.client('secretsmanager').get_secret_value(SecretId=arn)",
    "def verify_password(plain: str, hashed: str) -> bool:",
    "if not check_password(password, user.password):",
    "const token = localStorage.getItem('token');",
    "localStorage.removeItem('token');",
    "headers: { Authorization: `Bearer ${token}` },",
    "$password = $_POST['password'];",
    "my $token = $ENV{'API_TOKEN'};",
    "$Password = Read-Host -AsSecureString",
    "$env:API_TOKEN = $null",
    "os.environ['API_TOKEN'] = token",
    "config['password'] = getpass()",
    'System.setProperty("javax.net.ssl.trustStorePassword", password);',
    'os.Setenv("GITHUB_TOKEN", tok)',
    ".password(password)",
    ":password => params[:password]",
    "auth=(user, password)",
    "client.login(user, password)",
    "password_reset_timeout = 3600",
    "token_expiry_seconds = 900",
    "MIN_PASSWORD_LENGTH = 12",
    "key_size=2048",
    "key = (user_id, page)",
    "key = cache_key(user.id)",
    "cookie_name = 'sessionid'",
    "secret_ref: db-credentials",
    '<input type="password" name="password" autocomplete="current-password">',
    '<label for="password">Password</label>',
    "passwordless login via magic links",
    "The token bucket refills at 10 tokens per second.",
    "Use a personal access token (classic) with the repo scope.",
    "You can create an API key in the dashboard under Settings > API keys.",
]

# -- long dotted Python names -------------------------------------------------------------

DOTTED = [
    "django.contrib.auth.password_validation.UserAttributeSimilarityValidator",
    "django.contrib.auth.password_validation.CommonPasswordValidator",
    "django.contrib.auth.password_validation.NumericPasswordValidator",
    "rest_framework.authentication.TokenAuthentication",
    "rest_framework_simplejwt.authentication.JWTAuthentication",
    "google.oauth2.credentials.Credentials.from_authorized_user_file",
    "google.auth.transport.requests.Request",
    "transformers.models.auto.tokenization_auto.AutoTokenizer.from_pretrained",
    "transformers.tokenization_utils_base.PreTrainedTokenizerBase.pad_token_id",
    "airflow.providers.amazon.aws.hooks.secrets_manager.SecretsManagerHook",
    "azure.keyvault.secrets.SecretClient.get_secret",
    "azure.identity.DefaultAzureCredential",
    "cryptography.hazmat.primitives.asymmetric.rsa.generate_private_key",
    "cryptography.hazmat.primitives.serialization.load_pem_private_key",
    "botocore.credentials.RefreshableCredentials",
    "requests.auth.HTTPBasicAuth",
    "starlette.middleware.sessions.SessionMiddleware.secret_key",
    "flask.sessions.SecureCookieSessionInterface",
    "keyring.backends.SecretService.Keyring",
    "sqlalchemy.engine.url.URL.password",
    "pydantic.types.SecretStr.get_secret_value",
    "stream_app.core.redaction.redact_text",
    "oauthlib.oauth2.rfc6749.tokens.BearerToken",
    "authlib.integrations.requests_client.OAuth2Session.fetch_token",
    "jwt.api_jwt.PyJWT.decode",
    "paramiko.rsakey.RSAKey.from_private_key_file",
    "tests.unit.auth.test_token_service.TestTokenService.test_refresh_token_rotation",
    "myapp.settings.production.SECRET_KEY_FALLBACKS",
    "org.springframework.security.oauth2.server.resource.authentication.JwtAuthenticationToken",
    "com.example.auth.PasswordEncoderConfig.passwordEncoder",
]

# -- base64 of binary files ---------------------------------------------------------------

_HEADERS = [
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
    b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03",
    b"PK\x03\x04\x14\x00\x00\x00\x08\x00",
    b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00",
    b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01",
    b"\x00asm\x01\x00\x00\x00",
    b"SQLite format 3\x00",
    b"\xa7\r\r\n\x00\x00\x00\x00",
    b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n",
    b"\x00\x00\x01\x00\x01\x00\x10\x10\x00\x00",
]


def _binary(i: int) -> bytes:
    """A binary file: a header, then blocks of digest bytes and runs of zero bytes."""
    data = bytearray(_HEADERS[i % len(_HEADERS)])
    seed = hashlib.sha256(struct.pack(">I", i)).digest()
    for block in range(4 + i % 9):
        seed = hashlib.sha256(seed).digest()
        data += seed * (1 + block % 3)
        data += bytes(8 * ((i + block) % 7))  # padding, as binaries have
    return bytes(data)


def _base64_files() -> list[str]:
    out: list[str] = []
    for i in range(40):
        blob = base64.b64encode(_binary(i)).decode()
        if i % 4 == 1:  # wrapped at 76 columns, as ``base64`` writes it
            blob = "\n".join(blob[k : k + 76] for k in range(0, len(blob), 76))
        elif i % 4 == 2:
            blob = f'{{"name": "file{i}.bin", "content": "{blob}"}}'
        elif i % 4 == 3:
            blob = f"data:image/png;base64,{blob}"
        out.append(blob)
    return out


# -- hashes, UUIDs, integrity strings, public keys ----------------------------------------


def _digests() -> list[str]:
    out: list[str] = []
    for i in range(24):
        data = f"file-{i}".encode()
        out += [
            hashlib.sha256(data).hexdigest(),
            f"commit {hashlib.sha1(data).hexdigest()}",
            f"{hashlib.md5(data).hexdigest()}  dist/app-{i}.tar.gz",
            str(uuid.UUID(bytes=hashlib.md5(data).digest(), version=4)),
        ]
        if i % 3 == 0:
            out.append(
                f'"integrity": "sha512-{base64.b64encode(hashlib.sha512(data).digest()).decode()}"'
            )
            out.append(
                f'<script src="/app-{i}.js" integrity="sha384-'
                f'{base64.b64encode(hashlib.sha384(data).digest()).decode()}" '
                'crossorigin="anonymous"></script>'
            )
            out.append(f"sha256:{hashlib.sha256(data).hexdigest()}")
            out.append(
                f'resolved "https://registry.yarnpkg.com/pkg/-/pkg-{i}.0.0.tgz'
                f'#{hashlib.sha1(data).hexdigest()}"'
            )
    return out


def _public_keys() -> list[str]:
    out: list[str] = []
    for i in range(8):
        seed = hashlib.sha512(f"key-{i}".encode()).digest()
        ed = base64.b64encode(b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + seed[:32])
        rsa_body = b"\x00\x00\x00\x07ssh-rsa\x00\x00\x00\x03\x01\x00\x01\x00\x00\x01\x01"
        rsa = base64.b64encode(rsa_body + seed * 4)
        out += [
            f"ssh-ed25519 {ed.decode()} dev{i}@laptop",
            f"ssh-rsa {rsa.decode()} ci@runner-{i}",
            f"github.com ssh-ed25519 {ed.decode()}",
        ]
        der = b"\x30\x59\x30\x13\x06\x07\x2a\x86\x48\xce\x3d\x02\x01" + seed[:46]
        pem_body = base64.b64encode(der).decode()
        out.append(
            "-----BEGIN PUBLIC KEY-----\n"
            + "\n".join(pem_body[k : k + 64] for k in range(0, len(pem_body), 64))
            + "\n-----END PUBLIC KEY-----"
        )
    return out


# -- references to secrets, never their values --------------------------------------------

REFERENCES = [
    "password: ${{ secrets.DB_PASSWORD }}",
    "token: ${{ secrets.GITHUB_TOKEN }}",
    "NPM_TOKEN: ${{ secrets.NPM_TOKEN }}",
    "api-key: ${{ secrets.OPENAI_API_KEY }}",
    "run: npm publish --token ${{ secrets.NPM_TOKEN }}",
    "password: ${DB_PASSWORD}",
    "API_KEY=${API_KEY:-}",
    "SECRET_KEY=${SECRET_KEY:?must be set}",
    '"password": "${DB_PASSWORD}"',
    "export AWS_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY",
    "token = ENV['API_TOKEN']",
    "password: {{ .Values.db.password }}",
    "password: {{ vault_db_password }}",
    "secret_key = <%= ENV['SECRET_KEY_BASE'] %>",
    "password=%(password)s",
    "--password=$(cat /run/secrets/db_password)",
    "client_secret: !Ref ClientSecret",
    "password: !Sub '{{resolve:secretsmanager:${DbSecret}:SecretString:password}}'",
    'password = "<your-password>"',
    "DB_PASSWORD=",
    "api_key: null",
    "token: ~",
    "password: ''",
    "valueFrom:\n  secretKeyRef:\n    name: db\n    key: password",
    "TF_VAR_db_password=${var.db_password}",
    "password = var.db_password",
    "secret: ${env:CLIENT_SECRET}",
    "token: $(GITHUB_TOKEN)",
    "%env:API_TOKEN%",
    "AZURE_CLIENT_SECRET: $(azureClientSecret)",
]


def _everyday() -> list[str]:
    """Ordinary output near the rules: git, docker, kubectl, package managers."""
    return [
        "kubectl get secrets\nNAME                  TYPE                                  DATA   "
        "AGE\ndb-credentials        Opaque                                2      3d\n"
        "default-token-x7k2p   kubernetes.io/service-account-token   3      40d",
        "docker ps --format '{{.Names}}: {{.Status}}'",
        "ls -la ~/.ssh\n-rw------- 1 dev dev  411 Nov 29 10:00 id_ed25519\n"
        "-rw-r--r-- 1 dev dev   97 Nov 29 10:00 id_ed25519.pub",
        "git log --oneline -3\na1b2c3d Rotate the token cache\n0f9e8d7 Fix password reset",
        "-    password = get_password()\n+    password = get_password(prompt=True)",
        "npm WARN deprecated request@2.88.2: request has been deprecated",
        "found 0 vulnerabilities",
        "Successfully installed keyring-25.6.0 secretstorage-3.3.3 jeepney-0.9.0",
        "pip install python-jose[cryptography] passlib[bcrypt]",
        "Collecting pyjwt>=2.8 (from -r requirements.txt (line 4))",
        "tokenizers==0.21.0\ntransformers==4.48.0\nsafetensors==0.5.2",
        "Compiling ring v0.17.8\nCompiling rustls v0.23.20",
        "test auth::token::tests::refresh_rotates ... ok",
        "test result: ok. 42 passed; 0 failed; 0 ignored",
        "ok  \texample.com/shop/internal/auth\t0.012s",
        "PASS src/auth/token.test.ts (5.12 s)",
        "Tests:       12 passed, 12 total",
        "Time: 00:00:01.234, Memory: 10.00 MB",
        "2026-11-29T10:00:00.123Z INFO auth: token refreshed for user 42",
        "2026-11-29 10:00:00,123 WARNING passlib: password hash uses a deprecated scheme",
        '[2026-11-29 10:00:00] local.ERROR: Token mismatch {"exception":"TokenMismatch"}',
        'HTTP/1.1 401 Unauthorized\nWWW-Authenticate: Bearer realm="api", error="invalid_token"',
        "Cache-Control: no-store\nPragma: no-cache",
        "Content-Security-Policy: default-src 'self'",
        "x-ratelimit-remaining-tokens: 149000",
        "anthropic-ratelimit-output-tokens-limit: 80000",
        "Usage: gh secret set <secret-name> [flags]",
        "Usage: mysql [OPTIONS] [database]\n  -p, --password[=name] Password to use",
        "  -k, --insecure     Allow insecure server connections",
        "  -u, --user <user:password> Server user and password",
        "openssl rand -hex 32",
        "ssh-keygen -lf ~/.ssh/id_ed25519.pub",
        "256 SHA256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU dev@laptop (ED25519)",
        "Fingerprint: SHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8",
        'gpg: key 0x4AA4767BBC9C4B1D: public key "Dev <dev@example.com>" imported',
        "The authenticity of host 'github.com (140.82.112.3)' can't be established.",
        "Warning: Permanently added 'github.com' (ED25519) to the list of known hosts.",
        "TODO(ana): rotate the signing key before the release",
        "The password reset email was sent to ana@example.com.",
        "Tokens used: 1,204 input, 388 output.",
    ]


TOOL_OUTPUT = _tool_lines()
BASE64_FILES = _base64_files()
DIGESTS = _digests()
PUBLIC_KEYS = _public_keys()
EVERYDAY = _everyday()

GROUPS: dict[str, list[str]] = {
    "tool output": TOOL_OUTPUT,
    "special tokens": SPECIAL_TOKENS,
    "code": CODE,
    "dotted names": DOTTED,
    "base64 files": BASE64_FILES,
    "digests": DIGESTS,
    "public keys": PUBLIC_KEYS,
    "references": REFERENCES,
    "everyday": EVERYDAY,
}
BENIGN: list[str] = list(dict.fromkeys(s for group in GROUPS.values() for s in group))
