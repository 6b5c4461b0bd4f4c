"""Issue 11 item 1: TLS and SASL settings, and every Kafka client the project makes uses them.

TLS is tested end to end on the embedded broker behind a TLS-terminating proxy
(``tests/tls_proxy.py``) with a CA made for the test; the proxy also requires a client
certificate, so all three TLS files are exercised. SASL goes as far as tansu 0.6 allows:
it offers SCRAM-SHA-256/512 (not PLAIN) when started with ``--authentication``, but then
refuses to create a user (users are created over the Kafka protocol, which it answers only
after authentication, and it keeps nothing across restarts), so no login can succeed on
it. The tests show that the project's SCRAM settings reach the broker as a SCRAM exchange
that the broker answers with its verdict on the user.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import trustme
from aiokafka import AIOKafkaConsumer, conn
from aiokafka.errors import KafkaConnectionError
from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth

from stream_app.broker.embedded import EmbeddedBroker, free_port
from stream_app.config import Settings, SettingsError, load_settings
from tests.kafka_io import create_topics, publish
from tests.test_app import PARTITIONS, session_lines
from tests.tls_proxy import TlsProxy
from tests.worker_process import WorkerProcess

PASSWORD = "correct-horse-battery"


@dataclass
class Tls:
    """A CA made for the test, its files for the clients, and the proxy's address."""

    cafile: Path
    certfile: Path
    keyfile: Path
    bootstrap: str
    proxy: TlsProxy
    broker: EmbeddedBroker  # listening on plaintext; its metadata names the proxy

    def env(self) -> dict[str, str]:
        return {
            "STREAM_APP_BROKER_URL": f"kafka://{self.bootstrap}",
            "STREAM_APP_SECURITY_PROTOCOL": "SSL",
            "STREAM_APP_SSL_CAFILE": str(self.cafile),
            "STREAM_APP_SSL_CERTFILE": str(self.certfile),
            "STREAM_APP_SSL_KEYFILE": str(self.keyfile),
        }

    def librdkafka(self) -> dict[str, str]:
        """The same for the independent client (librdkafka), to show the TLS is standard."""
        return {
            "security.protocol": "SSL",
            "ssl.ca.location": str(self.cafile),
            "ssl.certificate.location": str(self.certfile),
            "ssl.key.location": str(self.keyfile),
        }


def _files(tmp: Path) -> tuple[trustme.CA, Path, Path, Path]:
    ca = trustme.CA()
    client = ca.issue_cert("stream-app-worker")
    paths = tmp / "ca.pem", tmp / "client.pem", tmp / "client.key"
    ca.cert_pem.write_to_path(str(paths[0]))
    client.cert_chain_pems[0].write_to_path(str(paths[1]))
    client.private_key_pem.write_to_path(str(paths[2]))
    return ca, *paths


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tls]:
    """tansu, advertising a TLS proxy that demands a client certificate of the test's CA."""
    tmp = tmp_path_factory.mktemp("tls")
    ca, cafile, certfile, keyfile = _files(tmp)
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(server)
    ca.configure_trust(server)
    server.verify_mode = ssl.CERT_REQUIRED
    proxy_port = free_port()
    with EmbeddedBroker(log=tmp / "tansu.log", advertised_port=proxy_port) as broker:
        proxy = TlsProxy(proxy_port, broker.port, server).start()
        try:
            yield Tls(cafile, certfile, keyfile, f"127.0.0.1:{proxy_port}", proxy, broker)
        finally:
            proxy.stop()


# -- settings -------------------------------------------------------------------------------


