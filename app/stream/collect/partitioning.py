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

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

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


def partitions_of(keys: Sequence[bytes], partitions: int) -> npt.NDArray[np.int64]:
    """:func:`partition_for` of each of ``keys``, computed over the batch with numpy (the keys'
    bytes laid out as one array; one pass per 4-byte block of the longest key)."""
    n = len(keys)
    lengths = np.fromiter(map(len, keys), dtype=np.int64, count=n)
    data = np.frombuffer(b"".join(keys) + b"\0\0\0\0", dtype=np.uint8).astype(np.uint32)
    starts = np.cumsum(lengths) - lengths
    m = np.uint32(_M)
    h = np.uint32(0x9747B28C) ^ lengths.astype(np.uint32)
    blocks = lengths >> 2
    for j in range(int(blocks.max(initial=0))):
        rows = np.flatnonzero(blocks > j)
        at = starts[rows] + 4 * j
        k = data[at] | data[at + 1] << 8 | data[at + 2] << 16 | data[at + 3] << 24
        k *= m
        k ^= k >> 24
        k *= m
        h[rows] = (h[rows] * m) ^ k
    rest, tail = lengths & 3, starts + (blocks << 2)
    # Bytes past a key's end are masked out (the padding keeps the last key's reads in range).
    h ^= np.where(rest >= 3, data[tail + 2] << 16, 0).astype(np.uint32)
    h ^= np.where(rest >= 2, data[tail + 1] << 8, 0).astype(np.uint32)
    h ^= np.where(rest >= 1, data[tail], 0).astype(np.uint32)
    h = np.where(rest >= 1, h * m, h)
    h ^= h >> 13
    h *= m
    h ^= h >> 15
    return (h & np.uint32(0x7FFFFFFF)).astype(np.int64) % partitions
