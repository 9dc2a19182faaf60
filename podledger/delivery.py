"""Delivery to Kafka that never drops a record: sends retried with back-off until the broker
acknowledges them, on a new producer after a failure, with the health of a component's writes.

`deliver` sends one record, `deliver_batched` many as whole record batches (the fold's bulk
output), records and batches built already (podledger.record_batch) alike; `ProducerSlot` is the
producer they replace after a failure.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError
from aiokafka.record.util import calc_crc32c

from podledger.config import Settings
from podledger.record_batch import HEADER_BYTES, RecordBatch

__all__ = [
    "DeliveryHealth",
    "OutRecord",
    "ProducerSlot",
    "Reset",
    "deliver",
    "deliver_batched",
]

log = logging.getLogger(__name__)

RETRY_FIRST_S, RETRY_MAX_S = 0.2, 5.0
UNHEALTHY_AFTER_S = 30.0  # a producer failing this long makes its component unhealthy
MAX_BATCH_BYTES = 1 << 20  # the most a record batch holds (a record larger alone fills one)


class DeliveryHealth:
    """Whether a producer delivers: unhealthy once its sends have failed for UNHEALTHY_AFTER_S."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.failing_since: float | None = None
        self.last_error = ""

    def delivered(self) -> None:
        self.failing_since = None

    def failed(self, error: BaseException) -> None:
        if self.failing_since is None:
            self.failing_since = self.clock()
        self.last_error = f"{error.__class__.__name__}: {error}"

    def healthy(self) -> tuple[bool, str]:
        if self.failing_since is None or self.clock() - self.failing_since < UNHEALTHY_AFTER_S:
            return True, "ok"
        return (
            False,
            f"kafka delivery failing for {self.clock() - self.failing_since:.0f}s: {self.last_error}",
        )


Reset = Callable[[], Awaitable[None]]


class ProducerSlot:
    """An idempotent `acks=all` producer made on first use, and dropped by `reset` after a failed
    write so the next use makes a new one (see deliver()); `health` is what its deliveries report."""

    def __init__(self, settings: Settings, **options: Any) -> None:
        self.settings = settings
        self.options = {
            "acks": "all",
            "enable_idempotence": True,  # a retried batch is written once
            "linger_ms": 2,
            "max_batch_size": MAX_BATCH_BYTES,
            "max_request_size": 8 << 20,
            **options,
        }
        self.health = DeliveryHealth()
        self._producer: AIOKafkaProducer | None = None
        self._starting: asyncio.Lock | None = None  # made in the running loop, on first use

    async def get(self) -> AIOKafkaProducer:
        if self._producer is not None:
            return self._producer
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:  # concurrent first uses share one producer
            if self._producer is None:
                producer = AIOKafkaProducer(
                    bootstrap_servers=self.settings.bootstrap,
                    **self.options,
                    **self.settings.kafka_client_options(),
                )
                await producer.start()
                self._producer = producer
        return self._producer

    async def reset(self, *args: Any, **kwargs: Any) -> None:
        """Stop the producer, if any (also a Faust shutdown signal's receiver: any arguments)."""
        if self._producer is not None:
            producer, self._producer = self._producer, None
            await producer.stop()


async def deliver(
    send: Callable[[], Awaitable[asyncio.Future[Any]]],
    what: str,
    health: DeliveryHealth | None = None,
    reset: Reset | None = None,
) -> Any:
    """Send until the broker acknowledges (RecordMetadata), retrying with back-off: a record is
    never dropped. Failures are logged and make `health` unhealthy while they last.

    `reset` replaces the producer after a failure: an idempotent producer whose batch failed is
    left with sequence numbers the broker no longer accepts (OutOfOrderSequenceNumber on every
    later send), so a retry needs a new producer, as the Java producer bumps its epoch."""
    delay = RETRY_FIRST_S
    while True:
        try:
            metadata = await (await send())
        except KafkaError as exc:
            if health is not None:
                health.failed(exc)
            log.warning(
                "%s not delivered (%s: %s); retrying in %.1fs", what, exc.__class__.__name__, exc, delay
            )
            if reset is not None:
                await reset()
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)
            continue
        if health is not None:
            health.delivered()
        return metadata


async def _resend_after(count: int, health: DeliveryHealth, reset: Reset | None, delay: float) -> float:
    """Between two rounds of deliver_batched: say what failed, replace the producer (see deliver()),
    wait `delay`, and return the next, doubled, delay."""
    log.warning("%d records not delivered (%s); resending in %.1fs", count, health.last_error, delay)
    if reset is not None:
        await reset()
    await asyncio.sleep(delay)
    return min(delay * 2, RETRY_MAX_S)


@dataclass(slots=True)
class OutRecord:
    """One record to publish, its partition chosen by the caller."""

    topic: str
    partition: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]] | None = None


