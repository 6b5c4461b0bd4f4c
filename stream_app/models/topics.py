"""Which partition a key lands in: Kafka's own rule, so every client agrees."""

from __future__ import annotations

from functools import lru_cache

from aiokafka.partitioner import murmur2


@lru_cache(maxsize=1 << 16)  # murmur2 is pure Python; a session's records repeat its key
def partition_for(key: bytes, partitions: int) -> int:
    """The partition the Java client's default partitioner (murmur2) picks for ``key``."""
    return int(murmur2(key) & 0x7FFFFFFF) % partitions
