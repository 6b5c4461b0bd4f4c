#!/bin/bash
# Every topic a stream-app worker reads or writes, made from the same STREAM_APP_* settings
# the worker gets (deploy/configmap.yaml, deploy/secret.yaml), with kafka-topics.sh.
#
#   topics.sh create   creates whatever is missing (the Job stream-app-topics); a principal
#                      with CreateTopics runs it once, so the workers need no such right
#   topics.sh wait     waits until every topic exists (the workers' init container): a worker
#                      that found one missing would try to create it itself and, without the
#                      right, crash
#
# An existing topic is left as it is (--if-not-exists): check its settings against this list
# with `kafka-topics.sh --describe` when it was made by hand. Names and defaults follow
# stream_app/config.py and stream_app/app.py; tests/test_deploy.py runs this script against a
# stand-in kafka-topics.sh and compares what it creates with what a worker creates.
set -euo pipefail

mode=${1:-}
if [[ $mode != create && $mode != wait ]]; then
    echo "usage: topics.sh create|wait" >&2
    exit 2
fi

bin=${KAFKA_BIN:-/opt/kafka/bin}
# STREAM_APP_BROKER_URL is "kafka://host:port;kafka://host:port"; kafka-topics.sh takes
# "host:port,host:port".
bootstrap=$(printf '%s' "${STREAM_APP_BROKER_URL:-kafka://localhost:9092}" |
    sed -e 's#kafka://##g' -e 's#;#,#g' -e 's#[[:space:]]##g' -e 's#,,*#,#g' -e 's#^,##' -e 's#,$##')
client=()
# TLS or SASL: mount a Kafka client properties file here (the optional Secret
# stream-app-kafka-client, key client.properties); without one the connection is plaintext.
if [[ -s ${KAFKA_CLIENT_CONFIG:-/etc/kafka-client/client.properties} ]]; then
    client=(--command-config "${KAFKA_CLIENT_CONFIG:-/etc/kafka-client/client.properties}")
fi

id=${STREAM_APP_ID:-stream-app}
partitions=${STREAM_APP_PARTITIONS:-4}
replication=${STREAM_APP_REPLICATION_FACTOR:-1}
week=604800000 # ms

# With three copies, a write acknowledged by two survives the loss of a broker; the worker
# produces with acks=all.
common=()
if ((replication >= 3)); then
    common=(min.insync.replicas=2)
fi

# name | partitions | topic configs (comma-separated; empty: the broker's defaults)
topics=(
    # Inputs, written by the coding agents' producers. A week covers any outage of the
    # workers that should not lose input: they resume from their committed offsets.
    "${STREAM_APP_TOPIC_MESSAGES:-llm.messages}|$partitions|retention.ms=$week"
    "${STREAM_APP_TOPIC_DECISIONS:-developer.decisions}|$partitions|retention.ms=$week"
    # The agents' OpenTelemetry logs (the Collector's Kafka exporter, POST /v1/logs), turned
    # into decisions on the decisions topic by the workers.
    "${STREAM_APP_TOPIC_TELEMETRY:-otlp_logs}|$partitions|retention.ms=$week"
    # Outputs. The turn topic keeps the latest revision of every turn (compaction), the
    # final topic each turn once, when final; the dead-letter topic holds original records,
    # credentials included: keep it short, long enough to reprocess.
    "${STREAM_APP_TOPIC_TURNS:-turns}|$partitions|cleanup.policy=compact"
    "${STREAM_APP_TOPIC_FINAL:-turns.final}|$partitions|cleanup.policy=compact"
    "${STREAM_APP_TOPIC_DLQ:-turns.dlq}|$partitions|retention.ms=$week"
    # Internal. <id>-sessions carries input records re-keyed by session id until their
    # owner applies them: its retention must outlast any stop of the whole group, as the
    # inputs' does.
    "$id-sessions|$partitions|retention.ms=$week"
    # Table changelogs: compacted and never deleted by time, since they are the state. A
    # session is a small head and one record per entry; the largest record the limits let
    # a state write (a stored decision, about twice STREAM_APP_MAX_RECORD_BYTES, and the
    # producer's request limit) fits 4 MiB with the defaults, compressed or not.
    "$id-sessions-changelog|$partitions|cleanup.policy=compact"
    "$id-entries-changelog|$partitions|cleanup.policy=compact,max.message.bytes=4194304"
    "$id-decisions-changelog|$partitions|cleanup.policy=compact"
    "$id-turn_bodies-changelog|$partitions|cleanup.policy=compact,max.message.bytes=4194304"
    # The due index: a small key per session with a turn not yet final.
    "$id-due-changelog|$partitions|cleanup.policy=compact"
    # The turn keys that went final: two small records a key, kept for a bounded time.
    "$id-final_keys-changelog|$partitions|cleanup.policy=compact"
    # Faust's leader election: one partition, never written to.
    "$id-__assignor-__leader|1|"
)

topics_tool() {
    "$bin/kafka-topics.sh" --bootstrap-server "$bootstrap" "${client[@]}" "$@"
}

if [[ $mode == create ]]; then
    for entry in "${topics[@]}"; do
        IFS='|' read -r name count configs <<<"$entry"
        args=(--create --if-not-exists --topic "$name" --partitions "$count"
            --replication-factor "$replication")
        IFS=',' read -r -a settings <<<"$configs"
        for setting in "${settings[@]}" "${common[@]}"; do
            args+=(--config "$setting")
        done
        topics_tool "${args[@]}"
        echo "topic $name: present"
    done
    exit 0
fi

while true; do
    if ! existing=$(topics_tool --list); then
        echo "no answer from $bootstrap; trying again in 5 s"
        sleep 5
        continue
    fi
    missing=()
    for entry in "${topics[@]}"; do
        name=${entry%%|*}
        grep -qxF -- "$name" <<<"$existing" || missing+=("$name")
    done
    if ((${#missing[@]} == 0)); then
        echo "all ${#topics[@]} topics present"
        exit 0
    fi
    echo "waiting for topics: ${missing[*]} (created by the Job stream-app-topics)"
    sleep 5
done
