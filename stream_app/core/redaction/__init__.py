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

The package is split by rule family: ``engine`` (shapes and places), ``names``,
``encodings``, ``structures``, ``text`` (the search of one string) and ``walk`` (a JSON
value).
"""

from __future__ import annotations

from stream_app.core.redaction.common import REDACTED
from stream_app.core.redaction.text import redact_text
from stream_app.core.redaction.walk import redact

__all__ = ["REDACTED", "redact", "redact_text"]
