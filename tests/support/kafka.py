"""Topics on the real broker: create them with a partition count, read them back (as
(partition, key, value) or as whole records), publish raw messages, statuses and desired pods onto
them, and make the broker refuse writes to one.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from podledger.config import Settings
from podledger.delivery import DeliveryHealth, OutRecord, deliver_batched
from podledger.partitioner import partition_for_node
from podledger.record_batch import RecordBatch
from podledger.schemas import encode, models
from podledger.streams.topic_state import configs_match, topic_configs
from podledger.streams.topics import ALL_TOPICS, start_admin
from podledger.types import JSONDict, Topic
from tests.support.processes import PodledgerProcess, wait_for


def with_topics(settings: Settings, partitions: int) -> Settings:
    """The test's settings (its own topic prefix) with `partitions` per topic, the topics created:
    for tests whose workers share the partitions out."""
    import asyncio

    from podledger.streams.topics import ensure_topics

    sized = Settings.from_env(
        env={},
        bootstrap=settings.bootstrap,
        topic_prefix=settings.topic_prefix,
        partitions=partitions,
        node=settings.node,
    )
    asyncio.run(ensure_topics(sized))
    return sized


async def read_topic(
    settings: Settings, name: str, at_least: int, timeout: float = 30.0, idle: float = 1.0
) -> list[tuple[int, bytes, bytes]]:
    """(partition, key, value) of every message of a topic, read from the start until at least
    `at_least` arrived and nothing new came for `idle` seconds."""
    consumer = AIOKafkaConsumer(
        settings.topic(name),
        bootstrap_servers=settings.bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        group_id=None,
    )
    await consumer.start()
    out: list[tuple[int, bytes, bytes]] = []
    try:
        async with asyncio.timeout(timeout):
            while True:
                batch = await consumer.getmany(timeout_ms=int(idle * 1000))
                if not batch and len(out) >= at_least:
                    return out
                for records in batch.values():
                    out += [(r.partition, r.key, r.value) for r in records]
    finally:
        await consumer.stop()


def wait_for_topic(
    settings: Settings,
    name: str,
    at_least: int,
    *,
    timeout: float = 120.0,
    alive: PodledgerProcess | None = None,
    idle: float = 0.5,
) -> list[tuple[int, bytes, bytes]]:
    """(partition, key, value) of every message of a topic once it holds at least `at_least`,
    polled until `timeout` (failing at once if the `alive` process exits)."""
    return wait_for(
        lambda: (
            len(msgs := asyncio.run(read_topic(settings, name, at_least, idle=idle))) >= at_least and msgs
        ),
        timeout=timeout,
        what=f"{at_least} records on {name}",
        alive=alive,
    )


async def read_records(settings: Settings, name: str, timeout: float = 30.0) -> list[ConsumerRecord]:
    """Every record of a topic as it is now (offsets, headers and all), read from the start to its end."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    out: list[ConsumerRecord] = []
    try:
        partitions = [TopicPartition(settings.topic(name), p) for p in range(settings.partitions)]
        consumer.assign(partitions)
        ends = await consumer.end_offsets(partitions)
        async with asyncio.timeout(timeout):
            while [tp for tp in partitions if await consumer.position(tp) < ends[tp]]:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    out += [r for r in records if r.offset < ends[TopicPartition(r.topic, r.partition)]]
    finally:
        await consumer.stop()
    return out


async def send_raw(settings: Settings, topic: str, node: str, key: bytes, value: bytes, ts_ms: int) -> None:
    """One message as given (valid or not), on the partition of `node`."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap, max_request_size=4 << 20)
    await producer.start()
    try:
        await producer.send_and_wait(
            settings.topic(topic),
            key=key,
            value=value,
            partition=partition_for_node(node, settings.partitions),
            timestamp_ms=ts_ms,
        )
    finally:
        await producer.stop()


async def publish_statuses(settings: Settings, *statuses: models.VersionedPodStatus) -> None:
    """Versioned statuses onto pod-status, as the fold would write them."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap)
    await producer.start()
    try:
        for vs in statuses:
            await producer.send(
                settings.topic("pod-status"),
                key=vs.uid.encode(),
                value=encode(vs),
                partition=partition_for_node(vs.node, settings.partitions),
            )
        await producer.flush()
    finally:
        await producer.stop()


