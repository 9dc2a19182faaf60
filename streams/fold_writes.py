"""The live fold's writes of a sealed batch, in three stages: its journal entries, then its
versions and dead letters, then its changed records and markers on fold-state (the protocol:
streams/batch.py). streams/fold_flight.py runs the stages of consecutive batches overlapped.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import replace
from typing import cast

from aiokafka import AIOKafkaProducer

from podledger.config import Settings
from podledger.delivery import OutRecord, ProducerSlot, deliver_batched
from podledger.record_batch import RecordBatch
from podledger.streams.batch import Batch
from podledger.streams.outputs import Output
from podledger.streams.state import FoldState
from podledger.streams.topics import ALL_TOPICS
from podledger.types import Topic

log = logging.getLogger(__name__)


class BatchWriter:
    """Delivers a batch's writes, stage by stage, each until the broker acknowledges it."""

    def __init__(self, settings: Settings, state: FoldState, counts: Counter[tuple[str, str]]) -> None:
        self.state = state
        self.counts = counts  # events folded, versions, dead letters by reason: the app's /metrics
        self._names = {spec.name: settings.topic(spec.name) for spec in ALL_TOPICS}
        # A producer per stage: a stage that fails makes a new producer of its own (see
        # podledger.delivery.deliver), which must not cut off another stage's writes in flight.
        self.journal_out = ProducerSlot(settings)
        self.versions_out = ProducerSlot(settings)
        self.state_out = ProducerSlot(settings)
        self.slots = (self.journal_out, self.versions_out, self.state_out)

    def healthy(self) -> tuple[bool, str]:
        """Unhealthy while any stage has failed to deliver for UNHEALTHY_AFTER_S."""
        for slot in self.slots:
            ok, why = slot.health.healthy()
            if not ok:
                return ok, why
        return True, "ok"

    async def close(self) -> None:
        for slot in self.slots:
            await slot.reset()

    async def commit(
        self,
        batch: Batch,
        journal_end: dict[int, int],
        reapplied: dict[int, dict[str, list[int]]],
    ) -> None:
        """The three stages of a sealed batch one after the other (for a restore's re-applied batch)."""
        ends = await self.journal(batch)
        await self.outputs(batch)
        await self.store(batch, {**journal_end, **ends}, {}, reapplied)

    async def journal(self, batch: Batch) -> dict[int, int]:
        """Stage 1: deliver the journal entries; returns each partition's last journal offset."""
        journal_end: dict[int, int] = {}
        built = [b for b in batch.built if b.topic == Topic.JOURNAL]
        offsets = await self._deliver(built, batch.journal, self.journal_out)
        partitions = [b.partition for b in built] + [partition for partition, _ in batch.journal]
        for partition, offset in zip(partitions, offsets, strict=True):
            journal_end[partition] = max(journal_end.get(partition, -1), offset)
        return journal_end

    async def outputs(self, batch: Batch) -> None:
        """Stage 2: deliver the versions and dead letters (each after its journal entry)."""
        built = [b for b in batch.built if b.topic != Topic.JOURNAL]
        await self._deliver(built, batch.outputs, self.versions_out)
        letters = Counter(out.value.reason for _, out in batch.outputs if out.topic == Topic.DEAD_LETTER)
        self.counts[("events", "")] += batch.built_events + len(batch.journal)
        self.counts[("versions", "")] += batch.built_versions + sum(
            1 for _, o in batch.outputs if o.topic == Topic.POD_STATUS_HISTORY
        )
        for reason, n in letters.items():
            self.counts[("dead_letters", reason)] += n
        if letters:
            log.warning(
                "dead-lettered %s", ", ".join(f"{n} {reason}" for reason, n in sorted(letters.items()))
            )

    async def store(
        self,
        batch: Batch,
        journal_end: dict[int, int],
        inputs: dict[int, dict[str, int]],
        reapplied: dict[int, dict[str, list[int]]] | None = None,
    ) -> None:
        """Stage 3: write the changed records, then each partition's marker (its last journal
        offset and, from `inputs`, the newest input offsets folded per topic), and wait for every
        acknowledgement (before Faust may commit these input offsets: nothing held is lost). Writes
        that fail are sent again, with everything after them on their partition, until taken."""
        writes = _Writes()
        producer = cast(AIOKafkaProducer, writes)  # FoldState writes through it: one batch per partition
        for key, (partition, record) in batch.changed.items():
            await self.state.put(producer, key, partition, record)
        for partition in sorted(journal_end.keys() | inputs.keys()):
            await self.state.put_marker(
                producer,
                partition,
                journal_end.get(partition),
                inputs.get(partition, {}),
                (reapplied or {}).get(partition),
            )
        slot = self.state_out
        await deliver_batched(writes.records, slot.get, slot.health, slot.reset)

    async def _deliver(
        self, built: list[RecordBatch], outputs: list[tuple[int, Output]], slot: ProducerSlot
    ) -> list[int]:
        """Publish the core's record batches, then outputs (co-partitioning: each on the partition
        number of its input), until the broker acknowledges them all; returns their offsets (a
        record batch's: its last record's). They go through a plain aiokafka producer, as whole
        record batches: Faust's send path would hold them as attachments until the offset commit,
        and costs several times more per message."""
        names = self._names
        items: list[OutRecord | RecordBatch] = [replace(b, topic=names[b.topic]) for b in built]
        items += [
            OutRecord(names[out.topic], partition, out.key.encode(), out.wire_value(), out.headers)
            for partition, out in outputs
        ]
        return await deliver_batched(items, slot.get, slot.health, slot.reset)


class _Writes:
    """Collects what FoldState would send, for deliver_batched (FoldState keeps the values)."""

    def __init__(self) -> None:
        self.records: list[OutRecord] = []

    async def send(self, topic: str, *, key: bytes, value: bytes | None, partition: int) -> None:
        self.records.append(OutRecord(topic, partition, key, value))
