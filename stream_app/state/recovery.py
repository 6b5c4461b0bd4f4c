"""Faust's table recovery, reading each changelog partition to its true end.

Recovery replays a changelog partition up to the end that ListOffsets reports. The test
broker reports the first offset of the last batch + 1 there, short of the end when the last
batch holds several records, so the newest table updates were never read back
(``../shared/BROKER-NOTES.md``). The high watermark of a fetch response is right on every
broker, so recovery takes whichever end is further.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from typing import Protocol, cast

from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition
from faust.tables.manager import TableManager
from faust.tables.recovery import Recovery
from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth
from faust.types import TP, AppT, ConsumerT

FETCH_WAIT_MS = 50


class ResumingConsumer(Protocol):
    """What recovery tells the app's consumer (``checkpointing/consumer.Consumer``, rule
    R6). A protocol rather than an import: ``checkpointing/`` builds on ``state/``, so
    ``state/`` must not import it back (``tests/test_code_quality.py`` checks both)."""

    async def read_again_from_expected(self) -> None: ...

    async def read_again(self, offsets: Mapping[TP, int], /) -> None: ...

    def streams_resumed(self, generation: int, /) -> None: ...


async def partition_counts(
    bootstrap: str, topics: list[str], options: Mapping[str, object]
) -> dict[str, int | None]:
    """How many partitions each topic has (None: no such topic), from fresh metadata.

    ``options``: the connection's security, as :func:`client_options` gives it.
    """
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, **options)
    await consumer.start()
    try:
        await consumer.topics()  # a metadata request for every topic
        return {t: len(p) if (p := consumer.partitions_for_topic(t)) else None for t in topics}
    finally:
        await consumer.stop()


async def fetched_ends(
    bootstrap: str,
    starts: dict[TP, int],
    options: Mapping[str, object] | None = None,
    timeout: float = 30.0,
) -> dict[TP, int]:
    """The high watermark of a fetch at ``starts`` (the offset after the last record);
    ``options`` as for :func:`partition_counts` (none: plaintext)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        fetch_max_wait_ms=FETCH_WAIT_MS,
        **(options or {}),
    )
    await consumer.start()
    try:
        tps = {TopicPartition(tp.topic, tp.partition): tp for tp in starts}
        consumer.assign(list(tps))
        for ktp, tp in tps.items():
            consumer.seek(ktp, max(0, starts[tp]))
        deadline = time.monotonic() + timeout
        ends: dict[TP, int] = {}
        while len(ends) < len(tps):
            await consumer.getmany(timeout_ms=FETCH_WAIT_MS * 2, max_records=1)
            for ktp, tp in tps.items():
                if (end := consumer.highwater(ktp)) is not None:
                    ends[tp] = end
            if time.monotonic() > deadline:
                raise TimeoutError(f"no fetch answered for {sorted(set(tps) - set(ends))}")
        return ends
    finally:
        await consumer.stop()


def bootstrap_servers(app: AppT) -> str:
    return ",".join(f"{url.host}:{url.port or 9092}" for url in app.conf.broker)


def client_options(app: AppT) -> dict[str, object]:
    """The app's connection security (TLS, SASL) as aiokafka options, as Faust's clients get it.

    The clients made here reach the same brokers as Faust's own, so they take the same
    ``broker_credentials``.
    """
    return dict(credentials_to_aiokafka_auth(app.conf.broker_credentials, app.conf.ssl_context))


class FetchEndRecovery(Recovery):
    """Faust's recovery, reading changelogs to their true end, and telling the consumer
    when the streams of a generation are resumed (``checkpointing/consumer.py``)."""

    async def _resume_streams(self, generation_id: int = 0) -> None:
        """The path without tables: resumes the streams, unless a rebalance overtook it."""
        await super()._resume_streams(generation_id)
        await self._streams_resumed(generation_id)

    async def on_recovery_completed(self, generation_id: int = 0) -> None:
        await super().on_recovery_completed(generation_id)
        await self._streams_resumed(generation_id)

    async def _streams_resumed(self, generation_id: int) -> None:
        """After the flow control's last resume, which empties the agents' queues and the
        changelog queue: from here a delivered record stays delivered.

        The consumer held back the agents' records and the standbys' changelog records
        until now (a standby that lost some to that resume went on past them, and the
        worker it handed its partitions to found states naming turn bodies it never read);
        each agent source partition is read again from its expected offset, and each
        standby partition from the offset its table has reached, as recovery seeks it. A
        generation overtaken meanwhile is not current, and the consumer delivers nothing
        for it."""
        consumer = cast(ResumingConsumer, self.app.consumer)
        if generation_id != self.app.consumer_generation_id:
            return
        await consumer.read_again_from_expected()
        reached = {tp: self.standby_offsets.get(tp) for tp in self.standby_tps}
        await consumer.read_again({tp: max(0, o or 0) for tp, o in reached.items()})
        consumer.streams_resumed(generation_id)

    async def _build_highwaters(
        self, consumer: ConsumerT, tps: set[TP], destination: Counter[TP], title: str
    ) -> None:
        await super()._build_highwaters(consumer, tps, destination, title)
        if not tps:
            return
        bootstrap = bootstrap_servers(self.app)
        # Faust keeps "end - 1": the offset of the last record.
        starts = {tp: destination[tp] + 1 for tp in tps}
        ends = await fetched_ends(bootstrap, starts, client_options(self.app))
        for tp, end in ends.items():
            destination[tp] = max(destination[tp], end - 1)


class FetchEndTableManager(TableManager):
    @property
    def recovery(self) -> Recovery:
        if self._recovery is None:
            self._recovery = FetchEndRecovery(self.app, self, beacon=self.beacon, loop=self.loop)
        return self._recovery
