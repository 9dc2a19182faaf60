"""What the index reads of a value to file it (read/index/fields.py): a vector table of history
and journal values it files, and of values it skips, with the exact types it asks for."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from podledger.read.index import fields

VERSION = {
    "uid": "u1",
    "namespace": "shop",
    "name": "web",
    "node": "n1",
    "version": 3,
    "ts_ms": 1_714_572_000_000,
    "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    "cause": {"type": "pleg:ContainerStarted", "topic": "pleg", "partition": 1, "offset": 7},
}
ENTRY = {
    "type": "pleg:ContainerStarted",
    "topic": "pleg",
    "partition": 1,
    "offset": 7,
    "ts_ms": 1_714_572_000_000,
    "event": {"uid": "u1", "kind": "ContainerStarted"},
}


def with_(base: dict[str, Any], **changes: Any) -> bytes:
    return orjson.dumps({**base, **changes})


def without(base: dict[str, Any], key: str) -> bytes:
    return orjson.dumps({k: v for k, v in base.items() if k != key})


VERSIONS_FILED = [
    pytest.param(orjson.dumps(VERSION), ("u1", 3, 1_714_572_000_000, "shop", "web", "n1"), id="whole"),
    pytest.param(
        without(VERSION, "namespace"), ("u1", 3, 1_714_572_000_000, "", "web", "n1"), id="no-namespace"
    ),
    pytest.param(with_(VERSION, node=None), ("u1", 3, 1_714_572_000_000, "shop", "web", ""), id="null-node"),
    pytest.param(
        with_(VERSION, rules="v2", chain={"prev": "00"}),
        ("u1", 3, 1_714_572_000_000, "shop", "web", "n1"),
        id="unknown-fields",
    ),
    pytest.param(
        b" \n" + orjson.dumps(VERSION) + b"\n", ("u1", 3, 1_714_572_000_000, "shop", "web", "n1"), id="spaces"
    ),
]

VERSIONS_SKIPPED = [
    pytest.param(None, id="tombstone"),
    pytest.param(b"", id="empty"),
    pytest.param(b"not json", id="not-json"),
    pytest.param(b"[1, 2]", id="an-array"),
    pytest.param(orjson.dumps(VERSION)[:-1], id="cut-short"),
    pytest.param(without(VERSION, "uid"), id="no-uid"),
    pytest.param(without(VERSION, "cause"), id="no-cause"),
    pytest.param(with_(VERSION, version=True), id="bool-version"),
    pytest.param(with_(VERSION, version=3.0), id="float-version"),
    pytest.param(with_(VERSION, ts_ms="1714572000000"), id="string-time"),
    pytest.param(with_(VERSION, uid=5), id="number-uid"),
    pytest.param(with_(VERSION, cause={"topic": "pleg"}), id="cause-without-offset"),
    pytest.param(with_(VERSION, cause="pleg"), id="cause-not-an-object"),
    pytest.param(
        b'{"uid": "u1", "version": 3, "ts_ms": 1, "cause": {"topic": "t", "offset": 1}} x', id="trailing"
    ),
]


@pytest.mark.parametrize(("value", "expected"), VERSIONS_FILED)
def test_a_history_value_is_filed_by_its_pod_version_and_time(
    value: bytes, expected: tuple[Any, ...]
) -> None:
    head = fields.version_head(value)
    assert head is not None
    assert (head.uid, head.version, head.ts_ms) == expected[:3]
    assert tuple(fields.text(f) for f in (head.namespace, head.name, head.node)) == expected[3:]


@pytest.mark.parametrize("value", VERSIONS_SKIPPED)
def test_a_value_that_is_no_history_record_is_skipped(value: bytes | None) -> None:
    assert fields.version_head(value) is None


ENTRIES_SKIPPED = [
    pytest.param(None, id="tombstone"),
    pytest.param(b'{"topic": 5}', id="number-topic"),
    pytest.param(without(ENTRY, "event"), id="no-event"),
    pytest.param(with_(ENTRY, event=[1]), id="event-an-array"),
    pytest.param(with_(ENTRY, event="ADD"), id="event-a-string"),
    pytest.param(with_(ENTRY, partition=False), id="bool-partition"),
    pytest.param(with_(ENTRY, offset=7.5), id="float-offset"),
    pytest.param(without(ENTRY, "ts_ms"), id="no-time"),
    pytest.param(
        b'{"topic": "pleg", "partition": 1, "offset": 7, "ts_ms": 1, "event": {"a": }}', id="bad-event"
    ),
]


def test_a_journal_value_is_filed_by_its_time_and_its_event_kept_undecoded() -> None:
    head = fields.entry_head(orjson.dumps(ENTRY))
    assert head is not None and head.ts_ms == ENTRY["ts_ms"]
    assert orjson.loads(bytes(head.event)) == ENTRY["event"]


@pytest.mark.parametrize("value", ENTRIES_SKIPPED)
def test_a_value_that_is_no_journal_entry_is_skipped(value: bytes | None) -> None:
    assert fields.entry_head(value) is None


@pytest.mark.parametrize(
    ("event", "uid"),
    [
        ({"uid": "u1", "kind": "ContainerStarted"}, "u1"),
        ({"op": "ADD", "pod": {"metadata": {"uid": "u2", "name": "web"}}}, "u2"),
        ({"op": "ADD", "pod": "not an object"}, ""),
        ({"op": "ADD", "pod": {"metadata": ["u3"]}}, ""),
        ({"uid": 7}, ""),
        ({"huge": 1e300, "uid": "u4"}, "u4"),
    ],
)
def test_an_entry_without_a_key_names_its_pod_from_its_event(event: dict[str, Any], uid: str) -> None:
    head = fields.entry_head(with_(ENTRY, event=event))
    assert head is not None and fields.event_uid(head.event) == uid
