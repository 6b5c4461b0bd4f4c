"""The deployment files agree with the app (they cannot run here: no Docker, no cluster).

Docker Compose and the Kubernetes manifests are read as a platform engineer would and held to
what the code does: the settings parse, every container passes Pod Security "restricted",
readiness and the PodDisruptionBudget agree, the workers address each other by names that
resolve, the topics script makes the topics a worker would make, and every alert and
dashboard panel reads metrics that ``/metrics`` really exports.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import generate_latest

from stream_app.app import create_app
from stream_app.config import Settings
from stream_app.models.dead_letter import Reason
from stream_app.observability import metrics
from tests.kustomize import kustomize, needs_kubectl

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
MONITORING = DEPLOY / "monitoring"

Doc = dict[str, Any]


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
        settings.topic_final,
    ):
        assert f"--topic {topic}" in script
    assert f"--partitions {settings.partitions}" in script
    assert "--topic turns --config cleanup.policy=compact" in script
    assert "--topic turns.final --config cleanup.policy=compact" in script
    assert settings.broker_url == "kafka://kafka:9092"
    assert f"127.0.0.1:{settings.web_port}:{settings.web_port}" in services["worker"]["ports"]
    assert services["worker"]["depends_on"]["topics"]["condition"] == (
        "service_completed_successfully"
    )
    assert "/ready" in " ".join(services["worker"]["healthcheck"]["test"])
    # The RocksDB store outlives the container.
    assert "ENV STREAM_APP_DATA_DIR=/data" in (ROOT / "Dockerfile").read_text()
    assert any(v.endswith(":/data") for v in services["worker"]["volumes"])


def test_compose_publishes_kafka_where_the_tools_look_and_only_on_the_hosts_loopback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 43 item 2-3: `stream-app publish`, `tail` and `export` on the host find compose's
    Kafka with no flag (their default broker), and neither Kafka (no authentication) nor the
    web port (whose /sessions/{id} returns chat content) is published beyond the host."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    monkeypatch.delenv("STREAM_APP_BROKER_URL", raising=False)
    default = Settings().bootstrap_servers()  # what a client command uses with no flag
    listeners = dict(
        item.split("://", 1)
        for item in services["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"].split(",")
    )
    assert listeners["HOST"] == default
    host_port = default.rsplit(":", 1)[1]
    for service in services.values():
        for mapping in service.get("ports", []):
            assert mapping.startswith("127.0.0.1:"), mapping
    assert any(m.split(":")[1] == host_port for m in services["kafka"]["ports"])


def test_compose_keeps_kafkas_log_with_the_workers_tables_and_restarts_a_crashed_worker() -> None:
    """Issue 23 item 6: state on both sides of the worker survives ``down`` and ``up``."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services, volumes = compose["services"], compose["volumes"]
    kafka = services["kafka"]
    log_dir = kafka["environment"]["KAFKA_LOG_DIRS"]
    mounts = dict(v.split(":", 1) for v in kafka["volumes"])
    assert log_dir in mounts.values()  # Kafka writes its log where a volume is mounted
    assert kafka["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"  # KRaft
    assert kafka["environment"]["CLUSTER_ID"]  # the same cluster on every start
    worker_mounts = dict(v.split(":", 1) for v in services["worker"]["volumes"])
    for name in (*mounts, *worker_mounts):
        assert name in volumes  # named volumes: kept by `down`, removed by `down -v`
    assert services["worker"]["restart"] in ("always", "unless-stopped", "on-failure")
    assert services["topics"].get("restart", "no") == "no"  # a one-shot job


# -- the manifests, as files --------------------------------------------------------------


def load(directory: Path) -> tuple[Doc, dict[tuple[str, str], Doc]]:
    """A kustomization and the resources it lists, by (kind, name)."""
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    docs: dict[tuple[str, str], Doc] = {}
    for name in kustomization["resources"]:
        for doc in yaml.safe_load_all((directory / name).read_text()):
            docs[(doc["kind"], doc["metadata"]["name"])] = doc
    return kustomization, docs


def deployed_settings(docs: dict[tuple[str, str], Doc]) -> Settings:
    env = {
        **docs[("ConfigMap", "stream-app")]["data"],
        **docs[("Secret", "stream-app")]["stringData"],
    }
    return Settings(**{k.removeprefix("STREAM_APP_").lower(): v for k, v in env.items()})


def pod_templates(docs: dict[tuple[str, str], Doc]) -> dict[str, Doc]:
    return {
        f"{kind}/{name}": doc["spec"]["template"]
        for (kind, name), doc in docs.items()
        if kind in {"StatefulSet", "Job", "Deployment", "DaemonSet"}
    }


def worker(docs: dict[tuple[str, str], Doc]) -> tuple[Doc, Doc]:
    sts = docs[("StatefulSet", "stream-app")]
    (container,) = [
        c for c in sts["spec"]["template"]["spec"]["containers"] if c["name"] == "worker"
    ]
    return sts, container


def test_every_file_is_listed_and_the_kinds_are_the_expected_ones() -> None:
    kustomization, docs = load(DEPLOY)
    listed = set(kustomization["resources"])
    assert listed == {p.name for p in DEPLOY.glob("*.yaml")} - {"kustomization.yaml"}
    assert {kind for kind, _ in docs} == {
        "ConfigMap",
        "Secret",
        "Service",
        "StatefulSet",
        "PodDisruptionBudget",
        "NetworkPolicy",
        "Job",
    }
    generated = {g["name"]: g["files"] for g in kustomization["configMapGenerator"]}
    assert generated == {"stream-app-topics": ["topics.sh"]}
    monitoring, mdocs = load(MONITORING)
    assert set(monitoring["resources"]) == {p.name for p in MONITORING.glob("*.yaml")} - {
        "kustomization.yaml"
    }
    assert {kind for kind, _ in mdocs} == {"ServiceMonitor", "PrometheusRule"}
    (dashboard,) = monitoring["configMapGenerator"]
    assert dashboard["files"] == ["stream-app-dashboard.json"]
    assert dashboard["options"]["labels"] == {"grafana_dashboard": "1"}


def test_kubernetes_manifests_hold_together_with_the_apps_settings() -> None:
    _, docs = load(DEPLOY)
    settings = deployed_settings(docs)
    assert settings.replication_factor == 3  # internal topics survive a broker loss

    sts, container = worker(docs)
    pod = sts["spec"]["template"]
    labels = pod["metadata"]["labels"]
    service = docs[("Service", "stream-app")]
    assert sts["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert (
        docs[("PodDisruptionBudget", "stream-app")]["spec"]["selector"]["matchLabels"].items()
        <= labels.items()
    )
    assert service["spec"]["selector"].items() <= labels.items()
    assert (
        docs[("NetworkPolicy", "stream-app")]["spec"]["podSelector"]["matchLabels"].items()
        <= labels.items()
    )

    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["web"] == settings.web_port
    assert service["spec"]["ports"] == [{"name": "web", "port": 6066, "targetPort": "web"}]
    assert container["livenessProbe"]["httpGet"] == {"path": "/health", "port": "web"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/ready", "port": "web"}
    assert container["startupProbe"]["httpGet"] == {"path": "/health", "port": "web"}
    annotations = pod["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert int(annotations["prometheus.io/port"]) == settings.web_port
    assert annotations["prometheus.io/path"] == "/metrics"

    sources = {s.get("configMapRef", s.get("secretRef"))["name"] for s in container["envFrom"]}
    assert sources == {"stream-app"}  # the ConfigMap and the Secret
    assert container["args"] == ["worker"]


def test_each_worker_keeps_its_rocksdb_tables_on_a_claim_of_its_own() -> None:
    _, docs = load(DEPLOY)
    sts, container = worker(docs)
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert claim["spec"]["resources"]["requests"]["storage"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    # Where the image points STREAM_APP_DATA_DIR (the ConfigMap does not move it).
    assert "ENV STREAM_APP_DATA_DIR=/data" in (ROOT / "Dockerfile").read_text()
    assert "STREAM_APP_DATA_DIR" not in docs[("ConfigMap", "stream-app")]["data"]
    assert mounts["/data"] == claim["metadata"]["name"]
    assert deployed_settings(docs).store == "rocksdb://"


# Volume types Pod Security "restricted" admits.
RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}


def effective(container_ctx: Doc, pod_ctx: Doc, key: str) -> Any:
    """A container's security setting, or the pod's when the container leaves it unset."""
    return container_ctx.get(key, pod_ctx.get(key))


def test_every_container_passes_restricted_pod_security() -> None:
    _, docs = load(DEPLOY)
    templates = pod_templates(docs)
    assert set(templates) == {"StatefulSet/stream-app", "Job/stream-app-topics"}
    for where, template in templates.items():
        spec = template["spec"]
        pod_ctx = spec.get("securityContext", {})
        for flag in ("hostNetwork", "hostPID", "hostIPC"):
            assert not spec.get(flag), (where, flag)
        assert pod_ctx.get("runAsUser", 1) != 0, where
        claims = {
            c["metadata"]["name"]
            for (kind, _), d in docs.items()
            if kind == "StatefulSet" and d["spec"]["template"] is template
            for c in d["spec"].get("volumeClaimTemplates", [])
        }
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for name, volume in volumes.items():
            kinds = set(volume) - {"name"}
            assert kinds <= RESTRICTED_VOLUMES, (where, name, kinds)
        containers = spec.get("initContainers", []) + spec["containers"]
        for c in containers:
            at = f"{where} {c['name']}"
            ctx = c.get("securityContext", {})

            assert effective(ctx, pod_ctx, "runAsNonRoot") is True, at
            assert effective(ctx, pod_ctx, "runAsUser") not in (0, None), (
                at
            )  # numeric: checkable by kubelet
            assert effective(ctx, pod_ctx, "seccompProfile") == {"type": "RuntimeDefault"}, at
            assert ctx.get("allowPrivilegeEscalation") is False, at
            assert ctx.get("privileged") in (None, False), at
            assert ctx.get("capabilities", {}).get("drop") == ["ALL"], at
            assert not ctx.get("capabilities", {}).get("add"), at
            assert ctx.get("readOnlyRootFilesystem") is True, at
            assert "hostPort" not in str(c.get("ports", [])), at
            # Writable only where needed: an emptyDir or the data claim; the rest read-only.
            for mount in c.get("volumeMounts", []):
                name = mount["name"]
                if mount.get("readOnly"):
                    continue
                writable = name in claims or "emptyDir" in volumes.get(name, {})
                assert writable, (at, name)
            limits = c.get("resources", {}).get("limits", {})
            assert "memory" in limits, at


def test_readiness_rides_out_a_rebalance_and_agrees_with_the_disruption_budget() -> None:
    _, docs = load(DEPLOY)
    settings = deployed_settings(docs)
    sts, container = worker(docs)
    pdb = docs[("PodDisruptionBudget", "stream-app")]["spec"]
    # One worker out at a time, and a pod stuck unready never blocks a drain of its node.
    assert pdb["maxUnavailable"] == 1
    assert pdb["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    assert sts["spec"]["replicas"] > pdb["maxUnavailable"]
    # /ready is 503 on every worker during a rebalance (eager). The probe must let a whole
    # rebalance pass (a member may take the session timeout to be noticed gone, and the
    # rebalance timeout to rejoin) without turning Ready off, or every pod would count as
    # disrupted at once and the budget would refuse every eviction.
    probe = container["readinessProbe"]
    tolerated = probe["periodSeconds"] * probe["failureThreshold"]
    rebalance = settings.session_timeout_seconds + settings.rebalance_timeout_seconds
    assert tolerated >= max(60, 2 * rebalance)
    assert probe.get("successThreshold", 1) == 1  # a recovered pod is Ready at once
    # The kubelet does not restart a worker for being busy with a rebalance either.
    live = container["livenessProbe"]
    assert live["periodSeconds"] * live["failureThreshold"] >= tolerated
    # Stopping is graceful (stream_app/cli/main.py): leave it time to settle and commit.
    assert sts["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] >= 30


def test_web_host_is_the_pods_stable_name_under_the_headless_service() -> None:
    _, docs = load(DEPLOY)
    sts, container = worker(docs)
    service = docs[("Service", "stream-app")]
    assert service["spec"]["clusterIP"] == "None"
    # A recovering worker (not ready) must still be reachable by its peers.
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert sts["spec"]["serviceName"] == service["metadata"]["name"]
    env = [e["name"] for e in container["env"]]
    values = {e["name"]: e for e in container["env"]}
    assert values["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    # $(POD_NAME) expands only when POD_NAME is defined before it.
    assert env.index("POD_NAME") < env.index("STREAM_APP_WEB_HOST")
    assert values["STREAM_APP_WEB_HOST"]["value"] == f"$(POD_NAME).{service['metadata']['name']}"
    # The workers' policy admits the peers on the web port, both ways.
    policy = docs[("NetworkPolicy", "stream-app")]["spec"]
    selector = policy["podSelector"]
    assert {"podSelector": selector} in policy["ingress"][0]["from"]
    peers = [rule for rule in policy["egress"] if rule["to"] == [{"podSelector": selector}]]
    assert peers == [
        {"to": [{"podSelector": selector}], "ports": [{"port": 6066, "protocol": "TCP"}]}
    ]


# -- the topics ----------------------------------------------------------------------------


def run_topics_script(tmp_path: Path, env: dict[str, str]) -> list[list[str]]:
    """Runs deploy/topics.sh create against a stand-in kafka-topics.sh; its argument lists."""
    calls = tmp_path / "calls"
    stub = tmp_path / "kafka-topics.sh"
    stub.write_text(f'#!/bin/bash\nprintf "%s\\0" "$@" >> {calls}\nprintf "\\n" >> {calls}\n')
    stub.chmod(0o755)
    done = subprocess.run(
        ["bash", str(DEPLOY / "topics.sh"), "create"],
        env={"PATH": os.environ["PATH"], "KAFKA_BIN": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [line.strip("\0").split("\0") for line in calls.read_text().splitlines() if line]


def created(calls: list[list[str]]) -> dict[str, dict[str, Any]]:
    """What each --create call asks for, by topic name."""
    topics: dict[str, dict[str, Any]] = {}
    for args in calls:
        assert args[:2] == ["--bootstrap-server", args[1]]
        options: dict[str, Any] = {"config": {}, "bootstrap": args[1]}
        i = 2
        while i < len(args):
            flag = args[i]
            if flag in ("--create", "--if-not-exists"):
                options[flag] = True
                i += 1
                continue
            value = args[i + 1]
            if flag == "--config":
                key, _, setting = value.partition("=")
                options["config"][key] = setting
            else:
                options[flag] = value
            i += 2
        topics[options["--topic"]] = options
    return topics


def topics_a_worker_declares(settings: Settings) -> dict[str, int]:
    """Topic name -> partitions, read from the worker's Faust app (nothing is started)."""
    app = create_app(settings)
    names: dict[str, int] = {}
    for agent in app.agents.values():
        for name in agent.channel.topics:
            names[name] = agent.channel.partitions
    for table in app.tables.values():
        names[table.changelog_topic.get_topic_name()] = table.changelog_topic.partitions
    leader = app._leader_assignor._leader_topic
    names[leader.get_topic_name()] = leader.partitions
    # Declared in the worker's start-up task, with STREAM_APP_PARTITIONS partitions.
    names[settings.topic_turns] = settings.partitions
    names[settings.topic_dlq] = settings.partitions
    names[settings.topic_final] = settings.partitions
    return names


@pytest.mark.parametrize("source", ["deployed settings", "defaults"])
def test_the_topics_job_creates_every_topic_a_worker_would(tmp_path: Path, source: str) -> None:
    _, docs = load(DEPLOY)
    if source == "defaults":
        env: dict[str, str] = {}
        settings = Settings()
    else:
        env = {
            **docs[("ConfigMap", "stream-app")]["data"],
            **docs[("Secret", "stream-app")]["stringData"],
        }
        settings = deployed_settings(docs)
    topics = created(run_topics_script(tmp_path, env))
    expected = topics_a_worker_declares(settings)
    assert {name: int(t["--partitions"]) for name, t in topics.items()} == expected
    for name, t in topics.items():
        assert t["--create"] and t["--if-not-exists"], name
        assert int(t["--replication-factor"]) == settings.replication_factor, name
        assert t["bootstrap"] == settings.bootstrap_servers(), name
    compacted = {
        name for name, t in topics.items() if t["config"].get("cleanup.policy") == "compact"
    }
    changelogs = {
        f"{settings.id}-{table}-changelog"
        for table in ("sessions", "entries", "decisions", "turn_bodies", "due", "final_keys")
    }
    # The state is the changelogs: compacted, never deleted by time; the turn topic keeps the
    # latest revision of every key, the final topic every turn once.
    assert compacted == changelogs | {settings.topic_turns, settings.topic_final}
    for name in changelogs:
        assert "retention.ms" not in topics[name]["config"], name
    # Everything that must wait for a stopped group has a stated retention (a week).
    for name in (
        settings.topic_messages,
        settings.topic_decisions,
        f"{settings.id}-sessions",
        settings.topic_dlq,
    ):
        assert topics[name]["config"]["retention.ms"] == str(7 * 24 * 3600 * 1000), name
    isr = {t["config"].get("min.insync.replicas") for t in topics.values()}
    assert isr == ({"2"} if settings.replication_factor >= 3 else {None})


def test_the_topics_job_and_the_init_container_run_the_generated_script() -> None:
    _, docs = load(DEPLOY)
    users = {
        "Job/stream-app-topics": ("topics", "create"),
        "StatefulSet/stream-app": ("wait-for-topics", "wait"),
    }
    for where, template in pod_templates(docs).items():
        name, mode = users[where]
        spec = template["spec"]
        (c,) = [c for c in spec.get("initContainers", []) + spec["containers"] if c["name"] == name]
        assert c["command"] == ["/bin/bash", "/opt/stream-app/topics.sh", mode], where
        mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert mounts["topics-script"] == "/opt/stream-app"
        assert volumes["topics-script"]["configMap"]["name"] == "stream-app-topics"
        assert volumes["kafka-client"]["secret"]["optional"] is True
        assert mounts["kafka-client"] == "/etc/kafka-client"
        sources = {s.get("configMapRef", s.get("secretRef"))["name"] for s in c["envFrom"]}
        assert sources == {"stream-app"}, where
    # Job pods are not workers: outside the budget, the Service and the workers' policy.
    job_labels = docs[("Job", "stream-app-topics")]["spec"]["template"]["metadata"]["labels"]
    worker_selector = docs[("PodDisruptionBudget", "stream-app")]["spec"]["selector"]["matchLabels"]
    assert not worker_selector.items() <= job_labels.items()


def test_the_worker_image_is_named_once_where_a_pushed_image_is_set() -> None:
    """Issue 43 item 3: a cluster pulls the image from a registry. The manifests name it in
    one place, kustomization.yaml's `images` (what `kustomize edit set image` changes), and
    both it and the README say to push it."""
    kustomization, docs = load(DEPLOY)
    (image,) = kustomization["images"]
    _, container = worker(docs)
    assert container["image"] == image["name"] == "stream-app"
    assert image["newTag"]
    kustomization_text = (DEPLOY / "kustomization.yaml").read_text()
    assert "docker push" in kustomization_text and "set image stream-app=" in kustomization_text
    readme = (ROOT / "README.md").read_text()
    assert "docker push" in readme and "kustomize edit set image" in readme


@needs_kubectl
@pytest.mark.parametrize("directory", [DEPLOY, MONITORING], ids=["deploy", "monitoring"])
def test_kustomize_builds(directory: Path) -> None:
    built = kustomize(directory)
    generated = [
        d for d in built if d["kind"] == "ConfigMap" and d["metadata"]["name"] != "stream-app"
    ]
    assert generated, "the generated ConfigMap is in the build"
    if directory == DEPLOY:
        # The hashed name of the script's ConfigMap reaches every pod that mounts it.
        (script,) = generated
        for d in built:
            if d["kind"] in ("StatefulSet", "Job"):
                volumes = {v["name"]: v for v in d["spec"]["template"]["spec"]["volumes"]}
                assert volumes["topics-script"]["configMap"]["name"] == script["metadata"]["name"]


# -- alerts and the dashboard ----------------------------------------------------------------


def exported_types() -> dict[str, str]:
    """Each metric the worker's /metrics exposes and its type, from the ``# TYPE`` lines of
    its registry (a labelled metric has no sample until a label value is used, but its
    ``# TYPE`` line is always there; a counter's name has its ``_total``)."""
    types: dict[str, str] = {}
    for line in generate_latest(metrics.REGISTRY).decode().splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            types[name] = kind
    return types


def exported_series() -> set[str]:
    """Every series name the worker's /metrics can carry: a histogram is queried through
    its ``_bucket``, ``_count`` and ``_sum``."""
    names: set[str] = set()
    for name, kind in exported_types().items():
        if kind in ("histogram", "summary"):
            names.update(f"{name}{suffix}" for suffix in ("_count", "_sum"))
            if kind == "histogram":
                names.add(f"{name}_bucket")
        else:
            names.add(name)
    return names


def rule_expressions() -> dict[str, str]:
    _, docs = load(MONITORING)
    rule = docs[("PrometheusRule", "stream-app")]
    return {r["alert"]: r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]}


def dashboard_expressions() -> list[str]:
    dashboard = json.loads((MONITORING / "stream-app-dashboard.json").read_text())
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]


SERIES = re.compile(r"\b(stream_app_[a-z0-9_]+)")


def test_exported_series_are_read_from_the_registry() -> None:
    series = exported_series()
    assert "stream_app_records_total" in series  # a counter without samples yet
    assert "stream_app_turn_latency_seconds_bucket" in series
    assert "stream_app_turn_latency_seconds" not in series  # not a queryable series
    assert "stream_app_turns_total" not in series


def test_alerts_read_only_series_the_worker_exports_and_cover_the_issue() -> None:
    exprs = rule_expressions()
    exported = exported_series()
    for alert, expr in exprs.items():
        for name in SERIES.findall(expr):
            assert name in exported, (alert, name)
    everything = "\n".join(exprs.values())
    reasons = {r.value for r in Reason}
    matched = re.findall(r'reason=~"([^"]+)"', everything)
    assert matched, "a dead-letter alert names its reasons"
    for alternatives in matched:
        assert set(alternatives.split("|")) <= reasons, alternatives
    # The alerts the issue asks for, by what they read.
    uses = {
        alert: set(SERIES.findall(expr)) | set(re.findall(r"\bkube_\w+", expr))
        for alert, expr in exprs.items()
    }
    assert "stream_app_consumer_lag" in uses["StreamAppConsumerLagGrowing"]
    (rejected,) = re.findall(r'reason=~"([^"]+)"', exprs["StreamAppDeadLettersRejected"])
    assert {"schema", "tenant_mismatch", "turn_too_large"} <= set(rejected.split("|"))
    assert {"stream_app_records_total", "stream_app_turns_emitted_total"} <= uses[
        "StreamAppNoTurnsEmitted"
    ]
    assert "kube_pod_status_ready" in uses["StreamAppWorkerNotReady"]
    assert "kube_pod_container_status_restarts_total" in uses["StreamAppWorkerRestarting"]
    # kube-state-metrics names pods and containers as the StatefulSet does.
    sts, container = worker(load(DEPLOY)[1])
    for expr in exprs.values():
        for pattern in re.findall(r'pod=~"([^"]+)"', expr):
            assert re.fullmatch(pattern, f"{sts['metadata']['name']}-0"), pattern
        if "container=" in expr:
            assert f'container="{container["name"]}"' in expr


def test_the_dashboard_reads_only_series_the_worker_exports_and_shows_each_concern() -> None:
    exported = exported_series()
    exprs = dashboard_expressions()
    used = {name for expr in exprs for name in SERIES.findall(expr)}
    assert used <= exported, used - exported
    assert {
        "stream_app_records_total",  # throughput
        "stream_app_consumer_lag",  # lag
        "stream_app_turn_latency_seconds_bucket",  # latency quantiles
        "stream_app_dead_letters_total",  # by reason
        "stream_app_sessions",  # sessions held
        "stream_app_turn_revisions_total",  # revisions
    } <= used
    assert any("by (reason)" in e and "stream_app_dead_letters_total" in e for e in exprs)
    assert {q for e in exprs for q in re.findall(r"histogram_quantile\((0\.\d+)", e)} >= {
        "0.5",
        "0.99",
    }


def test_every_alert_has_a_runbook_section() -> None:
    runbook = (ROOT / "docs" / "operations.md").read_text()
    headings = set(re.findall(r"^#+ (\S+)\s*$", runbook, flags=re.MULTILINE))
    _, docs = load(MONITORING)
    rule = docs[("PrometheusRule", "stream-app")]
    for group in rule["spec"]["groups"]:
        for r in group["rules"]:
            assert r["alert"] in headings, r["alert"]
            assert r["annotations"]["runbook"] == f"docs/operations.md#{r['alert'].lower()}"
            assert r["labels"]["severity"] in ("warning", "critical")


def test_every_metric_the_worker_exports_is_in_the_operations_table() -> None:
    """An operator reads what a series means in docs/operations.md: a metric left out of
    its table (six were, the event-loop lag among them) is one nobody alerts on."""
    table = (ROOT / "docs" / "operations.md").read_text()
    documented = set(re.findall(r"^\| `(stream_app_\w+)", table, flags=re.MULTILINE))
    families = {name for name in exported_types() if not name.endswith("_created")}
    assert families, "the registry exported no metric"
    assert families - documented == set()
    assert documented - families == set()  # nor a row for a metric that is gone
