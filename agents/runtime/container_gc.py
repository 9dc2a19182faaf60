"""The container garbage collector's loop (kuberuntime_gc.go): removes the dead containers a pod no
longer needs (agents.runtime.retention), through the runtime's remove_container, for any runtime.

Runtimes keep every container they ran until told to remove it, and a crash-looping pod adds one at
every restart: without a collector its snapshot grows for as long as the pod lives, and with it
every relist of the pod and every PLEG event carrying the snapshot. The kubelet sweeps all pods once
a minute; here each pod is still visited once a `period_s`, but a slice of the pods at a time, so a
minute's removals (a ContainerRemoved event each) spread over the minute instead of all landing in
one relist. Dead containers of deleted pods go with their sandbox (the pod worker removes it).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable

from podledger.agents.runtime.base import Runtime
from podledger.agents.runtime.retention import MAX_DEAD_PER_CONTAINER, dead_containers_to_remove

__all__ = ["GC_PERIOD_S", "GC_SLICES", "ContainerGC"]

log = logging.getLogger(__name__)

GC_PERIOD_S = 60.0  # the kubelet's ContainerGCPeriod: each pod is looked at once a minute
GC_SLICES = 60  # a sweep is done in this many steps, period_s / GC_SLICES apart


class ContainerGC:
    """Sweeps the runtime's pods, a slice per step, removing the dead containers they need no more."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        period_s: float = GC_PERIOD_S,
        slices: int = GC_SLICES,
        keep: int = MAX_DEAD_PER_CONTAINER,
        clock: Callable[[], float] = time.time,
        wanted: Callable[[str], bool] = lambda uid: True,
    ) -> None:
        self.runtime = runtime
        self.wanted = wanted  # pods whose dead containers are collected (the node agent: running ones)
        self.period_s = period_s
        self.slices = slices
        self.keep = keep
        self.clock = clock
        self._sweep: list[str] = []  # pods of the current sweep still to visit, next one last
        self._step = 0  # the current sweep's size / slices, rounded up
        self.removed = 0  # containers removed since the start

    async def step(self) -> int:
        """Visit the next slice of pods (starting a sweep over every pod the runtime knows when the
        last one is done); returns how many containers were removed."""
        if not self._sweep:
            self._sweep = list(self.runtime.relist(self.clock()))
            self._sweep.reverse()
            self._step = math.ceil(len(self._sweep) / self.slices)
        removed = 0
        for _ in range(min(self._step, len(self._sweep))):
            uid = self._sweep.pop()
            if not self.wanted(uid):
                continue
            snapshot = self.runtime.pod_snapshot(uid, self.clock())
            for container_id in dead_containers_to_remove(snapshot, self.keep):
                await self.runtime.remove_container(uid, container_id)
                removed += 1
        self.removed += removed
        return removed

    async def run(self) -> None:
        while True:
            try:
                await self.step()
            except Exception as exc:  # a runtime that fails a removal is retried at the next sweep
                log.warning("container garbage collection failed: %s", exc)
            await asyncio.sleep(self.period_s / self.slices)
