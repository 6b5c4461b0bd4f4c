"""Prometheus metrics of the worker: what went in, what came out, and how far behind it is."""

from __future__ import annotations

from collections import Counter as Counts
from collections.abc import Callable
from functools import partial

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

import stream_app
from stream_app.core.counts import Count
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
    "Input records ignored as redeliveries, by kind (message, decision, final: a finishing "
    "message for a turn already final).",
    ["kind"],
    registry=REGISTRY,
)
REPROCESSED = Counter(
    "stream_app_reprocessed",
    "Records read again after a restart and skipped as already applied.",
    registry=REGISTRY,
)
OFFSETS_RESTARTED = Counter(
    "stream_app_offsets_restarted",
    "Records below their session's applied offset yet stamped after anything applied from "
    "their partition: the topic was made again (or the cluster moved), and they are applied.",
    registry=REGISTRY,
)
PARTITIONS_RESTARTED = Counter(
    "stream_app_partitions_restarted",
    "Input partitions found to end below the offset the worker read them at (their topic "
    "made again), and read again from the start of their log.",
    ["topic"],
    registry=REGISTRY,
)
PARTITIONS_REREADING = Gauge(
    "stream_app_partitions_rereading",
    "Input partitions being read again from the start of a log made again, until the read "
    "reaches where that log ended when it was found.",
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
    "identity (a remembered message identity forgotten), final_key (a key that went final "
    "forgotten before its horizon, past STREAM_APP_MAX_FINAL_KEYS).",
    ["kind"],
    registry=REGISTRY,
)
STATE_RECORDS_TOO_LARGE = Counter(
    "stream_app_state_records_too_large",
    "State records past the producer's limit, never sent (a defect: the limits prevent it).",
    registry=REGISTRY,
)
STATE_FORMAT_NEWER = Gauge(
    "stream_app_state_format_newer",
    "1 when the worker met stored state of a format newer than its release's (a rollback "
    "onto a newer release's state) and stopped processing, holding its partitions; 0 else.",
    registry=REGISTRY,
)
STATE_UNREADABLE = Counter(
    "stream_app_state_unreadable",
    "Sessions whose state records did not decode (another version's, or garbage): read as "
    "absent and deleted.",
    registry=REGISTRY,
)
SESSIONS_EXPIRED = Counter(
    "stream_app_sessions_expired",
    "Sessions dropped from state after their idle time.",
    registry=REGISTRY,
)
PENDING_EXPIRED = Counter(
    "stream_app_pending_messages_expired",
    "Messages still pending when their session expired (no turn completed them).",
    registry=REGISTRY,
)
TURNS_CLOSED = Counter(
    "stream_app_turns_closed",
    "Turns dropped from state at the end of their late-decision window.",
    registry=REGISTRY,
)
SESSIONS = Gauge("stream_app_sessions", "Sessions held in this worker's state.", registry=REGISTRY)
LAG = Gauge(
    "stream_app_consumer_lag",
    "Records not yet read, by input partition.",
    ["topic", "partition"],
    registry=REGISTRY,
)
LOOP_LAG = Histogram(
    "stream_app_event_loop_lag_seconds",
    "How late the event loop ran a timer due every 50 ms: what any work holding the loop "
    "(a checkpoint's writes, a run of records) costs every other task.",
    # Fine from 10 to 50 ms, where a worker's lag is (its goal is 20 ms): a p99 read from
    # the buckets is then within 5-10 ms, not anywhere from 20 to 50.
    buckets=(
        *(0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05),
        *(0.1, 0.25, 0.5, 1, 2.5),
    ),
    registry=REGISTRY,
)
LOOP_LAG_MAX = Gauge(
    "stream_app_event_loop_lag_max_seconds",
    "The longest the event loop was late since the worker started.",
    registry=REGISTRY,
)
TURN_LATENCY = Histogram(
    "stream_app_turn_latency_seconds",
    "From the completing message's record timestamp to its turn being acknowledged.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
    registry=REGISTRY,
)

