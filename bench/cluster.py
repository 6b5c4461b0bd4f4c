"""Where a measurement runs, and what the measurements share: reading a topic whole, the
processes they run and their CPU. Each measurement gets a fresh embedded broker (tansu keeps
everything in memory and slows as it grows) or the user's cluster (``--bootstrap``), where it
names its topics and groups after a run of its own (``Cluster.new_run``) and deletes those
topics when done, the apps' changelogs among them; there the workers and peers run with the
environment's ``STREAM_APP_*`` settings, on the embedded broker with what tansu needs.
"""

from __future__ import annotations

import contextlib
import os
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from stream_app.broker.clients import ClientOptions, client_options
from stream_app.broker.embedded import WORKER_SETTINGS, EmbeddedBroker
from stream_app.config import Settings

# Every consumer here waits as briefly as the worker does: tansu holds each fetch for the
# whole wait, so a longer one would time the reader, not the worker.
FETCH_WAIT_MS = int(WORKER_SETTINGS["STREAM_APP_FETCH_MAX_WAIT_MS"])
Batch = list[ConsumerRecord[bytes, bytes]]


class Cluster:
    """A broker to measure on: how to reach it, what its processes get, and the partitions
    of every topic the bench makes there."""

    def __init__(
        self,
        options: ClientOptions,
        replication: int,
        worker_env: Mapping[str, str],
        partitions: int,
    ) -> None:
        self.options = options  # what every aiokafka client of the bench connects with
        self.replication = replication
        self.worker_env = worker_env  # STREAM_APP_* for the workers and peers, over os.environ
        self.partitions = partitions
        self.runs: list[str] = []

    @property
    def bootstrap(self) -> str:
        return self.options["bootstrap_servers"]

    def new_run(self) -> str:
        """A fresh id (``bench-`` and 8 hex digits) that starts every topic and group name of
        one measurement, and so of every topic its apps make."""
        self.runs.append(f"bench-{uuid.uuid4().hex[:8]}")
        return self.runs[-1]

    async def create_topics(self, names: list[str]) -> None:
        admin = AIOKafkaAdminClient(**self.options)
        await admin.start()
        try:
            await admin.create_topics(
                [NewTopic(n, self.partitions, self.replication) for n in names]
            )
        finally:
            await admin.close()

    async def topics(self, prefixes: tuple[str, ...], delete: bool = False) -> list[str]:
        """The topics whose names start with one of ``prefixes``, deleted if asked."""
        admin = AIOKafkaAdminClient(**self.options)
        await admin.start()
        try:
            found = sorted(t for t in await admin.list_topics() if t.startswith(prefixes))
            if found and delete:
                await admin.delete_topics(found)
            return found
        finally:
            await admin.close()

    async def read_until(
        self,
        topic: str,
        done: Callable[[Batch, float], Awaitable[bool]],
        missing: Callable[[], str],
        alive: Callable[[], bool] = lambda: True,
        timeout: float = 600,
    ) -> float:
        """Reads ``topic`` from its beginning, handing each batch (maybe empty) and its time
        to ``done`` until true; returns that time. Raises with ``missing`` past ``timeout``
        or once ``alive`` is false."""
        consumer = AIOKafkaConsumer(
            **self.options,
            enable_auto_commit=False,
            max_partition_fetch_bytes=4 * 1048576,
            fetch_max_wait_ms=FETCH_WAIT_MS,
        )
        await consumer.start()
        deadline = time.monotonic() + timeout
        try:
            partitions = [TopicPartition(topic, p) for p in range(self.partitions)]
            consumer.assign(partitions)
            await consumer.seek_to_beginning(*partitions)
            while True:
                batch = await consumer.getmany(timeout_ms=200, max_records=10_000)
                now = time.monotonic()
                if await done([r for records in batch.values() for r in records], now):
                    return now
                if now > deadline or not alive():
                    why = "it exited" if not alive() else f"after {timeout:.0f} s"
                    raise TimeoutError(f"{topic}: {missing()} ({why})")
        finally:
            await consumer.stop()


@contextlib.asynccontextmanager
async def fresh(bootstrap: str | None, log: Path, partitions: int = 4) -> AsyncIterator[Cluster]:
    """A new embedded broker logging to ``log``, or ``bootstrap``'s cleaned of ours after."""
    if bootstrap is None:
        with EmbeddedBroker(log=log) as broker:
            plaintext: ClientOptions = {
                "bootstrap_servers": broker.bootstrap,
                "security_protocol": "PLAINTEXT",
            }
            yield Cluster(plaintext, 1, WORKER_SETTINGS, partitions)
        return
    settings = Settings()
    options = client_options(settings, bootstrap)
    cluster = Cluster(options, settings.replication_factor, {}, partitions)
    try:
        yield cluster
    finally:
        for name in await cluster.topics(tuple(cluster.runs), delete=True):
            print(f"    deleted topic {name}", flush=True)


def wait_ready(port: int, deadline: float, alive: Callable[[], bool] = lambda: True) -> None:
    """Until ``/ready`` on ``port`` answers 200; raises once ``alive`` is false or past
    ``deadline`` (``time.monotonic()``)."""
    while True:
        if not alive():
            raise RuntimeError(f"the process serving port {port} exited")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"port {port} not ready") from None
            time.sleep(0.1)


def status_kib(pid: int | str, field: str = "VmRSS") -> int:
    """``/proc/<pid>/status``'s resident set now (``VmRSS``) or at its peak (``VmHWM``), KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def process_cpu_seconds(pid: int) -> float:
    """User and system CPU of a process so far (/proc/<pid>/stat, fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy_seconds() -> float:
    """CPU seconds all cores have spent busy so far (/proc/stat: all but idle and iowait)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    ticks = [int(f) for f in fields[:8]]  # user nice system idle iowait irq softirq steal
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")
