"""Topics are created with the partitions, cleanup policies and retention `streams/topics.py` declares
(docs/architecture.md, "Topics and partitioning"), idempotently, on the real broker."""

from __future__ import annotations

import asyncio
import dataclasses
import logging

import pytest
from aiokafka import AIOKafkaProducer

from podledger.config import Settings
from podledger.errors import UserError
from podledger.streams.topics import ALL_TOPICS, describe, ensure_topics
from podledger.types import Topic
from tests.support.kafka import configs_in_force, declared_configs, set_topic_configs

pytestmark = pytest.mark.kafka

EXPECTED_CLEANUP = {
    "pod-updates": "delete",
    "pleg": "delete",
    "probe-results": "delete",
    "pod-lifecycle": "delete",
    "journal": "delete",
    "pod-status": "compact",
    "pod-status-history": "delete",
    "pod-deletions": "delete",
    "dead-letter": "delete",
    "fold-state": "compact",
    "sink-state": "compact",
    "pod-status-watermarks": "compact",
}


def test_create_twice_then_read_configs_back(settings: Settings) -> None:
    first = asyncio.run(ensure_topics(settings))
    assert {c.topic: c.action for c in first} == {settings.topic(n): "created" for n in EXPECTED_CLEANUP}
    second = asyncio.run(ensure_topics(settings))
    assert {c.action for c in second} == {"unchanged"}

    described = asyncio.run(describe(settings))
    for spec in ALL_TOPICS:
        info = described[settings.topic(spec.name)]
        assert info["partitions"] == str(settings.partitions)
        assert info["cleanup.policy"] == EXPECTED_CLEANUP[spec.name]
        assert info["retention.ms"] == str(spec.retention_ms)
        assert info["min.insync.replicas"] == "1"  # min(2, replication factor 1)
    # Long retention for the audit trail, forever for the compacted latest-status table.
    assert int(described[settings.topic("journal")]["retention.ms"]) >= 30 * 86_400_000
    assert int(described[settings.topic("pod-status-history")]["retention.ms"]) >= 30 * 86_400_000
    assert described[settings.topic("pod-status")]["retention.ms"] == "-1"


def test_drifted_config_is_repaired(settings: Settings) -> None:
    asyncio.run(ensure_topics(settings))

    asyncio.run(set_topic_configs(settings, "pleg", {"retention.ms": "1000"}))
    changes = {c.topic: c for c in asyncio.run(ensure_topics(settings))}
    assert changes[settings.topic("pleg")].action == "altered"
    assert "retention.ms" in changes[settings.topic("pleg")].detail
    assert asyncio.run(describe(settings))[settings.topic("pleg")]["retention.ms"] == str(7 * 86_400_000)
    assert {c.action for c in asyncio.run(ensure_topics(settings))} == {"unchanged"}


def test_a_repair_keeps_what_else_is_set_on_the_topic(settings: Settings) -> None:
    """An operator's own config (here compression.type) outlives podledger bringing one of its
    configs back: the broker replaces a topic's whole config on each change."""
    asyncio.run(ensure_topics(settings))
    topic = Topic.POD_STATUS_HISTORY
    ours = declared_configs(settings, topic)
    changed = ours | {"compression.type": "zstd", "retention.ms": "1000"}
    asyncio.run(set_topic_configs(settings, topic, changed))
    change = {c.topic: c for c in asyncio.run(ensure_topics(settings))}[settings.topic(topic)]
    assert change.action == "altered" and change.detail == f"retention.ms={ours['retention.ms']}"

    after = asyncio.run(configs_in_force(settings, topic))
    assert after["retention.ms"] == ours["retention.ms"] and after["compression.type"] == "zstd"
    assert {c.action for c in asyncio.run(ensure_topics(settings))} == {"unchanged"}


def test_partition_count_mismatch_is_refused(settings: Settings) -> None:
    asyncio.run(ensure_topics(settings))
    other = dataclasses.replace(settings, partitions=settings.partitions + 1)
    with pytest.raises(UserError, match="co-partitioning"):
        asyncio.run(ensure_topics(other))


def test_cli_topics_create_prints_what_it_did(settings: Settings, podledger_process) -> None:
    env = {
        "PODLEDGER_BOOTSTRAP": settings.bootstrap,
        "PODLEDGER_TOPIC_PREFIX": settings.topic_prefix,
        "PODLEDGER_PARTITIONS": "2",
    }
    proc = podledger_process(["topics", "create"], env=env)
    assert proc.proc.wait(60) == 0, proc.output()
    assert proc.output().count("created") == len(ALL_TOPICS)
    again = podledger_process(["topics", "create"], env=env)
    assert again.proc.wait(60) == 0, again.output()
    assert again.output().count("unchanged") == len(ALL_TOPICS)


def test_replication_is_checked_and_a_single_copy_on_a_remote_broker_is_warned_about(
    settings: Settings,
) -> None:
    """Topics made with one replica are reported when three are configured; replication factor 1
    against a broker that is not on this machine is warned about (the local one is fine)."""
    asyncio.run(ensure_topics(settings))
    local = asyncio.run(ensure_topics(settings))
    assert [c for c in local if c.action == "warning"] == []
    raised = dataclasses.replace(settings, replication_factor=3)
    warnings = {c.topic: c.detail for c in asyncio.run(ensure_topics(raised)) if c.action == "warning"}
    assert set(warnings) == {settings.topic(spec.name) for spec in ALL_TOPICS}
    assert all("1 replicas, 3 configured" in detail for detail in warnings.values())


def test_min_insync_replicas_follows_the_replication_factor() -> None:
    from podledger.streams.topics import TOPICS, _is_loopback

    spec = TOPICS[0]
    assert [spec.configs(rf)["min.insync.replicas"] for rf in (1, 2, 3, 5)] == ["1", "2", "2", "2"]
    assert _is_loopback("127.0.0.1:9092,localhost:9093,[::1]:9094")
    assert not _is_loopback("127.0.0.1:9092,kafka:9092")


def test_new_topics_take_writes_as_soon_as_they_are_created(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    """A write to a partition whose leader does not take requests yet is refused and retried, and
    lands after writes to other topics sent later than it: the fold would see them out of order."""

    async def write_everywhere() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap, acks="all")
        await producer.start()
        try:
            sent = [
                await producer.send(settings.topic(spec.name), b"x", key=b"k", partition=p)
                for spec in ALL_TOPICS
                for p in range(settings.partitions)
            ]
            await asyncio.gather(*sent)
        finally:
            await producer.stop()

    asyncio.run(ensure_topics(settings))
    with caplog.at_level(logging.WARNING, logger="aiokafka"):
        asyncio.run(write_everywhere())
    refused = [r.getMessage() for r in caplog.records if "error produce response" in r.getMessage()]
    assert not refused
