"""The deployment files agree with the app's settings (they cannot run here: no Docker)."""

from __future__ import annotations

from pathlib import Path

import yaml

from stream_app.config import Settings

ROOT = Path(__file__).resolve().parent.parent


def test_compose_creates_every_topic_the_worker_uses_with_its_partition_count() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"
    script = services["topics"]["command"][0]
    env = services["worker"]["environment"]
    settings = Settings(
        **{k.removeprefix("STREAM_APP_").lower(): v for k, v in env.items() if "$" not in str(v)}
    )
    for topic in (
        settings.topic_messages,
        settings.topic_decisions,
        settings.topic_turns,
        settings.topic_dlq,
    ):
        assert f"--topic {topic}" in script
    assert f"--partitions {settings.partitions}" in script
    assert "--topic turns --config cleanup.policy=compact" in script
    assert settings.broker_url == "kafka://kafka:9092"
    assert f"{settings.web_port}:{settings.web_port}" in services["worker"]["ports"]
    assert services["worker"]["depends_on"]["topics"]["condition"] == (
        "service_completed_successfully"
    )
    assert "/ready" in " ".join(services["worker"]["healthcheck"]["test"])
