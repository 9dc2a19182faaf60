"""The index's consumer role: read pod-status-history and journal into an AuditIndex.

A plain aiokafka consumer outside any group reads every partition of both topics from the
offsets the index has stored (the beginning for a new index); each batch and the offsets past it
land in one transaction, so after a restart it resumes where the file ends, without duplicates.
`catch_up` stops at the topics' ends as they were when it started; `follow` runs until stopped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from aiokafka import AIOKafkaConsumer, TopicPartition

from podledger.config import Settings
from podledger.kafka import new_consumer, started
from podledger.read.index.base import INDEXED_TOPICS, AuditIndex, RawRecord

log = logging.getLogger(__name__)

BATCH_RECORDS = 20_000  # records per transaction when following the topics
# While catching up, transactions take up to this many records (or bytes of values): a batch
# updates each of its pods' rows in `pods` once, and a cluster's pods all appear in every batch.
CATCH_UP_RECORDS = 100_000
CATCH_UP_BYTES = 128 << 20


@dataclass(frozen=True, slots=True)
class Lag:
    """How far the index is behind the topics: per topic, the records not indexed yet."""

    behind: dict[str, int]
    indexed: int  # records read in this run

    @property
    def total(self) -> int:
        return sum(self.behind.values())

    def describe(self) -> str:
        parts = " ".join(f"{topic}={n}" for topic, n in sorted(self.behind.items()))
        return f"behind: {parts} ({self.total} records)"


Progress = Callable[[int, int], None]  # (records read so far, records to read) -> report


async def _partitions(consumer: AIOKafkaConsumer, settings: Settings) -> list[TopicPartition]:
    """Every partition of the indexed topics, as the broker knows them (settings.partitions when
    a topic does not exist yet)."""
    await consumer.topics()  # fetches the cluster's metadata
    tps = []
    for topic in INDEXED_TOPICS:
        known = consumer.partitions_for_topic(settings.topic(topic))
        partitions = sorted(known) if known else range(settings.partitions)
        tps += [TopicPartition(settings.topic(topic), p) for p in partitions]
    return tps


def _logical(settings: Settings, kafka_topic: str) -> str:
    return kafka_topic.removeprefix(settings.topic_prefix)


async def lag(settings: Settings, index: AuditIndex) -> Lag:
    """The index's lag behind the topics now: end offsets minus the offsets stored."""
    consumer = await started(lambda: new_consumer(settings), "index", 0)
    try:
        return await _lag(consumer, settings, index, await _partitions(consumer, settings), 0)
    finally:
        await consumer.stop()


async def _lag(
    consumer: AIOKafkaConsumer, settings: Settings, index: AuditIndex, tps: list[TopicPartition], read: int
) -> Lag:
    ends = await consumer.end_offsets(tps)
    stored = index.offsets()
    behind = dict.fromkeys(INDEXED_TOPICS, 0)
    for tp, end in ends.items():
        topic = _logical(settings, tp.topic)
        behind[topic] += max(end - stored.get((topic, tp.partition), 0), 0)
    return Lag(behind, read)


async def run(
    settings: Settings,
    index: AuditIndex,
    *,
    follow: bool = False,
    stop: asyncio.Event | None = None,
    progress: Progress | None = None,
    on_lag: Callable[[Lag], None] | None = None,
    lag_every_s: float = 10.0,
) -> Lag:
    """Index the topics: up to their current ends (follow=False), or until `stop` is set.

    A record older than the topic's retention is gone: the index starts at the oldest one left.
    The catch-up to the ends as they were at the start is one `catching_up` block: far behind,
    the store may load in bulk."""
    consumer = await started(lambda: new_consumer(settings), "index", settings.start_wait_s)
    try:
        tps = await _partitions(consumer, settings)
        consumer.assign(tps)
        stored = index.offsets()
        for tp in tps:
            next_offset = stored.get((_logical(settings, tp.topic), tp.partition))
            if next_offset is None:
                await consumer.seek_to_beginning(tp)
            else:
                consumer.seek(tp, next_offset)
        ends = await consumer.end_offsets(tps)
        starts = {tp: await consumer.position(tp) for tp in tps}
        todo = sum(max(ends[tp] - starts[tp], 0) for tp in tps)
        reading = _Reading(
            settings, consumer, index, tps, todo, progress, on_lag if follow else None, lag_every_s
        )
        with index.catching_up(todo):  # up to the ends as they were at the start
            await reading.run(stop, until=ends)
        if follow:
            await reading.run(stop, until=None)
        return await _lag(consumer, settings, index, tps, reading.read)
    finally:
        await consumer.stop()


@dataclass
class _Reading:
    """Batches from the consumer into the index, with progress and lag reports."""

    settings: Settings
    consumer: AIOKafkaConsumer
    index: AuditIndex
    tps: list[TopicPartition]
    todo: int
    progress: Progress | None
    on_lag: Callable[[Lag], None] | None
    lag_every_s: float
    read: int = 0
    last_lag: float = field(default_factory=time.monotonic)

    async def run(self, stop: asyncio.Event | None, *, until: dict[TopicPartition, int] | None) -> None:
        """Until `stop` is set, or (with `until`) every partition reached its end offset there;
        before that end, in the larger transactions of a catch-up."""
        while stop is None or not stop.is_set():
            if until is not None and await self._reached(until):
                return
            records = await self._fetch(BATCH_RECORDS if until is None else CATCH_UP_RECORDS, until)
            if records:
                self.index.add(records)
                self.read += len(records)
                if self.progress is not None:
                    self.progress(self.read, self.todo)
            if self.on_lag is not None and time.monotonic() - self.last_lag >= self.lag_every_s:
                self.on_lag(await _lag(self.consumer, self.settings, self.index, self.tps, self.read))
                self.last_lag = time.monotonic()

    async def _reached(self, until: dict[TopicPartition, int]) -> bool:
        return all([await self.consumer.position(tp) >= until[tp] for tp in self.tps])

    async def _fetch(self, most: int, until: dict[TopicPartition, int] | None) -> list[RawRecord]:
        """The records the consumer has, up to `most` records (and CATCH_UP_BYTES of values);
        while catching up it reads on as long as the topics have more before `until`."""
        records: list[RawRecord] = []
        size = 0
        while len(records) < most and size < CATCH_UP_BYTES:
            batch = await self.consumer.getmany(
                timeout_ms=500, max_records=min(BATCH_RECORDS, most - len(records))
            )
            fetched = [m for messages in batch.values() for m in messages]
            records += [
                RawRecord(_logical(self.settings, m.topic), m.partition, m.offset, m.key, m.value)
                for m in fetched
            ]
            size += sum(len(m.value or b"") for m in fetched)
            if not fetched or until is None or await self._reached(until):
                break
        return records
