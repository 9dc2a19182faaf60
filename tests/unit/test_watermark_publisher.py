"""The watermark publisher's tick (streams/watermark_publisher.py) with small fakes of its Kafka
clients: a rebalance during its awaits, the ingress topics' timestamp type, the ISR allowance."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka import TopicPartition

from podledger.config import Settings
from podledger.schemas import models
from podledger.streams.watermark_publisher import BLOCKED_CHECK_S, WatermarkPublisher
from podledger.types import INGRESS_TOPICS

MARKER = {"inputs": {str(t): 9 for t in INGRESS_TOPICS}}  # inputs up to offset 9 folded and stored


def last_record(partition: int, t_ms: int | None = 9_000) -> models.Watermark:
    return models.Watermark(partition, t_ms, {str(t): 10 for t in INGRESS_TOPICS}, None)


class Admin:
    """The admin calls the publisher makes: topic configs and replicas, as the broker answers."""

    def __init__(self, settings: Settings, types: dict[str, str], replicas: int = 1) -> None:
        self.settings, self.types, self.replicas = settings, types, replicas
        self.config_reads = 0

    async def list_topics(self) -> list[str]:
        return [self.settings.topic(t) for t in self.types]

    async def describe_configs(self, resources: list[Any]) -> list[Any]:
        self.config_reads += 1
        by_name = {self.settings.topic(t): v for t, v in self.types.items()}
        # DescribeConfigs v1's entries: name, value, read only, source (1: the topic's own), sensitive.
        rows = [
            (0, None, 2, r.name, [("message.timestamp.type", by_name[r.name], False, 1, False, [])])
            for r in resources
        ]
        return [SimpleNamespace(API_VERSION=1, resources=rows)]

    async def describe_topics(self, names: list[str]) -> list[dict[str, Any]]:
        return [{"topic": n, "partitions": [{"replicas": list(range(self.replicas))}]} for n in names]

    async def close(self) -> None:
        pass


class Consumer:
    """End offsets: every ingress partition at `end`; `during` runs inside the await, if set."""

    def __init__(self, end: int) -> None:
        self.end = end
        self.during: Callable[[], None] | None = None

    async def end_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        if self.during is not None:
            self.during()
        await asyncio.sleep(0)
        return {tp: self.end for tp in tps}


class Harness:
    """A publisher whose reads of its last records, end offsets and sends are the fakes'."""

    def __init__(self, settings: Settings | None = None, end: int = 10, replicas: int = 1) -> None:
        self.settings = settings or Settings()
        self.pub = WatermarkPublisher(self.settings)
        self.admin = Admin(self.settings, {str(t): "LogAppendTime" for t in INGRESS_TOPICS}, replicas)
        self.consumer = Consumer(end)
        self.last: dict[int, models.Watermark | None] = {}
        self.during_last: dict[int, Callable[[], None]] = {}  # runs while reading a partition's record
        self.published: list[models.Watermark] = []
        self.pub._admin = self.admin
        self.pub._reader = self._reader
        self.pub._last = self._last
        self.pub._publish = self._publish

    async def _reader(self) -> Any:
        return self.consumer

    async def _last(self, consumer: Any, partition: int) -> models.Watermark | None:
        if partition in self.during_last:
            self.during_last.pop(partition)()
        await asyncio.sleep(0)
        return self.last.get(partition)

    async def _publish(self, records: list[models.Watermark]) -> None:
        await asyncio.sleep(0)
        self.published.extend(records)

    def tick(self, owned: set[int]) -> list[models.Watermark]:
        return asyncio.run(self.pub.tick(owned))

    def rebalance_restoring(self, *partitions: int) -> Callable[[], None]:
        """An eager rebalance: everything revoked, then `partitions` restored again."""

        def run() -> None:
            self.pub.forget()
            for partition in partitions:
                self.pub.restored(partition, MARKER, None)

        return run


def test_a_partition_restored_during_a_tick_adopts_its_last_record_instead_of_stepping_back() -> None:
    # The reviewer's reproduction: while partition 1's record is read, a rebalance restores 0 again.
    h = Harness(end=20)  # a backlog on every ingress topic: only the last record's T can be claimed
    h.last = {0: last_record(0), 1: last_record(1)}
    h.pub.restored(0, MARKER, None)
    h.pub.restored(1, MARKER, None)
    h.during_last[1] = h.rebalance_restoring(0)
    h.tick({0, 1})
    assert all(r.t_ms is not None and r.t_ms >= 9_000 for r in h.published), h.published

    h.tick({0})  # the partition restored meanwhile is read and adopted now
    assert h.pub.progress[0].last == last_record(0) and not h.pub._unread
    assert all(r.t_ms is not None and r.t_ms >= 9_000 for r in h.published), h.published


