"""Two plain Faust apps the worker is compared with in ``python -m bench`` (issue 9).

- ``passthrough``, tuned: one agent over the input topics; ``orjson.loads`` each value and
  send it on (re-encoded, as the raw loop does) to one output topic, a ``send`` per event.
  Tunings: the root logger back to WARNING after start-up (Faust's spinner handler leaves
  it at DEBUG), ``producer_linger=0.005``, ``stream_buffer_maxsize=65536``,
  ``cython_optimizations=True``, raw key and value serializers.
- ``table``, naive: the same input, ``table[key] = value`` in a Faust Table (memory store,
  Faust's json codec) and a ``send`` per event; Faust's defaults otherwise.

Both run with the worker's settings for the cluster (``bench/cluster.py``): on tansu, what
it needs to be measured at all (``WORKER_SETTINGS``: fast group membership, and a 20 ms
fetch wait instead of Faust's hard-coded 1,500 ms, which tansu would hold every fetch
for); on a user's cluster, the ``STREAM_APP_*`` settings of the environment, connection
security included. A malformed value goes out as it came, as in the raw loop, so every
input record has exactly one output record, which the benchmark reads back and checks
against :func:`expected_output`.

``STREAM_APP_BROKER_URL=... python -m bench.peers KIND ...`` runs one of them (the
benchmark starts it as a subprocess, as it starts the worker); ``/ready`` answers 200 once
its partitions are assigned and its streams resumed.
"""

from __future__ import annotations

import argparse
import collections
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from bench.cluster import Cluster
from bench.reading import from_the_start, peak_rss_kib, wait_ready
from stream_app.clients import ClientOptions
from stream_app.config import Settings
from stream_app.embedded_broker import free_port

KINDS = {
    "passthrough": "Faust passthrough agent, tuned",
    "table": "Faust table agent, naive",
}
ROOT = Path(__file__).resolve().parent.parent


def passthrough_value(value: bytes) -> bytes:
    """What the raw loop and the passthrough agent send for an input value."""
    try:
        return orjson.dumps(orjson.loads(value))
    except orjson.JSONDecodeError:
        return value  # the bad ones go out as they came, like dead letters


def naive_value(value: bytes) -> Any:
    """What the naive table agent stores and sends (Faust's json codec encodes it)."""
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return value


def expected_output(kind: str, value: bytes) -> bytes:
    """The output record's value the ``kind`` peer produces for an input value."""
    if kind == "passthrough":
        return passthrough_value(value)
    from faust.serializers import codecs

    doc = naive_value(value)
    # Faust's serializer passes bytes through as they are (a malformed value, here).
    return doc if isinstance(doc, bytes) else codecs.dumps("json", doc)


# -- the apps (run in the peer's own process) -----------------------------------------------


def create_app(args: argparse.Namespace) -> Any:
    import faust
    from faust.transport.drivers import aiokafka as faust_aiokafka

    from stream_app.checkpointing.consumer import ConsumerThread

    settings = Settings()  # the worker's, from the environment

    class FetchWaitThread(ConsumerThread):
        fetch_max_wait_ms = settings.fetch_max_wait_ms

    class FetchWaitConsumer(faust_aiokafka.Consumer):
        """Faust's own consumer (its commits and acks), only with the worker's fetch wait."""

        def _new_consumer_thread(self) -> faust_aiokafka.AIOKafkaConsumerThread:
            return FetchWaitThread(self, loop=self.loop, beacon=self.beacon)

    class Transport(faust_aiokafka.Transport):
        Consumer = FetchWaitConsumer

    class App(faust.App):
        def _new_transport(self) -> Transport:
            return Transport(self.conf.broker_consumer, self)

    as_the_worker: dict[str, Any] = {
        "broker_session_timeout": settings.session_timeout_seconds,
        "broker_heartbeat_interval": settings.heartbeat_interval_seconds,
        "broker_rebalance_timeout": settings.rebalance_timeout_seconds,
        "broker_credentials": settings.broker_credentials(),
        "topic_replication_factor": settings.replication_factor,
    }
    tuned: dict[str, Any] = {
        "producer_linger": 0.005,
        "stream_buffer_maxsize": 65536,
        "cython_optimizations": True,
        "key_serializer": "raw",
        "value_serializer": "raw",
    }
    app = App(
        args.id,
        broker=settings.broker_url,
        datadir=args.datadir,
        web_port=args.web_port,
        web_host="127.0.0.1",
        topic_partitions=args.partitions,  # the table's changelog, as the input's
        **as_the_worker,
        **(tuned if args.kind == "passthrough" else {}),
    )
    source = app.topic(*args.inputs, key_type=bytes, value_type=bytes, value_serializer="raw")
    sink = app.topic(args.output)

    if args.kind == "passthrough":

        @app.agent(source)
        async def passthrough(stream: Any) -> None:
            async for key, value in stream.items():
                await sink.send(key=key, value=passthrough_value(value))

        @app.task  # type: ignore[untyped-decorator]
        async def quiet_root_logger() -> None:
            logging.getLogger().setLevel(logging.WARNING)

    else:
        table = app.Table("latest", partitions=args.partitions)

        @app.agent(source)
        async def naive(stream: Any) -> None:
            async for key, value in stream.items():
                doc = naive_value(value)
                table[key] = doc
                await sink.send(key=key, value=doc)

    @app.page("/ready")
    async def ready(web: Any, request: Any) -> Any:
        ok = (
            app.tables.recovery.completed.is_set()  # type: ignore[attr-defined]
            and not app.rebalancing
            and bool(app.consumer.assignment())
        )
        return web.json({"ready": ok}, status=200 if ok else 503)

    return app


