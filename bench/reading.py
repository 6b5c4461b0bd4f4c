"""What the benchmark's measurements share: reading a topic whole, and the processes it runs."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from aiokafka import AIOKafkaConsumer, TopicPartition

from stream_app.clients import ClientOptions


async def from_the_start(
    options: ClientOptions, topic: str, partitions: int, fetch_wait_ms: int
) -> AIOKafkaConsumer:
    """A started consumer assigned every partition of ``topic``, at its beginning."""
    consumer = AIOKafkaConsumer(
        **options,
        enable_auto_commit=False,
        max_partition_fetch_bytes=4 * 1048576,
        fetch_max_wait_ms=fetch_wait_ms,
    )
    await consumer.start()
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    await consumer.seek_to_beginning(*tps)
    return consumer


def wait_ready(port: int, deadline: float, alive: Callable[[], bool] = lambda: True) -> None:
    """Until ``/ready`` on ``port`` answers 200; raises if ``alive`` turns false or past
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


def peak_rss_kib(pid: int) -> int:
    """The process's peak resident set (VmHWM), KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0
