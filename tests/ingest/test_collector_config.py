"""The OpenTelemetry Collector that compose runs and deploy/otel-collector/ deploys: the
agents' OTLP logs go to the telemetry topic, in the encoding the worker decodes, from one
pinned image (issue 51)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.kustomize import kustomize, needs_kubectl

ROOT = Path(__file__).resolve().parents[2]
COMPONENT = ROOT / "deploy" / "otel-collector"


def config() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((COMPONENT / "config.yaml").read_text())
    return loaded


def test_the_collector_writes_otlp_logs_to_the_telemetry_topic_in_protobuf() -> None:
    conf = config()
    assert conf["receivers"]["otlp"]["protocols"]["http"]["endpoint"].endswith(":4318")
    kafka = conf["exporters"]["kafka"]
    assert kafka["logs"] == {"topic": "otlp_logs", "encoding": "otlp_proto"}
    assert kafka["brokers"] == ["${env:KAFKA_BROKERS}"]
    assert conf["service"]["pipelines"]["logs"]["exporters"] == ["kafka"]
    assert conf["service"]["pipelines"]["logs"]["receivers"] == ["otlp"]


def test_compose_and_deploy_run_one_pinned_image_on_the_telemetry_topic() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    service = compose["services"]["otel-collector"]
    image = service["image"]
    name, _, tag = image.partition(":")
    assert name == "otel/opentelemetry-collector-contrib" and tag and tag != "latest"
    assert (
        "./deploy/otel-collector/config.yaml:/etc/otelcol-contrib/config.yaml:ro"
        in (service["volumes"])
    )
    assert service["environment"]["KAFKA_BROKERS"] == "kafka:9092"
    assert all(port.startswith("127.0.0.1:") for port in service["ports"])
    assert "--topic otlp_logs" in compose["services"]["topics"]["command"][0]
    deployment = yaml.safe_load((COMPONENT / "deployment.yaml").read_text())
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == image


def test_the_collector_pod_passes_restricted_pod_security() -> None:
    deployment = yaml.safe_load((COMPONENT / "deployment.yaml").read_text())
    spec = deployment["spec"]["template"]["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    for container in spec["containers"]:
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"]["drop"] == ["ALL"]


@needs_kubectl
def test_the_component_builds() -> None:
    kinds = {d["kind"] for d in kustomize(COMPONENT)}
    assert kinds == {"ConfigMap", "Deployment", "Service", "NetworkPolicy"}
