"""The plain aiokafka clients of the processes that do not run Faust (node agents, tools).

Every producer here uses the shared node-name partitioner, so what a node agent publishes lands on the
same partition number as the rest of its pods' events (co-partitioning: podledger/partitioner.py and
docs/architecture.md#topics-and-partitioning).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.errors import KafkaConnectionError, KafkaError

from podledger.config import Settings
from podledger.keys import Signer, load_node_keys
from podledger.partitioner import partition_for_node
from podledger.schemas import encode

__all__ = [
    "DeliveryHealth",
    "OutRecord",
    "ProducerSlot",
    "Publisher",
    "deliver",
    "deliver_all",
    "deliver_batched",
    "new_consumer",
    "node_signer",
    "read_to_end",
    "started",
]

log = logging.getLogger(__name__)

ItemT = TypeVar("ItemT")
StartableT = TypeVar("StartableT", AIOKafkaProducer, AIOKafkaConsumer)

RETRY_FIRST_S, RETRY_MAX_S = 0.2, 5.0
UNHEALTHY_AFTER_S = 30.0  # a producer failing this long makes its component unhealthy


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
            "max_batch_size": 1 << 20,
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
    """Between two rounds of a bulk delivery: say what failed, replace the producer (see deliver()),
    wait `delay`, and return the next, doubled, delay."""
    log.warning("%d records not delivered (%s); resending in %.1fs", count, health.last_error, delay)
    if reset is not None:
        await reset()
    await asyncio.sleep(delay)
    return min(delay * 2, RETRY_MAX_S)


async def deliver_all(
    items: Sequence[tuple[int, ItemT]],
    send: Callable[[ItemT, int], Awaitable[asyncio.Future[Any]]],
    health: DeliveryHealth,
    reset: Reset | None = None,
) -> list[Any]:
    """Send (partition, item) pairs pipelined and wait until the broker has acknowledged every one;
    returns their RecordMetadata in order. A failed send (the broker down or refusing writes past
    the producer's timeout) is never dropped and never raises: from the first failure on each
    partition, that partition's items are sent again, in order, with back-off, and `health` turns
    unhealthy while it lasts (`reset`: as in deliver()). An item resent after it had in fact
    landed appears twice; the fold skips a duplicate journal entry by its input offset."""
    results: list[Any] = [None] * len(items)
    pending = list(range(len(items)))
    delay = RETRY_FIRST_S
    while True:
        sent = await asyncio.gather(
            *[await send(items[i][1], items[i][0]) for i in pending], return_exceptions=True
        )
        first_failure: dict[int, int] = {}  # partition -> position in `pending` of its first failure
        for n, (i, result) in enumerate(zip(pending, sent, strict=True)):
            if isinstance(result, KafkaError):
                first_failure.setdefault(items[i][0], n)
                health.failed(result)
            elif isinstance(result, BaseException):
                raise result
            else:
                results[i] = result
        if not first_failure:
            health.delivered()
            return results
        pending = [i for n, i in enumerate(pending) if n >= first_failure.get(items[i][0], len(pending))]
        delay = await _resend_after(len(pending), health, reset, delay)


@dataclass(slots=True)
class OutRecord:
    """One record to publish, its partition chosen by the caller."""

    topic: str
    partition: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]] | None = None


async def deliver_batched(
    records: Sequence[OutRecord],
    producer: Callable[[], Awaitable[AIOKafkaProducer]],
    health: DeliveryHealth,
    reset: Reset | None = None,
) -> list[int]:
    """deliver_all() for bulk output: the records go out as whole record batches, one per
    topic-partition (more when one passes the producer's batch size), with one delivery future per
    batch instead of a send, a future and a callback per record. Returns each record's offset.

    Same promise as deliver_all(): never dropped, never raising for a refused write; from the
    first failed batch of a topic-partition on, that topic-partition's records are sent again in
    order, with back-off, on a new producer (`reset`), and `health` turns unhealthy meanwhile."""
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
                    offsets[i] = result.offset + n
        if not retry:
            health.delivered()
            return offsets
        pending = retry
        delay = await _resend_after(len(pending), health, reset, delay)


def _batches(
    client: AIOKafkaProducer, records: Sequence[OutRecord], indices: list[int]
) -> list[tuple[list[int], Any]]:
    """The records at `indices` (one topic-partition, in order) as filled record batches."""
    out: list[tuple[list[int], Any]] = []
    batch, members = client.create_batch(), list[int]()
    for i in indices:
        r = records[i]
        if batch.append(key=r.key, value=r.value, timestamp=None, headers=r.headers or []) is None:
            out.append((members, batch))  # full (and closed by aiokafka): the record opens the next
            batch, members = client.create_batch(), list[int]()
            batch.append(key=r.key, value=r.value, timestamp=None, headers=r.headers or [])
        members.append(i)
    if members:
        batch.close()  # complete: sent without lingering for more
        out.append((members, batch))
    return out


def new_consumer(settings: Settings, **options: Any) -> AIOKafkaConsumer:
    """A consumer outside any group (partitions are assigned by hand), starting from the earliest offset."""
    defaults: dict[str, Any] = {
        "enable_auto_commit": False,
        "group_id": None,
        "auto_offset_reset": "earliest",
        "max_partition_fetch_bytes": 8 << 20,
    }
    return AIOKafkaConsumer(
        bootstrap_servers=settings.bootstrap,
        **{**defaults, **options},
        **settings.kafka_client_options(),
    )


async def read_to_end(
    consumer: AIOKafkaConsumer, tp: TopicPartition, start: int | None = None, end: int | None = None
) -> AsyncIterator[ConsumerRecord]:
    """Every message of an assigned partition from `start` (default: its beginning) up to `end`
    (default: its end as of now), exclusive.

    A `start` older than the partition's retention begins at the oldest message still there.
    """
    if end is None:
        end = (await consumer.end_offsets([tp]))[tp]
    if start is None or start >= end:
        await consumer.seek_to_beginning(tp)
    else:
        consumer.seek(tp, start)
    if start is not None and start >= end:
        return
    while await consumer.position(tp) < end:
        batch = await consumer.getmany(tp, timeout_ms=1000, max_records=10_000)
        for message in batch.get(tp, []):
            if message.offset < end:
                yield message


def _answers(bootstrap: str, timeout: float = 2.0) -> bool:
    """Whether any bootstrap server accepts a TCP connection."""
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                return True
        except (OSError, ValueError):
            continue
    return False


async def started(
    make: Callable[[], StartableT], what: str, wait_s: float, bootstrap: str = ""
) -> StartableT:
    """A started client from `make`. While the broker cannot be reached, a service waits for it
    (as a kubelet waits for its apiserver) with back-off for up to `wait_s` seconds (0: one try),
    then raises. A broker that answers but refuses us (TLS, SASL) is an error at once: waiting
    would not fix wrong credentials."""
    deadline = time.monotonic() + wait_s
    delay = 1.0
    while True:
        client = make()
        try:
            await client.start()
            return client
        except KafkaConnectionError as exc:
            with contextlib.suppress(Exception):
                await client.stop()
            pause = min(delay, deadline - time.monotonic())
            if pause <= 0 or (bootstrap and await asyncio.to_thread(_answers, bootstrap)):
                raise
            log.warning("%s: the broker is unreachable (%s); retrying in %.0fs", what, exc, pause)
            await asyncio.sleep(pause)
            delay = min(delay * 2, 10.0)


def node_signer(settings: Settings) -> Signer | None:
    """The signer of this node's records, when it has a secret (PODLEDGER_NODE_SECRET_FILE)."""
    keys = load_node_keys(settings)
    return None if keys is None else Signer(keys)


class Publisher:
    """An idempotent, fully acknowledged producer of topic values (models, or None for a tombstone).

    With a node secret configured, every record carries the node's proof of origin. Every
    delivery, awaited by `publish` or by the caller of `send` (the PLEG), updates `health`; after
    a failed one the next send first replaces the producer (see deliver())."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.producer: AIOKafkaProducer | None = None
        self.signer = node_signer(settings)
        self.health = DeliveryHealth()
        self._broken = False  # a delivery failed: the producer's sequence numbers are spent
        self._restarting = asyncio.Lock()

    async def start(self, wait_s: float = 0.0) -> None:
        """Connect (waiting up to `wait_s` for the broker); aiokafka clients must be made inside
        the running event loop."""
        self.producer = await started(
            lambda: AIOKafkaProducer(
                bootstrap_servers=self.settings.bootstrap,
                acks="all",
                enable_idempotence=True,
                linger_ms=5,
                max_batch_size=1 << 20,
                **self.settings.kafka_client_options(),
            ),
            "publisher",
            wait_s,
            self.settings.bootstrap,
        )
        self._broken = False

    async def stop(self) -> None:
        if self.producer is not None:
            await self.producer.stop()

    async def send(self, topic: str, key: str, value: Any, node: str) -> asyncio.Future[Any]:
        """Queue one value and return its delivery future without waiting for the broker.

        Queue many values one after another and await their futures together: concurrent `publish`
        calls by the thousand would all wake on every drained batch. A caller that sees the
        future fail must send the value again (the PLEG relists it again).
        """
        if self._broken:
            await self._restart()
        assert self.producer is not None, "Publisher.start() first"
        key_bytes, value_bytes = key.encode(), None if value is None else encode(value)
        delivery = await self.producer.send(
            self.settings.topic(topic),
            key=key_bytes,
            value=value_bytes,
            partition=partition_for_node(node, self.settings.partitions),
            headers=None if self.signer is None else self.signer.headers(topic, key_bytes, value_bytes),
        )
        delivery.add_done_callback(self._delivered)
        return delivery

    def _delivered(self, delivery: asyncio.Future[Any]) -> None:
        if delivery.cancelled():
            return
        error = delivery.exception()
        if error is None:
            self.health.delivered()
        elif isinstance(error, KafkaError):
            self.health.failed(error)
            self._broken = True

    async def publish(self, topic: str, key: str, value: Any, node: str) -> None:
        """Send until the broker acknowledges it (retrying, never dropping); same signature as
        streams.app.Pipeline.publish."""
        await deliver(lambda: self.send(topic, key, value, node), f"{topic} record of pod {key}")

    async def _restart(self) -> None:
        async with self._restarting:
            if not self._broken:  # another send replaced it meanwhile
                return
            old, self.producer = self.producer, None
            if old is not None:
                with contextlib.suppress(Exception):
                    await old.stop()
            await self.start(self.settings.start_wait_s)
