"""Two plain Faust apps the worker is compared with in ``python -m bench``, (f) and (g).

- ``passthrough``, tuned: ``orjson.loads`` each value and send it on re-encoded, as the raw
  loop does, a ``send`` per event; quiet logging, a 5 ms linger, a large stream buffer,
  Cython, raw serializers.
- ``table``, naive: ``table[key] = value`` in a Faust Table (memory store, Faust's json
  codec) and a ``send`` per event; Faust's defaults otherwise.

Both run with the worker's settings, its fetch wait included (tansu holds every fetch for
Faust's own 1,500 ms). Each input record has one output, checked by ``expected_output``.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson

from bench.cluster import Cluster
from stream_app.broker.embedded import free_port
from stream_app.config import Settings

Peer = tuple["subprocess.Popen[bytes]", int]
KINDS = {"passthrough": "Faust passthrough agent, tuned", "table": "Faust table agent, naive"}


def naive_value(value: bytes) -> Any:
    """The value parsed, or as it came when malformed (it goes out so, like a dead letter):
    what the naive table agent stores and sends, Faust's json codec encoding it."""
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return value


def passthrough_value(value: bytes) -> bytes:
    """What the raw loop and the passthrough agent send for an input value."""
    doc = naive_value(value)
    return doc if isinstance(doc, bytes) else orjson.dumps(doc)


def expected_output(kind: str, value: bytes) -> bytes:
    """The output record's value the ``kind`` peer produces for an input value."""
    from faust.serializers import codecs

    doc = naive_value(value)  # Faust's serializer passes bytes through as they are
    if kind == "passthrough" or isinstance(doc, bytes):
        return passthrough_value(value)
    return codecs.dumps("json", doc)


def create_app(spec: dict[str, Any]) -> Any:
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

    tuned: dict[str, Any] = {"producer_linger": 0.005, "stream_buffer_maxsize": 65536}
    app = App(
        spec["id"],
        broker=settings.broker_url,
        datadir=spec["datadir"],
        web_port=spec["port"],
        web_host="127.0.0.1",
        topic_partitions=spec["partitions"],  # the table's changelog, as the input's
        broker_session_timeout=settings.session_timeout_seconds,
        broker_heartbeat_interval=settings.heartbeat_interval_seconds,
        broker_rebalance_timeout=settings.rebalance_timeout_seconds,
        broker_credentials=settings.broker_credentials(),
        topic_replication_factor=settings.replication_factor,
        **(
            tuned
            | {"cython_optimizations": True, "key_serializer": "raw", "value_serializer": "raw"}
            if spec["kind"] == "passthrough"
            else {}
        ),
    )
    source = app.topic(*spec["inputs"], key_type=bytes, value_type=bytes, value_serializer="raw")
    sink = app.topic(spec["output"])

    if spec["kind"] == "passthrough":

        @app.agent(source)
        async def passthrough(stream: Any) -> None:
            async for key, value in stream.items():
                await sink.send(key=key, value=passthrough_value(value))

        @app.task  # type: ignore[untyped-decorator]
        async def quiet_root_logger() -> None:
            logging.getLogger().setLevel(logging.WARNING)

    else:
        table = app.Table("latest", partitions=spec["partitions"])

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


def start(kind: str, on: Cluster, run: str, topics: dict[str, str], workdir: Path) -> Peer:
    """One peer app in a process of its own, from ``topics`` messages and decisions to
    ``topics`` output, and the port of its web server."""
    name, port = f"{run}-peer-{kind}", free_port()  # the app id names its table's changelog
    spec = {
        "kind": kind,
        "id": name,
        "inputs": [topics["messages"], topics["decisions"]],
        "output": topics["output"],
        "partitions": on.partitions,
        "port": port,
        "datadir": str(workdir / name),
    }
    with open(workdir / f"{name}.log", "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "bench.peers", orjson.dumps(spec)],
            cwd=Path(__file__).resolve().parent.parent,
            env={**os.environ, **on.worker_env, "STREAM_APP_BROKER_URL": on.bootstrap},
            stdout=log,
            stderr=log,
        )
    return process, port


if __name__ == "__main__":
    create_app(orjson.loads(sys.argv[1])).Worker(
        loglevel="warning", quiet=True
    ).execute_from_commandline()
