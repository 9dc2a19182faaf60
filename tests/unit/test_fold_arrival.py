"""The order the live fold applies a fetch in, and the offsets Faust is told about
(streams/arrival.py)."""

from __future__ import annotations

from typing import NamedTuple

import pytest

from podledger.schemas import encode
from podledger.streams.arrival import WaitingRoom, arrival_order, gaps, ready_counts, slices
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


class TP(NamedTuple):
    topic: str
    partition: int


def counts(read: dict[TP, list[Rec]], behind: set[TP]) -> dict[tuple[str, int], int]:
    return {(tp.topic, tp.partition): n for tp, n in ready_counts(read, behind, RANK).items()}


PLEG0, UPDATES0, PROBES0 = TP("pleg", 0), TP("pod-updates", 0), TP("probe-results", 0)


@pytest.mark.parametrize(
    ("read", "behind", "expected"),
    [
        pytest.param(
            {PLEG0: run("pleg", 0, [10, 20]), UPDATES0: run("pod-updates", 0, [5, 30])},
            set(),
            {("pleg", 0): 2, ("pod-updates", 0): 2},
            id="nothing behind: all ready",
        ),
        pytest.param(
            {PLEG0: run("pleg", 0, [10, 20]), UPDATES0: run("pod-updates", 0, [5, 19, 20, 30])},
            {PLEG0},
            {("pleg", 0): 2, ("pod-updates", 0): 3},
            id="a sibling behind bounds the others at its last stamp (pod-updates ranks first)",
        ),
        pytest.param(
            {PLEG0: run("pleg", 0, [10, 20]), PROBES0: run("probe-results", 0, [19, 20, 21])},
            {PLEG0},
            {("pleg", 0): 2, ("probe-results", 0): 1},
            id="an equal stamp of a topic ranked after the sibling waits",
        ),
        pytest.param(
            {UPDATES0: run("pod-updates", 0, [5, 30])},
            {PLEG0},
            {("pod-updates", 0): 0},
            id="a sibling behind with nothing read holds everything",
        ),
        pytest.param(
            {PLEG0: run("pleg", 0, [10, 20, 40])},
            {PLEG0},
            {("pleg", 0): 3},
            id="a topic never waits for itself",
        ),
        pytest.param(
            {PLEG0: run("pleg", 0, [10, 20]), UPDATES0: run("pod-updates", 0, [50])},
            {PLEG0, PROBES0},
            {("pleg", 0): 0, ("pod-updates", 0): 0},
            id="two siblings behind: the lower bound holds",
        ),
        pytest.param(
            {TP("pod-updates", 1): run("pod-updates", 1, [50])},
            {PLEG0},
            {("pod-updates", 1): 1},
            id="another partition's topic bounds nothing",
        ),
        pytest.param(
            {PLEG0: run("pleg", 0, [50, 10]), UPDATES0: run("pod-updates", 0, [40, 55])},
            {PLEG0},
            {("pleg", 0): 2, ("pod-updates", 0): 1},
            id="a stamp that goes back counts as the highest before it",
        ),
    ],
)
def test_ready_counts(
    read: dict[TP, list[Rec]], behind: set[TP], expected: dict[tuple[str, int], int]
) -> None:
    assert counts(read, behind) == expected


def test_a_removal_read_ahead_waits_for_the_events_the_broker_took_before_it() -> None:
    """The case: one fetch reads pod-updates to its end (the pod's ADD and REMOVE) but PLEG only
    to its size limit; the next fetch reads the rest of PLEG. Folded fetch by fetch, the REMOVE
    would go before PLEG events stamped earlier; through the room it goes last."""
    room: WaitingRoom[TP, Rec] = WaitingRoom(RANK, wait_s=5.0, cap=1000)
    pleg = run("pleg", 0, [2, 3, 4, 5, 6])
    updates = run("pod-updates", 0, [1, 7])
    first = room.ready({UPDATES0: updates, PLEG0: pleg[:2]}, 1, now=0.0, behind=lambda p: {PLEG0})
    assert as_pairs(arrival_order(first, RANK)) == [("pod-updates", 0), ("pleg", 0), ("pleg", 1)]
    assert room.deadline() == 0.0
    second = room.ready({PLEG0: pleg[2:]}, 1, now=0.1, behind=lambda p: set())
    assert as_pairs(arrival_order(second, RANK)) == [
        ("pleg", 2),
        ("pleg", 3),
        ("pleg", 4),
        ("pod-updates", 1),
    ]
    assert not room.runs and room.deadline() is None


def test_a_sibling_that_stays_behind_delays_a_partition_only_so_long() -> None:
    room: WaitingRoom[TP, Rec] = WaitingRoom(RANK, wait_s=5.0, cap=1000)
    updates = run("pod-updates", 0, [1, 2])
    assert room.ready({UPDATES0: updates}, 1, now=10.0, behind=lambda p: {PLEG0}) == {}
    assert room.ready({}, 1, now=14.9, behind=lambda p: {PLEG0}) == {}
    assert room.ready({}, 1, now=15.0, behind=lambda p: {PLEG0}) == {UPDATES0: updates}


def test_past_the_cap_a_partition_goes_to_the_fold_as_merged() -> None:
    room: WaitingRoom[TP, Rec] = WaitingRoom(RANK, wait_s=5.0, cap=3)
    assert (
        room.ready({UPDATES0: run("pod-updates", 0, [1, 2, 3])}, 1, now=0.0, behind=lambda p: {PLEG0}) == {}
    )
    ready = room.ready({UPDATES0: run("pod-updates", 0, [4], first=3)}, 1, now=0.0, behind=lambda p: {PLEG0})
    assert [r.offset for r in ready[UPDATES0]] == [0, 1, 2, 3]


def test_what_waited_in_an_earlier_generation_is_dropped() -> None:
    """A rebalance rewinds the partitions to their commits: what waited is read again."""
    room: WaitingRoom[TP, Rec] = WaitingRoom(RANK, wait_s=5.0, cap=1000)
    room.ready({UPDATES0: run("pod-updates", 0, [1])}, 1, now=0.0, behind=lambda p: {PLEG0})
    ready = room.ready({PLEG0: run("pleg", 0, [2])}, 2, now=0.1, behind=lambda p: set())
    assert as_pairs(arrival_order(ready, RANK)) == [("pleg", 0)]
    assert not room.runs


def test_a_zero_wait_holds_nothing() -> None:
    room: WaitingRoom[TP, Rec] = WaitingRoom(RANK, wait_s=0.0, cap=1000)
    updates = run("pod-updates", 0, [1, 2])
    assert room.ready({UPDATES0: updates}, 1, now=0.0, behind=lambda p: {PLEG0}) == {UPDATES0: updates}


def test_the_cap_counts_what_would_go_on_waiting_not_what_was_read() -> None:
    """A catch-up fetch reads more than the cap of a sibling that is behind: those are ready (a
    topic never waits for itself), so the one record that must wait still does."""
    room: WaitingRoom[TP, Rec] = WaitingRoom(RANK, wait_s=5.0, cap=10)
    pleg = run("pleg", 0, list(range(1, 31)))
    removal = run("pod-updates", 0, [35])
    ready = room.ready({PLEG0: pleg, UPDATES0: removal}, 1, now=0.0, behind=lambda p: {PLEG0})
    assert ready == {PLEG0: pleg}
    assert room.runs == {UPDATES0: removal}