FINALS = Counter(
    "stream_app_turns_final",
    "Turns written to the final topic, by final_reason (window: past their late-decision "
    "window; evicted: closed early by a session limit; expired: their session expired).",
    ["reason"],
    registry=REGISTRY,
)
FINAL_DELAY = Histogram(
    "stream_app_final_delay_seconds",
    "From a turn's final_after to its final record acknowledged by the broker, for turns "
    "final by their window: the tick, the checkpoint and any consumer lag between.",
    buckets=(0.5, 1, 1.5, 2, 3, 5, 10, 30, 60, 300, 1800),
    registry=REGISTRY,
)
FINAL_KEYS = Gauge(
    "stream_app_final_keys",
    "Turn keys remembered as final on this worker's partitions, as each partition's last "
    "tick counted them: a finishing message for one of them is a duplicate.",
    registry=REGISTRY,
)
FINAL_WAITING = Gauge(
    "stream_app_final_waiting_turns",
    "Turns past their final_after (or closed early) whose final record is not written yet, "
    "as each partition's last tick found them: closed in the sessions it read, and one for "
    "each session due it left to the next tick (counted up to 1,000 a partition).",
    registry=REGISTRY,
)

MESSAGES_WAITING = Gauge(
    "stream_app_messages_waiting_sessions",
    "Sessions whose oldest pending message has waited for a finishing message (an "
    "assistant message with finishReason) longer than STREAM_APP_WAITING_WARN_SECONDS, as "
    "each partition's last sweep found them.",
    registry=REGISTRY,
)
MESSAGES_WAITING_OLDEST = Gauge(
    "stream_app_messages_waiting_oldest_seconds",
    "How long the oldest of those messages had waited at its partition's last sweep (0: none "
    "past the threshold).",
    registry=REGISTRY,
)
DECISIONS_WAITING = Gauge(
    "stream_app_decisions_waiting_sessions",
    "Sessions whose oldest decision waiting for its turn (none has the id its call_id names) "
    "has waited longer than STREAM_APP_WAITING_WARN_SECONDS, as each partition's last sweep "
    "found them.",
    registry=REGISTRY,
)
DECISIONS_WAITING_OLDEST = Gauge(
    "stream_app_decisions_waiting_oldest_seconds",
    "How long the oldest of those decisions had waited at its partition's last sweep (0: "
    "none past the threshold).",
    registry=REGISTRY,
)
INTERNAL_IGNORED = Counter(
    "stream_app_internal_records_ignored",
    "Records of <id>-sessions (timer messages, forwarded inputs) ignored, by reason: "
    "newer_version (written by a newer release, in a format this one does not know).",
    ["reason"],
    registry=REGISTRY,
)
# The agents' telemetry (SPEC §10, ``ingest/telemetry.py``): every log record is one of
# translated, ignored or untranslatable (a dead letter, also counted by reason above).
TELEMETRY_TRANSLATED = Counter(
    "stream_app_telemetry_translated",
    "Agents' log records translated into decisions (sent to the decisions topic), by harness.",
    ["harness"],
    registry=REGISTRY,
)
TELEMETRY_IGNORED = Counter(
    "stream_app_telemetry_ignored",
    "Agents' log records that are no decision event (api_request and the like: normal), by "
    "event name (the first 100 names a worker meets; later ones as 'other').",
    ["event"],
    registry=REGISTRY,
)
TELEMETRY_UNTRANSLATABLE = Counter(
    "stream_app_telemetry_untranslatable",
    "Agents' decision events that could not become a decision (untranslatable_telemetry "
    "dead letters: no session id, an unknown verdict), by event name.",
    ["event"],
    registry=REGISTRY,
)
OTLP_REQUESTS = Counter(
    "stream_app_otlp_requests",
    "POST /v1/logs requests, by answer: accepted (200, on the telemetry topic), invalid (400), "
    "unauthorized (401), too_large (413), unsupported (415), unavailable (503, no broker).",
    ["outcome"],
    registry=REGISTRY,
)
OTLP_LOG_RECORDS = Counter(
    "stream_app_otlp_log_records",
    "Log records of the /v1/logs requests written to the telemetry topic (answered 200).",
    registry=REGISTRY,
)
BUILD_INFO = Gauge(
    "stream_app_build_info",
    "1, labelled with the release this worker runs: its package version and the commit it "
    "was built from (empty when unknown).",
    ["version", "commit"],
    registry=REGISTRY,
)


