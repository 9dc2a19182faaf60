"""Faust wiring: the app, its topics and table, and the fold agent.

The agent only moves data: it decodes an input message, hands it to the pure `fold_event`,
stores the returned record in the changelog-backed table, and publishes the outputs. Node-side
sources and the apiserver sink attach to the same app through `roles` (see podledger run).
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import faust
from podledger.schemas import DecodeError, decode, encode, models
from podledger.streams.fold import Coordinates, Output, fold_event
from podledger.streams.topics import INGRESS, TOPICS

from podledger.config import Settings
from podledger.partitioner import partition_for_node

log = logging.getLogger("podledger.fold")

POD_RECORDS_TABLE = "pod-records"


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
        async for event in stream.events():
            message = event.message
            topic = self._by_kafka_name[message.topic]
            at = Coordinates(topic, message.partition, message.offset, int(message.timestamp * 1000))
            try:
                decoded = decode(topic, event.value, max_bytes=self.settings.max_event_bytes)
            except DecodeError as exc:
                await self._dead_letter(exc.reason, str(exc), at, event.key, event.value, message.partition)
                continue
            uid = decoded.uid.encode()
            record, outputs = fold_event(self.records.get(uid), at, decoded)
            await self._emit(outputs, message.partition)
            if record is None:
                self.records.pop(uid, None)
            else:
                self.records[uid] = record

    async def _emit(self, outputs: Iterable[Output], partition: int) -> None:
        for out in outputs:
            # Co-partitioning: an output lands on the partition number of its input.
            await self.topics[out.topic].send(
                key=out.key.encode(),
                value=None if out.value is None else encode(out.value),
                partition=partition,
            )

    async def _dead_letter(
        self,
        reason: str,
        detail: str,
        at: Coordinates,
        key: bytes | None,
        value: bytes | None,
        partition: int,
    ) -> None:
        letter = models.DeadLetter(
            reason=reason,
            detail=detail,
            topic=at.topic,
            partition=at.partition,
            offset=at.offset,
            key_b64=None if key is None else base64.b64encode(key).decode(),
            value_b64=None if value is None else base64.b64encode(value).decode(),
            ts_ms=at.ts_ms,
        )
        log.warning("dead-letter %s at %s/%s/%s: %s", reason, at.topic, at.partition, at.offset, detail)
        await self.topics["dead-letter"].send(key=key, value=encode(letter), partition=partition)
