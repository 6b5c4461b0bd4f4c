"""Settings from ``STREAM_APP_*`` environment variables; a bad value stops start-up."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from stream_app.core.policy import Policy


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="STREAM_APP_", extra="ignore")

    broker_url: str = "kafka://localhost:9092"
    id: str = "stream-app"
    org_id: str = Field("default", min_length=1)
    topic_messages: str = Field("llm.messages", min_length=1)
    topic_decisions: str = Field("developer.decisions", min_length=1)
    topic_turns: str = Field("turns", min_length=1)
    topic_dlq: str = Field("turns.dlq", min_length=1)
    partitions: int = Field(4, ge=1)
    replication_factor: int = Field(1, ge=1)
    session_ttl_seconds: float = Field(24 * 3600.0, gt=0)
    late_decision_window_seconds: float = Field(6 * 3600.0, gt=0)
    max_record_bytes: int = Field(1024 * 1024, ge=1)
    web_port: int = Field(6066, ge=1, le=65535)
    web_host: str = Field(default_factory=socket.gethostname, min_length=1)
    session_timeout_seconds: float = Field(10.0, gt=0)
    heartbeat_interval_seconds: float = Field(1.0, gt=0)
    rebalance_timeout_seconds: float = Field(10.0, gt=0)
    producer_max_batch_size: int = Field(512 * 1024, ge=1)
    fetch_max_wait_ms: int = Field(500, ge=1)
    batch_max_records: int = Field(1000, ge=1)
    commit_interval_ms: int = Field(1000, ge=0)
    sweep_interval_seconds: float = Field(60.0, gt=0)
    store: str = Field("rocksdb://", pattern=r"^(rocksdb|memory)://")
    data_dir: Path = Path("./data")
    standby_replicas: int = Field(1, ge=0)
    compression: Literal["none", "gzip", "lz4", "zstd", "snappy"] = "lz4"

    def policy(self) -> Policy:
        return Policy(
            org_id=self.org_id,
            max_record_bytes=self.max_record_bytes,
            session_ttl_seconds=self.session_ttl_seconds,
            late_decision_window_seconds=self.late_decision_window_seconds,
        )

    def bootstrap_servers(self) -> str:
        """The broker URL as Kafka clients take it: ``host:port,host:port``."""
        hosts = (part.strip().removeprefix("kafka://") for part in self.broker_url.split(";"))
        return ",".join(h for h in hosts if h)

    def topic_of(self, kind: str) -> str:
        return self.topic_messages if kind == "messages" else self.topic_decisions


class SettingsError(Exception):
    """A one-line description of the first bad setting."""


def load_settings() -> Settings:
    try:
        return Settings()
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        name = "STREAM_APP_" + str(first["loc"][0]).upper() if first["loc"] else "STREAM_APP_*"
        raise SettingsError(f"{name}: {first['msg']} (got {first.get('input')!r})") from None
