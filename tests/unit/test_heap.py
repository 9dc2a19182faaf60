"""The collector's policy for long-running services (podledger/heap.py)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from podledger.heap import YOUNG_THRESHOLD, CollectionSchedule, long_lived_heap, settle_long_lived_heap


@pytest.fixture
def restored_gc() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def test_objects_alive_at_start_leave_the_collectors_sight(restored_gc: None) -> None:
    long_lived = [{"pod": i} for i in range(10_000)]
    settle_long_lived_heap()
    assert gc.get_freeze_count() >= len(long_lived)
    assert gc.get_threshold()[0] == YOUNG_THRESHOLD


def test_a_long_lived_stretch_runs_under_the_policy_and_leaves_the_collector_as_it_was(
    restored_gc: None,
) -> None:
    gc.set_threshold(700, 10, 10)
    records = [{"pod": i} for i in range(10_000)]
    with pytest.raises(RuntimeError), long_lived_heap():
        assert gc.get_freeze_count() >= len(records)
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD
        raise RuntimeError("a fold that fails still gives the collector back")
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == (700, 10, 10)


def test_cycles_made_later_are_still_collected(restored_gc: None) -> None:
    settle_long_lived_heap()

    class Node:
        peer: object = None

    a, b = Node(), Node()
    a.peer, b.peer = b, a
    del a, b
    assert gc.collect() >= 2


def test_the_schedule_collects_young_passes_and_the_old_generation_every_full_every(
    restored_gc: None,
) -> None:
    schedule = CollectionSchedule(full_every=4, settle_at=0)
    assert [schedule() for _ in range(8)] == [1, 1, 1, 2, 1, 1, 1, 2]
    with pytest.raises(ValueError):
        CollectionSchedule(full_every=0)


def test_the_schedule_settles_the_heap_once_at_its_settle_call(restored_gc: None) -> None:
    schedule = CollectionSchedule(full_every=100, settle_at=3)
    schedule(), schedule()
    frozen = gc.get_freeze_count()
    steady_state = [{"snapshot": i} for i in range(5_000)]  # built by the first relists
    assert schedule() == 2
    assert gc.get_freeze_count() >= frozen + len(steady_state)
    schedule()
    assert gc.get_freeze_count() >= frozen + len(steady_state)  # once only


class Peer:
    """Half of a reference cycle, with a weak reference to tell when it is freed."""

    peer: object = None


def test_a_cycle_that_outlives_the_young_passes_is_freed_by_the_full_one(restored_gc: None) -> None:
    schedule = CollectionSchedule(full_every=3, settle_at=0)
    settle_long_lived_heap()
    gc.disable()  # only the schedule's passes run
    try:
        a, b = Peer(), Peer()
        a.peer, b.peer = b, a
        gone = weakref.ref(a)
        schedule()  # survives the young pass while referenced, and moves to the old generation
        del a, b
        schedule()  # a young pass does not look at the old generation
        assert gone() is not None
        assert schedule() == 2
        assert gone() is None
    finally:
        gc.enable()


def test_collecting_is_true_only_during_a_scheduled_pass(restored_gc: None) -> None:
    schedule = CollectionSchedule(full_every=2, settle_at=0)
    seen: list[bool] = []

    def observe(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(schedule.collecting)

    gc.callbacks.append(observe)
    try:
        schedule()
        gc.collect(0)
    finally:
        gc.callbacks.remove(observe)
    assert seen == [True, False]
    assert schedule.collecting is False