async def deliver_batched(
    records: Sequence[OutRecord | RecordBatch],
    producer: Callable[[], Awaitable[AIOKafkaProducer]],
    health: DeliveryHealth,
    reset: Reset | None = None,
) -> list[int]:
    """Send records and wait until the broker has acknowledged every one; returns each record's
    offset (a built batch's: that of its last record). They go out as whole record batches, one
    per topic-partition (more when one passes the producer's batch size, and each built batch as
    it is), in order, with one delivery future per batch instead of a send, a future and a callback
    per record.

    A refused write is never dropped and never raises: from the first failed batch of a
    topic-partition on, that topic-partition's records are sent again in order, with back-off, on
    a new producer (`reset`), and `health` turns unhealthy meanwhile. A record resent after it had
    in fact landed appears twice; the fold skips a duplicate journal entry by its input offset."""
    if not records:
        return []
    offsets = [-1] * len(records)
    pending = list(range(len(records)))
    delay = RETRY_FIRST_S
    while True:
        client = await producer()
        by_tp: dict[tuple[str, int], list[int]] = {}
        for i in pending:
            by_tp.setdefault((records[i].topic, records[i].partition), []).append(i)
        sent: list[tuple[tuple[str, int], list[int], Any]] = []  # (tp, record indices, delivery)
        for (topic, partition), indices in by_tp.items():
            for members, batch in _batches(client, records, indices):
                try:
                    delivery: Any = await client.send_batch(batch, topic, partition=partition)
                except KafkaError as exc:  # the producer could not even queue it
                    delivery = exc
                sent.append(((topic, partition), members, delivery))
        waited = await asyncio.gather(
            *(d for _, _, d in sent if not isinstance(d, BaseException)), return_exceptions=True
        )
        outcomes = iter(waited)
        failed: set[tuple[str, int]] = set()
        retry: list[int] = []
        for tp, members, delivery in sent:
            result = delivery if isinstance(delivery, BaseException) else next(outcomes)
            if tp in failed or isinstance(result, KafkaError):
                if isinstance(result, KafkaError):
                    health.failed(result)
                failed.add(tp)
                retry += members
            elif isinstance(result, BaseException):
                raise result
            else:
                for n, i in enumerate(members):
                    item = records[i]
                    offsets[i] = result.offset + (item.count - 1 if isinstance(item, RecordBatch) else n)
        if not retry:
            health.delivered()
            return offsets
        pending = retry
        delay = await _resend_after(len(pending), health, reset, delay)


def _batches(
    client: AIOKafkaProducer, records: Sequence[OutRecord | RecordBatch], indices: list[int]
) -> list[tuple[list[int], Any]]:
    """The records at `indices` (one topic-partition, in order) as filled record batches; a built
    batch goes as it is, between the batches of the records before and after it."""
    out: list[tuple[list[int], Any]] = []
    batch, members = client.create_batch(), list[int]()
    for i in indices:
        r = records[i]
        if isinstance(r, RecordBatch):
            if members:
                batch.close()
                out.append((members, batch))
                batch, members = client.create_batch(), list[int]()
            out.append(([i], _BuiltBatchBuilder(r)))
            continue
        if batch.append(key=r.key, value=r.value, timestamp=None, headers=r.headers or []) is None:
            out.append((members, batch))  # full (and closed by aiokafka): the record opens the next
            batch, members = client.create_batch(), list[int]()
            batch.append(key=r.key, value=r.value, timestamp=None, headers=r.headers or [])
        members.append(i)
    if members:
        batch.close()  # complete: sent without lingering for more
        out.append((members, batch))
    return out


class _BuiltBatchBuilder:
    """aiokafka's BatchBuilder interface over a RecordBatch, for send_batch: closed and full; a
    producer gives it its state just before it is built (a new one for each send), and it is
    stamped when built, as aiokafka stamps the records it appends."""

    def __init__(self, batch: RecordBatch) -> None:
        self._batch = batch
        self._state = (-1, -1, -1)  # producer id, epoch, base sequence: none unless idempotent
        self._buffer: bytes | None = None

    def append(self, **_: Any) -> None:
        return None  # full: nothing more goes in

    def close(self) -> None:
        pass

    def closed(self) -> bool:
        return True

    def size(self) -> int:
        return len(self._batch.data)

    def record_count(self) -> int:
        return self._batch.count

    def _set_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        self._state = (producer_id, producer_epoch, base_sequence)

    def _build(self) -> bytes:
        if self._buffer is None:
            stamp_ms = int(time.time() * 1000)
            header = self._batch.header_for(*self._state, stamp_ms, calc_crc32c)
            self._buffer = header + self._batch.data[HEADER_BYTES:]
        return self._buffer
