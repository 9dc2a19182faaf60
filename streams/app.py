"""Faust wiring: the app, its topics and table, and the fold agent.

The agent only moves data: it decodes an input message, hands it to the pure `fold_event`,
stores the returned record in the changelog-backed table, and publishes the outputs. Node-side
sources and the apiserver sink attach to the same app through `roles` (see podledger run).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import faust
from podledger.schemas import DecodeError, decode, encode
from podledger.streams.fold import Coordinates, Output, decode_input, fold_event
from podledger.streams.topics import INGRESS, TOPICS

from podledger.config import Settings
from podledger.partitioner import partition_for_node

log = logging.getLogger("podledger.fold")

POD_RECORDS_TABLE = "pod-records"
JSONDict = dict[str, Any]


def faust_broker_url(bootstrap: str) -> str:
    return ";".join(f"kafka://{server.strip()}" for server in bootstrap.split(",") if server.strip())


def _faust_credentials(settings: Settings) -> Any:
    protocol = settings.kafka_security_protocol
    if protocol == "PLAINTEXT":
        return None
    ssl_context = settings.kafka_client_options().get("ssl_context")
    if protocol.startswith("SASL"):
        return faust.SASLCredentials(
            username=settings.kafka_sasl_username,
            password=settings.kafka_sasl_password,
            mechanism=settings.kafka_sasl_mechanism or "PLAIN",
            ssl_context=ssl_context,
        )
    return faust.SSLCredentials(ssl_context)


class Pipeline:
    """The Faust app with podledger's topics, table and agents."""

    def __init__(self, settings: Settings, *, fold: bool = True) -> None:
        self.settings = settings
        self.app = faust.App(
            settings.fold_app_id,
            broker=faust_broker_url(settings.bootstrap),
            broker_credentials=_faust_credentials(settings),
            store="memory://",
            autodiscover=False,
            web_enabled=False,
            topic_partitions=settings.partitions,
            topic_replication_factor=settings.replication_factor,
            consumer_auto_offset_reset="earliest",
            producer_acks=-1,
            table_standby_replicas=0,
            broker_session_timeout=settings.session_timeout_ms / 1000,
            broker_heartbeat_interval=max(settings.session_timeout_ms / 3000, 0.5),
            datadir=settings.data_dir or None,
            logging_config=None,
        )
        self.topics: dict[str, faust.TopicT] = {
            spec.name: self.app.topic(
                settings.topic(spec.name),
                key_type=bytes,
                value_type=bytes,
                key_serializer="raw",
                value_serializer="raw",
                partitions=settings.partitions,
            )
            for spec in TOPICS
        }
        self._by_kafka_name = {settings.topic(name): name for name in INGRESS}
        self.records = self.app.Table(
            POD_RECORDS_TABLE,
            default=None,
            partitions=settings.partitions,
            key_type=bytes,  # the pod UID; values are plain dicts in Faust's (orjson) JSON codec
        )
        if fold:
            ingress = self.app.topic(
                *(settings.topic(name) for name in INGRESS),
                key_type=bytes,
                value_type=bytes,
                key_serializer="raw",
                value_serializer="raw",
            )
            self.app.agent(ingress, name="fold")(self._fold_agent)

    def partition(self, node: str) -> int:
        return partition_for_node(node, self.settings.partitions)

    async def publish(self, topic: str, key: str, value: Any, node: str) -> None:
        """Send one value (a model, or None for a tombstone) with the shared partitioner."""
        await self.topics[topic].send(
            key=key.encode(),
            value=None if value is None else encode(value),
            partition=self.partition(node),
        )

    def add_task(self, factory: Callable[[Pipeline], Awaitable[None]]) -> None:
        """Run a long-lived node or sink task inside the app's lifecycle."""

        async def task() -> None:
            await factory(self)

        task.__name__ = getattr(factory, "__name__", "task")
        self.app.task(task)

    def add_agent(self, topic: str, handler: Callable[[Pipeline, Any], Awaitable[None]]) -> None:
        """Consume a podledger topic, one decoded model at a time."""

        async def agent(stream: Any) -> None:
            async for event in stream.events():
                message = event.message
                if event.value is None:
                    continue
                try:
                    value = decode(topic, event.value)
                except DecodeError as exc:
                    log.warning(
                        "dropping undecodable %s message at %s/%s: %s",
                        topic,
                        message.partition,
                        message.offset,
                        exc,
                    )
                    continue
                await handler(self, value)

        agent.__name__ = f"{topic}_consumer"
        self.app.agent(self.topics[topic], name=f"{topic.replace('-', '_')}_consumer")(agent)

    async def _fold_agent(self, stream: Any) -> None:
        """Fold batches of input events, effectively once (DESIGN principle 4).

        Per batch: fold every event against the table, send every output and wait for the
        broker to acknowledge them, and only then write the changed records to the table's
        changelog. Faust flushes the producer before it commits input offsets. So after a crash
        a record is never ahead of the outputs it produced: a redelivered event either finds
        its offset in the record (skipped) or recomputes the very same outputs (deterministic),
        which consumers deduplicate on (uid, version).
        """
        batch_size, within = self.settings.fold_batch_size, self.settings.fold_batch_ms / 1000
        async for events in stream.take_events(batch_size, within=within):
            changed: dict[bytes, tuple[int, JSONDict | None]] = {}
            deliveries: list[Awaitable[Any]] = []
            for event in events:
                message = event.message
                topic = self._by_kafka_name[message.topic]
                at = Coordinates(topic, message.partition, message.offset, int(message.timestamp * 1000))
                decoded = decode_input(topic, at, event.key, event.value, self.settings.max_event_bytes)
                if isinstance(decoded, Output):
                    log.warning(
                        "dead-letter %s at %s/%s/%s", decoded.value.reason, topic, at.partition, at.offset
                    )
                    deliveries.append(await self._send(decoded, message.partition))
                    continue
                key = decoded.uid.encode()
                before = changed[key][1] if key in changed else self.records.data.get(key)
                record, outputs = fold_event(before, at, decoded)
                if record is not before:
                    changed[key] = (message.partition, record)
                for out in outputs:
                    deliveries.append(await self._send(out, message.partition))
            if deliveries:
                await asyncio.gather(*deliveries)
            for key, (partition, record) in changed.items():
                self._store_record(key, partition, record)

    def _store_record(self, key: bytes, partition: int, record: JSONDict | None) -> None:
        """Write one record (None deletes it) to the table and its changelog partition."""
        if record is None:
            self.records.data.pop(key, None)
            self.records.send_changelog(partition, key, None, value_serializer="raw")
        else:
            self.records.data[key] = record
            self.records.send_changelog(partition, key, record)

    async def _send(self, out: Output, partition: int) -> Awaitable[Any]:
        """Start sending one output now; returns its delivery to await.

        Co-partitioning: an output lands on the partition number of its input. `force`
        bypasses Faust's attachments, which would hold the message until the offset commit.
        """
        return await self.topics[out.topic].send(
            key=out.key.encode(),
            value=None if out.value is None else encode(out.value),
            partition=partition,
            force=True,
        )
