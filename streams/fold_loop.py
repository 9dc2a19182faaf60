"""The live fold loop: batches of input records in, the pure BatchFold over them, outputs published
and changed records stored, effectively once (the protocol: streams/batch.py).

It only moves data: the intake (streams/intake.py) hands it whole fetches of Faust's consumer,
BatchFold decides, and this loop publishes, stores, acknowledges, restores partitions it is given
and feeds the watermark publisher. streams/app.py wires it into the Faust app.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

import faust
import orjson
from aiokafka import AIOKafkaProducer, TopicPartition

from podledger.config import Settings
from podledger.kafka import DeliveryHealth, OutRecord, deliver_batched, new_consumer, read_to_end
from podledger.schemas import decode
from podledger.streams.batch import Batch, BatchFold, marker_key, seal
from podledger.streams.fold import Coordinates, HoldLimits, Output, PodRecord
from podledger.streams.intake import Delivery, Intake
from podledger.streams.state import FoldState
from podledger.streams.topics import ALL_TOPICS
from podledger.streams.watermark import oldest_held
from podledger.streams.watermark_publisher import WatermarkPublisher
from podledger.types import INGRESS_TOPICS, Topic

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OutputProducer:
    """The app's idempotent output producer as the loop uses it: get it, drop it after a failed
    write (deliver_batched makes a new one), and the health its deliveries report to."""

    producer: Callable[[], Awaitable[AIOKafkaProducer]]
    reset: Callable[[], Awaitable[None]]
    health: DeliveryHealth


class FoldLoop:
    """The fold's side of the app: its state, its intake and its loop."""

    def __init__(
        self,
        settings: Settings,
        app: faust.App,
        intake: Intake,
        output: OutputProducer,
        keyring: Any,
        counts: Counter[tuple[str, str]],
    ) -> None:
        self.settings, self.app, self.intake, self.output = settings, app, intake, output
        self.keyring = keyring
        self.counts = counts  # events folded, versions, dead letters by reason: the app's /metrics
        self._by_kafka_name = {settings.topic(name): name.value for name in INGRESS_TOPICS}
        self._names = {spec.name: settings.topic(spec.name) for spec in ALL_TOPICS}
        self.state = FoldState(settings)
        self.watermarks = WatermarkPublisher(settings)
        self._recovered: set[int] = set()  # partitions whose journal tail was re-applied
        self._waiting: set[bytes] = set()  # records holding events for unannounced pods
        self._holding: dict[bytes, dict[int, int]] = {}  # those records' oldest held stamp per partition
        self._unstored: Batch | None = None  # the batch being published and stored (see run)
        self._clock: dict[int, int] = {}  # partition -> newest pod-updates event time folded
        self._heads: dict[tuple[str, int], bytes] = {}  # (topic, partition) -> its hash chain's head

    async def run(self) -> None:
        """Fold batches of input records, effectively once (the protocol: streams/batch.py).

        Pipelined by one batch: batch n is folded while batch n-1 is published and stored, and
        published only once n-1 is stored, so the broker sees exactly the writes, in exactly the
        order, of one batch after the other. Folding n reads n-1's records from memory (what the
        store then writes), and n's offsets are acknowledged to Faust only after n is stored."""
        storing: asyncio.Task[None] | None = None
        try:
            while True:
                delivery = await self._take(storing)
                new = sorted({r.partition for r in delivery.records} - self._recovered)
                if new:  # restoring publishes: after the batch before, and from stored records only
                    await self._settle(storing)
                    storing = None
                    for partition in new:
                        await self._restore(partition)
                fold, folded = self._fold(delivery)
                self._seal(fold.batch)
                held = self._held()
                await self._settle(storing)
                self._unstored = fold.batch
                storing = asyncio.create_task(self._publish(fold.batch, folded, delivery, held))
        finally:
            if storing is not None and not storing.done():
                storing.cancel()  # not stored, not acknowledged: folded again by whoever resumes
            await self.output.reset()

    async def _take(self, storing: asyncio.Task[None] | None) -> Delivery:
        """The next batch; a failure of the batch being stored is raised meanwhile, not later."""
        if storing is None or storing.done():
            await self._settle(storing)
            return await self.intake.take()
        taking = asyncio.ensure_future(self.intake.take())
        await asyncio.wait({taking, storing}, return_when=asyncio.FIRST_COMPLETED)
        if storing.done() and storing.exception() is not None:
            taking.cancel()
            await self._settle(storing)
        return await taking

    @staticmethod
    async def _settle(storing: asyncio.Task[None] | None) -> None:
        if storing is not None:
            await storing

    def _fold(self, delivery: Delivery) -> tuple[BatchFold, dict[int, dict[str, int]]]:
        fold = self._batch_fold()
        folded: dict[int, dict[str, int]] = {}  # partition -> {topic: newest offset folded}
        by_kafka_name, is_redelivery, add = self._by_kafka_name, self.state.is_redelivery, fold.add_message
        for record in delivery.records:
            topic, partition, offset = by_kafka_name[record.topic], record.partition, record.offset
            if is_redelivery(partition, topic, offset):
                # Folded and stored already; Faust redelivers from an older commit after a
                # rebalance or a crash. A removed pod has no record to skip it by.
                continue
            offsets = folded.setdefault(partition, {})
            if offset > offsets.get(topic, -1):
                offsets[topic] = offset
            at = Coordinates(topic, partition, offset, record.timestamp)  # the broker's stamp, in ms
            add(at, record.key, record.value, record.headers or ())
        fold.expire_held(self._waiting)
        self._note_held(fold.batch)
        return fold, folded

    def _note_held(self, batch: Batch) -> None:
        """Keep the oldest held input of every record holding some, from the records a batch changed."""
        for key, (_, pod) in batch.changed.items():
            if pod and pod.get("held"):
                self._waiting.add(key)
                self._holding[key] = oldest_held([pod])
            else:
                self._holding.pop(key, None)

    async def _publish(
        self, batch: Batch, folded: dict[int, dict[str, int]], delivery: Delivery, held: dict[int, int]
    ) -> None:
        await self._commit(batch, inputs=folded)
        if self._unstored is batch:
            self._unstored = None
        self.intake.acknowledge(delivery)
        self.watermarks.stored([_Applied.of(r) for r in delivery.newest.values()], held, self._recovered)

    def _lookup(self, key: bytes) -> PodRecord | None:
        """A pod's record as of the last folded batch: the batch being stored, else fold-state."""
        unstored = self._unstored
        if unstored is not None and key in unstored.changed:
            record = unstored.changed[key][1]  # copied: that batch's store is writing it
            return None if record is None else orjson.loads(orjson.dumps(record))
        return self.state.get(key)

    def _batch_fold(self) -> BatchFold:
        limits = HoldLimits(self.settings.hold_max_events, self.settings.hold_max_ms)
        return BatchFold(
            self._lookup,
            limits,
            self.settings.max_event_bytes,
            self._clock,
            keyring=self.keyring,
            partitions=self.settings.partitions,
        )

    def _seal(self, batch: Batch) -> None:
        """Step 1's end, in batch order: the outputs' headers (before the first send: resends
        repeat them) and the clock held events expire by."""
        seal(batch, self._heads, self.settings.topic_prefix)
        self._clock.update(batch.newest)

    async def _commit(
        self,
        batch: Batch,
        journal_end: dict[int, int] | None = None,
        inputs: dict[int, dict[str, int]] | None = None,
        reapplied: dict[int, dict[str, list[int]]] | None = None,
    ) -> None:
        """Steps 2-4 of the protocol for a sealed batch: journal, then the other outputs, then the
        records, then each partition's marker (its last journal offset and, from `inputs`, the
        newest input offsets folded per topic)."""
        journal_end = dict(journal_end or {})
        offsets = await self._deliver(batch.journal)
        for (partition, _), offset in zip(batch.journal, offsets, strict=True):
            journal_end[partition] = max(journal_end.get(partition, -1), offset)
        await self._deliver(batch.outputs)
        letters = Counter(out.value.reason for _, out in batch.outputs if out.topic == Topic.DEAD_LETTER)
        self.counts[("events", "")] += len(batch.journal)
        self.counts[("versions", "")] += sum(
            1 for _, o in batch.outputs if o.topic == Topic.POD_STATUS_HISTORY
        )
        for reason, n in letters.items():
            self.counts[("dead_letters", reason)] += n
        if letters:
            log.warning(
                "dead-lettered %s", ", ".join(f"{n} {reason}" for reason, n in sorted(letters.items()))
            )
        inputs = inputs or {}
        await self._store(
            list(batch.changed.items()),
            [
                (p, journal_end.get(p), inputs.get(p, {}), (reapplied or {}).get(p))
                for p in sorted(journal_end.keys() | inputs.keys())
            ],
        )

    async def _store(
        self,
        records: list[tuple[bytes, tuple[int, PodRecord | None]]],
        markers: list[tuple[int, int | None, dict[str, int], dict[str, list[int]] | None]],
    ) -> None:
        """Step 4: write the changed records, then the markers, and wait for every acknowledgement
        (before Faust may commit these input offsets: nothing held is lost). Writes that fail are
        sent again, with everything after them on their partition, until the broker takes them."""
        writes = _Writes()
        producer = cast(AIOKafkaProducer, writes)  # FoldState writes through it: one batch per partition
        for key, (partition, record) in records:
            await self.state.put(producer, key, partition, record)
        for partition, journal_offset, folded, reapplied in markers:
            await self.state.put_marker(producer, partition, journal_offset, folded, reapplied)
        await deliver_batched(writes.records, self.output.producer, self.output.health, self.output.reset)

    async def _deliver(self, outputs: list[tuple[int, Output]]) -> list[int]:
        """Publish outputs (co-partitioning: each on the partition number of its input) until the
        broker acknowledges them all; returns their offsets. They go through a plain aiokafka
        producer, as whole record batches: Faust's send path would hold them as attachments until
        the offset commit, and costs several times more per message."""
        names = self._names
        return await deliver_batched(
            [
                OutRecord(names[out.topic], partition, out.key.encode(), out.wire_value(), out.headers)
                for partition, out in outputs
            ],
            self.output.producer,
            self.output.health,
            self.output.reset,
        )

    async def _restore(self, partition: int) -> None:
        """Load a newly assigned partition's records, then re-apply the journal entries written
        after its last marker (a crash between publishing a batch and storing its records)."""
        pods = await self.state.restore(partition)
        self._heads.update(await self.state.chain_heads(partition))
        for key in self.state.held_keys(partition):
            self._waiting.add(key)
            self._holding[key] = oldest_held([self.state.get(key)])
        marker = self.state.journal_marker(partition)
        start = 0 if marker is None else marker + 1
        consumer = new_consumer(self.settings)
        tp = TopicPartition(self.settings.topic(Topic.JOURNAL), partition)
        await consumer.start()
        try:
            consumer.assign([tp])
            fold = self._batch_fold()
            last = start - 1
            # The re-applied entries' inputs, which Faust will redeliver: skipped one by one (not
            # up to the newest), as the batch's held inputs at lower offsets were never journaled.
            reapplied: dict[str, list[int]] = {}
            async for message in read_to_end(consumer, tp, start):
                entry = decode(Topic.JOURNAL, message.value)
                fold.add_journal_entry(partition, entry, message.headers)
                reapplied.setdefault(entry.topic, []).append(entry.offset)
                last = message.offset
            if last >= start:
                fold.batch.journal.clear()
                self._seal(fold.batch)
                self._note_held(fold.batch)
                await self._commit(
                    fold.batch, journal_end={partition: last}, reapplied={partition: reapplied}
                )
                log.warning(
                    "partition %d: re-applied journal offsets %d..%d after a restart", partition, start, last
                )
        finally:
            await consumer.stop()
        log.info("partition %d: restored %d records", partition, pods)
        self._recovered.add(partition)
        marker = self.state.data.get(marker_key(partition))
        self.watermarks.restored(partition, marker, self._held().get(partition))

    async def on_revoked(self, *args: Any, **kwargs: Any) -> None:
        # Another worker may change these partitions' records before they come back to us.
        for partition in self._recovered:
            self.state.forget(partition)
        self._recovered.clear()
        self._waiting.clear()
        self._holding.clear()
        self._heads.clear()  # another worker extends the chains meanwhile: read again on restore
        self.watermarks.forget()

    def _held(self) -> dict[int, int]:
        """Per partition, the oldest input held for a pod not announced yet (bounds the watermark)."""
        out: dict[int, int] = {}
        for held in self._holding.values():
            for partition, stamp in held.items():
                out[partition] = min(out.get(partition, stamp), stamp)
        return out

    async def publish_watermarks(self) -> None:
        """Every PODLEDGER_WATERMARK_MS, the watermark of each owned partition (streams/watermark.py)."""

        def owned() -> set[int]:
            try:
                assigned = self.app.consumer.assignment()
            except Exception:  # not started, or between assignments
                return set()
            return {tp.partition for tp in assigned if tp.topic in self._by_kafka_name}

        await self.watermarks.run(owned)


class _Applied(NamedTuple):
    """An input record as the watermark publisher reads it (Faust's message shape: seconds)."""

    topic: str
    partition: int
    offset: int
    timestamp: float
    timestamp_type: int

    @classmethod
    def of(cls, record: Any) -> _Applied:
        return cls(
            record.topic, record.partition, record.offset, record.timestamp / 1000, record.timestamp_type
        )


class _Writes:
    """Collects what FoldState would send, for deliver_batched (FoldState keeps the values)."""

    def __init__(self) -> None:
        self.records: list[OutRecord] = []

    async def send(self, topic: str, *, key: bytes, value: bytes | None, partition: int) -> None:
        self.records.append(OutRecord(topic, partition, key, value))
