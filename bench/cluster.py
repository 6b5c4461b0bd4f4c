"""Where a measurement runs: a fresh embedded broker for each (the default), or the user's
own cluster (``python -m bench --bootstrap HOST:PORT``).

A fresh tansu each time keeps a measurement from paying for what earlier ones left on it:
it holds everything in memory and slows as it grows (``bench/broker.py``). A user's
cluster is shared by every measurement of the run, so each names its topics and groups
after a run id of its own (``Cluster.new_run``), and the cluster deletes the topics with
those names when the measurement is done, the workers' changelogs among them; no other
topic is touched.

On a user's cluster the workers and the Faust peers run with the ``STREAM_APP_*``
settings of the environment (connection security, timeouts, fetch wait), and the bench's
own clients connect with the same security; on the embedded broker they get what tansu
needs (``WORKER_SETTINGS``), whatever the environment says.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

from aiokafka.admin import AIOKafkaAdminClient

from stream_app.clients import ClientOptions, client_options
from stream_app.config import Settings
from stream_app.embedded_broker import WORKER_SETTINGS, EmbeddedBroker

RUN_PREFIX = "bench-"


class Cluster:
    """A broker to measure on: how to reach it, and what the processes run on it get."""

    def __init__(
        self,
        options: ClientOptions,
        replication: int,
        worker_env: Mapping[str, str],
        broker_pid: int | None,
    ) -> None:
        self.options = options  # what every aiokafka client of the bench connects with
        self.replication = replication  # of the topics the bench makes
        self.worker_env = worker_env  # STREAM_APP_* for the workers and peers, over os.environ
        self.broker_pid = broker_pid  # the embedded broker's process, metered in (d)
        self.runs: list[str] = []

    @property
    def bootstrap(self) -> str:
        return self.options["bootstrap_servers"]

    def new_run(self) -> str:
        """A fresh id, ``bench-`` and 8 hex digits, that starts every topic and group name
        of one measurement (and so of every topic its apps make)."""
        run = f"{RUN_PREFIX}{uuid.uuid4().hex[:8]}"
        self.runs.append(run)
        return run

    async def delete_runs(self) -> list[str]:
        """Deletes the topics named after this cluster's runs; returns their names."""
        admin = AIOKafkaAdminClient(**self.options)
        await admin.start()
        try:
            ours = sorted(t for t in await admin.list_topics() if t.startswith(tuple(self.runs)))
            if ours:
                await admin.delete_topics(ours)
            return ours
        finally:
            self.runs.clear()
            await admin.close()


@contextlib.asynccontextmanager
async def fresh(bootstrap: str | None, log: Path) -> AsyncIterator[Cluster]:
    """A cluster for one measurement: a new embedded broker logging to ``log``, or the one
    at ``bootstrap`` (as ``stream_app.cli.bootstrap_argument`` gives it), cleaned of the
    measurement's topics on the way out."""
    if bootstrap is None:
        with EmbeddedBroker(log=log) as broker:
            plaintext: ClientOptions = {
                "bootstrap_servers": broker.bootstrap,
                "security_protocol": "PLAINTEXT",
            }
            yield Cluster(plaintext, 1, WORKER_SETTINGS, broker.pid)
        return
    settings = Settings()
    cluster = Cluster(client_options(settings, bootstrap), settings.replication_factor, {}, None)
    try:
        yield cluster
    finally:
        for name in await cluster.delete_runs():
            print(f"    deleted topic {name}", flush=True)