async def publish_versions(
    settings: Settings, *statuses: models.VersionedPodStatus, removed: tuple[tuple[str, str], ...] = ()
) -> None:
    """Versioned statuses as the fold writes them, onto pod-status and pod-status-history, then a
    pod-status tombstone for each (uid, node) of `removed`."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap)
    await producer.start()
    try:
        for vs in statuses:
            partition = partition_for_node(vs.node, settings.partitions)
            for topic in ("pod-status", "pod-status-history"):
                await producer.send(
                    settings.topic(topic), key=vs.uid.encode(), value=encode(vs), partition=partition
                )
        for uid, node in removed:
            partition = partition_for_node(node, settings.partitions)
            await producer.send(
                settings.topic("pod-status"), key=uid.encode(), value=None, partition=partition
            )
        await producer.flush()
    finally:
        await producer.stop()


async def publish_desired(
    settings: Settings, *api_pods: JSONDict, op: str = "ADD", source: str = "api"
) -> None:
    """Desired pods onto pod-updates (as a pod source announces them), on their node's partition."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap)
    await producer.start()
    try:
        for pod in api_pods:
            node = pod["spec"]["nodeName"]
            update = models.PodUpdate(op, source, node, pod, int(time.time() * 1000))
            await producer.send(
                settings.topic("pod-updates"),
                key=pod["metadata"]["uid"].encode(),
                value=encode(update),
                partition=partition_for_node(node, settings.partitions),
            )
        await producer.flush()
    finally:
        await producer.stop()


async def refuse_writes(settings: Settings, topic: Topic, limit: int = 64) -> None:
    """Make the broker answer MESSAGE_TOO_LARGE to any record over `limit` bytes on `topic`."""
    await set_topic_configs(settings, topic, {"max.message.bytes": str(limit)})


async def accept_writes(settings: Settings, topic: Topic) -> None:
    """Undo refuse_writes, as the operator who set the limit would: the topic's configs become
    what podledger declares for it, and nothing else (`podledger topics create` keeps a config it
    does not declare, such as max.message.bytes)."""
    await set_topic_configs(settings, topic, declared_configs(settings, topic))


def declared_configs(settings: Settings, topic: str) -> dict[str, str]:
    """The configs podledger declares for a topic (streams/topics.py), at the settings' replication."""
    [spec] = [t for t in ALL_TOPICS if t.name == topic]
    return spec.configs(settings.replication_factor)


async def set_topic_configs(settings: Settings, topic: str, configs: dict[str, str]) -> None:
    """Give a topic these configs, as someone other than podledger would, and wait until the broker
    has them in force. They replace all the topic's own (the broker's AlterConfigs)."""
    name = settings.topic(topic)
    admin = await start_admin(settings)
    try:
        await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name, configs)])
        async with asyncio.timeout(30):  # the change reaches the broker's metadata asynchronously
            while not await configs_match(admin, {name: configs}):
                await asyncio.sleep(0.1)
    finally:
        await admin.close()


async def configs_in_force(settings: Settings, topic: str) -> dict[str, str]:
    """Every config of a topic as the broker has it in force."""
    name = settings.topic(topic)
    admin = await start_admin(settings)
    try:
        return (await topic_configs(admin, [name]))[name]
    finally:
        await admin.close()


class Producers:
    """The producer deliver_batched sends through, replaced after a failure as the fold does."""

    def __init__(self, settings: Settings, batch_bytes: int) -> None:
        self.settings, self.batch_bytes = settings, batch_bytes
        self.current: AIOKafkaProducer | None = None
        self.made = 0

    async def get(self) -> AIOKafkaProducer:
        if self.current is None:
            self.current = AIOKafkaProducer(
                bootstrap_servers=self.settings.bootstrap,
                acks="all",
                enable_idempotence=True,
                max_batch_size=self.batch_bytes,
                request_timeout_ms=5000,
            )
            await self.current.start()
            self.made += 1
        return self.current

    async def reset(self) -> None:
        if self.current is not None:
            with contextlib.suppress(Exception):
                await self.current.stop()
            self.current = None

    async def deliver(self, items: Sequence[OutRecord | RecordBatch], health: DeliveryHealth) -> list[int]:
        """deliver_batched through these producers, stopped afterwards."""
        try:
            return await deliver_batched(items, self.get, health, self.reset)
        finally:
            await self.reset()
