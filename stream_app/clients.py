"""Options of the aiokafka clients that the command-line tools make (publish, export)."""

from __future__ import annotations

import logging
from typing import Required

from stream_app.config import KafkaOptions, Settings


class ClientOptions(KafkaOptions, total=False):
    bootstrap_servers: Required[str]


def client_options(settings: Settings, bootstrap: str | None = None) -> ClientOptions:
    """Bootstrap servers (``--bootstrap`` or ``STREAM_APP_BROKER_URL``) and the connection's
    security from the settings, so that every tool connects as the worker does."""
    return {
        "bootstrap_servers": bootstrap or settings.bootstrap_servers(),
        **settings.kafka_options(),
    }


def quiet_client_log() -> None:
    """aiokafka logs each failed connection, with a traceback; the tools say it in one line."""
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
