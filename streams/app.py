"""Faust wiring: the app, its topics and table, and the fold agent.

The agent only moves data: it decodes an input message, hands it to the pure `fold_event`,
stores the returned record in the changelog-backed table, and publishes the outputs. Node-side
sources and the apiserver sink attach to the same app through `roles` (see podledger run).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import faust
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError

from podledger.config import Settings
from podledger.kafka import (
    RETRY_FIRST_S,
    RETRY_MAX_S,
    DeliveryHealth,
    deliver,
    deliver_all,
    new_consumer,
    node_signer,
    read_to_end,
)
from podledger.keys import load_keyring
from podledger.partitioner import partition_for_node
from podledger.paths import cache_dir
from podledger.schemas import DecodeError, cloud_events, decode, encode
from podledger.streams.batch import Batch, BatchFold, marker_key, seal
from podledger.streams.fold import Coordinates, HoldLimits, Output, PodRecord
from podledger.streams.state import FoldState
from podledger.streams.topics import ALL_TOPICS
from podledger.streams.watermark import oldest_held
from podledger.streams.watermark_publisher import WatermarkPublisher
from podledger.types import INGRESS_TOPICS, Topic

log = logging.getLogger(__name__)


def faust_broker_url(bootstrap: str) -> str:
    return ";".join(f"kafka://{server.strip()}" for server in bootstrap.split(",") if server.strip())


def _faust_credentials(settings: Settings) -> Any:
    """Faust's credentials from the same options the plain aiokafka clients get.

    SASLCredentials picks SASL_SSL when it has an SSL context and SASL_PLAINTEXT otherwise; the
    mechanism arrives spelled as Kafka does (SCRAM-SHA-512), which is how Faust's enum names it.
    """
    opts = settings.kafka_client_options()
    protocol = opts["security_protocol"]
    if protocol == "PLAINTEXT":
        return None
    if protocol.startswith("SASL_"):
        return faust.SASLCredentials(
            username=opts["sasl_plain_username"],
            password=opts["sasl_plain_password"],
            mechanism=opts["sasl_mechanism"],
            ssl_context=opts.get("ssl_context") if protocol == "SASL_SSL" else None,
        )
    return faust.SSLCredentials(opts["ssl_context"])


class Pipeline:
    """The Faust app with podledger's topics, table and agents."""

    def __init__(self, settings: Settings, *, fold: bool = True) -> None:
        self.settings = settings
        datadir = Path(settings.data_dir or cache_dir() / "faust" / settings.fold_app_id)
        datadir.parent.mkdir(parents=True, exist_ok=True)  # Faust creates only the last level
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
            broker_session_timeout=settings.session_timeout_ms / 1000,
            broker_heartbeat_interval=max(settings.session_timeout_ms / 3000, 0.5),
            datadir=str(datadir),
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
            for spec in ALL_TOPICS
        }
        self._by_kafka_name = {settings.topic(name): name.value for name in INGRESS_TOPICS}
        self.state = FoldState(settings)
        self._recovered: set[int] = set()  # partitions whose journal tail was re-applied
        self._waiting: set[bytes] = set()  # records holding events for unannounced pods
        self._output_producer: AIOKafkaProducer | None = None
        self._clock: dict[int, int] = {}  # partition -> newest pod-updates event time folded
        self._heads: dict[tuple[str, int], bytes] = {}  # (topic, partition) -> its hash chain's head
        self.signer = node_signer(settings)  # the node roles' proof of origin, if configured
        self.keyring = load_keyring(settings) if fold else None
        self.delivery = DeliveryHealth()  # of what the roles in this app publish
        # What the fold has done, for /metrics: events folded, versions, dead letters by reason.
        self.counts: Counter[tuple[str, str]] = Counter()
        self.app.on_before_shutdown.connect(self._stop_output_producer)
        self.watermarks = WatermarkPublisher(settings)
        if fold:
            self.app.on_partitions_revoked.connect(self._on_revoked)
            self.add_task(self._publish_watermarks)
            ingress = self.app.topic(
                *(settings.topic(name) for name in INGRESS_TOPICS),
                key_type=bytes,
                value_type=bytes,
                key_serializer="raw",
                value_serializer="raw",
            )
            self.app.agent(ingress, name="fold")(self._fold_agent)

    def partition(self, node: str) -> int:
        return partition_for_node(node, self.settings.partitions)

    async def publish(self, topic: str, key: str, value: Any, node: str) -> None:
        """Send one value (a model, or None for a tombstone) with the shared partitioner, through the
        idempotent output producer, until the broker acknowledges it (never dropped). A deletion
        carries its CloudEvents headers (schemas/cloud_events.py)."""
        key_bytes, value_bytes = key.encode(), None if value is None else encode(value)
        headers = [
            *(self.signer.headers(topic, key_bytes, value_bytes) if self.signer is not None else []),
            *cloud_events.headers(value, self.settings.topic_prefix),
        ]

        async def send() -> asyncio.Future[Any]:
            producer = await self._producer()
            return await producer.send(
                self.settings.topic(topic),
                key=key_bytes,
                value=value_bytes,
                partition=self.partition(node),
                headers=headers or None,
            )

        await deliver(send, f"{topic} record of pod {key}", self.delivery, self._stop_output_producer)

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
        """Fold batches of input events, effectively once (the protocol: streams/batch.py)."""
        batch_size, within = self.settings.fold_batch_size, self.settings.fold_batch_ms / 1000
        try:
            async for events in stream.take_events(batch_size, within=within):
                for partition in sorted({e.message.partition for e in events} - self._recovered):
                    await self._restore(partition)
                fold = self._batch_fold()
                folded: dict[int, dict[str, int]] = {}  # partition -> {topic: newest offset folded}
                for event in events:
                    message = event.message
                    topic = self._by_kafka_name[message.topic]
                    if self.state.is_redelivery(message.partition, topic, message.offset):
                        # Folded and stored already; Faust redelivers from an older commit after a
                        # rebalance or a crash. A removed pod has no record to skip it by.
                        continue
                    offsets = folded.setdefault(message.partition, {})
                    offsets[topic] = max(offsets.get(topic, -1), message.offset)
                    at = Coordinates(topic, message.partition, message.offset, int(message.timestamp * 1000))
                    fold.add_message(at, event.key, event.value, message.headers or ())
                fold.expire_held(self._waiting)
                await self._commit(fold.batch, inputs=folded)
                self.watermarks.stored((e.message for e in events), self._held(), self._recovered)
        finally:
            await self._stop_output_producer()

    def _batch_fold(self) -> BatchFold:
        limits = HoldLimits(self.settings.hold_max_events, self.settings.hold_max_ms)
        return BatchFold(
            self.state.get,
            limits,
            self.settings.max_event_bytes,
            self._clock,
            keyring=self.keyring,
            partitions=self.settings.partitions,
        )

    async def _commit(
        self,
        batch: Batch,
        journal_end: dict[int, int] | None = None,
        inputs: dict[int, dict[str, int]] | None = None,
        reapplied: dict[int, dict[str, list[int]]] | None = None,
    ) -> None:
        """Steps 2-4 of the protocol: journal, then the other outputs, then the records, then each
        partition's marker (its last journal offset and, from `inputs`, the newest input offsets
        folded per topic)."""
        seal(batch, self._heads, self.settings.topic_prefix)  # before the first send: resends repeat it
        self._clock.update(batch.newest)
        journal_end = dict(journal_end or {})
        delivered = await deliver_all(batch.journal, self._send, self.delivery, self._stop_output_producer)
        for (partition, _), meta in zip(batch.journal, delivered, strict=True):
            journal_end[partition] = max(journal_end.get(partition, -1), meta.offset)
        await deliver_all(batch.outputs, self._send, self.delivery, self._stop_output_producer)
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
        (before Faust may commit these input offsets: nothing held is lost). Records that fail are
        written again, and the markers after them, until the broker takes them."""
        delay = RETRY_FIRST_S
        while True:
            producer = await self._producer()
            writes = [await self.state.put(producer, key, p, record) for key, (p, record) in records]
            for partition, journal_offset, folded, reapplied in markers:
                writes.append(
                    await self.state.put_marker(producer, partition, journal_offset, folded, reapplied)
                )
            done = await asyncio.gather(*writes, return_exceptions=True)
            errors = [e for e in done if isinstance(e, BaseException)]
            if not errors:
                self.delivery.delivered()
                return
            for error in errors:
                if not isinstance(error, KafkaError):
                    raise error
                self.delivery.failed(error)
            records = [
                r for r, result in zip(records, done, strict=False) if isinstance(result, BaseException)
            ]
            log.warning(
                "%d fold-state writes not delivered (%s); retrying in %.1fs",
                len(errors),
                self.delivery.last_error,
                delay,
            )
            await self._stop_output_producer()  # see podledger.kafka.deliver()
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)

    async def _restore(self, partition: int) -> None:
        """Load a newly assigned partition's records, then re-apply the journal entries written
        after its last marker (a crash between publishing a batch and storing its records)."""
        pods = await self.state.restore(partition)
        self._heads.update(await self.state.chain_heads(partition))
        self._waiting |= {k for k in self.state.keys_of(partition) if self.state.data[k].get("held")}
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

    async def _on_revoked(self, *args: Any, **kwargs: Any) -> None:
        # Another worker may change these partitions' records before they come back to us.
        for partition in self._recovered:
            self.state.forget(partition)
        self._recovered.clear()
        self._heads.clear()  # another worker extends the chains meanwhile: read again on restore
        self.watermarks.forget()

    def _held(self) -> dict[int, int]:
        """Per partition, the oldest input held for a pod not announced yet (bounds the watermark)."""
        return oldest_held(self.state.data.get(key) for key in self._waiting)

    async def _publish_watermarks(self, _: Pipeline) -> None:
        """Every PODLEDGER_WATERMARK_MS, the watermark of each owned partition (streams/watermark.py)."""

        def owned() -> set[int]:
            try:
                assigned = self.app.consumer.assignment()
            except Exception:  # not started, or between assignments
                return set()
            return {tp.partition for tp in assigned if tp.topic in self._by_kafka_name}

        await self.watermarks.run(owned)

    async def _send(self, out: Output, partition: int) -> asyncio.Future[Any]:
        """Start sending one output now; returns its delivery (RecordMetadata) to await.

        Co-partitioning: an output lands on the partition number of its input. Outputs go
        through a plain aiokafka producer: Faust's send path would hold them as attachments
        until the offset commit, and costs several times more per message.
        """
        producer = await self._producer()
        return await producer.send(
            self.settings.topic(out.topic),
            key=out.key.encode(),
            value=out.wire_value(),
            partition=partition,
            headers=out.headers,
        )

    async def _producer(self) -> AIOKafkaProducer:
        if self._output_producer is None:
            self._output_producer = AIOKafkaProducer(
                bootstrap_servers=self.settings.bootstrap,
                acks="all",
                enable_idempotence=True,  # a retried batch is written once
                linger_ms=2,
                max_batch_size=1 << 20,
                max_request_size=8 << 20,
                **self.settings.kafka_client_options(),
            )
            await self._output_producer.start()
        return self._output_producer

    async def _stop_output_producer(self, *args: Any, **kwargs: Any) -> None:
        if self._output_producer is not None:
            await self._output_producer.stop()
            self._output_producer = None
