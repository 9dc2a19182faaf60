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
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError

from podledger.config import Settings
from podledger.kafka import new_consumer, read_to_end
from podledger.schemas import DecodeError, decode, encode, models
from podledger.streams.watermark import LOG_APPEND_TIME, Progress
from podledger.types import INGRESS_TOPICS, Topic

log = logging.getLogger(__name__)


class WatermarkPublisher:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.topic = settings.topic(Topic.POD_STATUS_WATERMARKS)
        self.ingress = {settings.topic(t): str(t) for t in INGRESS_TOPICS}
        self.progress: dict[int, Progress] = {}  # owned partitions
        self._unread: set[int] = set()  # partitions whose last published watermark is not read yet
        self.clock_ms: int | None = None  # the newest stamp the broker is known to have given
        self._producer: AIOKafkaProducer | None = None
        self._consumer: AIOKafkaConsumer | None = None
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
            elif topic not in self._warned:
                self._warned.add(topic)
                log.warning(
                    "%s is not stamped by the broker (LogAppendTime): no watermark for it;"
                    " run 'podledger topics create' to repair its config",
                    message.topic,
                )
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
        consumer = await self._reader()
        for partition in sorted(owned - self.progress.keys()):
            self.progress[partition] = Progress.resumed(partition, await self._last(consumer, partition))
        for partition in sorted(owned & self._unread):
            last = await self._last(consumer, partition)
            if partition in self.progress and last is not None:
                self.progress[partition].adopt(last)
        self._unread -= owned
        for partition in self.progress.keys() - owned:
            del self.progress[partition]
        if not owned:
            return []
        clock = self.clock_ms  # read before the end offsets: later records are stamped at or after it
        tps = [TopicPartition(self.settings.topic(t), p) for p in sorted(owned) for t in INGRESS_TOPICS]
        ends = await consumer.end_offsets(tps)
        changed: list[models.Watermark] = []
        probe: models.Watermark | None = None
        for partition in sorted(owned):
            progress = self.progress.get(partition)
            if progress is None:  # revoked meanwhile
                continue
            topic_ends = {self.ingress[tp.topic]: n for tp, n in ends.items() if tp.partition == partition}
            record, caught_up = progress.watermark(topic_ends, clock)
            if record != progress.last:
                changed.append(record)
            elif caught_up and probe is None:
                probe = record
        sent = changed or ([probe] if probe is not None else [])
        await self._publish(sent)
        for record in sent:
            if record.partition in self.progress:
                self.progress[record.partition].last = record
        return changed

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

    async def _stop(self) -> None:
        for client in (self._producer, self._consumer):
            if client is not None:
                await client.stop()
        self._producer = self._consumer = None
