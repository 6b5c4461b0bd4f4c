"""Which partition a key lands in: Kafka's own rule, so every client agrees."""

from __future__ import annotations

import struct
from functools import lru_cache

_M = 0x5BD1E995  # murmur2's mixing constant
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """MurmurHash2 as the Java client's ``Utils.murmur2`` computes it (seed 0x9747B28C):
    aiokafka's ``murmur2``, with the 4-byte words read in one ``struct`` call and 32-bit
    arithmetic masked once a step: a new session's first record asks it, on the worker's
    main thread."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    words = length >> 2
    for k in struct.unpack_from(f"<{words}I", data) if words else ():
        k = (k * _M) & _MASK
        k = ((k ^ (k >> 24)) * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail, extra = length & ~3, length & 3
    if extra >= 3:
        h ^= data[tail + 2] << 16
    if extra >= 2:
        h ^= data[tail + 1] << 8
    if extra >= 1:
        h = ((h ^ data[tail]) * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    return h ^ (h >> 15)


@lru_cache(maxsize=1 << 16)  # a session's records repeat its key
def partition_for(key: bytes, partitions: int) -> int:
    """The partition the Java client's default partitioner (murmur2) picks for ``key``."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions
