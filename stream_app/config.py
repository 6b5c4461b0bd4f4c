"""Settings from ``STREAM_APP_*`` environment variables; a bad value stops start-up.

The connection's security (TLS, SASL) is mapped to client options here and only here:
:meth:`Settings.kafka_options` for the aiokafka clients the project makes itself, and
:meth:`Settings.broker_credentials` for the worker's Faust app, which hands them to its own
consumer, producer and topic creation.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import socket
import ssl
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Required, TypedDict, cast

from pydantic import (
    Field,
    FilePath,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError
from pydantic_settings import BaseSettings, SettingsConfigDict

from stream_app.core.inputs import INPUTS
from stream_app.core.policy import Policy

if TYPE_CHECKING:
    from faust.types.auth import CredentialsT

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
# Never echoed back in an error line: the value is the secret.
SECRET_FIELDS = frozenset({"sasl_password", "web_token"})
MIN_WEB_TOKEN = 16  # characters of STREAM_APP_WEB_TOKEN
# What a worker is given when it must talk plaintext whatever its environment says (the
# embedded broker): empty values count as unset.
PLAINTEXT_SETTINGS = {
    "STREAM_APP_SECURITY_PROTOCOL": "PLAINTEXT",
    "STREAM_APP_SASL_MECHANISM": "",
    "STREAM_APP_SASL_USERNAME": "",
    "STREAM_APP_SASL_PASSWORD": "",
    "STREAM_APP_SSL_CAFILE": "",
    "STREAM_APP_SSL_CERTFILE": "",
    "STREAM_APP_SSL_KEYFILE": "",
}


def _setting_error(field: str, message: str) -> PydanticCustomError:
    """A cross-field error that still names its variable (a model's errors have no field)."""
    return PydanticCustomError("setting", "{message}", {"field": field, "message": message})


BROKER_FORMAT = "host:port or kafka://host:port (several: separated by commas or semicolons)"
_HOST_PORT = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]+\]|[^\s:/\[\]]+)(?::(?P<port>\d{1,5}))?")


def broker_hosts(address: str) -> list[str]:
    """Every ``host:port`` of a broker address, in any spelling the project takes.

    One format everywhere: ``STREAM_APP_BROKER_URL`` and every ``--bootstrap`` flag take
    Faust's ``kafka://host:port`` and Kafka clients' ``host:port`` alike, so an address
    copied from one place works in the other. Anything else (``http://``, a path, a port
    out of range) raises :class:`ValueError` now, in one line, rather than being retried
    as a broker that does not answer.
    """
    hosts = []
    for part in re.split(r"[;,]", address):
        text = part.strip()
        if not text:
            continue
        scheme, sep, rest = text.partition("://")
        if sep:
            if scheme.lower() != "kafka":
                raise ValueError(f"{scheme}:// is not a Kafka address; give {BROKER_FORMAT}")
            text = rest.removesuffix("/")
        match = _HOST_PORT.fullmatch(text)
        if match is None or not 0 < int(match["port"] or 9092) < 65536:
            raise ValueError(f"{part.strip()!r} is not a Kafka address; give {BROKER_FORMAT}")
        hosts.append(text)
    if not hosts:
        raise ValueError(f"no broker given; give {BROKER_FORMAT}")
    return hosts


