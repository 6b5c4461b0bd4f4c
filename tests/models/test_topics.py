"""Kafka's default partitioner: the same partition as the Java client (and aiokafka) picks."""

from __future__ import annotations

import pytest
from aiokafka.partitioner import murmur2 as aiokafka_murmur2
from hypothesis import given
from hypothesis import strategies as st

from stream_app.models.topics import murmur2, partition_for


@given(st.binary(max_size=64))
def test_murmur2_is_aiokafkas_for_any_key(key: bytes) -> None:
    assert murmur2(key) == aiokafka_murmur2(key)


@pytest.mark.parametrize(
    ("key", "java"),
    [  # org.apache.kafka.common.utils.UtilsTest.testMurmur2 (signed 32-bit, as Java has it)
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
        (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        (b"abc", 479470107),
    ],
)
def test_murmur2_is_the_java_clients(key: bytes, java: int) -> None:
    assert murmur2(key) == java % 2**32
    assert partition_for(key, 4) == (java & 0x7FFFFFFF) % 4
