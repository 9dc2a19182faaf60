"""The garbage collector's policy for long-running services with large, long-lived heaps.

A node agent at 10,000 pods holds about half a million objects that live as long as the process
(pod workers, their tasks, runtime snapshots). CPython's full collections walk all of them: on the
2-core test machine each took 0.5-1.6 s of wall time, stalling the event loop (and the PLEG's relist)
for as long. Once a service has started, its heap is moved out of the collector's sight and young
collections are made rarer; reference cycles created later are still collected.

Freezing is not enough for a service in its steady state: it replaces objects rather than adding
them (a pod's new snapshot replaces its last one, which dies), and CPython starts a young pass only
when allocations exceed deallocations by the threshold. The count barely moves while the young
generation fills with everything that survived since the last pass, so the pass that finally comes
walks hundreds of thousands of objects (0.3-0.45 s at 10k pods, twice a minute). A service with a
period of its own therefore runs the passes itself, at moments it picks (`CollectionSchedule`).

A command that folds a journal offline (`podledger fold`, `podledger verify`) grows its heap the
same way, one pod record at a time, and runs under the same policy for as long as it folds
(`long_lived_heap`): with CPython's default young threshold, 100,000 events over 10,000 pods took
about 620 collector passes and 13-15 % of the fold's time, against 9 passes and 2 % under it
(5,549 against 6,362 events/s, medians of five runs side by side).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

# Allocations minus deallocations before a young collection (CPython's default: 700). Higher means
# fewer, slightly longer young collections; the middle and old generations keep their ratios.
YOUNG_THRESHOLD = 50_000

# Scheduled passes between two that include the old generation: a minute at the PLEG's period.
# Fewer than the old generation's threshold (100), so automatic passes never reach it while the
# schedule runs.
FULL_EVERY = 60

# The scheduled pass that settles the heap once more: by then (ten seconds at the PLEG's period) the
# pods found at the start have been started and listed, and their snapshots and the workers' state
# are as long-lived as what the service built before its first relist.
SETTLE_AT = 10


def settle_long_lived_heap() -> None:
    """Collect once, then exempt every object alive now from later collections (`gc.freeze`).
    Call when a service has finished starting: what it built then lives as long as it does."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, max(middle, 20), max(old, 100))


@contextmanager
def long_lived_heap() -> Iterator[None]:
    """settle_long_lived_heap for a stretch of work, then the collector as it was before."""
    threshold = gc.get_threshold()
    settle_long_lived_heap()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


class CollectionSchedule:
    """Collector passes run when the caller's event loop is idle (the node agent: after each relist).

    Each call collects the young and middle generations, which then hold only what survived since
    the last call; every `full_every`-th call collects the old generation as well, what of it is
    not frozen, so reference cycles of any age are still freed. The `settle_at`-th call settles the
    heap (`settle_long_lived_heap`) instead, so the old generation's passes walk only what the
    service built since its startup, not the startup's pods and snapshots again. Automatic passes
    stay as the backstop (a burst of allocations still starts one); `collecting` tells observers of
    `gc.callbacks` a scheduled pass from an automatic one.
    """

    def __init__(self, full_every: int = FULL_EVERY, settle_at: int = SETTLE_AT) -> None:
        if full_every < 1:
            raise ValueError("full_every must be at least 1")
        self.full_every = full_every
        self.settle_at = settle_at
        self.calls = 0
        self.collecting = False

    def __call__(self) -> int:
        """Run the pass that is due; returns the oldest generation it collected."""
        self.calls += 1
        self.collecting = True
        try:
            if self.calls == self.settle_at:
                settle_long_lived_heap()
                return 2
            generation = 2 if self.calls % self.full_every == 0 else 1
            gc.collect(generation)
            return generation
        finally:
            self.collecting = False


class GcPauses:
    """The collector's pauses while registered (a context manager): each one stops the event loop.

    Per generation it counts the passes, their seconds and the longest, for a service's /metrics;
    with `keep` it also lists every pause as (generation, seconds, scheduled), for a benchmark.
    `scheduled` says whether the service ran the pass itself (CollectionSchedule.collecting)."""

    def __init__(self, scheduled: Callable[[], bool] = lambda: False, *, keep: bool = True) -> None:
        self.scheduled = scheduled
        self.keep = keep
        self.pauses: list[tuple[int, float, bool]] = []
        self.passes = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self.longest = [0.0, 0.0, 0.0]
        self._started = 0.0

    def __enter__(self) -> GcPauses:
        gc.callbacks.append(self._observe)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._observe)

    def _observe(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        elapsed = time.perf_counter() - self._started
        generation = int(info["generation"])
        self.passes[generation] += 1
        self.seconds[generation] += elapsed
        self.longest[generation] = max(self.longest[generation], elapsed)
        if self.keep:
            self.pauses.append((generation, elapsed, self.scheduled()))
