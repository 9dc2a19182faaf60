"""Faust wiring: the app, its topics, and the fold loop.

The fold loop only moves data: it takes batches of input records from the intake (Faust's
consumer read in whole fetches, streams/intake.py), hands them to the pure BatchFold, and publishes
the outputs and stores the changed records (the protocol: streams/batch.py). Node-side sources and
the apiserver sink attach to the same app through `roles` (see podledger run).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NamedTuple, cast

import faust
import orjson
from aiokafka import AIOKafkaProducer, TopicPartition

from podledger.config import Settings
from podledger.kafka import (
    DeliveryHealth,
    OutRecord,
    deliver,
    deliver_batched,
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
from podledger.streams.intake import Delivery, FoldApp, Intake
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
        self.app = (FoldApp if fold else faust.App)(
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
        self._holding: dict[bytes, dict[int, int]] = {}  # those records' oldest held stamp per partition
        self._unstored: Batch | None = None  # the batch being published and stored (see _fold_loop)
        self._names = {spec.name: settings.topic(spec.name) for spec in ALL_TOPICS}
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
            # Subscribed by the app's consumer group as an agent's topic would be; read by the intake.
            self.app.topics.add(ingress)
            self.intake = Intake(
                self.app,
                [settings.topic(name) for name in INGRESS_TOPICS],
                settings.fold_batch_size,
                settings.fold_batch_ms / 1000,
            )
            cast(FoldApp, self.app).intake = self.intake
            self.add_task(self._fold_loop)

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

    async def _fold_loop(self, _: Pipeline) -> None:
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
            await self._stop_output_producer()

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
        await deliver_batched(writes.records, self._producer, self.delivery, self._stop_output_producer)

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
            self._producer,
            self.delivery,
            self._stop_output_producer,
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

    async def _on_revoked(self, *args: Any, **kwargs: Any) -> None:
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

    async def _publish_watermarks(self, _: Pipeline) -> None:
        """Every PODLEDGER_WATERMARK_MS, the watermark of each owned partition (streams/watermark.py)."""

        def owned() -> set[int]:
            try:
                assigned = self.app.consumer.assignment()
            except Exception:  # not started, or between assignments
                return set()
            return {tp.partition for tp in assigned if tp.topic in self._by_kafka_name}

        await self.watermarks.run(owned)

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
