"""The collector's policy for long-running services (podledger/heap.py)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from podledger.heap import YOUNG_THRESHOLD, settle_long_lived_heap


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


def test_cycles_made_later_are_still_collected(restored_gc: None) -> None:
    settle_long_lived_heap()

    class Node:
        peer: object = None

    a, b = Node(), Node()
    a.peer, b.peer = b, a
    del a, b
    assert gc.collect() >= 2
