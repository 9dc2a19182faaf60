"""The fold's pod records: a dict in memory, backed by the compacted `fold-state` topic.

One state partition per input partition (co-partitioning), so a worker restores exactly the
partitions it is assigned. Restoring is a plain read of a compacted partition from its start to
its end offset; it replaced Faust's table recovery, which hung after repeated SIGKILLs in our
chaos test (the "No event received for active tp" stall of faust-streaming).
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from podledger.config import Settings

log = logging.getLogger("podledger.fold")
JSONDict = dict[str, Any]


class FoldState:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.topic = settings.topic("fold-state")
        self.data: dict[bytes, JSONDict] = {}
        self._keys: dict[int, set[bytes]] = {}  # partition -> keys it holds

    def get(self, key: bytes) -> JSONDict | None:
        return self.data.get(key)

    async def put(
        self, producer: AIOKafkaProducer, key: bytes, partition: int, record: JSONDict | None
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
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.settings.bootstrap,
            enable_auto_commit=False,
            group_id=None,
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=8 << 20,
            **self.settings.kafka_client_options(),
        )
        tp = TopicPartition(self.topic, partition)
        await consumer.start()
        keys = self._keys.setdefault(partition, set())
        try:
            consumer.assign([tp])
            end = (await consumer.end_offsets([tp]))[tp]
            await consumer.seek_to_beginning(tp)
            while await consumer.position(tp) < end:
                batch = await consumer.getmany(tp, timeout_ms=1000, max_records=10_000)
                for message in batch.get(tp, []):
                    if message.offset >= end:
                        continue
                    if message.value is None:
                        self.data.pop(message.key, None)
                        keys.discard(message.key)
                    else:
                        self.data[message.key] = orjson.loads(message.value)
                        keys.add(message.key)
        finally:
            await consumer.stop()
        return len(keys)
