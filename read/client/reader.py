"""The reading edge of the client: pod-status, joined with the desired pods of pod-updates.

Plain aiokafka consumers with partitions assigned by hand (a list-then-watch reader needs every
partition it filters on, so no consumer group splits them). The pod-updates table is caught up
after each pod-status batch is fetched and before it is handed on: a pod's desired state is on
pod-updates before the fold can publish a version of it, so every version meets its desired pod.
That catch-up asks for pod-updates' end offsets on a third, idle consumer: on the connection of a
consumer that is long-polling an idle topic, the broker answers only when the poll ends, which
put a fixed delay of fetch_max_wait_ms on every batch. A broker that goes away is waited for; the
consumers keep their positions and carry on. What the reader keeps of each value is its
`Decoding`: the client's is the validated models, serve's only the fields a Pod is made of.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, TypeVar

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.errors import KafkaError

from podledger.config import Settings
from podledger.kafka import new_consumer, started
from podledger.read.client.position import Position
from podledger.schemas import DecodeError, decode, models
from podledger.types import JSONDict, PodOp, Topic

log = logging.getLogger(__name__)

T = TypeVar("T")
S = TypeVar("S")  # what a reader keeps of a pod-status value
D = TypeVar("D")  # what a reader keeps of a desired pod
MAX_RECORDS = 10_000
# A load hands records on decoded this many at a time: the parsed values of whole fetches would be
# most of the peak memory of loading a large topic.
DECODED_BATCH = 1_000
RETRY_MAX_S = 5.0


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class Decoding(Generic[S, D]):
    """How a reader reads values: a pod-status value as (uid, status), a pod-updates value as
    (uid, desired pod; None for a REMOVE). Both raise DecodeError for a value they cannot read."""

    status: Callable[[bytes], tuple[str, S]]
    update: Callable[[bytes], tuple[str, D | None]]


def _status_model(value: bytes) -> tuple[str, models.VersionedPodStatus]:
    vs = decode(Topic.POD_STATUS, value)
    return vs.uid, vs


def _update_model(value: bytes) -> tuple[str, JSONDict | None]:
    update = decode(Topic.POD_UPDATES, value)
    return update.uid, None if update.op == PodOp.REMOVE else update.pod


# The client's: validated models, the whole desired pod (PodChange.status and .desired).
MODELS: Decoding[models.VersionedPodStatus, JSONDict] = Decoding(_status_model, _update_model)


@dataclass(slots=True)
class StatusRecord(Generic[S]):
    """One record of pod-status: a version, or a tombstone (`status` None) when the pod was removed."""

    partition: int
    offset: int
    uid: str
    status: S | None
    ts_ms: int  # the record's Kafka timestamp


class LedgerReader(Generic[S, D]):
    """Reads pod-status partitions (all, or `partitions`) and keeps the desired pod of every UID.

    `offsets` and `safe_ms` (per partition, all of them) make the reader's Position; partitions
    it does not read stay where `load` or `seek` put them."""

    def __init__(
        self,
        settings: Settings,
        partitions: Sequence[int] | None = None,
        *,
        decoding: Decoding[S, D],
        desired: bool = True,
        fetch_wait_ms: int = 100,
    ) -> None:
        self.settings = settings
        self.count = settings.partitions
        self.partitions = list(range(self.count)) if partitions is None else sorted(set(partitions))
        self.decoding = decoding
        self.with_desired = desired
        self.fetch_wait_ms = fetch_wait_ms
        status_topic, updates_topic = settings.topic(Topic.POD_STATUS), settings.topic(Topic.POD_UPDATES)
        self.all_status = [TopicPartition(status_topic, p) for p in range(self.count)]
        self.status_tps = [self.all_status[p] for p in self.partitions]
        self.updates_tps = [TopicPartition(updates_topic, p) for p in self.partitions]
        self.offsets = [0] * self.count
        self.safe_ms = [0] * self.count
        self.desired: dict[str, D] = {}
        self._status: AIOKafkaConsumer | None = None
        self._updates: AIOKafkaConsumer | None = None
        self._offsets: AIOKafkaConsumer | None = None
        self._updates_started = False

    async def start(self, wait_s: float = 0.0) -> None:
        def make() -> AIOKafkaConsumer:
            return new_consumer(self.settings, fetch_max_wait_ms=self.fetch_wait_ms)

        self._status = await started(make, "pod-status reader", wait_s)
        self._status.assign(self.status_tps)
        # Offset queries on a connection of their own: on a consumer's connection the broker
        # answers them only after its long-polling fetch (up to fetch_max_wait_ms).
        self._offsets = await started(make, "pod-status offsets", wait_s)
        if self.with_desired:
            self._updates = await started(make, "pod-updates reader", wait_s)
            self._updates.assign(self.updates_tps)

    async def stop(self) -> None:
        for consumer in (self._status, self._updates, self._offsets):
            if consumer is not None:
                await consumer.stop()

    def position(self) -> Position:
        return Position(tuple(self.offsets), min(self.safe_ms))

    @property
    def consumer(self) -> AIOKafkaConsumer:
        assert self._status is not None, "LedgerReader.start() first"
        return self._status

    @property
    def offsets_client(self) -> AIOKafkaConsumer:
        assert self._offsets is not None, "LedgerReader.start() first"
        return self._offsets

    async def _retrying(self, call: Callable[[], Awaitable[T]], what: str) -> T:
        """`call` until the broker answers: a reader rides through a broker restart."""
        delay = 0.2
        while True:
            try:
                return await call()
            except KafkaError as exc:
                log.warning("%s failed (%s); retrying in %.1fs", what, exc.__class__.__name__, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)

    async def log_starts(self) -> list[int]:
        """The oldest offset each pod-status partition still holds."""
        starts = await self._retrying(
            lambda: self.offsets_client.beginning_offsets(self.all_status), "log starts"
        )
        return [starts[tp] for tp in self.all_status]

    async def end_offsets(self) -> list[int]:
        ends = await self._retrying(lambda: self.offsets_client.end_offsets(self.all_status), "end offsets")
        return [ends[tp] for tp in self.all_status]

    async def catch_up_desired(self) -> None:
        """Read pod-updates up to its end as of now."""
        updates = self._updates
        if updates is None:
            return
        if not self._updates_started:
            await updates.seek_to_beginning(*self.updates_tps)
            self._updates_started = True
        ends = await self._retrying(
            lambda: self.offsets_client.end_offsets(self.updates_tps), "pod-updates end offsets"
        )
        while True:
            behind = [tp for tp in self.updates_tps if await updates.position(tp) < ends[tp]]
            if not behind:
                return
            batch = await self._retrying(
                partial(updates.getmany, *behind, timeout_ms=1000, max_records=MAX_RECORDS),
                "pod-updates fetch",
            )
            for records in batch.values():
                for record in records:
                    self._apply_update(record)

    def _apply_update(self, record: ConsumerRecord) -> None:
        try:
            uid, pod = self.decoding.update(record.value)
        except DecodeError as exc:
            log.debug("skipping pod-updates %d@%d: %s", record.partition, record.offset, exc)
            return
        if pod is None:
            self.desired.pop(uid, None)
        else:
            self.desired[uid] = pod

    def _decode(self, record: ConsumerRecord) -> StatusRecord[S] | None:
        if record.value is None:
            uid = record.key.decode(errors="replace") if record.key is not None else ""
            return StatusRecord(record.partition, record.offset, uid, None, record.timestamp)
        try:
            uid, status = self.decoding.status(record.value)
        except DecodeError as exc:
            log.warning("skipping pod-status %d@%d: %s", record.partition, record.offset, exc)
            return None
        return StatusRecord(record.partition, record.offset, uid, status, record.timestamp)

    async def load(self) -> AsyncIterator[list[StatusRecord[S]]]:
        """Every record of the read partitions up to their ends as of now, in batches; afterwards
        the reader stands at those ends (the list point)."""
        ends = await self.end_offsets()
        listed_at = now_ms()
        self.offsets, self.safe_ms = list(ends), [listed_at] * self.count
        await self.catch_up_desired()  # after the ends: every version before them meets its pod
        consumer = self.consumer
        await consumer.seek_to_beginning(*self.status_tps)
        while behind := [tp for tp in self.status_tps if await consumer.position(tp) < ends[tp.partition]]:
            batch = await self._retrying(
                partial(consumer.getmany, *behind, timeout_ms=1000, max_records=MAX_RECORDS),
                "pod-status fetch",
            )
            for tp, records in batch.items():
                wanted = [r for r in records if r.offset < ends[tp.partition]]
                for at in range(0, len(wanted), DECODED_BATCH):
                    out = [r for r in map(self._decode, wanted[at : at + DECODED_BATCH]) if r is not None]
                    if out:
                        yield out
        for tp in self.status_tps:
            consumer.seek(tp, ends[tp.partition])

    def seek(self, position: Position) -> None:
        """Stand at `position` (a resume): the next records read are the ones after it."""
        self.offsets, self.safe_ms = list(position.offsets), [position.safe_ms] * self.count
        for tp in self.status_tps:
            self.consumer.seek(tp, position.offsets[tp.partition])

    async def follow(self, idle_ms: int = 1000) -> AsyncIterator[list[StatusRecord[S]]]:
        """New records as they arrive, forever; an empty batch after `idle_ms` without any (the
        reader is caught up), so callers can send bookmarks. While a batch is being handled the
        reader's position is still the one before it; it moves past the batch when the next one
        is asked for."""
        consumer = self.consumer
        if self.with_desired and not self._updates_started:
            await self.catch_up_desired()
        while True:
            asked_ms = now_ms()
            batch: dict[Any, list[ConsumerRecord]] = await self._retrying(
                lambda: consumer.getmany(*self.status_tps, timeout_ms=idle_ms, max_records=MAX_RECORDS),
                "pod-status fetch",
            )
            out: list[StatusRecord[S]] = []
            for records in batch.values():
                out += [r for r in map(self._decode, records) if r is not None]
            if out:
                await self.catch_up_desired()
            yield out
            for tp, records in batch.items():
                if records:
                    self.offsets[tp.partition] = records[-1].offset + 1
                    self.safe_ms[tp.partition] = max(self.safe_ms[tp.partition], records[-1].timestamp)
            for tp in self.status_tps:
                highwater = consumer.highwater(tp)
                if highwater is not None and self.offsets[tp.partition] >= highwater:
                    self.safe_ms[tp.partition] = max(self.safe_ms[tp.partition], asked_ms)


class Cursor:
    """The position right after each record of a batch, as it is handed on: a batch spans several
    partitions, and a token must not skip the records of the batch not handed on yet."""

    def __init__(self, reader: LedgerReader[Any, Any]) -> None:
        self.offsets = list(reader.offsets)
        self.safe_ms = min(reader.safe_ms)

    def after(self, record: StatusRecord[Any]) -> Position:
        self.offsets[record.partition] = record.offset + 1
        return Position(tuple(self.offsets), self.safe_ms)
