"""The garbage collector's policy for long-running services with large, long-lived heaps.

A node agent at 10,000 pods holds about half a million objects that live as long as the process
(pod workers, their tasks, runtime snapshots). CPython's full collections walk all of them: on the
2-core test machine each took 0.5-1.6 s of wall time, stalling the event loop (and the PLEG's relist)
for as long. Once a service has started, its heap is moved out of the collector's sight and young
collections are made rarer; reference cycles created later are still collected.
"""

from __future__ import annotations

import gc

# Allocations minus deallocations before a young collection (CPython's default: 700). Higher means
# fewer, slightly longer young collections; the middle and old generations keep their ratios.
YOUNG_THRESHOLD = 50_000


def settle_long_lived_heap() -> None:
    """Collect once, then exempt every object alive now from later collections (`gc.freeze`).
    Call when a service has finished starting: what it built then lives as long as it does."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, max(middle, 20), max(old, 100))
