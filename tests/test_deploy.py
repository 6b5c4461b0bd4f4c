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
    # The RocksDB store outlives the container.
    assert "ENV STREAM_APP_DATA_DIR=/data" in (ROOT / "Dockerfile").read_text()
    assert any(v.endswith(":/data") for v in services["worker"]["volumes"])


def manifests() -> dict[str, dict]:
    docs = {}
    for path in sorted((ROOT / "deploy").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            docs[doc["kind"]] = doc
    return docs


def test_kubernetes_manifests_hold_together_with_the_apps_settings() -> None:
    docs = manifests()
    kustomization = docs.pop("Kustomization")
    listed = set(kustomization["resources"])
    assert listed == {p.name for p in (ROOT / "deploy").glob("*.yaml")} - {"kustomization.yaml"}
    assert set(docs) == {"ConfigMap", "Secret", "Service", "StatefulSet", "PodDisruptionBudget"}

    env = {**docs["ConfigMap"]["data"], **docs["Secret"]["stringData"]}
    settings = Settings(**{k.removeprefix("STREAM_APP_").lower(): v for k, v in env.items()})
    assert settings.replication_factor == 3  # internal topics survive a broker loss

    sts = docs["StatefulSet"]
    pod = sts["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    labels = pod["metadata"]["labels"]
    assert sts["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert docs["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert docs["Service"]["spec"]["selector"].items() <= labels.items()
    assert docs["Service"]["spec"]["clusterIP"] == "None"
    assert sts["spec"]["serviceName"] == docs["Service"]["metadata"]["name"]

    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["web"] == settings.web_port
    assert container["livenessProbe"]["httpGet"] == {"path": "/health", "port": "web"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/ready", "port": "web"}
    annotations = pod["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert int(annotations["prometheus.io/port"]) == settings.web_port
    assert annotations["prometheus.io/path"] == "/metrics"

    sources = {s.get("configMapRef", s.get("secretRef"))["name"] for s in container["envFrom"]}
    assert sources == {docs["ConfigMap"]["metadata"]["name"], docs["Secret"]["metadata"]["name"]}
    assert container["args"] == ["worker"]
    # Each worker's RocksDB store on a volume of its own, where the image keeps it.
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    (mount,) = container["volumeMounts"]
    assert mount == {"name": claim["metadata"]["name"], "mountPath": "/data"}
