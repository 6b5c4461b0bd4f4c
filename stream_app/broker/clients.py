"""The aiokafka clients that the command-line tools make (publish, export, tail): their
options, and how they are closed."""

from __future__ import annotations

import asyncio
import logging
from typing import Required

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError

from stream_app.config import KafkaOptions, Settings

CLOSE_TIMEOUT = 5.0  # seconds a closing consumer has


class ClientOptions(KafkaOptions, total=False):
    bootstrap_servers: Required[str]


def client_options(settings: Settings, bootstrap: str | None = None) -> ClientOptions:
    """Bootstrap servers (``--bootstrap`` or ``STREAM_APP_BROKER_URL``) and the connection's
    security from the settings, so that every tool connects as the worker does."""
    return {
        "bootstrap_servers": bootstrap or settings.bootstrap_servers(),
        **settings.kafka_options(),
    }


def no_broker(where: str) -> str:
    """The one wording of "nothing answers", with the two ways to point a tool elsewhere."""
    return (
        f"no Kafka broker answers at {where} "
        "(point the tool at yours with --bootstrap HOST:PORT or STREAM_APP_BROKER_URL)"
    )


def quiet_client_log() -> None:
    """aiokafka logs each failed connection, with a traceback; the tools say it in one line."""
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)


async def close_consumer(consumer: AIOKafkaConsumer) -> None:
    """Stops the consumer within ``CLOSE_TIMEOUT``; going away anyway, nothing a closing
    consumer says is worth a line.

    aiokafka's close awaits tasks it has just cancelled (its fetcher's, its coordinator's),
    and their cancellation can escape it: only a cancellation of the caller itself goes on.
    """
    try:
        async with asyncio.timeout(CLOSE_TIMEOUT):
            await consumer.stop()
    except (KafkaError, OSError, TimeoutError):
        pass
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
