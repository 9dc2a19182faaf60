"""The watermark: per partition, a time T such that every ingress record stamped at or before T has
been applied (docs/guarantees.md, "Completeness: the watermark"). Pure: offsets, stamps and clock
readings in, the claim out; streams/watermark_publisher.py reads them from Kafka and publishes.

Why T is sound. The ingress topics are stamped by the broker at append time (LogAppendTime,
streams/topics.py), so within one partition the stamps rise with the offsets. For one input
topic-partition, with `next_offset` the first offset not applied yet:

- every record below `next_offset` is applied, and every record at or after it is stamped at or
  after the newest applied one (ties in a millisecond included), so T = newest stamp - 1;
- when `next_offset` has reached `end`, the partition's end offset read *after* `clock_ms` (a stamp
  the broker had already given: something we saw it append), every record not applied yet is
  appended after that reading, so it is stamped at or after `clock_ms`: T = clock_ms - 1. With
  several replicas `end` is the high watermark (what the in-sync replicas copied), not the log end:
  a record the leader stamped may sit above it until its followers copy it, which an in-sync
  follower does within the broker's replica.lag.time.max.ms. T is then taken that allowance earlier:
  T = clock_ms - allowance - 1 (a stopgap: a heartbeat record per ingress partition would be exact).

Only while every ingress topic is LogAppendTime (its config, read by the publisher): with a topic
stamped by its writers no claim is sound, and none is made (`Stamping`).

A partition's T is the smallest over its ingress topics, kept below the oldest input held for a pod
not announced yet (it causes versions only once the pod is announced), and never below a T claimed
before: a claim, once true, stays true.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from podledger.schemas import models
from podledger.types import INGRESS_TOPICS

LOG_APPEND_TIME = 1  # Kafka's timestamp type of a record the broker stamped


LOG_APPEND_TIME_CONFIG = "LogAppendTime"  # the topic config message.timestamp.type that gives it


def topic_bound(
    next_offset: int, end: int | None, newest_ms: int | None, clock_ms: int | None, lag_ms: int = 0
) -> int | None:
    """The largest T such that every record of one input topic-partition stamped at or before T is
    applied, or None when nothing can be said. `end`: the end offset, read after `clock_ms`;
    `lag_ms`: how long a stamped record may stay above `end` (isr_allowance)."""
    known = [newest_ms] if newest_ms is not None else []
    if end is not None and next_offset >= end and clock_ms is not None:
        known.append(clock_ms - lag_ms)
    return max(known) - 1 if known else None


def isr_allowance(replicas: int, isr_lag_ms: int) -> int:
    """How long a record the leader stamped may stay above the end offsets (the high watermark):
    none with one replica (the high watermark is the log end), else the in-sync followers' lag."""
    return isr_lag_ms if replicas > 1 else 0


def partition_bound(bounds: Iterable[int | None], held_ms: int | None, previous: int | None) -> int | None:
    """A partition's T from its topics' bounds, the oldest held input's stamp and the T it had."""
    values = list(bounds)
    now = None if not values or None in values else min(v for v in values if v is not None)
    if now is not None and held_ms is not None:
        now = min(now, held_ms - 1)
    candidates = [v for v in (now, previous) if v is not None]
    return max(candidates) if candidates else None


