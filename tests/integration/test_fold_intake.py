"""The live fold's edges on the real broker: outputs published as whole record batches
(podledger.delivery.deliver_batched), and input offsets that Faust still commits although the fold
reads its consumer in whole fetches (streams/intake.py)."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import MessageSizeTooLargeError

from podledger.config import Settings
from podledger.delivery import DeliveryHealth, OutRecord, deliver_batched
from podledger.schemas import decode, encode
from podledger.streams.topics import ensure_topics, start_admin
from podledger.types import INGRESS_TOPICS, Topic
from podledger.workload import produce, workload
from tests.support import wait_for
from tests.support.kafka import Producers, accept_writes, read_records, refuse_writes, wait_for_topic
from tests.support.processes import podledger_env

pytestmark = pytest.mark.kafka


def records_for(settings: Settings, topic: Topic, count: int, size: int) -> list[OutRecord]:
    return [
        OutRecord(
            settings.topic(topic),
            n % settings.partitions,
            f"k{n}".encode(),
            f"{n:08d}".encode() * (size // 8),
            [("n", str(n).encode())],
        )
        for n in range(count)
    ]


async def until_refused(settings: Settings, topic: Topic) -> None:
    """Wait until the broker applies a lowered max.message.bytes (it does so a little after the
    alteration is acknowledged): probe records, keyed `probe`, go to partition 0 until refused."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap, acks="all", request_timeout_ms=5000)
    await producer.start()
    try:
        for _ in range(300):
            try:
                await producer.send_and_wait(settings.topic(topic), b"x" * 256, key=b"probe", partition=0)
            except MessageSizeTooLargeError:
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"{topic} still takes 256-byte records 30 s after max.message.bytes was lowered")
    finally:
        await producer.stop()


def test_batched_records_land_in_order_at_the_offsets_returned(settings: Settings) -> None:
    """Several batches per topic-partition (16 KB batches, 1.5 MB per partition), two topics."""
    asyncio.run(ensure_topics(settings))
    journal = records_for(settings, Topic.JOURNAL, 3000, 1024)
    history = records_for(settings, Topic.POD_STATUS_HISTORY, 300, 200)
    mixed = journal[:1500] + history + journal[1500:]
    health = DeliveryHealth()
    offsets = asyncio.run(Producers(settings, 16 << 10).deliver(mixed, health))
    assert health.healthy() == (True, "ok") and health.failing_since is None
    on_topic = {
        (r.topic, r.partition, r.offset): (r.key, r.value, list(r.headers))
        for name in (Topic.JOURNAL, Topic.POD_STATUS_HISTORY)
        for r in asyncio.run(read_records(settings, name))
    }
    assert len(on_topic) == len(mixed)  # each once
    for record, offset in zip(mixed, offsets, strict=True):
        assert on_topic[(record.topic, record.partition, offset)] == (
            record.key,
            record.value,
            record.headers,
        )
    for name in (Topic.JOURNAL, Topic.POD_STATUS_HISTORY):  # per partition, in the order given
        for partition in range(settings.partitions):
            sent = [
                o
                for r, o in zip(mixed, offsets, strict=True)
                if r.topic == settings.topic(name) and r.partition == partition
            ]
            assert sent == list(range(len(sent)))


def test_a_refused_topic_is_resent_until_taken_and_the_others_are_sent_once(settings: Settings) -> None:
    """pod-status-history refuses every batch (max.message.bytes); the journal's batches land at
    once and are never sent again; the history's are, on a new producer, until the repair."""
    asyncio.run(ensure_topics(settings))
    asyncio.run(refuse_writes(settings, Topic.POD_STATUS_HISTORY, 64))
    asyncio.run(until_refused(settings, Topic.POD_STATUS_HISTORY))
    journal = records_for(settings, Topic.JOURNAL, 200, 100)
    history = records_for(settings, Topic.POD_STATUS_HISTORY, 200, 100)
    health = DeliveryHealth()
    producers = Producers(settings, 1 << 20)

    async def run() -> list[int]:
        delivering = asyncio.create_task(
            deliver_batched(journal + history, producers.get, health, producers.reset)
        )
        try:
            async with asyncio.timeout(60):
                while health.failing_since is None and not delivering.done():
                    await asyncio.sleep(0.1)
                assert health.failing_since is not None, "the refused topic was taken"
            assert not delivering.done()
            assert "MessageSizeTooLarge" in health.last_error
            await asyncio.sleep(1)  # a resend or two, still refused
            assert not delivering.done()
            await accept_writes(settings, Topic.POD_STATUS_HISTORY)  # the operator's repair
            async with asyncio.timeout(60):
                return await delivering
        finally:
            await producers.reset()

    offsets = asyncio.run(run())
    assert health.failing_since is None
    assert producers.made >= 2  # a new producer after the refusal
    assert len(asyncio.run(read_records(settings, Topic.JOURNAL))) == len(journal)  # never resent
    landed = [r for r in asyncio.run(read_records(settings, Topic.POD_STATUS_HISTORY)) if r.key != b"probe"]
    assert sorted(r.value for r in landed) == sorted(r.value for r in history)
    by_offset = {(r.partition, r.offset): r.value for r in landed}
    for record, offset in zip(journal + history, offsets, strict=True):
        if record.topic == settings.topic(Topic.POD_STATUS_HISTORY):
            assert by_offset[(record.partition, offset)] == record.value


