"""The pods as they were at a past moment, for `/at/<time>/api/v1/...`.

A scan, for now: pod-status-history (every version) and pod-updates (desired pods, and REMOVE,
after which a pod no longer exists) are read from their beginning up to the moment, by Kafka
record timestamp. Its cost grows with the history the topics hold; the audit index (read/index/)
is the place for a faster lookup once it answers "every pod at time T". The newest few answers
are kept, so kubectl's discovery-then-list at one moment scans once.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

from aiokafka import AIOKafkaConsumer, TopicPartition

from podledger.config import Settings
from podledger.kafka import new_consumer, read_to_end
from podledger.read.kubeapi.served import PodDoc, pod_doc
from podledger.schemas import DecodeError, decode, models
from podledger.types import JSONDict, PodOp, Topic

log = logging.getLogger(__name__)
KEPT_MOMENTS = 4
SETTLED_MS = 60_000  # a moment this far back has all its records on the topics: its answer is kept


async def _ends_at(
    consumer: AIOKafkaConsumer, tps: list[TopicPartition], moment_ms: int
) -> dict[TopicPartition, int]:
    """Per partition, the first offset written after `moment_ms` (the end when none is)."""
    after = await consumer.offsets_for_times({tp: moment_ms + 1 for tp in tps})
    ends = await consumer.end_offsets(tps)
    return {tp: ends[tp] if after.get(tp) is None else after[tp].offset for tp in tps}


async def scan_pods_at(settings: Settings, moment_ms: int) -> list[PodDoc]:
    """Every pod that existed at `moment_ms`, at its newest version then."""
    history_tps = [
        TopicPartition(settings.topic(Topic.POD_STATUS_HISTORY), p) for p in range(settings.partitions)
    ]
    updates_tps = [TopicPartition(settings.topic(Topic.POD_UPDATES), p) for p in range(settings.partitions)]
    consumer = new_consumer(settings)
    await consumer.start()
    try:
        consumer.assign(history_tps + updates_tps)
        newest: dict[str, models.VersionedPodStatus] = {}
        history_ends = await _ends_at(consumer, history_tps, moment_ms)
        for tp in history_tps:
            async for record in read_to_end(consumer, tp, end=history_ends[tp]):
                try:
                    vs = decode(Topic.POD_STATUS_HISTORY, record.value)
                except DecodeError as exc:
                    log.debug("skipping history %d@%d: %s", record.partition, record.offset, exc)
                    continue
                if vs.uid not in newest or vs.version > newest[vs.uid].version:
                    newest[vs.uid] = vs
        desired: dict[str, JSONDict] = {}
        removed: set[str] = set()
        updates_ends = await _ends_at(consumer, updates_tps, moment_ms)
        for tp in updates_tps:
            async for record in read_to_end(consumer, tp, end=updates_ends[tp]):
                try:
                    update = decode(Topic.POD_UPDATES, record.value)
                except DecodeError:
                    continue
                if update.op == PodOp.REMOVE:
                    removed.add(update.uid)
                else:
                    desired[update.uid] = update.pod
    finally:
        await consumer.stop()
    return [pod_doc(vs, desired.get(uid), "") for uid, vs in newest.items() if uid not in removed]


class PastPods:
    """scan_pods_at with the newest few answers kept."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.kept: OrderedDict[int, list[PodDoc]] = OrderedDict()

    async def at(self, moment_ms: int, now_ms: int) -> list[PodDoc]:
        if moment_ms > now_ms - SETTLED_MS:
            return await scan_pods_at(self.settings, moment_ms)
        if moment_ms not in self.kept:
            self.kept[moment_ms] = await scan_pods_at(self.settings, moment_ms)
            while len(self.kept) > KEPT_MOMENTS:
                self.kept.popitem(last=False)
        self.kept.move_to_end(moment_ms)
        return self.kept[moment_ms]