class KafkaOptions(TypedDict, total=False):
    """The connection's security as aiokafka's clients take it as keyword arguments: one
    set of names for every client the project makes itself (the tools, the probes), typed
    where one is read (``tail`` names the protocol it tried)."""

    security_protocol: Required[SecurityProtocol]
    ssl_context: ssl.SSLContext
    sasl_mechanism: SaslMechanism | None
    sasl_plain_username: str | None
    sasl_plain_password: str


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="STREAM_APP_", extra="ignore")

    broker_url: str = "kafka://localhost:9092"
    id: str = "stream-app"
    org_id: str = Field("default", min_length=1)
    topic_messages: str = Field("llm.messages", min_length=1)
    topic_decisions: str = Field("developer.decisions", min_length=1)
    topic_turns: str = Field("turns", min_length=1)
    topic_dlq: str = Field("turns.dlq", min_length=1)
    # Each turn once, when nothing can revise it any more (SPEC §8, worker/final_records.py).
    topic_final: str = Field("turns.final", min_length=1)
    # The agents' OpenTelemetry logs (SPEC §10): OTLP requests, as the Collector's Kafka
    # exporter writes them (its default topic) and POST /v1/logs writes them.
    topic_telemetry: str = Field("otlp_logs", min_length=1)
    partitions: int = Field(4, ge=1)
    replication_factor: int = Field(1, ge=1)
    session_ttl_seconds: float = Field(24 * 3600.0, gt=0)
    late_decision_window_seconds: float = Field(6 * 3600.0, gt=0)
    max_record_bytes: int = Field(1024 * 1024, ge=1)
    # Per-session limits (SPEC §6, core/policy.py has what each means).
    max_key_bytes: int = Field(4096, ge=1)
    max_pending_messages: int = Field(1000, ge=1)
    max_pending_bytes: int = Field(8 * 1024 * 1024, ge=1)
    max_waiting_decisions: int = Field(1000, ge=1)
    max_turn_decisions: int = Field(256, ge=1)
    max_open_turns: int = Field(1000, ge=1)
    max_open_turn_bytes: int = Field(64 * 1024 * 1024, ge=1)
    max_remembered_identities: int = Field(10_000, ge=1)
    max_final_keys: int = Field(1_000_000, ge=1)
    max_turn_bytes: int = Field(1024 * 1024, ge=1)
    web_port: int = Field(6066, ge=1, le=65535)
    web_host: str = Field(default_factory=socket.gethostname, min_length=1)
    session_timeout_seconds: float = Field(10.0, gt=0)
    heartbeat_interval_seconds: float = Field(1.0, gt=0)
    rebalance_timeout_seconds: float = Field(10.0, gt=0)
    producer_max_batch_size: int = Field(512 * 1024, ge=1)
    fetch_max_wait_ms: int = Field(500, ge=1)
    batch_max_records: int = Field(1000, ge=1)
    read_ahead_records: int = Field(25_600, ge=100)
    commit_interval_ms: int = Field(1000, ge=0)
    # Pending messages and waiting decisions older than this are counted and logged by the
    # tick (``core/waiting.py``).
    waiting_warn_seconds: float = Field(300.0, gt=0)
    # How often the owner of each sessions partition looks for turns due to go final.
    final_tick_seconds: float = Field(1.0, gt=0)
    store: Literal["rocksdb://", "memory://"] = "rocksdb://"
    data_dir: Path = Path("./data")
    standby_replicas: int = Field(1, ge=0)
    compression: Literal["none", "gzip", "lz4", "zstd", "snappy"] = "zstd"
    # Basic redaction of messages' text, tool arguments and tool results too (the contract
    # redacts a decision's raw only, so chat content is kept verbatim by default).
    redact_content: bool = False
    # A record whose processing raises: a `processing_error` dead letter (and on), or stop.
    on_processing_error: Literal["dead_letter", "stop"] = "dead_letter"
    # Where the web server listens. Every address by default: workers forward /sessions/{id}
    # to each other at STREAM_APP_WEB_HOST, and probes and scrapers come from outside the pod;
    # STREAM_APP_WEB_TOKEN protects the one view that serves chat content.
    web_bind: str = Field("0.0.0.0", min_length=1)
    # Bearer token required by /sessions/{id} and Faust's /router views when set (16
    # characters at least: it is the only thing between the network and chat content).
    web_token: SecretStr | None = None
    security_protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: SaslMechanism | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_cafile: FilePath | None = None
    ssl_certfile: FilePath | None = None
    ssl_keyfile: FilePath | None = None

    @field_validator(
        "web_token",
        "sasl_mechanism",
        "sasl_username",
        "sasl_password",
        "ssl_cafile",
        "ssl_certfile",
        "ssl_keyfile",
        mode="before",
    )
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        """An empty variable (a ConfigMap key left blank, or PLAINTEXT_SETTINGS) is no value."""
        return None if value == "" else value

    @field_validator("broker_url")
    @classmethod
    def _one_broker_format(cls, value: str) -> str:
        """Faust's form, whichever was given: Faust takes no bare ``host:port``."""
        try:
            return ";".join(f"kafka://{host}" for host in broker_hosts(value))
        except ValueError as exc:
            raise PydanticCustomError("broker_url", str(exc)) from None

    @field_validator("web_token")
    @classmethod
    def _token_fits_a_header(cls, value: SecretStr | None) -> SecretStr | None:
        """A token a client cannot send as typed would match nothing: a trailing newline
        from ``echo`` into a Secret, a space, a control character, or a non-ASCII character
        that clients encode differently. Refused here, in the user's words, never echoed."""
        if value is None:
            return None
        token = value.get_secret_value()
        if any(c.isspace() or not c.isprintable() for c in token):
            raise PydanticCustomError(
                "web_token",
                "must not contain whitespace or control characters "
                "(a trailing newline included): it is sent in an Authorization header",
            )
        if not token.isascii():
            raise PydanticCustomError(
                "web_token", "must be ASCII: clients encode other characters differently"
            )
        if len(token) < MIN_WEB_TOKEN:
            raise PydanticCustomError("web_token", f"must be at least {MIN_WEB_TOKEN} characters")
        return value

    @model_validator(mode="after")
    def _security_is_consistent(self) -> Settings:
        """Refuses settings that would be silently ignored or fail at the first connection."""
        protocol = self.security_protocol
        if protocol in SASL_PROTOCOLS:
            for field in ("sasl_mechanism", "sasl_username", "sasl_password"):
                if getattr(self, field) is None:
                    raise _setting_error(
                        field, f"required when STREAM_APP_SECURITY_PROTOCOL is {protocol}"
                    )
        else:
            for field in ("sasl_mechanism", "sasl_username", "sasl_password"):
                if getattr(self, field) is not None:
                    raise _setting_error(
                        field, f"set, but STREAM_APP_SECURITY_PROTOCOL is {protocol} (no SASL)"
                    )
        if protocol not in TLS_PROTOCOLS:
            for field in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
                if getattr(self, field) is not None:
                    raise _setting_error(
                        field, f"set, but STREAM_APP_SECURITY_PROTOCOL is {protocol} (no TLS)"
                    )
        if self.ssl_keyfile is not None and self.ssl_certfile is None:
            raise _setting_error("ssl_keyfile", "set without STREAM_APP_SSL_CERTFILE")
        if protocol in TLS_PROTOCOLS:
            self.ssl_context()  # unreadable PEM is refused now, not at the first connection
        return self

    def policy(self) -> Policy:
        """The core's knobs: every field of ``Policy`` is the setting of the same name."""
        return Policy(**{f.name: getattr(self, f.name) for f in dataclasses.fields(Policy)})

    def bootstrap_servers(self) -> str:
        """The broker URL as Kafka clients take it: ``host:port,host:port``."""
        return ",".join(broker_hosts(self.broker_url))

    def topic_of(self, kind: str) -> str:
        """The topic of an input kind (``core/inputs.py``), by its name."""
        return cast(str, getattr(self, INPUTS[kind].setting))

    def input_topics(self) -> dict[str, str]:
        """Each input topic, with the name of the kind of record it carries."""
        return {self.topic_of(name): name for name in INPUTS}

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context of every Kafka connection (None: the protocol has no TLS).

        The server's certificate and host name are always checked: against
        ``STREAM_APP_SSL_CAFILE`` when set, else the system's trusted CAs. A client
        certificate (``STREAM_APP_SSL_CERTFILE``, ``STREAM_APP_SSL_KEYFILE``) is offered
        when set, for brokers that authenticate clients by certificate.
        """
        if self.security_protocol not in TLS_PROTOCOLS:
            return None
        try:
            context = ssl.create_default_context(
                cafile=str(self.ssl_cafile) if self.ssl_cafile else None
            )
        except (ssl.SSLError, OSError) as exc:
            raise _setting_error("ssl_cafile", f"not a PEM CA certificate ({exc})") from None
        if self.ssl_certfile is not None:
            try:
                context.load_cert_chain(
                    str(self.ssl_certfile), str(self.ssl_keyfile) if self.ssl_keyfile else None
                )
            except (ssl.SSLError, OSError) as exc:
                raise _setting_error(
                    "ssl_certfile", f"not a PEM certificate with its key ({exc})"
                ) from None
        return context

    def kafka_options(self) -> KafkaOptions:
        """Keyword arguments for an aiokafka client (consumer, producer, admin)."""
        options: KafkaOptions = {"security_protocol": self.security_protocol}
        if (context := self.ssl_context()) is not None:
            options["ssl_context"] = context
        if self.security_protocol in SASL_PROTOCOLS:
            assert self.sasl_password is not None  # checked at load
            options["sasl_mechanism"] = self.sasl_mechanism
            options["sasl_plain_username"] = self.sasl_username
            options["sasl_plain_password"] = self.sasl_password.get_secret_value()
        return options

    def broker_credentials(self) -> CredentialsT | None:
        """The same connection security as Faust's ``broker_credentials`` setting."""
        from faust import SASLCredentials, SSLCredentials

        context = self.ssl_context()
        if self.security_protocol in SASL_PROTOCOLS:
            assert self.sasl_password is not None  # checked at load
            return SASLCredentials(
                username=self.sasl_username,
                password=self.sasl_password.get_secret_value(),
                ssl_context=context,
                mechanism=self.sasl_mechanism,
            )
        if context is not None:
            return SSLCredentials(context)
        return None