@dataclass(slots=True)
class Progress:
    """What the fold has applied and stored on one partition, as the watermark needs it."""

    partition: int
    next: dict[str, int] = field(default_factory=dict)  # per ingress topic, the next offset to apply
    newest_ms: dict[str, int] = field(default_factory=dict)  # broker stamp of the newest applied record
    held_ms: int | None = None  # the oldest input held for an unannounced pod
    last: models.Watermark | None = None  # the newest watermark published (or read) for it

    @classmethod
    def resumed(cls, partition: int, last: models.Watermark | None) -> Progress:
        """A partition taken over: the offsets and held input its last published watermark names."""
        if last is None:
            return cls(partition)
        return cls(partition, dict(last.offsets), {}, last.held_ms, last)

    def adopt(self, last: models.Watermark) -> None:
        """The last watermark published for a partition this worker restored itself: its T is
        still true, and offsets it names are applied (its held input is the restored state's)."""
        self.last = last
        self.stored({t: o - 1 for t, o in last.offsets.items()})

    def applied(self, topic: str, offset: int, stamp_ms: int | None) -> None:
        """An input record applied and stored; `stamp_ms` None when the broker did not stamp it."""
        if offset + 1 > self.next.get(topic, 0):
            self.next[topic] = offset + 1
            if stamp_ms is None:  # written before its topic was LogAppendTime: says nothing of order
                self.newest_ms.pop(topic, None)
            else:
                self.newest_ms[topic] = stamp_ms

    def stored(self, marker_inputs: Mapping[str, int]) -> None:
        """The newest input offset per topic a restored partition's fold-state marker names."""
        for topic, offset in marker_inputs.items():
            if offset + 1 > self.next.get(topic, 0):
                self.next[topic] = offset + 1
                self.newest_ms.pop(topic, None)

    def watermark(
        self, ends: Mapping[str, int], clock_ms: int | None, lag_ms: int = 0, claims: bool = True
    ) -> tuple[models.Watermark, bool]:
        """The watermark to publish now, and whether every topic is caught up (a newer clock
        reading would advance it). `ends`: the end offsets, read after `clock_ms`; `lag_ms`: the
        ISR allowance. With `claims` False (an ingress topic not broker-stamped) T is None: a
        claim made before is withdrawn, not carried on, since it may have been false."""
        offsets = {str(t): self.next.get(t, 0) for t in INGRESS_TOPICS}
        if not claims:
            return models.Watermark(self.partition, None, offsets, self.held_ms), False
        bounds = [
            topic_bound(self.next.get(t, 0), ends.get(t), self.newest_ms.get(t), clock_ms, lag_ms)
            for t in INGRESS_TOPICS
        ]
        previous = None if self.last is None else self.last.t_ms
        t_ms = partition_bound(bounds, self.held_ms, previous)
        caught_up = all(t in ends and self.next.get(t, 0) >= ends[t] for t in INGRESS_TOPICS)
        return models.Watermark(self.partition, t_ms, offsets, self.held_ms), caught_up


@dataclass(slots=True)
class Stamping:
    """Which ingress topics the broker stamps, per topic (a config holds for all its partitions),
    as the publisher last read their configs. No claim until a reading, nor while a topic is not
    LogAppendTime. An applied record the broker did not stamp asks for a new reading before the
    next claim: the config may have changed since the last one (or the record predates a repair:
    its partition's bound then waits for a broker-stamped record, Progress.applied)."""

    read: bool = False  # the configs were read at least once
    unstamped: frozenset[str] = frozenset()  # topics whose config is not LogAppendTime (or unknown)
    stale: bool = True  # the configs should be read again before the next claim

    @property
    def claims(self) -> bool:
        return self.read and not self.unstamped

    def configs(self, types: Mapping[str, str | None]) -> tuple[set[str], set[str]]:
        """A reading of each ingress topic's message.timestamp.type (None: missing); returns the
        topics found not broker-stamped since the last reading, and those repaired."""
        now = frozenset(str(t) for t in INGRESS_TOPICS if types.get(t) != LOG_APPEND_TIME_CONFIG)
        found, repaired = set(now - self.unstamped), set(self.unstamped - now) if self.read else set()
        self.read, self.unstamped, self.stale = True, now, False
        return found, repaired

    def writer_stamped(self) -> None:
        """An applied record carried its writer's stamp."""
        self.stale = True


def oldest_held(waiting: Iterable[tuple[int, int]]) -> dict[int, int]:
    """Per partition, the stamp of the oldest input held for a pod not announced yet, from each
    waiting record's (partition, oldest held stamp) (streams/record.py held_since)."""
    out: dict[int, int] = {}
    for partition, stamp in waiting:
        out[partition] = min(out.get(partition, stamp), stamp)
    return out


def combine(watermarks: Mapping[int, models.Watermark | None], partitions: Iterable[int]) -> int | None:
    """The watermark of several partitions: the smallest T, or None while any has none."""
    values = [watermarks.get(p) for p in partitions]
    ts = [w.t_ms for w in values if w is not None and w.t_ms is not None]
    return min(ts) if ts and len(ts) == len(values) else None
