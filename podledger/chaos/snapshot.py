"""Every topic chaos checks, read once at one moment."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from aiokafka import TopicPartition

from podledger.chaos import checks
from podledger.config import Settings
from podledger.kafka import new_consumer
from podledger.schemas import decode, models
from podledger.types import INGRESS_TOPICS, Topic


@dataclass
class Snapshot:
    """Every topic the checks read, as it was at one moment."""

    ingress: list[tuple[checks.Coord, str, int]] = field(default_factory=list)  # (coords, uid, ts_ms)
    journal: list[models.JournalEntry] = field(default_factory=list)
    journal_values: list[bytes] = field(default_factory=list)
    dead_letters: list[models.DeadLetter] = field(default_factory=list)
    history: list[tuple[models.VersionedPodStatus, int]] = field(default_factory=list)  # (value, ts_ms)
    fold_state: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    ends: dict[str, int] = field(default_factory=dict)  # logical topic -> records read

    def versions(self) -> list[models.VersionedPodStatus]:
        return [vs for vs, _ in self.history]

    def accounted(self) -> set[checks.Coord]:
        held = checks.held_coordinates(self.fold_state)
        return checks.accounted_coordinates(self.journal, self.dead_letters, held)

    def lost(self) -> list[checks.Coord]:
        return checks.lost_inputs((c for c, _, _ in self.ingress), self.accounted())


SNAPSHOT_TOPICS = (
    *INGRESS_TOPICS,
    Topic.JOURNAL,
    Topic.DEAD_LETTER,
    Topic.POD_STATUS_HISTORY,
    Topic.FOLD_STATE,
)


async def read_topics(
    settings: Settings, topics: Iterable[str], timeout: float = 300.0
) -> dict[str, list[Any]]:
    """Every record of `topics` (logical names) up to their end offsets as of now, read at once:
    {topic: records, partition by partition, in offset order}."""
    names = {settings.topic(t): str(t) for t in topics}
    tps = [TopicPartition(name, p) for name in names for p in range(settings.partitions)]
    got: dict[TopicPartition, list[Any]] = {tp: [] for tp in tps}
    consumer = new_consumer(settings)
    await consumer.start()
    try:
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        await consumer.seek_to_beginning(*tps)
        async with asyncio.timeout(timeout):
            pending = set(tps)
            while pending:
                for tp in list(pending):
                    if await consumer.position(tp) >= ends[tp]:
                        pending.discard(tp)
                if not pending:
                    break
                batch = await consumer.getmany(timeout_ms=1000, max_records=50_000)
                for tp, records in batch.items():
                    got[tp] += [r for r in records if r.offset < ends[tp]]
    finally:
        await consumer.stop()
    out: dict[str, list[Any]] = {t: [] for t in names.values()}
    for tp in tps:
        out[names[tp.topic]] += got[tp]
    return out


async def read_snapshot(settings: Settings) -> Snapshot:
    snap = Snapshot()
    records = await read_topics(settings, SNAPSHOT_TOPICS)
    for topic, found in records.items():
        snap.ends[topic] = len(found)
    for topic in INGRESS_TOPICS:
        snap.ingress += [
            ((str(topic), m.partition, m.offset), (m.key or b"").decode(), m.timestamp)
            for m in records[topic]
        ]
    for m in records[Topic.JOURNAL]:
        snap.journal.append(decode(Topic.JOURNAL, m.value))
        snap.journal_values.append(m.value)
    snap.dead_letters = [decode(Topic.DEAD_LETTER, m.value) for m in records[Topic.DEAD_LETTER]]
    snap.history = [
        (decode(Topic.POD_STATUS_HISTORY, m.value), m.timestamp) for m in records[Topic.POD_STATUS_HISTORY]
    ]
    snap.fold_state = [(m.key, m.value) for m in records[Topic.FOLD_STATE]]
    return snap
