"""The order in which the live fold applies a fetched batch of ingress records, and the offsets
Faust must be told about. Pure: records are anything with the attributes of a Kafka record.

The four ingress topics of one partition are fetched independently, so a fetch may hold a pod's
PLEG events well ahead of the pod-updates record announcing it. Folding the topics one after
another would hold those events (streams/fold.py) and release them later. The broker stamps every
ingress record at append time (LogAppendTime), so merging a partition's topics by that stamp
replays the order the broker took them in, and the fold holds only what really came early.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeVar


class Record(Protocol):
    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int: ...


RecordT = TypeVar("RecordT", bound=Record)
ItemT = TypeVar("ItemT")


def arrival_order(fetched: Mapping[Any, Sequence[RecordT]], rank: Mapping[str, int]) -> list[RecordT]:
    """Every fetched record, each partition's topics merged by broker stamp (ties: by `rank` of
    the topic, then offset); partitions one after another, by number. Each topic-partition keeps
    its offset order: stamps rise with offsets on a LogAppendTime topic, and the merge never
    reorders one input (a topic that is not LogAppendTime keeps its order, only the interleaving
    with the other topics is then arbitrary)."""
    by_partition: dict[int, list[Sequence[RecordT]]] = {}
    for records in fetched.values():
        if records:
            by_partition.setdefault(records[0].partition, []).append(records)
    out: list[RecordT] = []
    for partition in sorted(by_partition):
        runs = by_partition[partition]
        if len(runs) == 1:
            out += runs[0]
            continue
        keyed = [_keyed(run, (rank.get(run[0].topic, len(rank)), n)) for n, run in enumerate(runs)]
        out += (record for _, _, _, record in heapq.merge(*keyed))
    return out


def _keyed(
    run: Sequence[RecordT], rank: tuple[int, int]
) -> Iterator[tuple[int, tuple[int, int], int, RecordT]]:
    # heapq.merge needs each run sorted by its key; within a run the offset order wins, so a stamp
    # lower than the one before it (a topic the broker does not stamp) never moves a record back.
    floor = None
    for record in run:
        floor = record.timestamp if floor is None else max(floor, record.timestamp)
        yield floor, rank, record.offset, record


def slices(items: Sequence[ItemT], size: int) -> list[Sequence[ItemT]]:
    """`items` cut into consecutive runs of at most `size` (at least 1)."""
    size = max(size, 1)
    return [items[i : i + size] for i in range(0, len(items), size)]


def gaps(last_read: int | None, offsets: Iterable[int]) -> list[tuple[int, int]]:
    """The offset ranges (first, last; inclusive) skipped between `last_read` and the ascending
    `offsets` of one topic-partition, which Faust must treat as acknowledged to commit past them
    (records gone to retention or compaction, or control records). No range before a first read."""
    out: list[tuple[int, int]] = []
    previous = last_read
    for offset in offsets:
        if previous is not None and offset > previous + 1:
            out.append((previous + 1, offset - 1))
        previous = offset if previous is None else max(previous, offset)
    return out
