"""The node's pod workers (podWorkers): one worker per pod UID, fed by pod-updates, woken by PLEG events
and probe failures, and the housekeeping that cleans up what no pod claims.

Each worker's task lives in pod_worker.py; this holds the set and dispatches to it. A restarted agent
rebuilds every worker from pod-updates and pod-lifecycle (`apply_update`, `apply_lifecycle`) before any
worker runs: the log, not memory, says what was desired and how far each pod got, and containers that
outlived the agent were adopted by the runtime.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from podledger.agents.mirror import MirrorPods, config_hash
from podledger.agents.runtime.base import Runtime
from podledger.agents.worker.pod_worker import RESYNC_S, PodWorkerTasks, WorkerState, kill_containers
from podledger.logs import pod_logger
from podledger.schemas import models
from podledger.types import LifecycleKind, PodOp, Publish

__all__ = ["PodWorkers"]

log = logging.getLogger(__name__)

HOUSEKEEPING_S = 2.0  # runtime orphans are cleaned this often once sources are ready (HandlePodCleanups)
ORPHAN_GRACE_S = 1  # runtime-only orphans are killed with grace 1 (HandlePodCleanups)


class PodWorkers:
    """Every pod worker of one node, fed by pod-updates, woken by PLEG events and probe failures."""

    def __init__(
        self,
        runtime: Runtime,
        node: str,
        publish: Publish,
        *,
        prober: Any | None = None,
        mirrors: MirrorPods | None = None,
        sources_ready: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.time,
        resync_s: float = RESYNC_S,
    ) -> None:
        self.runtime = runtime
        self.mirrors = mirrors  # when the node talks to an apiserver
        self.sources_ready = sources_ready
        self.clock = clock
        self.workers: dict[str, WorkerState] = {}
        self.running = False
        self._tasks = PodWorkerTasks(
            self.workers,
            runtime,
            node,
            publish,
            prober=prober,
            mirrors=mirrors,
            clock=clock,
            resync_s=resync_s,
        )

    # ------------------------------------------------------------------ input

    def apply_update(self, update: models.PodUpdate) -> None:
        """One pod-updates message for this node (HandlePodAdditions/Updates/Removes)."""
        uid = update.uid
        w = self.workers.get(uid)
        if w is not None and w.removed:
            # This life is ending; the message belongs to the UID's next life, if any.
            if update.op == PodOp.REMOVE:
                w.next_life = None
            elif w.next_life is None:
                w.next_life = WorkerState(uid, update.pod, update.source, since_ms=update.ts_ms)
            else:
                w.next_life.pod, w.next_life.source = update.pod, update.source
            return
        if update.op == PodOp.REMOVE:
            if w is None:
                return
            if not self.running and self.runtime.pod_snapshot(uid, self.clock()) is None:
                del self.workers[uid]  # replaying the log: gone, and nothing of it is left to stop
                return
            w.removed = True
            if not w.terminating:
                self._tasks.interrupt(w)
            w.wake.set()
            return
        if w is None:
            w = self.workers[uid] = WorkerState(uid, update.pod, update.source, since_ms=update.ts_ms)
            if self.running:
                self._tasks.launch(w)
            return
        if w.terminated:
            return  # a finished UID ignores updates until it is removed
        was_terminating, (old_grace, _) = w.terminating or w.wants_termination(), w.grace_period()
        w.pod, w.source = update.pod, update.source
        if w.wants_termination() and not was_terminating:
            self._tasks.interrupt(w)  # becoming terminating cancels the in-flight sync (UpdatePod)
        elif w.terminating and w.grace_period()[0] < old_grace:
            self._tasks.interrupt(w)  # a shortened grace period does too
        w.wake.set()

    def apply_lifecycle(self, event: models.PodLifecycle) -> None:
        """Replay one of our own pod-lifecycle facts (only while restoring from the log)."""
        w = self.workers.get(event.uid)
        if w is not None and w.next_life is not None and event.ts_ms >= w.next_life.since_ms:
            w = w.next_life
        if w is None or event.ts_ms < w.since_ms:
            return  # a fact of an earlier life of this UID
        if event.kind == LifecycleKind.SYNC_RESULT:
            w.reasons = {
                r["container"]: {k: v for k, v in r.items() if k != "container"} for r in event.sync_results
            }
            w.backoff = dict(event.backoff or {})
        elif event.kind == LifecycleKind.TERMINATING:
            w.terminating = True
            if event.grace_s is not None:
                w.grace_s = event.grace_s
        else:
            w.terminating = w.terminated = True

    def wake(self, uid: str) -> None:
        """Something changed for the pod (a PLEG event, a probe failure): look at it now."""
        w = self.workers.get(uid)
        if w is not None:
            w.wake.set()

    def publishes_for(self, uid: str) -> bool:
        """Whether runtime events of this pod still matter: not for pods gone from the config (as the
        kubelet's sync loop drops PLEG events of pods its pod manager no longer has)."""
        w = self.workers.get(uid)
        return w is not None and not w.removed

    # ------------------------------------------------------------------ running

    def start(self) -> None:
        """Launch every restored worker; from now on updates act at once."""
        self.running = True
        for w in self.workers.values():
            self._tasks.launch(w)

    async def stop(self) -> None:
        """Stop the workers but not the containers: a restarted agent adopts them."""
        self.running = False
        tasks = [w.task for w in self.workers.values() if w.task is not None]
        tasks += list(self._tasks.mirroring.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def stop_all_pods(self, grace_s: float = 2.0) -> None:
        """Stop every container the runtime runs (for a throw-away node such as the demo's)."""
        snapshots = self.runtime.relist(self.clock())
        await asyncio.gather(
            *(kill_containers(self.runtime, uid, s, grace_s) for uid, s in snapshots.items())
        )

    async def housekeeping(self, period_s: float = HOUSEKEEPING_S) -> None:
        """HandlePodCleanups in short: once sources are ready, pods only the runtime knows are killed
        and removed."""
        while True:
            await asyncio.sleep(period_s)
            if not (self.running and self.sources_ready()):
                continue
            try:
                await self.remove_orphans()
                if self.mirrors is not None:
                    static = {config_hash(w.pod) for w in self.workers.values() if w.source != "api"}
                    await self.mirrors.delete_orphans(static)
            except Exception as exc:  # the apiserver or the runtime may be away; the next round retries
                log.warning("housekeeping failed: %s", exc)

    async def remove_orphans(self) -> list[str]:
        orphans = [uid for uid in self.runtime.relist(self.clock()) if uid not in self.workers]
        for uid in orphans:
            snapshot = self.runtime.pod_snapshot(uid, self.clock())
            await kill_containers(self.runtime, uid, snapshot, ORPHAN_GRACE_S)
            await self.runtime.remove_sandbox(uid)
            pod_logger(log, None, None, uid).info("removed from the runtime: no pod of this node has it")
        return orphans