def _series() -> dict[Count, Callable[[], Counter] | None]:
    """Each count's series: the one place a count becomes a metric (None: replay's only).
    A labelled series is made at its first count (``declare`` makes those alerts need)."""
    series: dict[Count, Callable[[], Counter] | None] = {
        Count.TURNS_EMITTED: lambda: TURNS,
        Count.TURN_REVISIONS: lambda: REVISIONS,
        Count.DUPLICATE_MESSAGE: partial(DUPLICATES.labels, kind="message"),
        Count.DUPLICATE_DECISION: partial(DUPLICATES.labels, kind="decision"),
        Count.DUPLICATE_FINAL: partial(DUPLICATES.labels, kind="final"),
        Count.REPROCESSED: lambda: REPROCESSED,
        Count.OFFSETS_RESTARTED: lambda: OFFSETS_RESTARTED,
        Count.PARTS_SKIPPED: lambda: PARTS_SKIPPED,
        Count.MALFORMED_TOOL_ARGUMENTS: lambda: MALFORMED_ARGUMENTS,
        Count.SESSIONS_EXPIRED: lambda: SESSIONS_EXPIRED,
        Count.PENDING_MESSAGES_EXPIRED: lambda: PENDING_EXPIRED,
        Count.TURNS_CLOSED: lambda: TURNS_CLOSED,
        Count.TURNS_CLOSED_EARLY: partial(STATE_EVICTIONS.labels, kind="open_turn"),
        Count.IDENTITIES_FORGOTTEN: partial(STATE_EVICTIONS.labels, kind="identity"),
        Count.FINAL_KEYS_FORGOTTEN: partial(STATE_EVICTIONS.labels, kind="final_key"),
        Count.SESSIONS_IN_STATE: None,  # the worker's is a gauge
        Count.PENDING_REPLACED: None,  # replay's sum of where records went
        Count.HELD_BY_TOO_LARGE: None,  # the dead letter is counted, by reason
        Count.INTERNAL_NEWER: partial(INTERNAL_IGNORED.labels, reason="newer_version"),
    }
    for count in Count:
        if (reason := count.reason) is not None:
            series[count] = partial(DEAD_LETTERS.labels, reason=reason.value)
    return series


SERIES = _series()


def count(counts: Counts[Count]) -> None:
    """Moves the counters by what one step of the core counted."""
    for name, n in counts.items():
        if n and (series := SERIES[name]) is not None:
            series().inc(n)


def declare(input_topics: list[str]) -> None:
    """Creates every labelled series at zero: an alert on ``increase()`` sees the first
    dead letter of a reason, or the first record of a topic, only if its series was
    there before it."""
    for reason in Reason:
        DEAD_LETTERS.labels(reason=reason.value)
    for topic in input_topics:
        RECORDS.labels(topic=topic)
        PARTITIONS_RESTARTED.labels(topic=topic)
    for final_reason in ("window", "evicted", "expired"):
        FINALS.labels(reason=final_reason)
    INTERNAL_IGNORED.labels(reason="newer_version")


def build_info() -> dict[str, str]:
    """Sets ``stream_app_build_info`` of this process's release (one series, at 1) and
    returns its labels, which the ``startup`` line names too."""
    labels = {"version": stream_app.__version__, "commit": stream_app.commit() or ""}
    BUILD_INFO.clear()
    BUILD_INFO.labels(**labels).set(1)
    return labels