class SettingsError(Exception):
    """A one-line description of the first bad setting."""


# Names from Kafka's own vocabulary that people reach for first; difflib finds no setting
# close to them.
_KAFKA_WORDS = {
    f"{prefix}{word}": "BROKER_URL"
    for prefix in ("", "KAFKA_")
    for word in ("BOOTSTRAP", "BOOTSTRAP_SERVER", "BOOTSTRAP_SERVERS", "BROKER", "BROKERS")
} | {"KAFKA": "BROKER_URL", "KAFKA_URL": "BROKER_URL"}


# Settings a release no longer has, with why: a deployment that still sets one is told
# (``setting_ignored``), never refused.
RETIRED = {
    "SWEEP_INTERVAL_SECONDS": "idle sessions expire at the tick now, every "
    "STREAM_APP_FINAL_TICK_SECONDS (issue 50)",
}


def unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """A line for each ``STREAM_APP_*`` variable that is no setting, with the closest one.

    A misspelled name would otherwise be ignored without a word, and its default used.
    """
    known = sorted(name.upper() for name in Settings.model_fields)
    lines = []
    for variable in sorted(environ):
        upper = variable.upper()
        suffix = upper.removeprefix("STREAM_APP_")
        if suffix == upper or suffix.lower() in Settings.model_fields:
            continue
        if (why := RETIRED.get(suffix)) is not None:
            lines.append(f"{variable} is no longer a setting and is ignored: {why}")
            continue
        close = _KAFKA_WORDS.get(suffix) or next(
            iter(difflib.get_close_matches(suffix, known, n=1, cutoff=0.6)), None
        )
        hint = f"did you mean STREAM_APP_{close}?" if close else "no setting has a name like it"
        lines.append(f"{variable} is not a setting and is ignored ({hint})")
    return lines


