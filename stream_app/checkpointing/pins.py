"""Every private name of Faust (with mode), aiokafka and aiohttp that this project overrides
or reads, with the class that defines it and the shape the project relies on.

The at-least-once holes are closed by overriding Faust's internals (``consumer.py``,
``state/recovery.py``, ``state/tables.py``), the web server's limits by overriding
aiohttp's (``worker/web_server.py``). No release promises to keep any of them: a method renamed
upstream would silently stop being overridden, and a changed signature or value would fail
deep inside a rebalance. ``tests/checkpointing/test_pins.py`` checks each pin against the
installed versions and fails naming it; it also reads ``stream_app/`` for private names of
those packages, so a use without a pin here fails too. When a pin fails after an upgrade,
read the upstream change against the rule that relies on it (the ``consumer.py`` rules are
cited as R1-R15) before changing the pin.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

#: The packages whose private names are pinned: Faust, the service library it is built
#: on, the Kafka client under it, and the web server under its web driver.
PINNED_PACKAGES = ("faust", "mode", "aiokafka", "aiohttp")

Kind = Literal["method", "coroutine", "attribute"]


@dataclass(frozen=True)
class Pin:
    #: The class that defines the name, by its import path.
    owner: str
    name: str
    #: A plain method, an ``async def`` one, or a value (an instance or class attribute).
    kind: Kind
    #: A method's parameters, annotations left out (``signature``); a value's type name,
    #: and for a mapping by partition the type name of a value in it: ``defaultdict[list]``.
    shape: str
    #: What the project does with it, and which rule relies on it.
    use: str
    #: The modules of ``stream_app`` that use it (none: relied on without being named).
    where: tuple[str, ...]
    #: For a method the project overrides or replaces: the only functions of its package
    #: that refer to it, as ``module.Class.function``; None: not checked.
    callers: tuple[str, ...] | None = None


CONSUMER = "faust.transport.consumer.Consumer"
AIOKAFKA_CONSUMER = "faust.transport.drivers.aiokafka.Consumer"
CONSUMER_THREAD = "faust.transport.drivers.aiokafka.AIOKafkaConsumerThread"
ROCKSDB_STORE = "faust.stores.rocksdb.Store"
CHECKPOINTING = ("stream_app.checkpointing.consumer",)
TABLES = ("stream_app.state.tables",)
WEB_SERVER = ("stream_app.worker.web_server",)

PINS: tuple[Pin, ...] = (
    # -- Faust's consumer: delivery and commit bookkeeping (checkpointing/consumer.py) --
    Pin(
        CONSUMER,
        "_drain_messages",
        "coroutine",
        "(self, fetcher)",
        "overridden: the drain loop, R1, R4-R9 and R13",
        CHECKPOINTING,
        callers=("faust.transport.consumer.Fetcher._fetcher",),
    ),
    Pin(
        CONSUMER,
        "_new_offset",
        "method",
        "(self, tp)",
        "overridden: the offset a commit may reach, R3",
        CHECKPOINTING,
        callers=("faust.transport.consumer.Consumer._filter_committable_offsets",),
    ),
    Pin(
        CONSUMER,
        "_add_gap",
        "coroutine",
        "(self, tp, offset_from, offset_to)",
        "replaced by Consumer._mark_absent (R4), with a different interval: only the "
        "replaced drain loop may call it, or it needs an override again",
        (),
        callers=("faust.transport.consumer.Consumer._drain_messages",),
    ),
    Pin(
        CONSUMER,
        "_read_offset",
        "attribute",
        "defaultdict[NoneType]",
        "read and written: the last offset delivered per partition (R7, R9)",
        CHECKPOINTING,
    ),
    Pin(
        CONSUMER,
        "_committed_offset",
        "attribute",
        "defaultdict[NoneType]",
        "read and written: the committed offset per partition, None if unknown (R3, R5, R14)",
        CHECKPOINTING,
    ),
    Pin(
        CONSUMER,
        "_acked",
        "attribute",
        "defaultdict[list]",
        "read, trimmed and emptied: acknowledged offsets per partition (R3, R14)",
        CHECKPOINTING,
    ),
    Pin(
        CONSUMER,
        "_acked_index",
        "attribute",
        "defaultdict[set]",
        "read, trimmed and emptied: the same offsets as a set (R3, R14)",
        CHECKPOINTING,
    ),
    Pin(
        CONSUMER,
        "_gap",
        "attribute",
        "defaultdict[IntervalTree]",
        "written and emptied: absent offsets per partition, end excluded (R3, R4, R14)",
        CHECKPOINTING,
    ),
    Pin(
        CONSUMER,
        "_unacked_messages",
        "attribute",
        "WeakSet",
        "written: an acknowledgement that does not count leaves Faust's wait (R2); read: "
        "the events under way when a log was made again (R14)",
        CHECKPOINTING,
    ),
    Pin(
        CONSUMER,
        "_commit_every",
        "attribute",
        "int",
        "read: Faust's commit every n acknowledgements, kept by the drain loop",
        CHECKPOINTING,
    ),
    Pin(
        CONSUMER,
        "_n_acked",
        "attribute",
        "int",
        "read and reset: acknowledgements since that commit",
        CHECKPOINTING,
    ),
    Pin(
        AIOKAFKA_CONSUMER,
        "_new_consumer_thread",
        "method",
        "(self)",
        "overridden: the consumer thread of consumer.py (R11, R12)",
        CHECKPOINTING,
        callers=("faust.transport.consumer.ThreadDelegateConsumer.__init__",),
    ),
    # -- Faust's consumer thread and aiokafka's consumer (checkpointing/consumer.py) ----
    Pin(
        CONSUMER_THREAD,
        "_create_worker_consumer",
        "method",
        "(self, transport)",
        "overridden: the aiokafka consumer gets the app's fetch wait (R12)",
        CHECKPOINTING,
        callers=("faust.transport.drivers.aiokafka.AIOKafkaConsumerThread._create_consumer",),
    ),
    Pin(
        CONSUMER_THREAD,
        "_fetch_records",
        "coroutine",
        "(self, consumer, active_partitions, timeout=None, max_records=None)",
        "overridden and called: a fetch asks aiokafka's fetcher a share of each partition "
        "at a time (R15); Faust's asks it once, for every buffered record",
        CHECKPOINTING,
        callers=("faust.transport.drivers.aiokafka.AIOKafkaConsumerThread.getmany",),
    ),
    Pin(
        CONSUMER_THREAD,
        "_ensure_consumer",
        "method",
        "(self)",
        "called: the aiokafka consumer a seek runs on (R11)",
        CHECKPOINTING,
    ),
    Pin(
        "aiokafka.AIOKafkaConsumer",
        "_fetch_max_wait_ms",
        "attribute",
        "int",
        "written: the fetch wait, in ms (R12)",
        CHECKPOINTING,
    ),
    # -- Faust's app (app.py) ----------------------------------------------------------
    Pin(
        "faust.app.base.App",
        "_new_transport",
        "method",
        "(self)",
        "overridden: the transport whose consumer is consumer.py's",
        ("stream_app.app",),
        callers=("faust.app.base.App.transport",),
    ),
    # -- Faust's web driver and aiohttp's server (worker/web_server.py) ------------------------
    Pin(
        "faust.web.drivers.aiohttp.Web",
        "_runner",
        "attribute",
        "AppRunner",
        "written: the runner that serves the app through web_server.Server (its limits)",
        WEB_SERVER,
    ),
    Pin(
        "aiohttp.web_runner.AppRunner",
        "_make_server",
        "coroutine",
        "(self)",
        "overridden: the application's server remade as web_server.Server",
        WEB_SERVER,
        callers=("aiohttp.web_runner.BaseRunner.setup",),
    ),
    Pin(
        "aiohttp.web_server.Server",
        "_kwargs",
        "attribute",
        "dict",
        "read: the options each connection's protocol is made with",
        WEB_SERVER,
    ),
    # -- Faust's recovery (state/recovery.py) ------------------------------------------
    Pin(
        "faust.tables.recovery.Recovery",
        "_resume_streams",
        "coroutine",
        "(self, generation_id=0)",
        "overridden: recovery without tables resumes the streams here (R6)",
        ("stream_app.state.recovery",),
        callers=("faust.tables.recovery.Recovery._restart_recovery",),
    ),
    Pin(
        "faust.tables.recovery.Recovery",
        "_build_highwaters",
        "coroutine",
        "(self, consumer, tps, destination, title)",
        "overridden: each changelog's end read from a fetch's high watermark",
        ("stream_app.state.recovery",),
        callers=("faust.tables.recovery.Recovery._restart_recovery",),
    ),
    Pin(
        "faust.tables.manager.TableManager",
        "_recovery",
        "attribute",
        "NoneType",
        "written: the recovery service, built on first use (None until then)",
        ("stream_app.state.recovery",),
    ),
    # -- Faust's tables and stores (state/tables.py) -----------------------------------
    Pin(
        "faust.tables.base.Collection",
        "_new_store_by_url",
        "method",
        "(self, url)",
        "overridden: the stores that file a key in its session's partition",
        TABLES,
        callers=(
            "faust.tables.base.Collection._new_store",
            "faust.tables.objects.ChangeloggedObjectManager.storage",
        ),
    ),
    Pin(ROCKSDB_STORE, "_get", "method", "(self, key)", "overridden: by key's partition", TABLES),
    Pin(
        ROCKSDB_STORE,
        "_set",
        "method",
        "(self, key, value)",
        "overridden: a key filed in its session's partition",
        TABLES,
    ),
    Pin(ROCKSDB_STORE, "_del", "method", "(self, key)", "overridden: likewise", TABLES),
    Pin(ROCKSDB_STORE, "_contains", "method", "(self, key)", "overridden: likewise", TABLES),
    Pin(
        ROCKSDB_STORE,
        "_db_for_partition",
        "method",
        "(self, partition)",
        "called: the database of one partition",
        TABLES,
    ),
    Pin(
        ROCKSDB_STORE,
        "_open_for_partition",
        "method",
        "(self, partition)",
        "overridden: a damaged database is moved aside and opened empty, then rebuilt",
        TABLES,
        callers=("faust.stores.rocksdb.Store._db_for_partition",),
    ),
    Pin(
        "faust.transport.drivers.aiokafka.Producer",
        "_ensure_producer",
        "method",
        "(self)",
        "called: the aiokafka producer, to hand records over in record batches",
        ("stream_app.broker.record_batches",),
    ),
    Pin(
        "aiokafka.producer.message_accumulator.BatchBuilder",
        "_build",
        "method",
        "(self)",
        "called: a record batch compressed as it is handed over, not in the sender's step",
        ("stream_app.broker.record_batches",),
    ),
    Pin(
        "faust.stores.memory.Store",
        "_key_partition",
        "attribute",
        "dict",
        "written: key -> partition, which Faust reads when a partition is revoked",
        TABLES,
    ),
)


def signature(function: Callable[..., object]) -> str:
    """A function's parameters without annotations: what an override must accept, and
    stable whatever the annotations' spelling."""
    sig = inspect.signature(function)
    bare = [p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()]
    return str(sig.replace(parameters=bare, return_annotation=inspect.Signature.empty))
