"""Pod workers: one asyncio task per pod, driving the runtime toward the desired pod (pod_workers.go).

A worker moves SyncPod -> Terminating -> Terminated (UpdatePod). Each pass reads the pod's snapshot from
the runtime, lets the pure `compute_pod_actions` decide, and carries the decisions out. What the kubelet's
workers tell its status manager goes to pod-lifecycle instead: sync results (the reason cache, plus the
crash-loop back-off so a restarted agent resumes it), terminating (with the grace period in use) and
terminated (with the final runtime snapshot, so the fold never judges a terminated pod by an older
relist). A restarted agent rebuilds every worker from pod-updates and pod-lifecycle (`apply_update`,
`apply_lifecycle`) before any worker runs: the log, not memory, says what was desired and how far each
pod got, and containers that outlived the agent were adopted by the runtime.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from podledger.agents.mirror import MirrorPods, config_hash
from podledger.agents.runtime.base import Runtime
from podledger.agents.worker.actions import (
    compute_pod_actions,
    latest_by_name,
    phase_from_runtime,
    running_container_ids,
)
from podledger.agents.worker.lifecycle import effective_grace_period, liveness_kill_grace
from podledger.logs import PodLogger, pod_logger
from podledger.schemas import models
from podledger.streams import status as status_gen
from podledger.types import (
    TERMINAL_PHASES,
    JSONDict,
    LifecycleKind,
    PodOp,
    ProbeResult,
    Publish,
    RuntimeSnapshot,
    Topic,
)

__all__ = ["PodWorkers", "WorkerState"]

log = logging.getLogger(__name__)

RESYNC_S = 60.0  # syncFrequency: a pod is looked at again at least this often
ERROR_REQUEUE_S = 10.0  # after a failed pass (completeWork)
HOUSEKEEPING_S = 2.0  # runtime orphans are cleaned this often once sources are ready (HandlePodCleanups)
ORPHAN_GRACE_S = 1  # runtime-only orphans are killed with grace 1 (HandlePodCleanups)
JITTER = 0.5  # requeues after errors and resyncs are stretched by up to half (completeWork)


@dataclass
class WorkerState:
    """What one pod worker knows; everything here can be rebuilt from pod-updates and pod-lifecycle."""

    uid: str
    pod: JSONDict
    source: str
    terminating: bool = False
    terminated: bool = False
    removed: bool = False  # REMOVE seen: clean the runtime up once terminated, then forget the pod
    grace_s: int | None = None  # the stored grace period (calculateEffectiveGracePeriod); only ever shrinks
    backoff: dict[str, JSONDict] = field(default_factory=dict)
    reasons: dict[str, JSONDict] = field(default_factory=dict)
    since_ms: int = 0  # when this life of the UID began (its ADD); older lifecycle facts are not its own
    # The same UID added again while this life still ends (a static pod's manifest restored): it starts
    # once this one is cleaned up.
    next_life: WorkerState | None = None
    # Not state: the task machinery.
    wake: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    task: asyncio.Task[None] | None = field(default=None, repr=False)
    current: asyncio.Task[float | None] | None = field(default=None, repr=False)
    interrupted: bool = False

    @property
    def name(self) -> str:
        meta = self.pod["metadata"]
        return f"{meta.get('namespace') or 'default'}/{meta['name']}"

    @property
    def log(self) -> PodLogger:
        """The module's logger for lines about this pod."""
        meta = self.pod["metadata"]
        return pod_logger(log, meta.get("namespace") or "default", meta.get("name"), self.uid)

    def wants_termination(self) -> bool:
        """UpdatePod's reasons to terminate: deleted, removed, or terminal in the API. Static pods are
        never ended by an API phase."""
        if self.removed or (self.pod.get("metadata") or {}).get("deletionTimestamp"):
            return True
        api_phase = (self.pod.get("status") or {}).get("phase")
        return self.source == "api" and api_phase in TERMINAL_PHASES

    def grace_period(self) -> tuple[int, bool]:
        meta, spec = self.pod.get("metadata") or {}, self.pod.get("spec") or {}
        return effective_grace_period(
            self.grace_s,
            meta.get("deletionGracePeriodSeconds"),
            None,
            spec.get("terminationGracePeriodSeconds"),
        )


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
        self.node = node
        self._publish = publish
        self.prober = prober
        self.mirrors = mirrors  # when the node talks to an apiserver
        self.sources_ready = sources_ready
        self.clock = clock
        self.resync_s = resync_s
        self.workers: dict[str, WorkerState] = {}
        self.running = False
        self._mirroring: dict[str, asyncio.Task[None]] = {}  # mirror pod checks under way, by pod UID

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
                self._interrupt(w)
            w.wake.set()
            return
        if w is None:
            w = self.workers[uid] = WorkerState(uid, update.pod, update.source, since_ms=update.ts_ms)
            if self.running:
                self._launch(w)
            return
        if w.terminated:
            return  # a finished UID ignores updates until it is removed
        was_terminating, (old_grace, _) = w.terminating or w.wants_termination(), w.grace_period()
        w.pod, w.source = update.pod, update.source
        if w.wants_termination() and not was_terminating:
            self._interrupt(w)  # becoming terminating cancels the in-flight sync (UpdatePod)
        elif w.terminating and w.grace_period()[0] < old_grace:
            self._interrupt(w)  # a shortened grace period does too
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
            self._launch(w)

    async def stop(self) -> None:
        """Stop the workers but not the containers: a restarted agent adopts them."""
        self.running = False
        tasks = [w.task for w in self.workers.values() if w.task is not None]
        tasks += list(self._mirroring.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def stop_all_pods(self, grace_s: float = 2.0) -> None:
        """Stop every container the runtime runs (for a throw-away node such as the demo's)."""
        snapshots = self.runtime.relist(self.clock())
        await asyncio.gather(*(self._kill_all(uid, s, grace_s) for uid, s in snapshots.items()))

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
            await self._kill_all(uid, snapshot, ORPHAN_GRACE_S)
            await self.runtime.remove_sandbox(uid)
            pod_logger(log, None, None, uid).info("removed from the runtime: no pod of this node has it")
        return orphans

    def _launch(self, w: WorkerState) -> None:
        w.task = asyncio.ensure_future(self._work(w))

    def _stop_task(self, w: WorkerState) -> None:
        if w.task is not None and not w.task.done():
            w.task.cancel()

    def _interrupt(self, w: WorkerState) -> None:
        if w.current is not None and not w.current.done():
            w.interrupted = True
            w.current.cancel()

    async def _work(self, w: WorkerState) -> None:
        while True:
            w.wake.clear()
            w.current = asyncio.ensure_future(self._pass(w))
            try:
                delay = await w.current
            except asyncio.CancelledError:
                if not w.interrupted:
                    w.current.cancel()
                    raise
                w.interrupted, delay = False, 0.0
            except Exception:
                w.log.exception("sync failed; retrying in %.0fs", ERROR_REQUEUE_S)
                delay = ERROR_REQUEUE_S
            if self.workers.get(w.uid) is not w:
                return  # forgotten
            if delay == 0:
                continue
            if delay is not None and delay >= ERROR_REQUEUE_S:
                delay *= 1 + random.random() * JITTER  # so restored pods do not resync in lockstep
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(w.wake.wait(), delay)

    async def _pass(self, w: WorkerState) -> float | None:
        """One pass; returns how long to wait before the next unless woken (None: until woken)."""
        if w.terminated:
            if w.removed:
                await self.runtime.remove_sandbox(w.uid)
                if self.prober is not None:
                    self.prober.remove_pod(w.uid)
                del self.workers[w.uid]
                if w.next_life is not None:  # the UID came back while this life ended
                    self.workers[w.uid] = w.next_life
                    self._launch(w.next_life)
            return None
        if w.terminating or w.wants_termination():
            return await self._terminate(w)
        return await self._sync(w)

    async def _sync(self, w: WorkerState) -> float | None:
        now = self.clock()
        snapshot = self.runtime.pod_snapshot(w.uid, now)
        if phase_from_runtime(w.pod, snapshot) in TERMINAL_PHASES:
            return await self._terminate(w)  # SyncPod found the pod terminal (its isTerminal result)
        if self.prober is not None:
            self.prober.add_pod(w.pod)
        if self.mirrors is not None and w.source != "api" and w.uid not in self._mirroring:
            # In the background: the pod runs whether or not the apiserver is there to show it.
            self._mirroring[w.uid] = asyncio.ensure_future(self._ensure_mirror(w, self.mirrors))
        actions = compute_pod_actions(
            w.pod,
            snapshot,
            now,
            backoff=w.backoff,
            probe_failures=self._probe_failures(w.uid),
            started=self._sidecars_started(w.pod, snapshot),
        )
        if actions.create_sandbox:
            await self._kill_all(w.uid, snapshot, w.grace_period()[0])
            await self.runtime.create_sandbox(w.pod)
            return 0.0
        meta, spec = w.pod["metadata"], w.pod.get("spec") or {}
        for kill in actions.kill:
            grace = liveness_kill_grace(
                spec.get("terminationGracePeriodSeconds"),
                self._probe_grace(w.uid, kill.name, kill.probe),
                meta.get("deletionGracePeriodSeconds"),
            )
            w.log.info("%s", kill.message)
            await self.runtime.stop_container(w.uid, kill.container_id, grace)
        reasons, failed = dict(actions.reasons), False
        latest = latest_by_name(snapshot)
        containers = {
            c["name"]: c for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
        }
        for name in actions.start:
            previous = latest.get(name)
            attempt = 0 if previous is None else int(previous.get("restart_count") or 0) + 1
            try:
                await self.runtime.start_container(w.pod, containers[name], attempt=attempt)
                reasons.pop(name, None)
            except Exception as exc:  # the runtime's refusal is the container's waiting reason
                reasons[name] = {"reason": "RunContainerError", "message": str(exc)}
                failed = True
        await self._sync_result(w, reasons, actions.backoff)
        if failed:
            return ERROR_REQUEUE_S
        if actions.kill:
            return 0.0  # restart what was killed (back-off permitting) without waiting for the relist
        return self.resync_s if actions.wait_s is None else min(actions.wait_s, self.resync_s)

    async def _ensure_mirror(self, w: WorkerState, mirrors: MirrorPods) -> None:
        try:
            await mirrors.ensure(w.pod)
        except Exception as exc:
            w.log.warning("mirror pod not updated: %s", exc)
        finally:
            self._mirroring.pop(w.uid, None)

    async def _terminate(self, w: WorkerState) -> float | None:
        """SyncTerminatingPod then SyncTerminatedPod (kubelet.go)."""
        grace, _ = w.grace_period()
        if not w.terminating or grace != w.grace_s:
            # State changes only once the fact is acknowledged: a failed publish is retried next pass.
            await self._lifecycle(w, LifecycleKind.TERMINATING, grace_s=grace)
            w.terminating, w.grace_s = True, grace
        if self.prober is not None:
            self.prober.stop_liveness_and_startup(w.uid)
        snapshot = self.runtime.pod_snapshot(w.uid, self.clock())
        await self._kill_all(w.uid, snapshot, grace, w.pod)
        await self.runtime.stop_sandbox(w.uid)
        final = self.runtime.pod_snapshot(w.uid, self.clock())
        still = running_container_ids(final)
        if still:
            raise RuntimeError(f"containers {still} still running after the kill")
        if self.prober is not None:
            self.prober.remove_pod(w.uid)
        await self._lifecycle(w, LifecycleKind.TERMINATED, runtime=final or {"containers": [], "ips": []})
        w.terminated = True
        w.log.info("terminated (grace %ds)", grace)
        return 0.0 if w.removed else None

    async def _kill_all(
        self, uid: str, snapshot: RuntimeSnapshot | None, grace: float, pod: JSONDict | None = None
    ) -> None:
        """Regular containers together, then sidecars in reverse start order (killPodWithSyncResult)."""
        running = running_container_ids(snapshot)
        if not running:
            return
        sidecars = [
            c["name"]
            for c in ((pod or {}).get("spec") or {}).get("initContainers") or []
            if status_gen.is_sidecar(c)
        ]
        by_id = {c["id"]: c["name"] for c in (snapshot or {}).get("containers") or []}
        first = [cid for cid in running if by_id[cid] not in sidecars]
        deadline = time.monotonic() + grace
        await asyncio.gather(*(self.runtime.stop_container(uid, cid, grace) for cid in first))
        # Each sidecar gets what is left of the pod's grace (the runtime still allows 2 s at least).
        for name in reversed(sidecars):
            for cid in running:
                if by_id[cid] == name:
                    await self.runtime.stop_container(uid, cid, max(deadline - time.monotonic(), 0.0))

    # ------------------------------------------------------------------ probes

    def _probe_failures(self, uid: str) -> dict[str, str]:
        """Running containers whose liveness (or startup) result is Failure, by runtime id."""
        return {} if self.prober is None else dict(self.prober.probe_failures(uid))

    def _sidecars_started(self, pod: JSONDict, snapshot: RuntimeSnapshot | None) -> dict[str, bool]:
        """Running sidecars with a startup probe, by runtime id: started only once it succeeded (no
        result yet is not started). Containers without a startup probe count as started."""
        if self.prober is None:
            return {}
        init = (pod.get("spec") or {}).get("initContainers") or []
        probed = {c["name"] for c in init if status_gen.is_sidecar(c) and c.get("startupProbe")}
        results = self.prober.startup_results(pod["metadata"]["uid"])
        return {
            c["id"]: results.get(c["id"]) == ProbeResult.SUCCESS
            for c in (snapshot or {}).get("containers") or []
            if c["name"] in probed and c["state"] == "running"
        }

    def _probe_grace(self, uid: str, container: str, probe: str | None) -> int | None:
        if self.prober is None or probe is None:
            return None
        grace = self.prober.probe_termination_grace(uid, container, probe)
        return None if grace is None else int(grace)

    # ------------------------------------------------------------------ output

    async def _sync_result(
        self, w: WorkerState, reasons: dict[str, JSONDict], backoff: dict[str, JSONDict]
    ) -> None:
        """Publish the reason cache when it (or the back-off) changed; the fold needs nothing more often."""
        if reasons == w.reasons and backoff == w.backoff:
            return
        results = [{"container": name, **value} for name, value in sorted(reasons.items())]
        await self._lifecycle(w, LifecycleKind.SYNC_RESULT, sync_results=results, backoff=backoff)
        w.reasons, w.backoff = reasons, backoff

    async def _lifecycle(self, w: WorkerState, kind: LifecycleKind, **fields: Any) -> None:
        event = models.PodLifecycle(w.uid, self.node, kind, int(self.clock() * 1000), **fields)
        await self._publish(Topic.POD_LIFECYCLE, w.uid, event, self.node)