_warned: set[str] = set()  # a process that loads its settings twice warns once


def _warn(line: str) -> None:
    print(f"stream-app: warning: {line}", file=sys.stderr, flush=True)


def _number(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


_BOUNDS = {
    "greater_than_equal": ("ge", "must be {} or more"),
    "greater_than": ("gt", "must be more than {}"),
    "less_than_equal": ("le", "must be {} or less"),
    "less_than": ("lt", "must be less than {}"),
}


def _in_user_words(error: ErrorDetails) -> str:
    """What the variable must be, said about the variable rather than pydantic's input."""
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind in _BOUNDS:
        key, text = _BOUNDS[kind]
        return text.format(_number(ctx[key]))
    if kind in ("int_parsing", "int_from_float", "int_type"):
        return "must be a whole number"
    if kind in ("float_parsing", "float_type"):
        return "must be a number"
    if kind in ("bool_parsing", "bool_type"):
        return "must be true or false"
    if kind == "literal_error":
        return f"must be {str(ctx.get('expected', '')).replace(chr(39), '')}"
    if kind in ("string_too_short", "too_short"):
        least = ctx.get("min_length", 1)
        return "must not be empty" if least == 1 else f"must be at least {least} characters"
    if kind in ("string_too_long", "too_long"):
        return f"must be at most {ctx.get('max_length')} characters"
    if kind in ("path_not_file", "path_not_directory"):
        return "no such file" if kind == "path_not_file" else "no such directory"
    return str(error["msg"])


def load_settings(warn: Callable[[str], None] = _warn) -> Settings:
    """The settings, or :class:`SettingsError` naming the first bad variable.

    ``warn`` is told once per process about each ``STREAM_APP_*`` variable that is not a
    setting (default: a line on stderr).
    """
    for line in unknown_variables(os.environ):
        if line not in _warned:
            _warned.add(line)
            warn(line)
    try:
        return Settings()
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        field = str(first["loc"][0]) if first["loc"] else (first.get("ctx") or {}).get("field")
        name = f"STREAM_APP_{field.upper()}" if field else "STREAM_APP_*"
        said = _in_user_words(first)
        if field in SECRET_FIELDS or first["type"] == "setting":
            # A secret is never echoed; a cross-field error is about the setting, not a value.
            raise SettingsError(f"{name}: {said}") from None
        raise SettingsError(f"{name}: {said} (got {first.get('input')!r})") from None
