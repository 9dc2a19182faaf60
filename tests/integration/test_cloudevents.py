"""Status versions and deletions on the real broker are CloudEvents (Kafka binding, binary mode):
the CloudEvents SDK reads them, with no podledger code, as records a generic consumer gets."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import orjson
import pytest
from aiokafka import ConsumerRecord
from cloudevents.core.base import BaseCloudEvent
from cloudevents.core.bindings.kafka import KafkaMessage, from_binary
from cloudevents.core.formats.json import JSONFormat

from podledger.agents.kube import Kube
from podledger.config import Settings
from podledger.streams.topics import ensure_topics
from podledger.workload import produce, workload
from tests.pods import running_status, versioned
from tests.support import wait_for
from tests.support.kafka import publish_statuses, read_records
from tests.support.node import create_api_pod
from tests.support.processes import podledger_env

pytestmark = pytest.mark.kafka

PODS, EVENTS = 10, 150


def as_cloudevent(record: ConsumerRecord) -> BaseCloudEvent:
    """What any CloudEvents consumer does with a Kafka record."""
    message = KafkaMessage(headers=dict(record.headers), key=record.key, value=record.value)
    return from_binary(message, JSONFormat())


def source(settings: Settings, node: str) -> str:
    return f"podledger/{settings.topic_prefix.rstrip('.')}/{node}"


def test_status_versions_are_cloudevents_and_tombstones_are_not(
    settings: Settings, podledger_process
) -> None:
    asyncio.run(ensure_topics(settings))
    proc = podledger_process(["run", "--roles", "fold"], env=podledger_env(settings))
    events = list(workload(PODS, EVENTS, nodes=3, seed=4, remove_at_end=True))
    lives, removals = events[:-PODS], events[-PODS:]
    # The removals go once every other event is folded: a fetch that brought a pod's REMOVE before
    # its pleg and probe events would leave those held for a pod gone, and few versions to check.
    asyncio.run(produce(settings, lives))
    wait_for(
        lambda: len(asyncio.run(read_records(settings, "journal"))) >= len(lives),
        timeout=180,
        interval=1,
        what="every event journaled",
        alive=proc,
    )
    asyncio.run(produce(settings, removals))
    wait_for(
        lambda: sum(r.value is None for r in asyncio.run(read_records(settings, "pod-status"))) >= PODS,
        timeout=180,
        interval=1,
        what="every pod's tombstone",
        alive=proc,
    )
    history = asyncio.run(read_records(settings, "pod-status-history"))
    latest = asyncio.run(read_records(settings, "pod-status"))
    assert proc.stop() == 0
    versions = [r for r in [*history, *latest] if r.value is not None]
    assert len(versions) > PODS * 2
    for record in versions:
        value = orjson.loads(record.value)
        event = as_cloudevent(record)
        assert event.get_id() == f"{value['uid']}/{value['version']}"
        assert event.get_source() == source(settings, value["node"])
        assert event.get_type() == "io.podledger.pod.status.v1"
        assert event.get_specversion() == "1.0"
        assert event.get_time() == datetime.fromtimestamp(value["ts_ms"] / 1000, UTC)
        assert event.get_subject() == f"{value['namespace']}/{value['name']}"
        assert event.get_datacontenttype() == "application/json"
        assert event.get_data() == value
    tombstones = [r for r in latest if r.value is None]
    assert len(tombstones) == PODS
    assert all(not any(name.startswith("ce_") for name, _ in r.headers) for r in tombstones)


@pytest.mark.kube
def test_a_deletion_by_the_sink_is_a_cloudevent(
    settings: Settings, kubeconfig: str, podledger_process
) -> None:
    asyncio.run(ensure_topics(settings))
    kube = Kube.from_kubeconfig(kubeconfig)
    pod = create_api_pod(kube, settings.node)
    name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
    kube.delete_pod("default", name, grace_seconds=30)  # marked only: the node must finish it
    failed = {**running_status("False"), "phase": "Failed"}
    finished = versioned(pod, settings.node, 3, failed, running=False, finished=True, deleting=True)
    asyncio.run(publish_statuses(settings, finished))
    proc = podledger_process(["run", "--roles", "sink"], env=podledger_env(settings, kubeconfig))
    [record] = wait_for(
        lambda: asyncio.run(read_records(settings, "pod-deletions")),
        timeout=90,
        what="the deletion announced",
        alive=proc,
    )
    assert proc.stop() == 0
    event = as_cloudevent(record)
    value = orjson.loads(record.value)
    assert event.get_id() == f"{uid}/3/deletion"
    assert event.get_source() == source(settings, settings.node)
    assert event.get_type() == "io.podledger.pod.deletion.v1"
    assert event.get_time() == datetime.fromtimestamp(value["ts_ms"] / 1000, UTC)
    assert event.get_data() == value and value["uid"] == uid and value["version"] == 3
    assert event.get_extension("partitionkey") == uid
