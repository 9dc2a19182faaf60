"""The pods as they were at a past moment, for `/at/<time>/api/v1/...`, and whether that answer
is complete.

A scan, for now: pod-status-history (every version) is read to its end and each pod's newest
version caused by an input stamped at or before the moment is kept (the version's `ts_ms`, the
broker's stamp of its input); pod-updates (desired pods, and REMOVE, after which a pod no longer
exists) is read from its beginning up to the moment, by the same stamps. The answer is complete
when the fold's watermark, read before the scan, has reached the moment: every input up to it
had then been applied, so no version it causes can appear later. Its cost grows with the history
the topics hold; the audit index (read/index/) is the place for a faster lookup once it answers
"every pod at time T". The newest few complete answers are kept, so kubectl's
discovery-then-list at one moment scans once.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition

from podledger.config import Settings
from podledger.kafka import new_consumer, read_to_end
from podledger.read.client.watermark import partition_watermarks, partitions_of
from podledger.read.kubeapi.served import PodDoc, pod_doc
from podledger.schemas import DecodeError, decode, models
from podledger.streams.watermark import combine
from podledger.types import JSONDict, PodOp, Topic

log = logging.getLogger(__name__)
KEPT_MOMENTS = 4


async def _ends_at(
    consumer: AIOKafkaConsumer, tps: list[TopicPartition], moment_ms: int
) -> dict[TopicPartition, int]:
    """Per partition, the first offset written after `moment_ms` (the end when none is). The end
    is read first: a record appended between the two reads is then beyond it, not inside."""
    ends = await consumer.end_offsets(tps)
    after = await consumer.offsets_for_times({tp: moment_ms + 1 for tp in tps})
    return {tp: ends[tp] if after.get(tp) is None else min(ends[tp], after[tp].offset) for tp in tps}


@dataclass(frozen=True, slots=True)
class PastAnswer:
    docs: list[PodDoc]
    watermark_ms: int | None  # the fold's watermark before the scan (None: not every partition has one)
    moment_ms: int

    @property
    def complete(self) -> bool:
        """Every input up to the moment had been applied: no later version changes this answer."""
        return self.watermark_ms is not None and self.watermark_ms >= self.moment_ms


async def scan_pods_at(settings: Settings, moment_ms: int) -> list[PodDoc]:
    """Every pod that existed at `moment_ms`, at its newest version then."""
    history, updates = settings.topic(Topic.POD_STATUS_HISTORY), settings.topic(Topic.POD_UPDATES)
    partitions = await partitions_of(settings, [history, updates])
    history_tps = [TopicPartition(history, p) for p in partitions[history]]
    updates_tps = [TopicPartition(updates, p) for p in partitions[updates]]
    if not history_tps:  # no fold has created its topics yet: no pod has a version
        return []
    consumer = new_consumer(settings)
    await consumer.start()
    try:
        consumer.assign(history_tps + updates_tps)
        newest: dict[str, models.VersionedPodStatus] = {}
        # A version caused by an input up to the moment may be written long after it (a fold that
        # lagged): the whole topic is read, and versions are kept by their input's stamp.
        history_ends = await consumer.end_offsets(history_tps)
        for tp in history_tps:
            async for record in read_to_end(consumer, tp, end=history_ends[tp]):
                try:
                    vs = decode(Topic.POD_STATUS_HISTORY, record.value)
                except DecodeError as exc:
                    log.debug("skipping history %d@%d: %s", record.partition, record.offset, exc)
                    continue
                if vs.ts_ms <= moment_ms and (vs.uid not in newest or vs.version > newest[vs.uid].version):
                    newest[vs.uid] = vs
        desired: dict[str, JSONDict] = {}
        removed: set[str] = set()
        updates_ends = await _ends_at(consumer, updates_tps, moment_ms)
        for tp in updates_tps:
            async for record in read_to_end(consumer, tp, end=updates_ends[tp]):
                if record.timestamp > moment_ms:  # the broker's stamp: after the moment
                    continue
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
    """scan_pods_at with the watermark, and the newest few complete answers kept."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.kept: OrderedDict[int, PastAnswer] = OrderedDict()

    async def at(self, moment_ms: int) -> PastAnswer:
        if moment_ms in self.kept:
            self.kept.move_to_end(moment_ms)
            return self.kept[moment_ms]
        # The watermark first: what it covers is on the topics before the scan starts.
        marks = await partition_watermarks(self.settings, wait_s=0)
        watermark_ms = combine(marks, marks.keys())
        answer = PastAnswer(await scan_pods_at(self.settings, moment_ms), watermark_ms, moment_ms)
        if answer.complete:
            self.kept[moment_ms] = answer
            while len(self.kept) > KEPT_MOMENTS:
                self.kept.popitem(last=False)
        return answer
