"""Kafka's default partitioner: murmur2 of the key bytes, made positive, modulo the partition count.

A record produced with a key lands in the same partition a Kafka Java producer
would choose, so data moved between stratalog and Kafka keeps its per-key
ordering. (Kafka's exact murmur2 variant, seed 0x9747b28c, is not in a
maintained Python package outside client libraries, so it is written here and
checked against kafka-python's in the tests.)
"""

from __future__ import annotations

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` as a signed 32-bit int."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length % 4
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partitions: int) -> int:
    """``toPositive(murmur2(key)) % partitions``, as Kafka's BuiltInPartitioner."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions
