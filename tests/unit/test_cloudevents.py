"""CloudEvents binary-mode headers of status versions and deletions (schemas/cloud_events.py),
read back by the CloudEvents SDK's Kafka binding as a generic consumer would."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from cloudevents.core.bindings.kafka import KafkaMessage, from_binary
from cloudevents.core.formats.json import JSONFormat

from podledger.schemas import cloud_events, encode, models, to_dict
from tests import pods

POD = pods.pod(("c",), name="web", uid="3c1f2f9e-0001", node="node-a")
VERSION = pods.versioned(POD, "node-a", 7, {"phase": "Running"})
VERSION.ts_ms = 1_767_323_045_678  # 2026-01-02T03:04:05.678Z
DELETION = models.PodDeletion("3c1f2f9e-0001", "default", "web", "node-a", 9, 1_767_323_045_001)


@pytest.mark.parametrize(
    ("ts_ms", "text"),
    [
        (0, "1970-01-01T00:00:00.000Z"),
        (1_767_323_045_678, "2026-01-02T03:04:05.678Z"),
        (1_767_323_045_000, "2026-01-02T03:04:05.000Z"),
        (951_782_400_007, "2000-02-29T00:00:00.007Z"),
    ],
)
def test_time_is_rfc3339_utc_with_milliseconds(ts_ms: int, text: str) -> None:
    assert cloud_events.rfc3339_ms(ts_ms) == text


@pytest.mark.parametrize(
    ("prefix", "source"),
    [
        ("podledger.", "podledger/podledger/node-a"),
        ("prod-eu_", "podledger/prod-eu/node-a"),
        ("", "podledger/node-a"),
    ],
)
def test_source_names_the_deployment_and_the_node(prefix: str, source: str) -> None:
    assert cloud_events.source(prefix, "node-a") == source


def test_a_version_carries_every_binary_mode_attribute() -> None:
    assert dict(cloud_events.headers(VERSION, "prod.")) == {
        "ce_specversion": b"1.0",
        "ce_id": b"3c1f2f9e-0001/7",
        "ce_source": b"podledger/prod/node-a",
        "ce_type": b"io.podledger.pod.status.v1",
        "ce_time": b"2026-01-02T03:04:05.678Z",
        "ce_subject": b"default/web",
        "content-type": b"application/json",
    }


def test_a_deletion_is_another_event_than_the_version_it_deleted() -> None:
    headers = dict(cloud_events.headers(DELETION, "prod."))
    assert headers["ce_type"] == b"io.podledger.pod.deletion.v1"
    assert headers["ce_id"] == b"3c1f2f9e-0001/9/deletion"
    assert headers["ce_time"] == b"2026-01-02T03:04:05.001Z"


def test_other_values_and_tombstones_carry_none() -> None:
    assert cloud_events.headers(None, "p.") == []
    assert cloud_events.headers({"version": 1}, "p.") == []
    entry = models.JournalEntry("pleg:ContainerStarted", "pleg", 0, 1, 2, {})
    assert cloud_events.headers(entry, "p.") == []


@pytest.mark.parametrize("value", [VERSION, DELETION], ids=["version", "deletion"])
def test_the_sdk_reads_them_as_cloudevents(value: object) -> None:
    message = KafkaMessage(
        headers=dict(cloud_events.headers(value, "prod.")), key=b"3c1f2f9e-0001", value=encode(value)
    )
    event = from_binary(message, JSONFormat())
    assert event.get_specversion() == "1.0"
    assert event.get_source() == "podledger/prod/node-a"
    assert event.get_time() == datetime.fromtimestamp(value.ts_ms / 1000, UTC)  # type: ignore[attr-defined]
    assert event.get_data() == to_dict(value)
    assert event.get_extension("partitionkey") == "3c1f2f9e-0001"
