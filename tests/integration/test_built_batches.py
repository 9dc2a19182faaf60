"""Record batches the native fold core builds and seals (streams/foldcore/serve_sealed.go), sent by
an idempotent aiokafka producer as they are (podledger.delivery.deliver_batched): the broker takes
them with the producer's state set, stamped when sent and their checksum made anew, every record
lands once, in order, at the offsets returned, and a refused batch is sent again on a new producer
(a new producer id, so a new checksum) until the topic takes it."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import pytest

from podledger.config import Settings
from podledger.delivery import DeliveryHealth, OutRecord, deliver_batched
from podledger.partitioner import partition_for_node
from podledger.record_batch import RecordBatch
from podledger.schemas import encode
from podledger.streams.fold_core_live import LiveCore
from podledger.streams.fold_core_wire import CoreGaveUp
from podledger.streams.native_replay import find_core
from podledger.streams.outputs import Coordinates
from podledger.streams.topics import ensure_topics
from podledger.types import Topic
from podledger.workload import workload
from tests.support.kafka import Producers, accept_writes, read_records, refuse_writes

pytestmark = pytest.mark.kafka

GENESIS = bytes(32)


def built_batches(settings: Settings, record_batch_bytes: int) -> list[RecordBatch]:
    """A workload folded and sealed by the real core, its batches named with the test's topics
    (at most `record_batch_bytes` each, so that each topic-partition has several)."""
    core_path = find_core("auto")
    assert core_path, "the native fold core is not built: `make install` builds it (it needs Go)"
    offsets: dict[tuple[str, int], int] = {}
    inputs = []
    for e in workload(30, 600, nodes=3, seed=3):
        partition = partition_for_node(e.node, settings.partitions)
        offset = offsets[(e.topic, partition)] = offsets.get((e.topic, partition), -1) + 1
        inputs.append((Coordinates(e.topic, partition, offset, e.ts_ms), encode(e.value), None))
    heads = {
        (topic, p): GENESIS
        for topic in (Topic.JOURNAL, Topic.POD_STATUS_HISTORY)
        for p in range(settings.partitions)
    }

    async def fold() -> list[RecordBatch]:
        core = LiveCore(core_path, 1 << 20, 100, settings.topic_prefix, record_batch_bytes)
        try:
            batch = await core.fold(inputs, {}, heads)
        finally:
            await core.close()
        assert not isinstance(batch, CoreGaveUp), f"the core gave up: {batch.reason}"
        return batch.built

    return [replace(b, topic=settings.topic(b.topic)) for b in asyncio.run(fold())]


def on_topics(settings: Settings) -> dict[tuple[str, int, int], tuple[bytes | None, bytes | None, list]]:
    return {
        (r.topic, r.partition, r.offset): (r.key, r.value, list(r.headers))
        for name in (Topic.JOURNAL, Topic.POD_STATUS, Topic.POD_STATUS_HISTORY)
        for r in asyncio.run(read_records(settings, name))
    }


def test_built_batches_land_in_order_at_the_offsets_returned(settings: Settings) -> None:
    """Built batches between plain records on the same partitions: each record once, a built
    batch's records in a row, the offset returned its last record's."""
    asyncio.run(ensure_topics(settings))
    built = built_batches(settings, 8 << 10)
    journal = [b for b in built if b.topic == settings.topic(Topic.JOURNAL)]
    assert len(journal) > settings.partitions  # several batches a partition
    plain = [
        OutRecord(settings.topic(Topic.JOURNAL), n % settings.partitions, b"plain", b"%d" % n)
        for n in range(30)
    ]
    items: list[OutRecord | RecordBatch] = [*plain[:10], *built[: len(built) // 2], *plain[10:20]]
    items += [*built[len(built) // 2 :], *plain[20:]]
    health = DeliveryHealth()
    time.sleep(0.01)  # the core stamped its batches before this
    sent_after_ms = int(time.time() * 1000)
    offsets = asyncio.run(Producers(settings, 1 << 20).deliver(items, health))
    landed = on_topics(settings)
    stamps = [
        r.timestamp
        for name in (Topic.JOURNAL, Topic.POD_STATUS, Topic.POD_STATUS_HISTORY)
        for r in asyncio.run(read_records(settings, name))
    ]
    assert min(stamps) >= sent_after_ms  # stamped when sent (CreateTime), as aiokafka stamps
    assert len(landed) == len(plain) + sum(b.count for b in built)  # each once
    next_offset: dict[tuple[str, int], int] = {}
    for item, offset in zip(items, offsets, strict=True):
        where = (item.topic, item.partition)
        count = item.count if isinstance(item, RecordBatch) else 1
        assert offset == next_offset.get(where, 0) + count - 1  # in the order given, in a row
        next_offset[where] = offset + 1
        if isinstance(item, OutRecord):
            assert landed[(*where, offset)][:2] == (item.key, item.value)
    history = [v for (t, _, _), v in landed.items() if t == settings.topic(Topic.POD_STATUS_HISTORY)]
    assert history and all(any(name == "podledger-hash" for name, _ in h) for _, _, h in history)
    assert all(any(name == "ce_id" for name, _ in h) for _, _, h in history)


def test_a_refused_built_batch_is_sent_again_on_a_new_producer_until_taken(settings: Settings) -> None:
    """pod-status-history refuses every batch; the journal's built batches land at once, the
    history's are sent again, with each new producer's state and checksum, until the repair."""
    asyncio.run(ensure_topics(settings))
    built = built_batches(settings, 1 << 20)
    asyncio.run(refuse_writes(settings, Topic.POD_STATUS_HISTORY, 64))
    health = DeliveryHealth()
    producers = Producers(settings, 1 << 20)

    async def run() -> list[int]:
        delivering = asyncio.create_task(deliver_batched(built, producers.get, health, producers.reset))
        try:
            async with asyncio.timeout(60):
                while health.failing_since is None and not delivering.done():
                    await asyncio.sleep(0.1)
            assert not delivering.done(), "the refused topic took the batches"
            await asyncio.sleep(1)  # a resend or two, still refused
            await accept_writes(settings, Topic.POD_STATUS_HISTORY)
            async with asyncio.timeout(60):
                return await delivering
        finally:
            await producers.reset()

    offsets = asyncio.run(run())
    assert health.failing_since is None and producers.made >= 2
    landed = on_topics(settings)
    assert len(landed) == sum(b.count for b in built)  # each once: the journal's never resent
    for item, offset in zip(built, offsets, strict=True):
        assert (item.topic, item.partition, offset) in landed
