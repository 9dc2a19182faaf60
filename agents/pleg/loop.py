"""The relist loop (generic.go relist): list the runtime every period, publish what changed.

Each event goes out with the pod's runtime snapshot, so the fold never has to ask the runtime
anything. Observers (benchmarks) see each relist's timings through `on_relist`.

The node agent's pod workers and prober share this event loop, so a relist never holds it for long:
the diff touches only pods whose snapshot changed (relist.relist_changes), and events are queued in
chunks with a yield to the loop between them, then acknowledged together.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

from podledger.agents.pleg.relist import (
    RELIST_PERIOD_S,
    PodLifecycleEvent,
    Relisted,
    RelistHealth,
    relist_changes,
)
from podledger.agents.runtime.base import Runtime
from podledger.schemas import models
from podledger.types import JSONDict, RuntimeSnapshot

log = logging.getLogger(__name__)

# Events queued between two yields to the event loop: queueing one costs tens of microseconds, so a
# chunk holds the loop for a few milliseconds at most.
QUEUE_CHUNK = 128


@dataclass(frozen=True, slots=True)
class RelistTiming:
    """One relist: seconds spent listing and diffing alone, seconds up to its events' acknowledgement,
    how many events it published, and seconds until they were all queued (before the acknowledgement)."""

    list_s: float
    total_s: float
    published: int
    queued_s: float = 0.0


class Pleg:
    """Relists the runtime every `period_s` and publishes each event with the pod's snapshot."""

    def __init__(
        self,
        runtime: Runtime,
        node: str,
        publish: Callable[[models.PlegEvent], Awaitable[Any]],
        *,
        period_s: float = RELIST_PERIOD_S,
        clock: Callable[[], float] = time.time,
        wanted: Callable[[str], bool] = lambda uid: True,
        on_relist: Callable[[RelistTiming], None] | None = None,
        between_relists: Callable[[], object] | None = None,
    ) -> None:
        self.runtime = runtime
        self.wanted = wanted  # pods whose events are published (the node still has them in its config)
        self.node = node
        # Receives a schemas.models.PlegEvent once queued; may return its delivery future, which the
        # relist awaits after queueing all its events.
        self.publish = publish
        self.period_s = period_s
        self.clock = clock
        self.health = RelistHealth()
        # The last relist whose events were all acknowledged: a relist that fails is diffed again
        # from here, so its events are published again.
        self.previous = Relisted()
        self.on_relist = on_relist
        # Called after each relist, failed or not, before the loop sleeps: the moment the relist has
        # nothing left to do (the node agent runs its collector passes there).
        self.between_relists = between_relists

    async def relist_once(self) -> list[PodLifecycleEvent]:
        """One relist: returns the events it published."""
        now = self.clock()
        started = time.perf_counter()
        current = self.runtime.relist(now)
        events, relisted = relist_changes(self.previous, current)
        listed = time.perf_counter()
        ts_ms = int(now * 1000)
        empty: RuntimeSnapshot = {"containers": [], "ips": []}
        deliveries = []
        published = 0
        for n, event in enumerate(events):
            if n and n % QUEUE_CHUNK == 0:
                await asyncio.sleep(0)  # let the pod workers and the prober run between chunks
            if not self.wanted(event.pod_uid):
                continue
            snapshot = current.get(event.pod_uid) or empty
            delivery = await self.publish(
                models.PlegEvent(
                    event.pod_uid, self.node, event.type, event.container_id, cast(JSONDict, snapshot), ts_ms
                )
            )
            published += 1
            if delivery is not None:
                deliveries.append(delivery)
        queued = time.perf_counter()
        # A relist's events are queued one after another and acknowledged together, in shared batches.
        await asyncio.gather(*deliveries)
        if self.on_relist is not None:
            done = time.perf_counter()
            self.on_relist(RelistTiming(listed - started, done - started, published, queued - started))
        self.previous = relisted
        self.health.record_relist(now)
        return events

    async def run(self) -> None:
        while True:
            started = time.monotonic()
            try:
                await self.relist_once()
            except Exception as exc:  # a failed relist is what relist health reports; keep relisting
                log.warning("relist failed: %s", exc)
            if self.between_relists is not None:
                self.between_relists()
            await asyncio.sleep(max(0.0, self.period_s - (time.monotonic() - started)))
