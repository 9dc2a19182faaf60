"""Publishing the fold's watermarks on `pod-status-watermarks` (the claim itself: streams/watermark.py).

The fold agent reports each stored batch (`stored`), restored partition (`restored`) and revocation
(`forget`); a timer task (`run`) publishes, every PODLEDGER_WATERMARK_MS, the watermark of each
partition this worker owns whose record changed. Its clock is the broker's: the newest stamp the
broker gave to a record this worker saw, the watermark records' own (that topic is LogAppendTime
too) or an input's. The fold's own clock is never read, so a skewed host cannot make a false claim.

An idle, caught-up partition advances with each tick, since each tick's records bring a newer
reading. When a tick has nothing to publish although a caught-up partition would advance with a
newer reading (the first tick, or a tick within the same millisecond), it publishes that
partition's record again to get one.

Claims need every ingress topic to be LogAppendTime: their configs are read at the first tick, every
CONFIG_CHECK_S, and at the tick after an applied record the broker did not stamp. While one is not,
every owned partition's record says t_ms null and no new T is claimed (streams/watermark.py,
Stamping); the worker warns once, naming the repair (`podledger topics create`).

A rebalance can happen during any await of a tick: `forget` (partitions revoked) bumps a generation,
and a tick that sees it changed ends without publishing; a partition restored meanwhile adopts its
last record, read in this tick or the next.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from podledger.config import Settings
from podledger.kafka import new_consumer, read_to_end
from podledger.schemas import DecodeError, decode, encode, models
from podledger.streams.topic_state import topic_configs
from podledger.streams.topics import admin_client
from podledger.streams.watermark import LOG_APPEND_TIME, Progress, Stamping, isr_allowance
from podledger.types import INGRESS_TOPICS, Topic

log = logging.getLogger(__name__)
CONFIG_CHECK_S = 300.0  # how often the ingress topics' timestamp type is read again
BLOCKED_CHECK_S = 10.0  # ... while one is not broker-stamped: a repair is noticed within this


class WatermarkPublisher:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.topic = settings.topic(Topic.POD_STATUS_WATERMARKS)
        self.ingress = {settings.topic(t): str(t) for t in INGRESS_TOPICS}
        self.progress: dict[int, Progress] = {}  # owned partitions
        self._unread: set[int] = set()  # partitions whose last published watermark is not read yet
        self.clock_ms: int | None = None  # the newest stamp the broker is known to have given
        self.stamping = Stamping()  # which ingress topics the broker stamps, by their configs
        self.replicas = settings.replication_factor  # the most any ingress partition has, once read
        self._checked_at: float | None = None  # loop time of the last reading of the configs
        self._generation = 0  # bumped by forget(): a tick that sees it change ends
        self._producer: AIOKafkaProducer | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._admin: AIOKafkaAdminClient | None = None
        self._warned: set[str] = set()

    # ---- what the fold agent reports (synchronous: no await between a batch's store and this) ----

    def stored(self, messages: Iterable[Any], held: dict[int, int], restored: set[int]) -> None:
        """A batch is stored: `messages` (Faust's, redelivered ones included) are applied; `held` is
        the oldest held input per partition over the `restored` partitions' records. Partitions
        revoked meanwhile (not restored any more) are left alone: their held inputs are unknown."""
        for message in messages:
            topic = self.ingress.get(message.topic)
            if topic is None or message.partition not in restored:
                continue
            stamp = round(message.timestamp * 1000) if message.timestamp_type == LOG_APPEND_TIME else None
            self._of(message.partition).applied(topic, message.offset, stamp)
            if stamp is not None:
                self._saw(stamp)
            else:  # its topic's config may have changed: read it again before the next claim
                self.stamping.writer_stamped()
        for partition in restored:
            self._of(partition).held_ms = held.get(partition)

    def restored(self, partition: int, marker: dict[str, Any] | None, held_ms: int | None) -> None:
        """A partition's fold-state was restored: its marker names the inputs folded and stored, its
        records the oldest input held."""
        progress = self._of(partition)
        progress.stored((marker or {}).get("inputs") or {})
        progress.held_ms = held_ms

    def forget(self) -> None:
        """Partitions revoked: another worker may fold them; read their last watermark again."""
        self.progress.clear()
        self._unread.clear()
        self._generation += 1

    def _of(self, partition: int) -> Progress:
        if partition not in self.progress:
            self.progress[partition] = Progress(partition)
            self._unread.add(partition)
        return self.progress[partition]

    # ---- the timer ----

    async def run(self, owned: Callable[[], set[int]]) -> None:
        try:
            while True:
                await asyncio.sleep(self.settings.watermark_ms / 1000)
                try:
                    await self.tick(owned())
                except KafkaError as exc:  # the next tick tries again
                    log.warning("watermarks not published: %s", exc)
                    await self._stop()
        finally:
            await self._stop()

    async def tick(self, owned: set[int]) -> list[models.Watermark]:
        """Publish the changed watermarks of the `owned` partitions; returns them."""
        generation = self._generation
        for partition in self.progress.keys() - owned:  # before any await: `owned` is current
            del self.progress[partition]
            self._unread.discard(partition)
        if not owned:
            return []
        await self._read_configs()
        consumer = await self._reader()
        for partition in sorted(owned):
            if partition in self.progress and partition not in self._unread:
                continue
            last = await self._last(consumer, partition)
            if self._generation != generation:
                return []  # revoked meanwhile: another worker may have published since
            progress = self.progress.get(partition)
            if progress is None:  # owned, not restored here: resume from its last record
                self.progress[partition] = Progress.resumed(partition, last)
            else:  # restored here, perhaps during the await: its last record is still true
                if last is not None:
                    progress.adopt(last)
                self._unread.discard(partition)
        clock = self.clock_ms  # read before the end offsets: later records are stamped at or after it
        tps = [TopicPartition(self.settings.topic(t), p) for p in sorted(owned) for t in INGRESS_TOPICS]
        ends = await consumer.end_offsets(tps)
        if self._generation != generation:
            return []
        lag_ms = isr_allowance(self.replicas, self.settings.watermark_isr_lag_ms)
        changed: list[models.Watermark] = []
        probe: models.Watermark | None = None
        for partition in sorted(owned):
            progress = self.progress.get(partition)
            if progress is None:
                continue
            topic_ends = {self.ingress[tp.topic]: n for tp, n in ends.items() if tp.partition == partition}
            record, caught_up = progress.watermark(topic_ends, clock, lag_ms, self.stamping.claims)
            if record != progress.last:
                changed.append(record)
            elif caught_up and probe is None:
                probe = record
        sent = changed or ([probe] if probe is not None else [])
        await self._publish(sent)
        if self._generation == generation:
            for record in sent:
                self.progress[record.partition].last = record
        return changed

    async def _read_configs(self) -> None:
        """Read the ingress topics' timestamp type (and replicas) when due: before the first claim,
        every CONFIG_CHECK_S (BLOCKED_CHECK_S while one is wrong), after a writer-stamped record."""
        now = asyncio.get_running_loop().time()
        every = BLOCKED_CHECK_S if self.stamping.unstamped else CONFIG_CHECK_S
        if not self.stamping.stale and self._checked_at is not None and now - self._checked_at < every:
            return
        admin = await self._admin_client()
        present = [name for name in self.ingress if name in set(await admin.list_topics())]
        configs = await topic_configs(admin, present) if present else {}
        described = await admin.describe_topics(present) if present else []
        replicas = [len(p["replicas"]) for t in described for p in t["partitions"]]
        self.replicas = max([self.settings.replication_factor, *replicas])
        found, repaired = self.stamping.configs(
            {self.ingress[n]: configs.get(n, {}).get("message.timestamp.type") for n in present}
        )
        self._checked_at = now
        for topic in sorted(found):
            log.warning(
                "%s is not stamped by the broker (message.timestamp.type is not LogAppendTime): no"
                " watermark is claimed until 'podledger topics create' repairs its config",
                self.settings.topic(topic),
            )
        for topic in sorted(repaired):
            log.warning("%s is stamped by the broker again: watermarks resume", self.settings.topic(topic))

    # ---- Kafka ----

    def _saw(self, stamp_ms: int) -> None:
        self.clock_ms = stamp_ms if self.clock_ms is None else max(self.clock_ms, stamp_ms)

    async def _publish(self, records: list[models.Watermark]) -> None:
        if not records:
            return
        producer = await self._writer()
        futures = [
            await producer.send(
                self.topic, key=str(r.partition).encode(), value=encode(r), partition=r.partition
            )
            for r in records
        ]
        for meta in await asyncio.gather(*futures):
            if meta.timestamp_type == LOG_APPEND_TIME:
                self._saw(meta.timestamp)
            elif self.topic not in self._warned:
                self._warned.add(self.topic)
                log.warning("%s is not LogAppendTime: run 'podledger topics create'", self.topic)

    async def _last(self, consumer: AIOKafkaConsumer, partition: int) -> models.Watermark | None:
        """The newest watermark on a partition (its last record: key = partition number)."""
        tp = TopicPartition(self.topic, partition)
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        last = None
        async for message in read_to_end(consumer, tp, max(end - 1, 0), end):
            try:
                last = decode(Topic.POD_STATUS_WATERMARKS, message.value)
            except DecodeError as exc:
                log.warning("ignoring watermark %d@%d: %s", partition, message.offset, exc)
        return last

    async def _reader(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            consumer = new_consumer(self.settings)
            await consumer.start()
            self._consumer = consumer
        return self._consumer

    async def _writer(self) -> AIOKafkaProducer:
        if self._producer is None:
            producer = AIOKafkaProducer(
                bootstrap_servers=self.settings.bootstrap,
                acks="all",
                enable_idempotence=True,
                **self.settings.kafka_client_options(),
            )
            await producer.start()
            self._producer = producer
        return self._producer

    async def _admin_client(self) -> AIOKafkaAdminClient:
        if self._admin is None:
            admin = admin_client(self.settings, "podledger-watermarks")
            try:
                await admin.start()
            except BaseException:
                await admin.close()
                raise
            self._admin = admin
        return self._admin

    async def _stop(self) -> None:
        for client in (self._producer, self._consumer):
            if client is not None:
                await client.stop()
        if self._admin is not None:
            await self._admin.close()
        self._producer = self._consumer = None
        self._admin = None
