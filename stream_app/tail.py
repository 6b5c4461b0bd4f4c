"""``stream-app tail``: the turn topic as it grows, for people (or as JSON lines)."""

from __future__ import annotations

import asyncio
import sys
from typing import IO, Any

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition


def describe(key: str, turn: dict[str, Any]) -> str:
    """One readable paragraph per turn revision."""
    calls = ", ".join(f"{c['name']}({c['id']})" for c in turn["tool_calls"]) or "none"
    verdicts = (
        f"{d['decision_id']} {'accepted' if d['accepted'] else 'rejected'} ({d['agent_harness']})"
        for d in turn["decisions"]
    )
    decisions = ", ".join(verdicts) or "none"
    completion = turn["completion"].replace("\n", " / ")
    if len(completion) > 120:
        completion = completion[:117] + "..."
    return (
        f"turn {key}: {len(turn['new_messages'])} new messages\n"
        f"  completion: {completion}\n  tool calls: {calls}\n  decisions: {decisions}"
    )


async def tail(
    bootstrap: str,
    topic: str,
    *,
    as_json: bool = False,
    from_beginning: bool = True,
    limit: int | None = None,
    out: IO[str] = sys.stdout,
) -> int:
    """Prints turn revisions until ``limit`` are printed (or forever); returns the count."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    printed = 0
    try:
        while topic not in await consumer.topics():  # fetches metadata; may not exist yet
            await asyncio.sleep(0.5)
        partitions = consumer.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        consumer.assign(tps)
        if from_beginning:
            await consumer.seek_to_beginning(*tps)
        else:
            await consumer.seek_to_end(*tps)
        while limit is None or printed < limit:
            batch = await consumer.getmany(timeout_ms=500)
            for records in batch.values():
                for record in records:
                    if record.value is None:
                        continue
                    key = (record.key or b"").decode()
                    if as_json:
                        out.write(
                            orjson.dumps({"key": key, "value": orjson.loads(record.value)}).decode()
                            + "\n"
                        )
                    else:
                        out.write(describe(key, orjson.loads(record.value)) + "\n")
                    out.flush()
                    printed += 1
    finally:
        await consumer.stop()
    return printed
