"""The fold's pod records: a dict in memory, backed by the compacted `fold-state` topic.

One state partition per input partition (co-partitioning), so a worker restores exactly the
partitions it is assigned. Restoring is a plain read of a compacted partition from its start to
its end offset; it replaced Faust's table recovery, which hung after repeated SIGKILLs in our
chaos test (the "No event received for active tp" stall of faust-streaming).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import orjson
from aiokafka import AIOKafkaProducer, TopicPartition

from podledger.config import Settings
from podledger.kafka import new_consumer, read_to_end
from podledger.schemas.chain import GENESIS, head_after
from podledger.streams.batch import CHAINED, advance_marker, is_redelivery, marker_key
from podledger.streams.fold import PodRecord
from podledger.types import JSONDict, Topic

log = logging.getLogger(__name__)


class FoldState:
    """The fold's pod records and per-partition journal markers, kept in memory and on fold-state."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.topic = settings.topic(Topic.FOLD_STATE)
        # Pod records by UID; by marker key {"journal_offset": n, "inputs": {topic: newest offset},
        # "reapplied": {topic: [offsets]}} (batch.advance_marker).
        self.data: dict[bytes, Any] = {}
        self._keys: dict[int, set[bytes]] = {}  # partition -> keys it holds

    def get(self, key: bytes) -> PodRecord | None:
        return self.data.get(key)

    def journal_marker(self, partition: int) -> int | None:
        """The last journal offset whose batch's records are stored (None: none yet)."""
        marker = self.data.get(marker_key(partition)) or {}
        return None if marker.get("journal_offset") is None else int(marker["journal_offset"])

    def is_redelivery(self, partition: int, topic: str, offset: int) -> bool:
        """Whether input `offset` of `topic` on `partition` was folded by a batch whose records are
        stored: Faust redelivers from a commit older than that batch (batch.is_redelivery)."""
        return is_redelivery(self.data.get(marker_key(partition)) or {}, topic, offset)

    async def put_marker(
        self,
        producer: AIOKafkaProducer,
        partition: int,
        journal_offset: int | None,
        inputs: Mapping[str, int],
        reapplied: Mapping[str, list[int]] | None = None,
    ) -> Any:
        """Advance a partition's marker (batch.advance_marker) and start writing it."""
        marker = advance_marker(self.data.get(marker_key(partition)) or {}, journal_offset, inputs, reapplied)
        return await self.put(producer, marker_key(partition), partition, marker)

    async def put(
        self, producer: AIOKafkaProducer, key: bytes, partition: int, record: PodRecord | JSONDict | None
    ) -> Any:
        """Set (None: delete) a record and start writing it; returns its delivery to await."""
        keys = self._keys.setdefault(partition, set())
        if record is None:
            self.data.pop(key, None)
            keys.discard(key)
        else:
            self.data[key] = record
            keys.add(key)
        value = None if record is None else orjson.dumps(record)
        return await producer.send(self.topic, key=key, value=value, partition=partition)

    def keys_of(self, partition: int) -> set[bytes]:
        return self._keys.get(partition, set())

    def forget(self, partition: int) -> None:
        """Drop a partition's records (another worker may change them while we do not own it)."""
        for key in self._keys.pop(partition, set()):
            self.data.pop(key, None)

    async def restore(self, partition: int) -> int:
        """Load a partition's records from the state topic; returns how many there are."""
        self.forget(partition)
        consumer = new_consumer(self.settings)
        tp = TopicPartition(self.topic, partition)
        await consumer.start()
        keys = self._keys.setdefault(partition, set())
        try:
            consumer.assign([tp])
            async for message in read_to_end(consumer, tp):
                if message.value is None:
                    self.data.pop(message.key, None)
                    keys.discard(message.key)
                else:
                    self.data[message.key] = orjson.loads(message.value)
                    keys.add(message.key)
        finally:
            await consumer.stop()
        return len(keys)

    async def chain_heads(self, partition: int) -> dict[tuple[str, int], bytes]:
        """The head of each chained output topic's partition (schemas/chain.py): the hash its last
        record carries. Read from the topic itself on every restore, it is right whoever wrote
        last, a worker that died mid-batch included."""
        heads: dict[tuple[str, int], bytes] = {}
        consumer = new_consumer(self.settings)
        await consumer.start()
        try:
            for topic in CHAINED:
                tp = TopicPartition(self.settings.topic(topic), partition)
                consumer.assign([tp])
                end = (await consumer.end_offsets([tp]))[tp]
                heads[(topic, partition)] = GENESIS
                if end > 0:
                    async for message in read_to_end(consumer, tp, end - 1, end):
                        heads[(topic, partition)] = head_after(message.headers or ())
        finally:
            await consumer.stop()
        return heads
