"""The consumer client (read/client/) on the real broker: list-then-watch, selectors, resuming
from a token, and riding through a broker restart."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from functools import partial
from pathlib import Path

import pytest

from podledger.config import Settings
from podledger.local.broker import restart_kafka, start_kafka
from podledger.read.client import (
    ChangeType,
    PodChange,
    TokenExpired,
    decode_position,
    encode_position,
    watch_pods,
)
from podledger.streams.topics import DAY_MS, ensure_topics
from tests import pods
from tests.support.kafka import publish_desired, publish_versions

pytestmark = pytest.mark.kafka

make_pod = partial(pods.pod, ["main"], image="app:1")


def desired(name: str, node: str, app: str, namespace: str = "default") -> dict:
    return make_pod(
        name=name, uid=f"uid-{name}", node=node, namespace=namespace, metadata={"labels": {"app": app}}
    )


def version(pod: dict, n: int, ready: str = "True"):
    return pods.versioned(pod, pod["spec"]["nodeName"], n, pods.running_status(ready=ready))


async def take(changes: AsyncIterator[PodChange], count: int, timeout: float = 30.0) -> list[PodChange]:
    out: list[PodChange] = []
    async with asyncio.timeout(timeout):
        async for change in changes:
            out.append(change)
            if len(out) == count:
                return out
    return out


async def take_until_synced(changes: AsyncIterator[PodChange]) -> list[PodChange]:
    out: list[PodChange] = []
    async with asyncio.timeout(30):
        async for change in changes:
            out.append(change)
            if change.type == ChangeType.SYNCED:
                return out
    return out


def test_list_then_watch_with_selectors_and_resume(settings: Settings) -> None:
    asyncio.run(list_then_watch(settings))


async def list_then_watch(settings: Settings) -> None:
    await ensure_topics(settings)
    web1, web2 = desired("web-1", "n1", "web"), desired("web-2", "n2", "web")
    db = desired("db-1", "n1", "db", namespace="data")
    await publish_desired(settings, web1, web2, db)
    await publish_versions(settings, version(web1, 1), version(web1, 2), version(web2, 1), version(db, 1))

    everything = watch_pods(settings)
    listed = await take_until_synced(everything)
    assert {(c.type, c.name, c.status.version) for c in listed[:-1]} == {
        (ChangeType.LISTED, "web-1", 2), (ChangeType.LISTED, "web-2", 1), (ChangeType.LISTED, "db-1", 1)
    }  # fmt: skip
    assert listed[0].pod()["metadata"]["labels"] == {"app": "web"}, "joined with pod-updates"
    token = listed[-1].token

    web_only = watch_pods(settings, labels="app=web")
    assert {c.name for c in (await take_until_synced(web_only))[:-1]} == {"web-1", "web-2"}
    on_n1 = watch_pods(settings, node="n1", namespace="data")
    assert [c.name for c in (await take_until_synced(on_n1))[:-1]] == ["db-1"]

    web3 = desired("web-3", "n2", "web")
    await publish_desired(settings, web3)
    await publish_versions(settings, version(web1, 3, ready="False"), version(web3, 1), version(db, 2),
                           removed=((web2["metadata"]["uid"], "n2"),))  # fmt: skip
    changes = await take(everything, 4)
    seen = {(c.type, c.uid) for c in changes}
    assert seen == {
        (ChangeType.MODIFIED, "uid-web-1"), (ChangeType.ADDED, "uid-web-3"),
        (ChangeType.MODIFIED, "uid-db-1"), (ChangeType.DELETED, "uid-web-2"),
    }  # fmt: skip
    assert [c.pod()["metadata"]["labels"] for c in changes if c.uid == "uid-web-3"] == [{"app": "web"}]
    web_changes = await take(web_only, 3)
    assert {(c.type, c.uid) for c in web_changes} == seen - {(ChangeType.MODIFIED, "uid-db-1")}
    assert [(c.type, c.uid) for c in await take(on_n1, 1)] == [(ChangeType.MODIFIED, "uid-db-1")]

    # Resuming from the list's token gives exactly the changes after it; from the token of the
    # first of them, exactly the others.
    resumed = watch_pods(settings, resume=token)
    again = await take(resumed, 4)
    assert {(c.type, c.uid) for c in again} == seen
    ordered = [c.uid for c in changes]
    from_second = await take(watch_pods(settings, resume=changes[0].token), 3)
    assert sorted(c.uid for c in from_second) == sorted(ordered[1:])
    for gen in (everything, web_only, on_n1, resumed):
        await gen.aclose()


def test_a_token_the_topic_no_longer_holds_is_refused(settings: Settings) -> None:
    asyncio.run(token_no_longer_held(settings))


async def token_no_longer_held(settings: Settings) -> None:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
    from aiokafka.admin.records_to_delete import RecordsToDelete
    from aiokafka.structs import TopicPartition

    await ensure_topics(settings)
    web = desired("web-1", "n1", "web")
    await publish_desired(settings, web)
    await publish_versions(settings, version(web, 1))
    token = (await take_until_synced(watch_pods(settings)))[-1].token
    await publish_versions(settings, version(web, 2))
    # A token from two days ago: tombstones after it may be compacted away.
    stale = encode_position(
        replace(decode_position(token), safe_ms=decode_position(token).safe_ms - 2 * DAY_MS)
    )
    with pytest.raises(TokenExpired, match="older than the tombstone retention"):
        await take(watch_pods(settings, resume=stale), 1)
    # Records before the token deleted (retention on a compact,delete topic, or DeleteRecords).
    partition = pods_partition(settings, "n1")
    topic = settings.topic("pod-status")
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap)
    await admin.start()
    try:
        await admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, {"cleanup.policy": "compact,delete"})]
        )
        await admin.delete_records({TopicPartition(topic, partition): RecordsToDelete(2)})
    finally:
        await admin.close()
    with pytest.raises(TokenExpired, match="now starts at offset 2"):
        await take(watch_pods(settings, resume=token), 1)


def pods_partition(settings: Settings, node: str) -> int:
    from podledger.partitioner import partition_for_node

    return partition_for_node(node, settings.partitions)


def test_the_watch_rides_through_a_broker_restart(tmp_path: Path, topic_prefix: str) -> None:
    asyncio.run(broker_restart(tmp_path, topic_prefix))


async def broker_restart(tmp_path: Path, topic_prefix: str) -> None:
    broker = await asyncio.to_thread(start_kafka, tmp_path / "kafka")
    try:
        settings = replace(Settings.from_env(env={}), bootstrap=broker.bootstrap, topic_prefix=topic_prefix,
                           partitions=3)  # fmt: skip
        await ensure_topics(settings)
        web = desired("web-1", "n1", "web")
        await publish_desired(settings, web)
        await publish_versions(settings, version(web, 1))
        changes = watch_pods(settings)
        await take_until_synced(changes)
        await asyncio.to_thread(restart_kafka, broker)
        await publish_versions(settings, version(web, 2))
        [change] = await take(changes, 1, timeout=90)
        assert (change.type, change.status.version) == (ChangeType.MODIFIED, 2)
        await changes.aclose()
    finally:
        broker.stop()
