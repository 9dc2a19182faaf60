"""The one partitioner every podledger producer uses.

Decision: a pod's events are partitioned by the murmur2 hash of its *node name* (Kafka's default
hash, so Java and Go clients can compute the same partition), not by the message key (the pod
UID). All topics share one partition count, so every event of a pod lands on the same partition
number in every topic (co-partitioning keeps the fold's state local), and a node agent can read
only the partitions that hold its own pods.
"""

from __future__ import annotations

from functools import lru_cache

_SEED, _M, _R = 0x9747B28C, 0x5BD1E995, 24
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (the Java client's Utils.murmur2) as an unsigned 32-bit value; kept here,
    pure, so the fold's core can compute partitions without a Kafka client."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = (int.from_bytes(data[i : i + 4], "little") * _M) & _MASK
        k ^= k >> _R
        h = ((h * _M) & _MASK) ^ ((k * _M) & _MASK)
    tail = length % 4
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h = ((h ^ data[whole]) * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    return h ^ (h >> 15)


@lru_cache(maxsize=65536)
def partition_for_node(node: str, partitions: int) -> int:
    """The partition of every event of every pod bound to `node`."""
    if partitions < 1:
        raise ValueError("partitions must be >= 1")
    return (murmur2(node.encode()) & 0x7FFFFFFF) % partitions
