"""What the broker tests of a worker under bad input share: a ready worker, the records sent
to its internal sessions topic, and the check that it still runs, uncrashed."""

from __future__ import annotations

from confluent_kafka import Producer

from stream_app.models.topics import partition_for
from tests.test_app import PARTITIONS, Pipeline
from tests.worker_process import WorkerProcess


def ready_worker(pipeline: Pipeline, name: str = "worker", **settings: str) -> WorkerProcess:
    """A worker of ``pipeline``, with more ``STREAM_APP_*`` ``settings``, started and ready."""
    worker = pipeline.worker(name)
    worker.env.update(settings)
    worker.start().wait_ready()
    return worker


def to_sessions_topic(pipeline: Pipeline, key: bytes, values: list[bytes]) -> str:
    """Writes ``values`` under ``key`` to the app's internal sessions topic, in the key's
    partition, as the intake would; returns the topic."""
    topic = f"{pipeline.topics['STREAM_APP_ID']}-sessions"
    producer = Producer({"bootstrap.servers": pipeline.broker.bootstrap})
    for value in values:
        producer.produce(topic, value, key, partition=partition_for(key, PARTITIONS))
    assert producer.flush(30) == 0
    return topic


def still_running(worker: WorkerProcess) -> str:
    """Asserts that the worker runs and logged no crash; returns its log."""
    assert worker.process is not None and worker.process.poll() is None
    log = worker.log.read_text(errors="replace")
    assert '"event":"crash"' not in log, log[-3000:]
    return log
