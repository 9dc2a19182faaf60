"""The live fold loop: batches of input records in, the pure BatchFold over them, outputs published
and changed records stored, effectively once (the protocol: streams/batch.py).

It only moves data: the intake (streams/intake.py) hands it whole fetches of Faust's consumer,
BatchFold decides, and this loop has each batch written (streams/fold_writes.py), acknowledges it,
restores the partitions it is given and feeds the watermark publisher. streams/app.py wires it into
the Faust app.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import faust
from aiokafka import TopicPartition

from podledger.config import Settings
from podledger.heap import GcPauses, settle_long_lived_heap
from podledger.kafka import new_consumer, read_to_end
from podledger.schemas import decode
from podledger.streams.batch import (
    Batch,
    BatchFold,
    Waiting,
    is_marker,
    marker_key,
    note_waiting,
    stored_record,
)
from podledger.streams.fold_core_live import LiveCore, Started, core_inputs, fold_batch
from podledger.streams.fold_core_wire import SealedInputs, sealed_inputs
from podledger.streams.fold_flight import Flight
from podledger.streams.fold_writes import BatchWriter
from podledger.streams.intake import Delivery, Intake
from podledger.streams.native_replay import find_core
from podledger.streams.outputs import Coordinates
from podledger.streams.record import HoldLimits, PodRecord
from podledger.streams.seal import seal
from podledger.streams.state import FoldState
from podledger.streams.watermark import oldest_held
from podledger.streams.watermark_publisher import WatermarkPublisher
from podledger.types import INGRESS_TOPICS, Topic

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Ahead:
    """A delivery taken early: while the batch before it was sealed, or while the core folded
    that one (`FoldLoop._prepare`). `inputs` and `folded` are what FoldLoop._inputs gives;
    `sealed`, when the core may fold them, the inputs as it takes them, made while partitions had
    been taken away `revocations` times; with `started`, the core folds them meanwhile."""

    delivery: Delivery
    inputs: list[tuple[Coordinates, Any]] = field(default_factory=list)
    folded: dict[int, dict[str, int]] = field(default_factory=dict)
    sealed: SealedInputs | None = None
    revocations: int = 0
    started: Started | None = None


class FoldLoop:
    """The fold's side of the app: its state, its intake and its loop."""

    def __init__(
        self,
        settings: Settings,
        app: faust.App,
        intake: Intake,
        keyring: Any,
        counts: Counter[tuple[str, str]],
    ) -> None:
        self.settings, self.app, self.intake = settings, app, intake
        self.keyring = keyring
        self._by_kafka_name = {settings.topic(name): name.value for name in INGRESS_TOPICS}
        self.state = FoldState(settings)
        self.writer = BatchWriter(settings, self.state, counts)
        self.watermarks = WatermarkPublisher(settings)
        self._recovered: set[int] = set()  # partitions whose journal tail was re-applied
        self._waiting: Waiting = {}  # records holding events for unannounced pods, since when
        self._ahead: _Ahead | None = None  # the next delivery, taken early (see _fold_ahead)
        self._prepared: _Ahead | None = None  # the one after it, made ready (see _prepare)
        self._revocations = 0  # how many times partitions were taken away
        self.flight = Flight(self.writer)  # batches sealed and not stored yet (streams/fold_flight.py)
        self._clock: dict[int, int] = {}  # partition -> newest pod-updates event time folded
        self._heads: dict[tuple[str, int], bytes] = {}  # (topic, partition) -> its hash chain's head
        self.gc_pauses = GcPauses(keep=False)  # the collector's stops of this loop, for /metrics
        self.counts = counts
        self.core = _live_core(settings)
        # Held while a batch is folded: the core is awaited meanwhile, and a revocation must not
        # forget records (or restart the core) in the middle of a batch.
        self._folding = asyncio.Lock()

    async def run(self) -> None:
        """Fold batches of input records, effectively once (the protocol: streams/batch.py).

        Each sealed batch goes on its way in three write stages, overlapping with the batches
        before and after it (streams/fold_flight.py), and the fold goes on folding. Folding reads
        the records of batches not stored yet from memory (what their store then writes). A crash
        loses none of them: the successor re-applies the journal after the stored marker.

        With the native core, the next batch, when fetched already, is handed to the core as soon
        as batch n is folded and sealed, so the core folds n+1 while this loop sends n; and the
        batch after it is taken and made ready for the core meanwhile, so that the core waits for
        this loop only as long as sealing n takes."""
        try:
            with self.gc_pauses:
                await self._run()
        finally:
            self.flight.cancel()
            await self.writer.close()
            if self.core is not None:
                await self.core.close()

    async def _run(self) -> None:
        while True:
            ahead, self._ahead = self._ahead, None
            delivery = ahead.delivery if ahead is not None else await self._take()
            if ahead is None or ahead.started is None:
                new = sorted({r.partition for r in delivery.records} - self._recovered)
                if new:  # restoring publishes: after the batches before, and from stored records only
                    await self.flight.settle()
                    for partition in new:
                        await self._restore(partition)
                    # What the worker holds from now on lives as long as it does: out of the
                    # collector's sight, its full passes stop walking it (~100 ms each, stalling
                    # every batch).
                    settle_long_lived_heap()
            async with self._folding:  # a rebalance's revocation waits for the batch being folded
                batch, folded = await self._fold(delivery, ahead)
                self._seal(batch)  # before the next batch is handed over: its chains go on from here
                self._ahead = await self._fold_ahead()
            held = self._held()
            await self.flight.room()
            self.flight.send(batch, folded, functools.partial(self._stored, delivery, held))
            if self._ahead is not None and self._ahead.started is not None:
                self._prepared = await self._prepare()  # while the core folds the batch handed to it

    def _stored(self, delivery: Delivery, held: dict[int, int]) -> None:
        """A batch's records and markers are stored: its inputs may be committed, its watermarks go on."""
        self.intake.acknowledge(delivery)
        self.watermarks.stored([_Applied.of(r) for r in delivery.newest.values()], held, self._recovered)

    async def _fold_ahead(self) -> _Ahead | None:
        """Hand the next delivery to the core, which folds it while this loop sends the batch
        before it: the one made ready meanwhile (`_prepare`; made again if partitions were taken
        away since), else the next one if it is fetched already. Not when it needs a restore
        first: it is only taken then."""
        if self.core is None:
            return None
        self.flight.reap()
        ahead, self._prepared = self._prepared, None
        if ahead is None or ahead.revocations != self._revocations:
            delivery = ahead.delivery if ahead is not None else await self.intake.take_nowait()
            if delivery is None:
                return None
            ahead = self._made_ready(delivery)
        if ahead.sealed is not None:
            ahead.started = await self.core.start_fold(ahead.sealed, self._clock, self._heads)
        return ahead

    async def _prepare(self) -> _Ahead | None:
        """Take the delivery after the one the core folds, if it is fetched already, and make it
        ready for the core (`_made_ready`), so that once the core answers, handing it over costs
        only the request's first bytes: the core waits for the loop no longer than that."""
        delivery = await self.intake.take_nowait()
        return None if delivery is None else self._made_ready(delivery)

    def _made_ready(self, delivery: Delivery) -> _Ahead:
        """A delivery taken early, with its inputs and the core's form of them (`sealed` None: the
        core is not to fold it: nothing new, a partition to restore first, or a record to
        dead-letter as forged, which the Python fold takes)."""
        revocations = self._revocations
        if {r.partition for r in delivery.records} - self._recovered:
            return _Ahead(delivery, revocations=revocations)
        inputs, folded = self._inputs(delivery)
        handed = core_inputs(inputs, self.keyring, self.settings.partitions) if inputs else None
        sealed = None if handed is None else sealed_inputs(handed)
        return _Ahead(delivery, inputs, folded, sealed, revocations)

    async def _take(self) -> Delivery:
        """The next batch; a failure of a batch on its way is raised meanwhile, not later (it fails
        the newest batch's store too, which waits for it)."""
        self.flight.reap()
        newest = self.flight.newest_store()
        if newest is None:
            return await self.intake.take()
        taking = asyncio.ensure_future(self.intake.take())
        await asyncio.wait({taking, newest}, return_when=asyncio.FIRST_COMPLETED)
        if newest.done() and newest.exception() is not None:
            taking.cancel()
            await newest
        return await taking

    async def _fold(
        self, delivery: Delivery, ahead: _Ahead | None
    ) -> tuple[Batch, dict[int, dict[str, int]]]:
        """Fold a delivery's new inputs: through the native core when there is one and it covers
        them, else (or when it gives up) with the Python fold. `ahead`: the delivery was taken
        early, and maybe handed to the core (`_fold_ahead`)."""
        if ahead is not None and ahead.started is not None:
            inputs, folded, started = ahead.inputs, ahead.folded, ahead.started
        else:
            (inputs, folded), started = self._inputs(delivery), None
        batch, native = await fold_batch(
            self.core, self._batch_fold(), inputs, self._waiting, self._heads, started
        )
        if self.core is not None:
            self.counts[("native_batches" if native else "python_batches", "")] += 1
        return batch, folded

    def _inputs(self, delivery: Delivery) -> tuple[list[tuple[Coordinates, Any]], dict[int, dict[str, int]]]:
        """A delivery's inputs to fold (those not folded and stored already), and per partition the
        newest offset of each topic among them."""
        folded: dict[int, dict[str, int]] = {}  # partition -> {topic: newest offset folded}
        inputs: list[tuple[Coordinates, Any]] = []
        by_kafka_name, is_redelivery = self._by_kafka_name, self.state.is_redelivery
        for record in delivery.records:
            topic, partition, offset = by_kafka_name[record.topic], record.partition, record.offset
            if is_redelivery(partition, topic, offset):
                # Folded and stored already; Faust redelivers from an older commit after a
                # rebalance or a crash. A removed pod has no record to skip it by.
                continue
            offsets = folded.setdefault(partition, {})
            if offset > offsets.get(topic, -1):
                offsets[topic] = offset
            inputs.append((Coordinates(topic, partition, offset, record.timestamp), record))  # stamp in ms
        return inputs, folded

    def _lookup(self, key: bytes) -> PodRecord | None:
        """A pod's record as of the last folded batch: from the newest batch not stored yet that
        changed it (as it is: the fold never changes a record it is given, it makes a new one, so
        that batch's store still writes what it folded), else fold-state."""
        for unstored in reversed(self.flight.unstored):
            if key in unstored.changed:
                return stored_record(unstored.changed[key][1])
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

    async def _restore(self, partition: int) -> None:
        """Load a newly assigned partition's records, then re-apply the journal entries written
        after its last marker (a crash between publishing a batch and storing its records)."""
        pods = await self.state.restore(partition)
        self._heads.update(await self.state.chain_heads(partition))
        for key in self.state.held_keys(partition):
            note_waiting(self._waiting, key, self.state.records.get(key))
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
                for key, (_, pod) in fold.batch.changed.items():
                    note_waiting(self._waiting, key, pod)
                await self.writer.commit(fold.batch, {partition: last}, {partition: reapplied})
                log.warning(
                    "partition %d: re-applied journal offsets %d..%d after a restart", partition, start, last
                )
        finally:
            await consumer.stop()
        if self.core is not None:
            records = self.state.records
            await self.core.load(
                (key, records.get(key)) for key in self.state.keys_of(partition) if not is_marker(key)
            )
        log.info("partition %d: restored %d records", partition, pods)
        self._recovered.add(partition)
        marker = self.state.data.get(marker_key(partition))
        self.watermarks.restored(partition, marker, self._held().get(partition))

    async def on_revoked(self, *args: Any, **kwargs: Any) -> None:
        async with self._folding:
            await self._forget_partitions()

    async def _forget_partitions(self) -> None:
        self._revocations += 1  # what was made ready before is made again (FoldLoop._fold_ahead)
        # Another worker may change these partitions' records before they come back to us.
        for partition in self._recovered:
            self.state.forget(partition)
        if self.core is not None:  # it forgets them too (and what batches in flight made): a new one
            await self.core.close()  # starts with the next batch
        self._recovered.clear()
        self._waiting.clear()
        self._heads.clear()  # another worker extends the chains meanwhile: read again on restore
        self.watermarks.forget()

    def _held(self) -> dict[int, int]:
        """Per partition, the oldest input held for a pod not announced yet (bounds the watermark)."""
        return oldest_held(self._waiting.values())

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


def _live_core(settings: Settings) -> LiveCore | None:
    """The native fold core for this worker's batches, when one is installed and wanted."""
    path = find_core(settings.fold_core)
    if path is None:
        return None
    return LiveCore(path, settings.max_event_bytes, settings.hold_max_events, settings.topic_prefix)
