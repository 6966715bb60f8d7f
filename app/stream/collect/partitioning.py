"""Which ``events`` partition a user's key belongs to: Kafka's default (murmur2) partitioner.

"One value per user per slot" is enforced per partition, so it bounds a user's contribution
only if every event of the user lands in the one partition its key hashes to. Producers must
use Kafka's default key partitioner: the Java client's and aiokafka's default, librdkafka's
``partitioner=murmur2_random`` (:data:`PRODUCER_CONFIG`). The collect stage recomputes the
partition of every key (cached per key) and dead-letters an event that arrived elsewhere.

>>> murmur2(b"21")
-973932308
>>> [partition_for(f"user-{i}".encode(), 4) for i in range(5)]
[3, 0, 0, 3, 3]
"""

from __future__ import annotations

PRODUCER_CONFIG = {"partitioner": "murmur2_random"}
"""What a confluent-kafka (librdkafka) producer of ``events`` or ``preferences`` must set."""

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 of ``data`` (seed ``0x9747b28c``), as a signed int."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    tail = length & ~3
    for i in range(0, tail, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner picks for ``key`` among ``partitions``."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions
