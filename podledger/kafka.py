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
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.errors import KafkaConnectionError, KafkaError

from podledger.config import Settings
from podledger.delivery import DeliveryHealth, deliver
from podledger.keys import Signer, load_node_keys
from podledger.partitioner import partition_for_node
from podledger.schemas import encode

__all__ = [
    "Publisher",
    "new_consumer",
    "node_signer",
    "read_to_end",
    "started",
]

log = logging.getLogger(__name__)

ItemT = TypeVar("ItemT")
StartableT = TypeVar("StartableT", AIOKafkaProducer, AIOKafkaConsumer)


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
