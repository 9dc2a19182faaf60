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
  appended after that reading, so it is stamped at or after `clock_ms`: T = clock_ms - 1.

A partition's T is the smallest over its ingress topics, kept below the oldest input held for a pod
not announced yet (it causes versions only once the pod is announced), and never below a T claimed
before: a claim, once true, stays true.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from podledger.schemas import models
from podledger.types import INGRESS_TOPICS

LOG_APPEND_TIME = 1  # Kafka's timestamp type of a record the broker stamped


def topic_bound(next_offset: int, end: int | None, newest_ms: int | None, clock_ms: int | None) -> int | None:
    """The largest T such that every record of one input topic-partition stamped at or before T is
    applied, or None when nothing can be said. `end`: the end offset, read after `clock_ms`."""
    known = [newest_ms] if newest_ms is not None else []
    if end is not None and next_offset >= end and clock_ms is not None:
        known.append(clock_ms)
    return max(known) - 1 if known else None


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
    unstamped: set[str] = field(default_factory=set)  # topics with writer-stamped records: no claim

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
            if stamp_ms is None:  # the topic is not LogAppendTime: stamps say nothing about order
                self.newest_ms.pop(topic, None)
                self.unstamped.add(topic)
            else:
                self.newest_ms[topic] = stamp_ms

    def stored(self, marker_inputs: Mapping[str, int]) -> None:
        """The newest input offset per topic a restored partition's fold-state marker names."""
        for topic, offset in marker_inputs.items():
            if offset + 1 > self.next.get(topic, 0):
                self.next[topic] = offset + 1
                self.newest_ms.pop(topic, None)

    def watermark(self, ends: Mapping[str, int], clock_ms: int | None) -> tuple[models.Watermark, bool]:
        """The watermark to publish now, and whether every topic is caught up (a newer clock
        reading would advance it). `ends`: the end offsets, read after `clock_ms`."""
        bounds = [
            None
            if t in self.unstamped
            else topic_bound(self.next.get(t, 0), ends.get(t), self.newest_ms.get(t), clock_ms)
            for t in INGRESS_TOPICS
        ]
        previous = None if self.last is None else self.last.t_ms
        t_ms = partition_bound(bounds, self.held_ms, previous)
        caught_up = all(t in ends and self.next.get(t, 0) >= ends[t] for t in INGRESS_TOPICS)
        offsets = {str(t): self.next.get(t, 0) for t in INGRESS_TOPICS}
        return models.Watermark(self.partition, t_ms, offsets, self.held_ms), caught_up


def oldest_held(records: Iterable[Any]) -> dict[int, int]:
    """Per partition, the stamp of the oldest input held for a pod not announced yet, over fold
    records (held items are [topic, partition, offset, stamp, event, ...], streams/fold.py)."""
    out: dict[int, int] = {}
    for record in records:
        for item in (record or {}).get("held") or ():
            partition, stamp = int(item[1]), int(item[3])
            out[partition] = min(out.get(partition, stamp), stamp)
    return out


def combine(watermarks: Mapping[int, models.Watermark | None], partitions: Iterable[int]) -> int | None:
    """The watermark of several partitions: the smallest T, or None while any has none."""
    values = [watermarks.get(p) for p in partitions]
    ts = [w.t_ms for w in values if w is not None and w.t_ms is not None]
    return min(ts) if ts and len(ts) == len(values) else None
