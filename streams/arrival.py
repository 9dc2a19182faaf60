"""The order in which the live fold applies a fetched batch of ingress records, and the offsets
Faust must be told about. No I/O and no clock: records are anything with the attributes of a Kafka
record, and time is what the caller says it is.

The four ingress topics of one partition are fetched independently, so a fetch may hold a pod's
PLEG events well ahead of the pod-updates record announcing it. Folding the topics one after
another would hold those events (streams/fold.py) and release them later. The broker stamps every
ingress record at append time (LogAppendTime), so merging a partition's topics by that stamp
replays the order the broker took them in, and the fold holds only what really came early. What
a fetch read of one topic past what it read of a sibling topic still behind waits for the next
fetch (`ready_counts`), so the merge spans fetches as well.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar


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


class PartitionOf(Protocol):
    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...


PartitionT = TypeVar("PartitionT", bound=PartitionOf)


def ready_counts(
    read: Mapping[PartitionT, Sequence[RecordT]], behind: Collection[PartitionT], rank: Mapping[str, int]
) -> dict[PartitionT, int]:
    """How many of each topic-partition's read records (offset order) the fold may apply now, given
    the topic-partitions `behind`: those the broker holds more of than was read, or of which that
    is not known yet.

    The merge orders a partition's topics by broker stamp, but it can only merge what was read. A
    fetch returns at most max.partition.fetch.bytes of each topic-partition, so a fetch may end
    one topic's run early and read another's to its end: merged as they are, a pod's removal read
    in full from pod-updates would go before PLEG events the broker took earlier and the fetch did
    not reach. So a record waits while a sibling topic-partition (same partition, other topic)
    is behind and could still hold a record that merges before it: one whose (stamp, rank) is not
    below that of the sibling's last read record (with nothing of it read, every record waits).
    A topic-partition's own records never wait for itself, and a topic-partition not behind
    bounds nothing: the broker holds nothing of it that was not read."""
    bounds: dict[int, list[tuple[PartitionT, tuple[float, int]]]] = {}
    for tp in behind:
        run = read.get(tp)
        last = max((r.timestamp for r in run), default=-math.inf) if run else -math.inf
        bounds.setdefault(tp.partition, []).append((tp, (last, rank.get(tp.topic, len(rank)))))
    counts: dict[PartitionT, int] = {}
    for tp, run in read.items():
        limits = [limit for other, limit in bounds.get(tp.partition, ()) if other != tp]
        if not limits:
            counts[tp] = len(run)
            continue
        bound, own_rank = min(limits), rank.get(tp.topic, len(rank))
        ready = 0
        for floor, _, _, _ in _keyed(run, (own_rank, 0)):
            if (floor, own_rank) >= bound:
                break
            ready += 1
        counts[tp] = ready
    return counts


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


@dataclass(slots=True)
class WaitingRoom(Generic[PartitionT, RecordT]):
    """The records read but not ready yet (`ready_counts`), per topic-partition in offset order, each
    with the time it was read (`now` as the caller's clock gives it: this holds no clock).

    Waiting has two limits, so a sibling that stays behind (its leader gone, say) delays a partition
    but never stops it: once a partition's oldest waiting record has waited `wait_s`, or more than
    `cap` of its records would go on waiting, all of them are ready, in the merge of what was read.
    Records read in another consumer generation are dropped: a rebalance rewinds the partitions to
    their committed offsets (streams/fold_consumer.py), and they are read again."""

    rank: Mapping[str, int]
    wait_s: float
    cap: int
    generation: int | None = None
    runs: dict[PartitionT, list[RecordT]] = field(default_factory=dict)
    read_at: dict[PartitionT, list[float]] = field(default_factory=dict)

    def clear(self) -> None:
        self.runs.clear()
        self.read_at.clear()

    def deadline(self) -> float | None:
        """When the oldest waiting record is due, or None when none waits."""
        return min((times[0] for times in self.read_at.values()), default=None)

    def ready(
        self,
        fetched: Mapping[PartitionT, Sequence[RecordT]],
        generation: int,
        now: float,
        behind: Callable[[int], Collection[PartitionT]],
    ) -> dict[PartitionT, Sequence[RecordT]]:
        """Add what was `fetched` and return what is ready to fold, per topic-partition, as its runs
        to merge; `behind(partition)` names the partition's topic-partitions that are behind."""
        if generation != self.generation:
            self.clear()
            self.generation = generation
        for tp, run in fetched.items():
            if run:
                self.runs.setdefault(tp, []).extend(run)
                self.read_at.setdefault(tp, []).extend([now] * len(run))
        by_partition: dict[int, list[PartitionT]] = {}
        for tp in self.runs:
            by_partition.setdefault(tp.partition, []).append(tp)
        out: dict[PartitionT, Sequence[RecordT]] = {}
        for partition, tps in by_partition.items():
            waiting = {tp: self.runs[tp] for tp in tps}
            everything = {tp: len(run) for tp, run in waiting.items()}
            counts = everything
            if now - min(self.read_at[tp][0] for tp in tps) < self.wait_s:
                counts = ready_counts(waiting, behind(partition), self.rank)
                if sum(everything[tp] - counts[tp] for tp in tps) > self.cap:  # what would stay
                    counts = everything
            for tp, count in counts.items():
                if not count:
                    continue
                run = self.runs[tp]
                out[tp] = run[:count]
                if count == len(run):
                    del self.runs[tp], self.read_at[tp]
                else:
                    self.runs[tp] = run[count:]
                    self.read_at[tp] = self.read_at[tp][count:]
        return out
