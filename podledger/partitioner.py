"""The one partitioner every podledger producer uses.

Decision: a pod's events are partitioned by the murmur2 hash of its *node name* (Kafka's default
hash, so Java and Go clients can compute the same partition), not by the message key (the pod
UID). All topics share one partition count, so every event of a pod lands on the same partition
number in every topic (co-partitioning keeps the fold's state local), and a node agent can read
only the partitions that hold its own pods.
"""

from __future__ import annotations

from functools import lru_cache

from aiokafka.partitioner import murmur2


@lru_cache(maxsize=65536)
def partition_for_node(node: str, partitions: int) -> int:
    """The partition of every event of every pod bound to `node`."""
    if partitions < 1:
        raise ValueError("partitions must be >= 1")
    return (murmur2(node.encode()) & 0x7FFFFFFF) % partitions
