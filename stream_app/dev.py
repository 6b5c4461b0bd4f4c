"""``stream-app dev``: a broker and a worker on this machine, in one command.

The embedded broker (tansu, in memory) listens on loopback; the worker is a real
``stream-app worker`` process tuned for it. With ``--demo`` the example session is
published and its turns are printed as they arrive.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import orjson
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from stream_app.config import Settings
from stream_app.embedded_broker import WORKER_SETTINGS, EmbeddedBroker
from stream_app.replay import record_value
from stream_app.tail import tail

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "session.jsonl"


async def _create_topics(bootstrap: str, settings: Settings) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        wanted = [
            settings.topic_messages,
            settings.topic_decisions,
            settings.topic_turns,
            settings.topic_dlq,
        ]
        await admin.create_topics(
            [NewTopic(t, settings.partitions, 1) for t in wanted if t not in existing]
        )
    finally:
        await admin.close()


async def _publish(bootstrap: str, settings: Settings, path: Path) -> int:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    count = 0
    try:
        for line in path.read_bytes().splitlines():
            doc = orjson.loads(line)
            value = doc["value"]
            raw = record_value(value)
            key = None if doc["key"] is None else doc["key"].encode()
            await producer.send(settings.topic_of(doc["topic"]), raw, key=key)
            count += 1
        await producer.flush()
    finally:
        await producer.stop()
    return count


def _wait_ready(port: int, worker: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if worker.poll() is not None:
            raise SystemExit(f"stream-app dev: the worker exited with status {worker.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"stream-app dev: the worker was not ready in {timeout:.0f} s")


def run(settings: Settings, port: int | None, demo: Path | None, demo_turns: int | None) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="stream-app-dev-"))
    with EmbeddedBroker(port=port, log=workdir / "broker.log") as broker:
        asyncio.run(_create_topics(broker.bootstrap, settings))
        env = {
            **os.environ,
            **WORKER_SETTINGS,
            "STREAM_APP_BROKER_URL": broker.url,
            "STREAM_APP_WEB_HOST": "127.0.0.1",
            # The broker keeps nothing, so neither may the worker's table store.
            "STREAM_APP_DATA_DIR": str(workdir / "data"),
        }
        with open(workdir / "worker.log", "ab") as log:
            worker = subprocess.Popen(
                [sys.executable, "-m", "stream_app", "worker"],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            _wait_ready(settings.web_port, worker)
            print(f"broker (Kafka protocol): {broker.bootstrap}", flush=True)
            print(
                f"worker web: http://127.0.0.1:{settings.web_port}  (/metrics /ready)", flush=True
            )
            print(
                f"topics: in {settings.topic_messages}, {settings.topic_decisions}; "
                f"out {settings.topic_turns}, {settings.topic_dlq}",
                flush=True,
            )
            print(f"logs: {workdir}", flush=True)
            if demo is not None:
                sent = asyncio.run(_publish(broker.bootstrap, settings, demo))
                print(f"published {sent} records from {demo}; turns as they arrive:", flush=True)
            asyncio.run(tail(broker.bootstrap, settings.topic_turns, limit=demo_turns))
        except KeyboardInterrupt:
            pass
        finally:
            worker.terminate()
            worker.wait(30)
    return 0
