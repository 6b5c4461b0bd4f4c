"""Prometheus metrics of the worker: what went in, what came out, and how far behind it is."""

from __future__ import annotations

from collections import Counter as Counts

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from stream_app.models.dead_letter import Reason

REGISTRY = CollectorRegistry()

RECORDS = Counter(
    "stream_app_records", "Input records read, by topic.", ["topic"], registry=REGISTRY
)
TURNS = Counter("stream_app_turns_emitted", "Turns emitted for the first time.", registry=REGISTRY)
REVISIONS = Counter(
    "stream_app_turn_revisions",
    "Turns emitted again because a late decision joined them.",
    registry=REGISTRY,
)
DUPLICATES = Counter(
    "stream_app_duplicates",
    "Input records ignored as redeliveries, by kind (message, decision).",
    ["kind"],
    registry=REGISTRY,
)
REPROCESSED = Counter(
    "stream_app_reprocessed",
    "Records read again after a restart and skipped as already applied.",
    registry=REGISTRY,
)
DEAD_LETTERS = Counter(
    "stream_app_dead_letters", "Records dead-lettered, by reason.", ["reason"], registry=REGISTRY
)
PARTS_SKIPPED = Counter(
    "stream_app_parts_skipped",
    "Message content parts of unknown kind (image, file, ...) skipped.",
    registry=REGISTRY,
)
MALFORMED_ARGUMENTS = Counter(
    "stream_app_malformed_tool_arguments",
    "Tool-call arguments that were not a JSON object (emitted as {}).",
    registry=REGISTRY,
)
STATE_EVICTIONS = Counter(
    "stream_app_state_evictions",
    "What a session gave up to stay within its limits, by kind: open_turn (closed early), "
    "identity (a remembered message identity forgotten).",
    ["kind"],
    registry=REGISTRY,
)
STATE_RECORDS_TOO_LARGE = Counter(
    "stream_app_state_records_too_large",
    "State records past the producer's limit, never sent (a defect: the limits prevent it).",
    registry=REGISTRY,
)
STATE_UNREADABLE = Counter(
    "stream_app_state_unreadable",
    "Sessions whose state records did not decode (another version's, or garbage): read as "
    "absent and deleted.",
    registry=REGISTRY,
)
SESSIONS = Gauge("stream_app_sessions", "Sessions held in this worker's state.", registry=REGISTRY)
LAG = Gauge(
    "stream_app_consumer_lag",
    "Records not yet read, by input partition.",
    ["topic", "partition"],
    registry=REGISTRY,
)
TURN_LATENCY = Histogram(
    "stream_app_turn_latency_seconds",
    "From the completing message's record timestamp to its turn being acknowledged.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
    registry=REGISTRY,
)


def count(counts: Counts[str]) -> None:
    """Moves the counters by what one step of the core counted."""
    for name, n in counts.items():
        if not n:
            continue
        if name == "turns_emitted":
            TURNS.inc(n)
        elif name == "turn_revisions":
            REVISIONS.inc(n)
        elif name.startswith("duplicate:"):
            DUPLICATES.labels(kind=name.removeprefix("duplicate:")).inc(n)
        elif name.startswith("dead_letter:"):
            DEAD_LETTERS.labels(reason=name.removeprefix("dead_letter:")).inc(n)
        elif name == "parts_skipped":
            PARTS_SKIPPED.inc(n)
        elif name == "malformed_tool_arguments":
            MALFORMED_ARGUMENTS.inc(n)
        elif name == "reprocessed":
            REPROCESSED.inc(n)
        elif name == "turns_closed_early":
            STATE_EVICTIONS.labels(kind="open_turn").inc(n)
        elif name == "identities_forgotten":
            STATE_EVICTIONS.labels(kind="identity").inc(n)


def declare(input_topics: list[str]) -> None:
    """Creates every labelled series at zero: an alert on ``increase()`` sees the first
    dead letter of a reason, or the first record of a topic, only if its series was
    there before it."""
    for reason in Reason:
        DEAD_LETTERS.labels(reason=reason.value)
    for kind in ("open_turn", "identity"):
        STATE_EVICTIONS.labels(kind=kind)
    for topic in input_topics:
        RECORDS.labels(topic=topic)
