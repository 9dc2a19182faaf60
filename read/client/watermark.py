"""How far the fold has applied its inputs: the watermark on `pod-status-watermarks`
(docs/guarantees.md, "Completeness: the watermark").

    t_ms = await watermark(settings)   # every input stamped at or before t_ms has been applied

Each partition's watermark is the last record of its partition of the topic (its key is the
partition number), so a read costs one record per partition.
"""

from __future__ import annotations

import logging

from aiokafka import TopicPartition

from podledger.config import Settings
from podledger.kafka import new_consumer, read_to_end, started
from podledger.partitioner import partition_for_node
from podledger.schemas import DecodeError, decode, models
from podledger.streams.watermark import combine
from podledger.types import Topic

log = logging.getLogger(__name__)


async def partition_watermarks(
    settings: Settings, wait_s: float | None = None
) -> dict[int, models.Watermark | None]:
    """The newest watermark of every partition (None: the fold published none yet). An unreachable
    broker is waited for `wait_s` (default PODLEDGER_START_WAIT_S)."""
    topic = settings.topic(Topic.POD_STATUS_WATERMARKS)
    tps = [TopicPartition(topic, p) for p in range(settings.partitions)]
    wait = settings.start_wait_s if wait_s is None else wait_s
    consumer = await started(lambda: new_consumer(settings), "watermark reader", wait)
    out: dict[int, models.Watermark | None] = {}
    try:
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
        return combine(marks, range(settings.partitions))
    return combine(marks, [partition_for_node(node, settings.partitions)])
