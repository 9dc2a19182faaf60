"""The exactly-once protocol of streams/batch.py, simulated without Kafka: a worker dies after
publishing a batch but before storing its records, and its successor sees the inputs again in
another cross-topic order. The journal tail must make the history come out the same."""

from __future__ import annotations

import random
from typing import Any

import pytest

from podledger.schemas import encode
from podledger.streams.batch import BatchFold, advance_marker, is_marker, is_redelivery, marker_key
from podledger.streams.fold import Coordinates, HoldLimits
from podledger.workload import workload

LIMITS = HoldLimits()


class World:
    """Topics and a table as plain lists and dicts."""

    def __init__(self) -> None:
        self.journal: list[Any] = []
        self.history: list[Any] = []
        self.table: dict[bytes, Any] = {}

    def publish(self, fold: BatchFold) -> None:
        self.journal += [out.value for _, out in fold.batch.journal]
        self.history += [out.value for _, out in fold.batch.outputs if out.topic == "pod-status-history"]

    def store(self, fold: BatchFold, table: dict[bytes, Any]) -> None:
        for key, (_, record) in fold.batch.changed.items():
            if record is None:
                table.pop(key, None)
            else:
                table[key] = record
        if fold.batch.journal:
            table[marker_key(0)] = {"journal_offset": len(self.journal) - 1}


def inputs(n_pods: int = 12, n_events: int = 240) -> list[tuple[Coordinates, bytes]]:
    per_topic: dict[str, int] = {}
    out = []
    for e in workload(n_pods, n_events, nodes=1, seed=5, start_ms=1_700_000_000_000):
        offset = per_topic[e.topic] = per_topic.get(e.topic, -1) + 1
        out.append((Coordinates(e.topic, 0, offset, e.ts_ms), encode(e.value)))
    return out


def run(
    world: World, table: dict[bytes, Any], messages: list[tuple[Coordinates, bytes]], crash_after: int | None
) -> None:
    for start in range(0, len(messages), 20):
        fold = BatchFold(table.get, LIMITS, 1 << 20)
        for at, value in messages[start : start + 20]:
            fold.add_message(at, None, value)
        world.publish(fold)
        if crash_after is not None and start >= crash_after:
            return  # died after publishing, before storing the records
        world.store(fold, table)


def recover(world: World, table: dict[bytes, Any]) -> None:
    marker = table.get(marker_key(0))
    fold = BatchFold(table.get, LIMITS, 1 << 20)
    for entry in world.journal[(marker["journal_offset"] + 1 if marker else 0) :]:
        fold.add_journal_entry(0, entry)
    world.history += [out.value for _, out in fold.batch.outputs if out.topic == "pod-status-history"]
    for key, (_, record) in fold.batch.changed.items():
        table[key] = record


def by_version(history: list[Any]) -> dict[tuple[str, int], bytes]:
    out: dict[tuple[str, int], bytes] = {}
    for vs in history:
        body = encode(vs.status)
        assert out.setdefault((vs.uid, vs.version), body) == body, (vs.uid, vs.version)
    return out


def test_crash_between_publish_and_store_then_reordered_redelivery_changes_nothing() -> None:
    messages = inputs()
    clean = World()
    run(clean, {}, messages, crash_after=None)
    expected = by_version(clean.history)

    for crash_after in (40, 100, 180):
        world = World()
        table: dict[bytes, Any] = {}
        run(world, table, messages, crash_after=crash_after)
        published_before_crash = by_version(world.history)
        # Up to the crash the run is the clean run: same inputs in the same order.
        assert published_before_crash == {k: expected[k] for k in published_before_crash}
        # The successor: restored table, journal tail re-applied, then every input again from
        # the last committed batch, with the topics interleaved differently.
        committed = crash_after
        recover(world, table)
        redelivered = messages[committed:]
        random.Random(crash_after).shuffle(redelivered)
        redelivered.sort(key=lambda m: (m[0].topic, m[0].offset))  # per-topic order kept, topics regrouped
        run(world, table, redelivered, crash_after=None)

        got = by_version(world.history)  # asserts: never two statuses under one (uid, version)
        for uid in {u for u, _ in expected}:
            versions = sorted(v for u, v in got if u == uid)
            assert versions == list(range(1, len(versions) + 1))
        # The versions published before the crash stand; nothing republished them differently.
        assert {k: got[k] for k in published_before_crash} == published_before_crash


def test_journal_markers_are_not_pod_records() -> None:
    assert is_marker(marker_key(3)) and not is_marker(b"3c1f2f9e-1111-4a2b-9c3d-000000000001")


# The marker after a restart (batch.advance_marker): a lost batch's journaled inputs are skipped
# one by one when Faust redelivers them; the inputs it held for unannounced pods are folded again.
MARKER_VECTORS = [
    # (name, marker before, journal offset, inputs folded, re-applied, [(topic, offset, redelivery?)])
    (
        "a batch advances the newest input offsets",
        {},
        4,
        {"pleg": 9},
        None,
        [("pleg", 9, True), ("pleg", 10, False)],
    ),
    (
        "a restart remembers exactly the re-applied inputs",
        {"journal_offset": 2, "inputs": {"pleg": 3}},
        6,
        {},
        {"pleg": [7, 9], "pod-updates": [4]},
        [
            ("pleg", 3, True),
            ("pleg", 5, False),  # held for an unannounced pod in the lost batch: never journaled
            ("pleg", 7, True),
            ("pleg", 8, False),
            ("pleg", 9, True),
            ("pod-updates", 4, True),
            ("pod-updates", 2, False),
        ],
    ),
    (
        "the next batch's offsets cover what was re-applied below them",
        {"journal_offset": 6, "inputs": {"pleg": 3}, "reapplied": {"pleg": [7, 9]}},
        8,
        {"pleg": 8},
        None,
        [("pleg", 7, True), ("pleg", 8, True), ("pleg", 9, True), ("pleg", 10, False)],
    ),
]


@pytest.mark.parametrize(
    ("before", "journal_offset", "inputs", "reapplied", "checks"),
    [case[1:] for case in MARKER_VECTORS],
    ids=[case[0] for case in MARKER_VECTORS],
)
def test_a_restart_skips_only_what_it_reapplied(
    before: dict, journal_offset: int, inputs: dict, reapplied: dict | None, checks: list
) -> None:
    marker = advance_marker(before, journal_offset, inputs, reapplied)
    assert marker["journal_offset"] == journal_offset
    assert [is_redelivery(marker, topic, offset) for topic, offset, _ in checks] == [w for _, _, w in checks]


def test_reapplied_offsets_are_dropped_once_covered() -> None:
    marker = advance_marker({"inputs": {"pleg": 3}, "reapplied": {"pleg": [7, 9]}}, None, {"pleg": 9})
    assert "reapplied" not in marker and marker["inputs"] == {"pleg": 9}
