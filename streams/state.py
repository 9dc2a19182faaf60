"""The fold's pod records: in memory as their stored JSON, backed by the compacted `fold-state` topic.

One state partition per input partition (co-partitioning), so a worker restores exactly the
partitions it is assigned. Restoring is a plain read of a compacted partition from its start to
its end offset; it replaced Faust's table recovery, which hung after repeated SIGKILLs in our
chaos test (the "No event received for active tp" stall of faust-streaming).

A pod record stays in memory as the JSON bytes it has on the topic and is decoded each time the
fold reads it (about 15 us for a typical record, once per pod per batch). Decoded, a record takes
about five times its JSON's size in Python objects (a 2.5 KB record, 12 KB), and a hundred
thousand of them made restoring a slow, garbage-collected build of 1.2 GB of dicts
(`podledger bench recovery`). As bytes, restoring is reading the partition, and memory is the
topic's size. The markers, small and read for every input, stay decoded.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any

import orjson
from aiokafka import AIOKafkaProducer, TopicPartition

from podledger.config import Settings
from podledger.kafka import new_consumer, read_to_end
from podledger.schemas.chain import GENESIS, head_after
from podledger.streams.batch import (
    MARKER_PREFIX,
    advance_marker,
    holds_events,
    is_marker,
    is_redelivery,
    marker_key,
)
from podledger.streams.fold import PodRecord
from podledger.streams.seal import CHAINED
from podledger.types import JSONDict, Topic

log = logging.getLogger(__name__)


class FoldState:
    """The fold's pod records and per-partition journal markers, kept in memory and on fold-state."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.topic = settings.topic(Topic.FOLD_STATE)
        self.records: dict[bytes, bytes] = {}  # pod UID -> its record's JSON
        # Partition -> marker {"journal_offset": n, "inputs": {topic: newest offset},
        # "reapplied": {topic: [offsets]}} (batch.advance_marker).
        self.markers: dict[int, JSONDict] = {}
        self.data = StateView(self)  # every key, decoded: records and markers
        self._keys: dict[int, set[bytes]] = {}  # partition -> keys it holds

    def get(self, key: bytes) -> PodRecord | None:
        """A pod's record, decoded afresh: the caller may change it freely."""
        raw = self.records.get(key)
        return None if raw is None else orjson.loads(raw)

    def journal_marker(self, partition: int) -> int | None:
        """The last journal offset whose batch's records are stored (None: none yet)."""
        marker = self.markers.get(partition) or {}
        return None if marker.get("journal_offset") is None else int(marker["journal_offset"])

    def is_redelivery(self, partition: int, topic: str, offset: int) -> bool:
        """Whether input `offset` of `topic` on `partition` was folded by a batch whose records are
        stored: Faust redelivers from a commit older than that batch (batch.is_redelivery)."""
        return is_redelivery(self.markers.get(partition) or {}, topic, offset)

    async def put_marker(
        self,
        producer: AIOKafkaProducer,
        partition: int,
        journal_offset: int | None,
        inputs: Mapping[str, int],
        reapplied: Mapping[str, list[int]] | None = None,
    ) -> Any:
        """Advance a partition's marker (batch.advance_marker) and start writing it."""
        marker = advance_marker(self.markers.get(partition) or {}, journal_offset, inputs, reapplied)
        return await self.put(producer, marker_key(partition), partition, marker)

    async def put(
        self,
        producer: AIOKafkaProducer,
        key: bytes,
        partition: int,
        record: PodRecord | JSONDict | bytes | None,
    ) -> Any:
        """Set (None: delete) a record, given as itself or as its JSON, and start writing it;
        returns its delivery to await."""
        value = record if record is None or isinstance(record, bytes) else orjson.dumps(record)
        self._set(partition, key, value)
        return await producer.send(self.topic, key=key, value=value, partition=partition)

    def _set(self, partition: int, key: bytes, value: bytes | None) -> None:
        """Keep a stored value (None: a deletion) in memory as restore and put see it."""
        keys = self._keys.setdefault(partition, set())
        if is_marker(key):
            if value is None:
                self.markers.pop(partition, None)
            else:
                self.markers[partition] = orjson.loads(value)
        elif value is None:
            self.records.pop(key, None)
        else:
            self.records[key] = value
        if value is None:
            keys.discard(key)
        else:
            keys.add(key)

    def keys_of(self, partition: int) -> set[bytes]:
        return self._keys.get(partition, set())

    def held_keys(self, partition: int) -> set[bytes]:
        """The partition's records that hold events for a pod not announced yet."""
        return {key for key in self.keys_of(partition) if holds_events(self.records.get(key))}

    def forget(self, partition: int) -> None:
        """Drop a partition's records (another worker may change them while we do not own it)."""
        for key in self._keys.pop(partition, set()):
            self.records.pop(key, None)
        self.markers.pop(partition, None)

    async def restore(self, partition: int) -> int:
        """Load a partition's records from the state topic; returns how many keys it holds."""
        self.forget(partition)
        consumer = new_consumer(self.settings)
        tp = TopicPartition(self.topic, partition)
        await consumer.start()
        try:
            consumer.assign([tp])
            async for message in read_to_end(consumer, tp):
                self._set(partition, message.key, message.value)
        finally:
            await consumer.stop()
        return len(self.keys_of(partition))

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


class StateView(Mapping[bytes, Any]):
    """Every stored key of a FoldState, decoded: pod records (a fresh dict on each read) and
    markers. For readers that look at whole partitions (held_keys is the cheap way to find the
    records holding events)."""

    def __init__(self, state: FoldState) -> None:
        self._state = state

    def __getitem__(self, key: bytes) -> Any:
        if is_marker(key):
            partition = int(key[len(MARKER_PREFIX) :])
            if partition not in self._state.markers:
                raise KeyError(key)
            return self._state.markers[partition]
        return orjson.loads(self._state.records[key])

    def __iter__(self) -> Iterator[bytes]:
        yield from self._state.records
        yield from (marker_key(p) for p in self._state.markers)

    def __len__(self) -> int:
        return len(self._state.records) + len(self._state.markers)
