"""The fold's records in memory (streams/state.py): kept as their stored JSON, decoded on each read,
and the records `podledger bench recovery` stores (podledger/bench/recovery.py) shaped as the fold's."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from podledger.bench.recovery import copy_record, deletion, identity_of, pod_identity, sample_records
from podledger.config import Settings
from podledger.schemas import decode, encode
from podledger.streams.batch import marker_key
from podledger.streams.fold import Coordinates, fold_event
from podledger.streams.state import FoldState
from podledger.types import Topic


class Sent:
    """Stands in for the producer FoldState.put writes through: records what it was given."""

    def __init__(self) -> None:
        self.values: list[tuple[str, bytes, bytes | None, int]] = []

    async def send(self, topic: str, *, key: bytes, value: bytes | None, partition: int) -> Any:
        self.values.append((topic, key, value, partition))
        return None


@pytest.fixture(scope="module")
def samples() -> list[Any]:
    return sample_records(40)


def put(state: FoldState, sent: Sent, key: bytes, partition: int, record: Any) -> None:
    asyncio.run(state.put(sent, key, partition, record))


def test_a_record_is_kept_as_the_bytes_it_is_stored_as_and_read_back_equal(samples: list[Any]) -> None:
    state, sent = FoldState(Settings.from_env(env={})), Sent()
    record = samples[0]
    put(state, sent, b"uid-1", 2, record)
    assert sent.values == [("podledger.fold-state", b"uid-1", orjson.dumps(record), 2)]
    assert state.records[b"uid-1"] == orjson.dumps(record)
    first, second = state.get(b"uid-1"), state.get(b"uid-1")
    assert first == record and second == record
    first["version"] = 999  # the caller's copy: what is stored does not change
    assert state.get(b"uid-1") == record
    put(state, sent, b"uid-1", 2, None)
    assert state.get(b"uid-1") is None and b"uid-1" not in state.keys_of(2)
    assert sent.values[-1][2] is None  # a tombstone on fold-state


def test_markers_stay_decoded_and_are_seen_through_data(samples: list[Any]) -> None:
    state, sent = FoldState(Settings.from_env(env={})), Sent()
    put(state, sent, b"uid-1", 1, samples[0])
    asyncio.run(state.put_marker(sent, 1, 41, {"pleg": 7}))
    assert state.journal_marker(1) == 41
    assert state.is_redelivery(1, "pleg", 7) and not state.is_redelivery(1, "pleg", 8)
    assert state.journal_marker(0) is None
    assert state.data[marker_key(1)] == {"journal_offset": 41, "inputs": {"pleg": 7}}
    assert state.data[b"uid-1"] == samples[0]
    assert set(state.data) == {b"uid-1", marker_key(1)} == state.keys_of(1)
    assert state.data.get(marker_key(0)) is None and state.data.get(b"nobody") is None
    state.forget(1)
    assert len(state.data) == 0 and state.journal_marker(1) is None and state.get(b"uid-1") is None


def test_held_keys_are_the_records_holding_events(samples: list[Any]) -> None:
    """A record that holds events for its unannounced pod, one whose `held` list is empty, and
    records that only mention "held" inside their pod: held_keys finds the first alone."""
    state, sent = FoldState(Settings.from_env(env={})), Sent()
    event = {"topic": "pleg", "partition": 0, "offset": 3, "ts_ms": 1, "event": {}}
    holding = {"uid": "u1", "pod": None, "held": [[event]], "applied": {}}
    put(state, sent, b"u1", 0, holding)
    put(state, sent, b"u2", 0, {"uid": "u2", "pod": None, "held": [], "applied": {}})
    pod = samples[0]["pod"]
    tricky = {**samples[0], "pod": {**pod, "spec": {**pod["spec"], "held": [["x"]]}}}
    assert b'"held":[[' in orjson.dumps(tricky)
    put(state, sent, b"u3", 0, tricky)
    put(state, sent, b"u4", 0, samples[1])
    put(state, sent, b"u5", 1, holding)
    assert state.held_keys(0) == {b"u1"}
    assert state.held_keys(1) == {b"u5"}
    assert {k for k in state.keys_of(0) if state.data[k].get("held")} == state.held_keys(0)


def test_copied_records_carry_their_own_identity_only(samples: list[Any]) -> None:
    for i, sample in enumerate(samples):
        old, new = identity_of(sample), pod_identity(1000 + i, nodes=17)
        copied = copy_record(orjson.dumps(sample), old, new)
        assert old.uid.encode() not in copied and old.uid[:8].encode() not in copied
        assert f'"{old.name}"'.encode() not in copied
        record = orjson.loads(copied)
        assert (record["uid"], record["name"], record["node"]) == (new.uid, new.name, new.node)
        assert record["pod"]["metadata"]["uid"] == new.uid and record["pod"]["spec"]["nodeName"] == new.node
        assert record["applied"] == {}
        # the same record apart from the identity and the applied offsets
        back = copy_record(copied, new, old)
        assert {**orjson.loads(back), "applied": sample["applied"]} == sample


def test_the_takeover_deletion_makes_the_version_after_the_stored_one(samples: list[Any]) -> None:
    """The premise of the benchmark's check: a graceful deletion of a restored pod is always a
    new version, numbered after the one its record holds (a fold that lost the record would
    start the pod at version 1)."""
    for sample in samples[:10]:
        record = orjson.loads(copy_record(orjson.dumps(sample), identity_of(sample), pod_identity(5, 3)))
        update = deletion(record, 1_800_000_000_000)
        at = Coordinates(Topic.POD_UPDATES, 0, 0, update.ts_ms)
        after, outputs = fold_event(record, at, decode(Topic.POD_UPDATES, encode(update)))
        versions = [o.value.version for o in outputs if o.topic == Topic.POD_STATUS_HISTORY]
        assert versions == [record["version"] + 1]
        assert after is not None and after["version"] == record["version"] + 1
        _, fresh = fold_event(None, at, decode(Topic.POD_UPDATES, encode(update)))
        assert [o.value.version for o in fresh if o.topic == Topic.POD_STATUS_HISTORY] == [1]
