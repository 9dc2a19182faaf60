"""The load of `podledger bench fold`'s latency phase (podledger.bench.pacer) on the real broker: every
event lands once, each topic-partition's in the order given, spread over the time the rate asks for
rather than sent at once."""

from __future__ import annotations

import asyncio
import time

import pytest

from podledger.bench.pacer import paced_produce
from podledger.config import Settings
from podledger.partitioner import partition_for_node
from podledger.streams.topics import ensure_topics
from podledger.workload import workload
from tests.support.kafka import read_records

pytestmark = pytest.mark.kafka


def test_paced_events_land_once_in_order_at_the_rate(settings: Settings) -> None:
    asyncio.run(ensure_topics(settings))
    events = list(workload(20, 600, nodes=3, seed=4))
    rate = 1000

    started = time.monotonic()
    asyncio.run(paced_produce(settings, events, rate))
    elapsed = time.monotonic() - started

    # The last event is due after (600 - 1) / 1000 s: a pacer that sent everything at once would
    # be done well before.
    assert elapsed >= (len(events) - 1) / rate
    for topic in {e.topic for e in events}:
        landed = asyncio.run(read_records(settings, topic))
        expected = [e for e in events if e.topic == topic]
        assert len(landed) == len(expected)
        for partition in range(settings.partitions):
            keys = [r.key.decode() for r in landed if r.partition == partition]
            assert keys == [
                e.key for e in expected if partition_for_node(e.node, settings.partitions) == partition
            ]