def test_faust_commits_the_fold_input_offsets_once_the_batches_are_stored(
    settings: Settings, podledger_process
) -> None:
    """The fold takes whole fetches from Faust's consumer; Faust's offset commit still covers every
    input, and covers it only with the batch's fold-state written (its marker names the input)."""
    asyncio.run(ensure_topics(settings))
    events = list(workload(30, 600, nodes=3, seed=11))
    proc = podledger_process(["run", "--roles", "fold"], env=podledger_env(settings, None))
    asyncio.run(produce(settings, events))
    wait_for_topic(settings, "journal", len(events), alive=proc)

    async def positions() -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        admin = await start_admin(settings)
        try:
            committed = await admin.list_consumer_group_offsets(settings.fold_app_id)
        finally:
            await admin.close()
        tps = [
            TopicPartition(settings.topic(t), p) for t in INGRESS_TOPICS for p in range(settings.partitions)
        ]
        consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap)
        await consumer.start()
        try:
            ends = await consumer.end_offsets(tps)
        finally:
            await consumer.stop()
        return {tp: meta.offset for tp, meta in committed.items() if tp in ends}, ends

    def all_committed() -> bool:
        committed, ends = asyncio.run(positions())
        return all(committed.get(tp, 0) == end for tp, end in ends.items() if end > 0)

    wait_for(all_committed, timeout=60, what="the input offsets committed", alive=proc)
    committed, _ = asyncio.run(positions())
    markers = {
        r.partition: r.value
        for r in asyncio.run(read_records(settings, Topic.FOLD_STATE))
        if r.key.startswith(b"\x00journal:") and r.value is not None
    }
    for tp, offset in committed.items():
        if offset == 0:
            continue
        inputs = orjson.loads(markers[tp.partition])["inputs"]
        topic = tp.topic[len(settings.topic_prefix) :]
        assert inputs[topic] >= offset - 1  # stored before committed


def test_a_pod_update_is_folded_after_the_events_it_follows_when_they_span_fetches(
    settings: Settings, podledger_process
) -> None:
    """A fetch returns at most max.partition.fetch.bytes (1 MiB) of each topic-partition. A pod
    whose PLEG events fill two such fetches and which is then removed: the removal, already
    fetched in full from pod-updates, waits for the PLEG events the first fetch did not reach,
    so every event is applied to the pod before its removal and none is given up as unknown."""
    asyncio.run(ensure_topics(settings))
    events = list(workload(1, 12000, nodes=1, seed=7, remove_at_end=True))
    pleg_bytes = sum(len(encode(e.value)) for e in events if e.topic == Topic.PLEG)
    assert pleg_bytes > 1 << 21  # two fetches at the least
    # All on the broker before the fold's first fetch. The announcement and the removal are sent
    # apart: one produce request appends a whole batch under one broker stamp, so sent together
    # they could share a stamp with thousands of the pod's events (or come after them).
    for part in (events[:1], events[1:-1], events[-1:]):
        asyncio.run(produce(settings, part))
    proc = podledger_process(["run", "--roles", "fold"], env=podledger_env(settings, None))
    journal = wait_for_topic(settings, "journal", len(events), timeout=90, alive=proc)
    entries = [decode(Topic.JOURNAL, value) for _, _, value in journal]
    assert len(entries) == len(events)
    assert entries[-1].topic == Topic.POD_UPDATES and entries[-1].event["op"] == "REMOVE"
    assert entries[0].topic == Topic.POD_UPDATES and entries[0].event["op"] == "ADD"
    assert not asyncio.run(read_records(settings, Topic.DEAD_LETTER))