@pytest.fixture
def pem(tmp_path: Path) -> dict[str, str]:
    _, cafile, certfile, keyfile = _files(tmp_path)
    return {"CA": str(cafile), "CERT": str(certfile), "KEY": str(keyfile)}


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"SECURITY_PROTOCOL": "TLS"}, "SECURITY_PROTOCOL"),
        ({"SECURITY_PROTOCOL": "SASL_SSL"}, "SASL_MECHANISM"),
        ({"SECURITY_PROTOCOL": "SASL_PLAINTEXT", "SASL_MECHANISM": "GSSAPI"}, "SASL_MECHANISM"),
        (
            {"SECURITY_PROTOCOL": "SASL_PLAINTEXT", "SASL_MECHANISM": "PLAIN"},
            "SASL_USERNAME",
        ),
        (
            {
                "SECURITY_PROTOCOL": "SASL_PLAINTEXT",
                "SASL_MECHANISM": "PLAIN",
                "SASL_USERNAME": "u",
            },
            "SASL_PASSWORD",
        ),
        ({"SASL_USERNAME": "u"}, "SASL_USERNAME"),  # PLAINTEXT: it would be ignored
        ({"SSL_CAFILE": "{CA}"}, "SSL_CAFILE"),  # no TLS: it would be ignored
        ({"SECURITY_PROTOCOL": "SSL", "SSL_CAFILE": "/no/such/file"}, "SSL_CAFILE"),
        ({"SECURITY_PROTOCOL": "SSL", "SSL_CAFILE": "{KEY}"}, "SSL_CAFILE"),  # not a CA
        ({"SECURITY_PROTOCOL": "SSL", "SSL_KEYFILE": "{KEY}"}, "SSL_KEYFILE"),
        ({"SECURITY_PROTOCOL": "SSL", "SSL_CERTFILE": "{CA}"}, "SSL_CERTFILE"),  # no key
        ({"WEB_TOKEN": "short"}, "WEB_TOKEN"),
    ],
)
def test_a_bad_security_setting_is_one_line_naming_its_variable(
    monkeypatch: pytest.MonkeyPatch, pem: dict[str, str], env: dict[str, str], variable: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(f"STREAM_APP_{name}", value.format(**pem))
    with pytest.raises(SettingsError, match=f"^STREAM_APP_{variable}: ") as refused:
        load_settings()
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(
    "env",
    [
        {"SASL_PASSWORD": PASSWORD},  # refused: PLAINTEXT has no SASL
        {"WEB_TOKEN": PASSWORD[:10]},  # refused: too short
    ],
)
def test_a_refused_secret_is_not_echoed(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str]
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(f"STREAM_APP_{name}", value)
    with pytest.raises(SettingsError) as refused:
        load_settings()
    assert PASSWORD[:10] not in str(refused.value)


def test_the_password_is_not_in_the_settings_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAM_APP_SECURITY_PROTOCOL", "SASL_PLAINTEXT")
    monkeypatch.setenv("STREAM_APP_SASL_MECHANISM", "SCRAM-SHA-512")
    monkeypatch.setenv("STREAM_APP_SASL_USERNAME", "worker")
    monkeypatch.setenv("STREAM_APP_SASL_PASSWORD", PASSWORD)
    monkeypatch.setenv("STREAM_APP_WEB_TOKEN", PASSWORD)
    s = load_settings()
    assert PASSWORD not in repr(s) and PASSWORD not in str(s.model_dump())
    assert PASSWORD not in repr(s.broker_credentials())
    assert s.kafka_options()["sasl_plain_password"] == PASSWORD


def test_empty_security_variables_count_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SASL_MECHANISM", "SASL_USERNAME", "SASL_PASSWORD", "SSL_CAFILE", "WEB_TOKEN"):
        monkeypatch.setenv(f"STREAM_APP_{name}", "")
    s = load_settings()
    assert s.kafka_options() == {"security_protocol": "PLAINTEXT"}
    assert s.broker_credentials() is None and s.web_token is None


def _comparable(options: Any) -> dict[str, Any]:
    """aiokafka options with the TLS context replaced by what it checks."""
    out = dict(options)
    if (context := out.pop("ssl_context", None)) is not None:
        out["tls"] = (context.verify_mode, context.check_hostname, len(context.get_ca_certs()))
    return out


@pytest.mark.parametrize(
    ("protocol", "mechanism"),
    [
        ("PLAINTEXT", None),
        ("SSL", None),
        ("SASL_PLAINTEXT", "PLAIN"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
        ("SASL_SSL", "SCRAM-SHA-512"),
    ],
)
def test_the_worker_and_the_tools_connect_alike(
    pem: dict[str, str], protocol: str, mechanism: str | None
) -> None:
    """What Faust makes of the worker's credentials equals what the other clients get."""
    fields: dict[str, Any] = {"security_protocol": protocol}
    if "SSL" in protocol:
        fields.update(ssl_cafile=pem["CA"], ssl_certfile=pem["CERT"], ssl_keyfile=pem["KEY"])
    if mechanism:
        fields.update(sasl_mechanism=mechanism, sasl_username="worker", sasl_password=PASSWORD)
    s = Settings(**fields)
    ours = _comparable(s.kafka_options())
    assert ours == _comparable(credentials_to_aiokafka_auth(s.broker_credentials()))
    assert ours["security_protocol"] == protocol
    if "SSL" in protocol:
        assert ours["tls"] == (ssl.CERT_REQUIRED, True, 1)  # the test's CA, and only it
    if mechanism:
        assert ours["sasl_mechanism"] == mechanism
        assert ours["sasl_plain_username"] == "worker"


def test_the_worker_app_is_given_the_credentials_and_the_bind_address(
    pem: dict[str, str],
) -> None:
    from stream_app.app import create_app

    s = Settings(
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="worker",
        sasl_password=PASSWORD,
        ssl_cafile=pem["CA"],
        web_bind="127.0.0.1",
        id=f"creds-{uuid.uuid4().hex[:6]}",
    )
    conf = create_app(s).conf
    auth = credentials_to_aiokafka_auth(conf.broker_credentials)
    assert auth["security_protocol"] == "SASL_SSL"
    assert auth["sasl_mechanism"] == "SCRAM-SHA-512"
    assert auth["sasl_plain_password"] == PASSWORD
    assert conf.web_bind == "127.0.0.1"
    assert conf.web_tables_enabled is False  # /table/sessions/{key} would bypass the token


# -- TLS end to end -------------------------------------------------------------------------


async def _connects(options: dict[str, Any], bootstrap: str) -> bool:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, request_timeout_ms=5000, **options)
    try:
        await asyncio.wait_for(consumer.start(), 15)
    except (KafkaConnectionError, TimeoutError):
        return False
    finally:
        await consumer.stop()
    return True


@pytest.mark.broker
def test_a_client_missing_any_part_of_the_tls_settings_is_refused(tls: Tls) -> None:
    full = {k.removeprefix("STREAM_APP_").lower(): v for k, v in tls.env().items()}

    def options(**change: Any) -> dict[str, Any]:
        return Settings(**{**full, **change}).kafka_options()

    assert asyncio.run(_connects(options(), tls.bootstrap))  # the control: all of it works
    refused = {
        "plaintext": options(
            security_protocol="PLAINTEXT", ssl_cafile=None, ssl_certfile=None, ssl_keyfile=None
        ),
        "system CAs only": options(ssl_cafile=None),
        "no client certificate": options(ssl_certfile=None, ssl_keyfile=None),
    }
    for what, attempt in refused.items():
        assert not asyncio.run(_connects(attempt, tls.bootstrap)), what


@pytest.mark.broker
def test_a_worker_and_tail_run_through_tls(tls: Tls, topics: dict[str, str], workdir: Path) -> None:
    """Every client of the worker (group consumer, producer, changelog, topic metadata,
    recovery's fetches) and tail's consumer connect only through the TLS proxy."""
    create_topics(
        tls.bootstrap,
        [topics[f"STREAM_APP_TOPIC_{t}"] for t in ("MESSAGES", "DECISIONS", "TURNS", "DLQ")],
        PARTITIONS,
        **tls.librdkafka(),
    )
    before = tls.proxy.accepted
    worker = WorkerProcess(
        tls.broker,  # its URL is replaced by the proxy's below
        {**topics, **tls.env(), "STREAM_APP_PARTITIONS": str(PARTITIONS)},
        workdir,
    )
    try:
        worker.start().wait_ready()
        assert tls.proxy.accepted > before
        sent = publish(
            tls.bootstrap,
            [line for line in session_lines() if line["topic"] == "messages"],
            {
                "messages": topics["STREAM_APP_TOPIC_MESSAGES"],
                "decisions": topics["STREAM_APP_TOPIC_DECISIONS"],
            },
            **tls.librdkafka(),
        )
        assert sent == 12
        done = subprocess.run(
            [sys.executable, "-m", "stream_app", "tail", "--json", "--limit", "4"],
            env={**os.environ, **topics, **tls.env()},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr + worker.log.read_text()[-3000:]
        keys = sorted(orjson.loads(line)["key"] for line in done.stdout.splitlines())
        assert keys == [f'["sess-7f3a","msg-a{i}"]' for i in range(1, 5)]
    finally:
        worker.stop()


# -- SASL, as far as tansu goes --------------------------------------------------------------


@pytest.fixture(scope="module")
def authenticating(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    log = tmp_path_factory.mktemp("sasl") / "tansu.log"
    with EmbeddedBroker(log=log, options=["--authentication"]) as broker:
        yield broker


async def _scram_verdict(options: dict[str, Any], broker: EmbeddedBroker) -> str | None:
    """The broker's last SCRAM message to the client (``server-final``), or None if the
    exchange never got there."""
    heard: list[str] = []
    final = conn.ScramAuthenticator.process_server_final_message

    def listen(self: Any, message: str) -> None:
        heard.append(message)
        final(self, message)

    conn.ScramAuthenticator.process_server_final_message = listen  # type: ignore[method-assign]
    try:
        connection = await conn.create_conn("127.0.0.1", broker.port, **options)
        connection.close()
    except Exception:  # whatever aiokafka makes of the verdict: the verdict is the result
        pass
    finally:
        conn.ScramAuthenticator.process_server_final_message = final  # type: ignore[method-assign]
    return heard[-1] if heard else None


@pytest.mark.broker
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_settings_reach_the_broker_as_a_scram_exchange(
    authenticating: EmbeddedBroker, mechanism: str
) -> None:
    s = Settings(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism,
        sasl_username=f"nobody-{uuid.uuid4().hex[:6]}",
        sasl_password=PASSWORD,
    )
    # tansu looked the user up and says it has none: it cannot hold one (see the docstring).
    assert asyncio.run(_scram_verdict(s.kafka_options(), authenticating)) == "e=unknown-user"


@pytest.mark.broker
def test_an_authenticating_broker_refuses_plaintext_and_offers_no_plain(
    authenticating: EmbeddedBroker,
) -> None:
    plain = Settings(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_username="worker",
        sasl_password=PASSWORD,
    )
    for options in (Settings().kafka_options(), plain.kafka_options()):
        assert not asyncio.run(_connects(options, authenticating.bootstrap)), options
