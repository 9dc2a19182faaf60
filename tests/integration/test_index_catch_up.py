"""The index's consumer role catching up on the real broker: far behind the topics, it loads
without the pod indexes, in transactions of several fetches, and builds the indexes at the end;
stopped halfway, the next run resumes at the offsets stored with the rows, without copies, and
answers as an index filled record by record."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from podledger.config import Settings
from podledger.read.audit import queries
from podledger.read.audit.parse import PodRef
from podledger.read.index import RawRecord, SqliteIndex, builder, schema, writes
from podledger.streams.topics import ensure_topics
from podledger.types import Topic
from podledger.workload import workload
from tests.support.audit import audit_records, fill_audit_index

pytestmark = pytest.mark.kafka


async def publish(settings: Settings, records: list[RawRecord]) -> None:
    """The records onto the test's topics, each on its partition, in order (so at its offset)."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap, max_request_size=4 << 20)
    await producer.start()
    try:
        for r in records:
            await producer.send(settings.topic(r.topic), key=r.key, value=r.value, partition=r.partition)
        await producer.flush()
    finally:
        await producer.stop()


def pod_indexes(index: SqliteIndex) -> set[str]:
    rows = index.db.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE '%_pod'")
    return {name for (name,) in rows}


class Stopped(Exception):
    """The builder stopped from outside halfway through its catch-up."""


def test_a_catch_up_far_behind_loads_in_bulk_and_a_stopped_one_resumes_without_copies(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writes, "BULK_RECORDS", 10)
    monkeypatch.setattr(builder, "CATCH_UP_RECORDS", 150)
    monkeypatch.setattr(builder, "BATCH_RECORDS", 40)  # a catch-up transaction takes several fetches
    ingress = list(workload(8, 400, nodes=2, seed=11, start_ms=1_714_572_000_000))
    records = audit_records(ingress, partition=1)
    asyncio.run(ensure_topics(settings))
    asyncio.run(publish(settings, records))

    index = SqliteIndex(tmp_path / "audit.sqlite", topics="test")
    seen: list[tuple[int, set[str]]] = []

    def stop_halfway(done: int, todo: int) -> None:
        seen.append((done, pod_indexes(index)))
        if done >= todo // 2:
            raise Stopped

    with pytest.raises(Stopped):
        asyncio.run(builder.run(settings, index, progress=stop_halfway))
    assert [indexes for _, indexes in seen] == [set()] * len(seen)  # loading without them
    sizes = [b - a for a, b in itertools.pairwise([0] + [done for done, _ in seen])]
    assert len(sizes) >= 2 and max(sizes) > 40  # a transaction took several fetches
    assert pod_indexes(index) == set(schema.POD_INDEXES)  # built again when it stopped
    stored = index.offsets()
    halfway = sum(stored.values())
    assert seen[-1][0] == halfway < len(records)

    lag = asyncio.run(builder.run(settings, index))
    assert lag.total == 0 and lag.indexed == len(records) - halfway  # resumed where the file ended
    expected = SqliteIndex(tmp_path / "expected.sqlite", topics="test")
    fill_audit_index(expected, ingress, partition=1)
    for topic in (Topic.POD_STATUS_HISTORY, Topic.JOURNAL):
        assert index.count(topic) == expected.count(topic) == sum(r.topic == topic for r in records)
    for uid in {e.key for e in ingress}:
        assert answers(index, uid) == answers(expected, uid)


def answers(index: SqliteIndex, uid: str) -> Any:
    return (
        queries.history(index, PodRef(uid=uid), with_status=True),
        queries.why(index, PodRef(uid=uid)),
        [e.value for e in index.journal(uid)],
    )
