"""How far the fold has applied its inputs: the watermark on `pod-status-watermarks`
(docs/guarantees.md, "Completeness: the watermark").

    t_ms = await watermark(settings)   # every input stamped at or before t_ms has been applied

Each partition's watermark is the last record of its partition of the topic (its key is the
partition number), so a read costs one record per partition. The partitions are those the topic has,
as the broker's metadata says (PODLEDGER_PARTITIONS only while it does not exist): a client
configured with fewer would otherwise combine too few and claim too much.
"""

from __future__ import annotations

import logging

from aiokafka import TopicPartition

from podledger.config import Settings
from podledger.kafka import new_consumer, read_to_end, started
from podledger.partitioner import partition_for_node
from podledger.schemas import DecodeError, decode, models
from podledger.streams.topic_state import topic_partitions
from podledger.streams.topics import admin_client
from podledger.streams.watermark import combine
from podledger.types import Topic

log = logging.getLogger(__name__)


async def partitions_of(settings: Settings, topics: list[str]) -> dict[str, range]:
    """The partitions each topic has, by the broker's metadata (none while it does not exist)."""
    admin = admin_client(settings, "podledger-reader")
    try:
        await admin.start()
        counts = await topic_partitions(admin, topics)
    finally:
        await admin.close()
    return {topic: range(counts.get(topic, 0)) for topic in topics}


async def partition_watermarks(
    settings: Settings, wait_s: float | None = None
) -> dict[int, models.Watermark | None]:
    """The newest watermark of every partition of the topic (None: the fold published none yet).
    An unreachable broker is waited for `wait_s` (default PODLEDGER_START_WAIT_S)."""
    topic = settings.topic(Topic.POD_STATUS_WATERMARKS)
    wait = settings.start_wait_s if wait_s is None else wait_s
    consumer = await started(lambda: new_consumer(settings), "watermark reader", wait)
    out: dict[int, models.Watermark | None] = {}
    try:
        partitions = (await partitions_of(settings, [topic]))[topic]
        if not partitions:  # no fold has created it yet: no partition has a watermark
            return dict.fromkeys(range(settings.partitions))
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        for tp in tps:
            out[tp.partition] = None
            async for record in read_to_end(consumer, tp, max(ends[tp] - 1, 0), ends[tp]):
                try:
                    out[tp.partition] = decode(Topic.POD_STATUS_WATERMARKS, record.value)
                except DecodeError as exc:
                    log.warning("skipping watermark %d@%d: %s", record.partition, record.offset, exc)
    finally:
        await consumer.stop()
    return out


async def watermark(settings: Settings, *, node: str | None = None) -> int | None:
    """The time (ms since the epoch, the broker's clock) up to which every input has been applied,
    over every partition, or only `node`'s; None while a partition has no watermark yet."""
    marks = await partition_watermarks(settings)
    if node is None:
        return combine(marks, marks.keys())
    return combine(marks, [partition_for_node(node, len(marks))])
