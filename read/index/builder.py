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
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition

from podledger.config import Settings
from podledger.kafka import new_consumer, started
from podledger.read.index.base import INDEXED_TOPICS, AuditIndex, RawRecord

log = logging.getLogger(__name__)

BATCH_RECORDS = 20_000  # records per transaction: fewer, larger commits rewrite the pod indexes less


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

    A record older than the topic's retention is gone: the index starts at the oldest one left."""
    consumer = await started(lambda: new_consumer(settings), "index", settings.start_wait_s)
    read = 0
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
        last_lag = time.monotonic()
        while stop is None or not stop.is_set():
            if not follow and all([await consumer.position(tp) >= ends[tp] for tp in tps]):
                break
            batch = await consumer.getmany(timeout_ms=500, max_records=BATCH_RECORDS)
            records = [
                RawRecord(_logical(settings, m.topic), m.partition, m.offset, m.key, m.value)
                for messages in batch.values()
                for m in messages
            ]
            if records:
                index.add(records)
                read += len(records)
                if progress is not None:
                    progress(read, todo)
            if follow and on_lag is not None and time.monotonic() - last_lag >= lag_every_s:
                on_lag(await _lag(consumer, settings, index, tps, read))
                last_lag = time.monotonic()
        return await _lag(consumer, settings, index, tps, read)
    finally:
        await consumer.stop()
