"""The order the live fold applies a fetch in, and the offsets Faust is told about
(streams/arrival.py)."""

from __future__ import annotations

from typing import NamedTuple

import pytest

from podledger.schemas import encode
from podledger.streams.arrival import arrival_order, gaps, slices
from podledger.streams.batch import BatchFold
from podledger.streams.fold import DEFAULT_HOLD, Coordinates, PodRecord
from podledger.types import INGRESS_TOPICS
from podledger.workload import workload

RANK = {str(t): n for n, t in enumerate(INGRESS_TOPICS)}


class Rec(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int


def run(topic: str, partition: int, stamps: list[int], first: int = 0) -> list[Rec]:
    return [Rec(topic, partition, first + n, ts) for n, ts in enumerate(stamps)]


def as_pairs(records: list[Rec]) -> list[tuple[str, int]]:
    return [(r.topic, r.offset) for r in records]


def test_a_partitions_topics_are_merged_by_the_brokers_stamp() -> None:
    fetched = {
        ("pleg", 0): run("pleg", 0, [10, 20, 30]),
        ("pod-updates", 0): run("pod-updates", 0, [5, 25]),
        ("probe-results", 0): run("probe-results", 0, [21]),
    }
    assert as_pairs(arrival_order(fetched, RANK)) == [
        ("pod-updates", 0),
        ("pleg", 0),
        ("pleg", 1),
        ("probe-results", 0),
        ("pod-updates", 1),
        ("pleg", 2),
    ]


def test_equal_stamps_go_in_topic_rank_order_pod_updates_first() -> None:
    fetched = {
        ("pleg", 0): run("pleg", 0, [7]),
        ("pod-lifecycle", 0): run("pod-lifecycle", 0, [7]),
        ("pod-updates", 0): run("pod-updates", 0, [7]),
    }
    assert [r.topic for r in arrival_order(fetched, RANK)] == ["pod-updates", "pleg", "pod-lifecycle"]


def test_a_topic_whose_stamps_go_back_keeps_its_offset_order() -> None:
    """A topic the broker does not stamp (CreateTime): one input is never reordered."""
    fetched = {
        ("pleg", 0): run("pleg", 0, [50, 10, 60]),
        ("pod-updates", 0): run("pod-updates", 0, [40, 55]),
    }
    merged = arrival_order(fetched, RANK)
    assert [r.offset for r in merged if r.topic == "pleg"] == [0, 1, 2]
    assert [r.offset for r in merged if r.topic == "pod-updates"] == [0, 1]
    assert as_pairs(merged) == [("pod-updates", 0), ("pleg", 0), ("pleg", 1), ("pod-updates", 1), ("pleg", 2)]


def test_partitions_come_one_after_another_and_empty_runs_are_skipped() -> None:
    fetched = {
        ("pleg", 3): run("pleg", 3, [1]),
        ("pleg", 1): run("pleg", 1, [9]),
        ("pod-updates", 2): [],
        ("pod-updates", 1): run("pod-updates", 1, [2]),
    }
    assert [(r.partition, r.topic) for r in arrival_order(fetched, RANK)] == [
        (1, "pod-updates"),
        (1, "pleg"),
        (3, "pleg"),
    ]


def test_unknown_topics_with_equal_keys_do_not_compare_records() -> None:
    fetched = {("a", 0): run("a", 0, [1]), ("b", 0): run("b", 0, [1])}
    assert [r.topic for r in arrival_order(fetched, RANK)] == ["a", "b"]


def test_a_workload_fetched_topic_by_topic_holds_nothing_once_merged() -> None:
    """Fetched per topic, a pod's PLEG events come before pod-updates announces it; folded in the
    broker's order, no event waits for its pod."""
    events = list(workload(20, 400, nodes=1, seed=3))
    offsets: dict[str, int] = {}
    records: dict[tuple[str, int], list[tuple[Rec, bytes, bytes]]] = {}
    for stamp, event in enumerate(events, start=1_000):
        offset = offsets[event.topic] = offsets.get(event.topic, -1) + 1
        record = Rec(event.topic, 0, offset, stamp)
        records.setdefault((event.topic, 0), []).append((record, event.key.encode(), encode(event.value)))

    def ever_held(order: list[Rec]) -> int:
        """How many events had to wait for their pod's announcement."""
        payload = {(r.topic, r.offset): kv for rs in records.values() for r, *kv in rs}
        store: dict[bytes, PodRecord | None] = {}
        fold = BatchFold(store.get, DEFAULT_HOLD, 1 << 20)
        held = 0
        for r in order:
            key, value = payload[(r.topic, r.offset)]
            fold.add_message(Coordinates(r.topic, r.partition, r.offset, r.timestamp), key, value)
            pod = fold.record(key)
            held += bool(pod and pod.get("held"))
        return held

    # Fetched topic by topic, pod-updates last: every PLEG event comes before its pod's ADD.
    fetch_order = [r for topic in reversed(INGRESS_TOPICS) for r, *_ in records.get((str(topic), 0), [])]
    assert ever_held(fetch_order) > 0  # the case the merge is for
    by_topic = {tp: [r for r, *_ in rs] for tp, rs in records.items()}
    assert ever_held(arrival_order(by_topic, RANK)) == 0


@pytest.mark.parametrize(
    ("items", "size", "expected"),
    [
        ([], 3, []),
        ([1, 2, 3], 3, [[1, 2, 3]]),
        ([1, 2, 3, 4], 3, [[1, 2, 3], [4]]),
        ([1, 2], 0, [[1], [2]]),
    ],
)
def test_slices(items: list[int], size: int, expected: list[list[int]]) -> None:
    assert [list(s) for s in slices(items, size)] == expected


@pytest.mark.parametrize(
    ("last_read", "offsets", "expected"),
    [
        pytest.param(None, [5, 6, 7], [], id="first read: nothing before it is a gap"),
        pytest.param(4, [5, 6, 7], [], id="consecutive"),
        pytest.param(4, [8, 9], [(5, 7)], id="retention took 5-7"),
        pytest.param(None, [1, 3, 4, 9], [(2, 2), (5, 8)], id="control records inside a run"),
        pytest.param(7, [7, 8], [], id="the last read again"),
    ],
)
def test_gaps(last_read: int | None, offsets: list[int], expected: list[tuple[int, int]]) -> None:
    assert gaps(last_read, offsets) == expected