def _arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__)
    parser.add_argument("kind", choices=sorted(KINDS))
    parser.add_argument("--id", required=True, help="the app id (consumer group)")
    parser.add_argument("--inputs", required=True, nargs="+")
    parser.add_argument("--output", required=True)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--web-port", type=int, required=True)
    parser.add_argument("--datadir", required=True)
    return parser.parse_args(argv)


# -- the benchmark's side ------------------------------------------------------------------


class Peer:
    """One peer app in a subprocess, on its own input and output topics."""

    def __init__(
        self,
        kind: str,
        on: Cluster,
        run: str,
        topics: dict[str, str],
        partitions: int,
        workdir: Path,
    ) -> None:
        self.port = free_port()
        name = f"{run}-peer-{kind}"  # the app id, which its table's changelog is named after
        self.log = open(workdir / f"{name}.log", "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.peers",
                kind,
                "--id",
                name,
                "--inputs",
                topics["messages"],
                topics["decisions"],
                "--output",
                topics["output"],
                "--partitions",
                str(partitions),
                "--web-port",
                str(self.port),
                "--datadir",
                str(workdir / name),
            ],
            cwd=ROOT,
            env={**os.environ, **on.worker_env, "STREAM_APP_BROKER_URL": on.bootstrap},
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def alive(self) -> bool:
        return self.process.poll() is None

    def wait_ready(self, timeout: float = 60) -> None:
        wait_ready(self.port, time.monotonic() + timeout, self.alive)

    def peak_rss_mib(self) -> float:
        return peak_rss_kib(self.process.pid) / 1024

    def stop(self) -> None:
        from stream_app.embedded_broker import terminate

        terminate(self.process, grace=30)
        self.log.close()


async def read_outputs(
    options: ClientOptions,
    topic: str,
    partitions: int,
    expected: collections.Counter[tuple[bytes | None, bytes]],
    timeout: float,
    fetch_wait_ms: int,
    alive: Callable[[], bool],
) -> tuple[float, int]:
    """Reads ``topic`` until every expected (key, value) has arrived as often as expected.

    Returns the time the last one was read and the number of records read (more than
    expected only if the peer sent some twice).
    """
    consumer = await from_the_start(options, topic, partitions, fetch_wait_ms)
    missing = collections.Counter(expected)
    left, read = missing.total(), 0
    deadline = time.monotonic() + timeout
    try:
        while True:
            batch = await consumer.getmany(timeout_ms=200, max_records=10_000)
            now = time.monotonic()
            for records in batch.values():
                read += len(records)
                for r in records:
                    pair = (r.key, r.value)
                    if missing[pair] > 0:
                        missing[pair] -= 1
                        left -= 1
            if left == 0:
                return now, read
            if now > deadline or not alive():
                why = "the peer exited" if not alive() else f"after {timeout:.0f} s"
                raise TimeoutError(f"{left} of {expected.total()} outputs missing: {why}")
    finally:
        await consumer.stop()


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    app = create_app(args)
    app.Worker(loglevel="warning", quiet=True).execute_from_commandline()
    return 0


if __name__ == "__main__":
    sys.exit(main())
