"""A worker that died after publishing a batch's journal entries but before storing the batch:
its successor re-applies those entries and must still fold the inputs the batch held for pods
not announced yet, which the journal does not have.

The crash is set up exactly rather than timed: the topics are put in the state the dead worker
left (the inputs, and the journal entries of the lost batch with no fold-state at all), and a
fresh worker starts on them."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaProducer

from podledger.config import Settings
from podledger.partitioner import partition_for_node
from podledger.schemas import decode, encode
from podledger.streams.batch import BatchFold
from podledger.streams.fold import Coordinates, HoldLimits
from podledger.streams.topics import ensure_topics
from podledger.types import Topic
from podledger.workload import IngressEvent, produce, workload
from tests.support import wait_for
from tests.support.kafka import read_topic, wait_for_topic
from tests.support.processes import podledger_env

pytestmark = pytest.mark.kafka


def first_events(events: list[IngressEvent], uid: str) -> tuple[IngressEvent, IngressEvent]:
    """A pod's announcement and its first pleg event."""
    mine = [e for e in events if e.key == uid]
    return mine[0], next(e for e in mine if e.topic == Topic.PLEG)


async def publish_journal(settings: Settings, partition: int, entries: list[bytes]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap, acks="all")
    await producer.start()
    try:
        for value in entries:
            entry = decode(Topic.JOURNAL, value)
            key = entry.event.get("uid") or entry.event["pod"]["metadata"]["uid"]
            await producer.send(
                settings.topic(Topic.JOURNAL), key=key.encode(), value=value, partition=partition
            )
        await producer.flush()
    finally:
        await producer.stop()


def test_inputs_held_by_a_batch_lost_in_a_crash_are_folded_by_the_successor(
    settings: Settings, podledger_process
) -> None:
    asyncio.run(ensure_topics(settings))
    events = list(workload(2, 40, nodes=1, seed=3))
    uid_x, uid_y = events[0].key, events[1].key
    add_x, pleg_x = first_events(events, uid_x)
    add_y, pleg_y = first_events(events, uid_y)
    partition = partition_for_node(add_x.node, settings.partitions)

    # The lost batch: Y announced, then a pleg event of X (not announced: held), then one of Y.
    lost_batch = [add_y, pleg_x, pleg_y]
    asyncio.run(produce(settings, lost_batch))
    offsets = {Topic.POD_UPDATES: 0, Topic.PLEG: 0}
    fold = BatchFold(lambda key: None, HoldLimits(100, 60_000), settings.max_event_bytes)
    for event in lost_batch:
        at = Coordinates(event.topic, partition, offsets[event.topic], event.ts_ms)
        offsets[event.topic] += 1
        fold.add_message(at, event.key.encode(), encode(event.value))
    journaled = [out.wire_value() for _, out in fold.batch.journal]
    assert len(journaled) == 2  # Y's announcement and Y's pleg event; X's is held, not journaled
    asyncio.run(publish_journal(settings, partition, journaled))  # ... and then the worker died

    proc = podledger_process(["run", "--roles", "fold"], env=podledger_env(settings, None))
    wait_for(
        lambda: "re-applied journal offsets 0..1" in proc.output(),
        timeout=120,
        what="the re-apply",
        alive=proc,
    )
    asyncio.run(produce(settings, [add_x]))  # X is announced: its held pleg event applies now

    journal = wait_for_topic(settings, "journal", 4, timeout=120, alive=proc)
    inputs = {(e.topic, e.offset) for e in (decode(Topic.JOURNAL, v) for _, _, v in journal)}
    assert (Topic.PLEG, 0) in inputs, f"X's held pleg event was lost; journal has {sorted(inputs)}"
    assert inputs == {(Topic.POD_UPDATES, 0), (Topic.PLEG, 0), (Topic.PLEG, 1), (Topic.POD_UPDATES, 1)}
    # Y's re-applied inputs were not folded a second time.
    assert len(journal) == 4
    history = asyncio.run(read_topic(settings, "pod-status-history", 1, idle=1.0))
    assert {decode(Topic.POD_STATUS_HISTORY, v).uid for _, _, v in history} == {uid_x, uid_y}