def test_a_rebalance_while_the_end_offsets_are_read_ends_the_tick() -> None:
    h = Harness(end=20)
    h.last = {0: last_record(0)}
    h.pub.restored(0, MARKER, None)
    h.tick({0})
    assert h.pub.progress[0].last == last_record(0)

    h.consumer.during = h.rebalance_restoring(0)  # the new Progress has not adopted its record yet
    assert h.tick({0}) == [] and h.published == []
    h.consumer.during = None
    h.tick({0})
    assert h.pub.progress[0].last == last_record(0) and h.published == []  # backlog: T stays 9_000


def test_a_partition_owned_but_not_restored_resumes_from_its_record_and_restoring_keeps_it() -> None:
    h = Harness(end=10)
    h.last = {3: last_record(3)}
    h.pub.clock_ms = 20_000
    h.during_last[3] = lambda: h.pub.restored(3, MARKER, None)  # restored while its record is read
    [record] = h.tick({3})
    assert record.t_ms == 19_999 and not h.pub._unread  # caught up: adopted, then the clock


def test_a_writer_stamped_topic_withdraws_the_claims_until_it_is_repaired(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = Harness(end=10)
    h.last = {0: last_record(0), 1: last_record(1)}
    h.pub.clock_ms = 20_000
    for p in (0, 1):
        h.pub.restored(p, MARKER, None)
    h.admin.types["pleg"] = "CreateTime"
    with caplog.at_level(logging.WARNING, "podledger.streams.watermark_publisher"):
        h.tick({0, 1})
        h.tick({0, 1})
    assert [(r.partition, r.t_ms) for r in h.published] == [(0, None), (1, None)]  # on every partition
    warnings = [r.getMessage() for r in caplog.records if "pleg" in r.getMessage()]
    assert len(warnings) == 1 and "podledger topics create" in warnings[0]

    h.admin.types["pleg"] = "LogAppendTime"  # `podledger topics create`
    h.pub.clock_ms = 21_000
    h.tick({0, 1})
    assert h.admin.config_reads == 1, "read again before BLOCKED_CHECK_S"
    assert h.published[-1].t_ms is None
    assert h.pub._checked_at is not None
    h.pub._checked_at -= BLOCKED_CHECK_S
    h.tick({0, 1})
    assert [(r.partition, r.t_ms) for r in h.published[-2:]] == [(0, 20_999), (1, 20_999)]


def test_an_applied_writer_stamped_record_has_the_configs_read_again_at_the_next_tick() -> None:
    h = Harness(end=10)
    h.pub.restored(0, MARKER, None)
    h.pub.clock_ms = 20_000
    h.tick({0})
    h.tick({0})
    assert h.admin.config_reads == 1
    message = SimpleNamespace(
        topic=h.settings.topic("pleg"), partition=0, offset=9, timestamp=15.0, timestamp_type=0
    )
    h.pub.stored([message], {}, {0})
    h.admin.types["pleg"] = "CreateTime"  # changed since the last reading
    h.tick({0})
    assert h.admin.config_reads == 2 and h.published[-1].t_ms is None


# (configured replication factor, replicas the ingress partitions have) -> a caught-up T at 100_000
ISR_VECTORS = [
    ("one replica: the clock", 1, 1, 99_999),
    ("three replicas configured and found", 3, 3, 69_999),
    ("configured 1, the topics have 3: the topics decide", 1, 3, 69_999),
    ("configured 3, the topics have 1 (a test broker): the allowance stays", 3, 1, 69_999),
]


@pytest.mark.parametrize(
    ("case", "configured", "found", "expected"), ISR_VECTORS, ids=[v[0] for v in ISR_VECTORS]
)
def test_a_caught_up_claim_keeps_the_isr_allowance_with_several_replicas(
    case: str, configured: int, found: int, expected: int
) -> None:
    h = Harness(Settings(replication_factor=configured), end=10, replicas=found)
    h.pub.restored(0, MARKER, None)
    h.pub.clock_ms = 100_000
    [record] = h.tick({0})
    assert record.t_ms == expected
