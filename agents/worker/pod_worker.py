"""One pod's worker (pod_workers.go): what it knows, and the asyncio task driving the runtime toward
the desired pod.

A worker moves SyncPod -> Terminating -> Terminated (UpdatePod). Each pass reads the pod's snapshot from
the runtime, lets the pure `compute_pod_actions` decide, and carries the decisions out. What the kubelet's
workers tell its status manager goes to pod-lifecycle instead: sync results (the reason cache, plus the
crash-loop back-off so a restarted agent resumes it), terminating (with the grace period in use) and
terminated (with the final runtime snapshot, so the fold never judges a terminated pod by an older
relist). `PodWorkers` (pod_workers.py) holds the node's workers and feeds them updates.
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

from podledger.agents.mirror import MirrorPods
from podledger.agents.runtime.base import Runtime
from podledger.agents.worker import decisions
from podledger.agents.worker.actions import (
    compute_pod_actions,
    latest_by_name,
    phase_from_runtime,
    running_container_ids,
)
from podledger.agents.worker.lifecycle import liveness_kill_grace
from podledger.logs import PodLogger, pod_logger
from podledger.schemas import models
from podledger.types import TERMINAL_PHASES, JSONDict, LifecycleKind, Publish, RuntimeSnapshot, Topic

__all__ = ["PodWorkerTasks", "WorkerState", "kill_containers"]

log = logging.getLogger(__name__)

RESYNC_S = 60.0  # syncFrequency: a pod is looked at again at least this often
ERROR_REQUEUE_S = 10.0  # after a failed pass (completeWork)
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
        """UpdatePod's reasons to terminate (`decisions.wants_termination`)."""
        return decisions.wants_termination(self.pod, self.source, self.removed)

    def grace_period(self) -> tuple[int, bool]:
        return decisions.pod_grace_period(self.pod, self.grace_s)


async def kill_containers(
    runtime: Runtime, uid: str, snapshot: RuntimeSnapshot | None, grace: float, pod: JSONDict | None = None
) -> None:
    """Regular containers together, then sidecars in reverse start order (killPodWithSyncResult)."""
    regular, sidecars = decisions.kill_order(snapshot, pod)
    if not (regular or sidecars):
        return
    deadline = time.monotonic() + grace
    await asyncio.gather(*(runtime.stop_container(uid, cid, grace) for cid in regular))
    # Each sidecar gets what is left of the pod's grace (the runtime still allows 2 s at least).
    for cid in sidecars:
        await runtime.stop_container(uid, cid, max(deadline - time.monotonic(), 0.0))


class PodWorkerTasks:
    """Runs each pod worker's task: its loop, and the passes that sync or terminate its pod."""

    def __init__(
        self,
        workers: dict[str, WorkerState],
        runtime: Runtime,
        node: str,
        publish: Publish,
        *,
        prober: Any | None,
        mirrors: MirrorPods | None,
        clock: Callable[[], float],
        resync_s: float,
    ) -> None:
        self.workers = workers  # the node's workers (PodWorkers'): a finished pod is forgotten here
        self.runtime = runtime
        self.node = node
        self._publish = publish
        self.prober = prober
        self.mirrors = mirrors  # when the node talks to an apiserver
        self.clock = clock
        self.resync_s = resync_s
        self.mirroring: dict[str, asyncio.Task[None]] = {}  # mirror pod checks under way, by pod UID

    # ------------------------------------------------------------------ the task

    def launch(self, w: WorkerState) -> None:
        w.task = asyncio.ensure_future(self._work(w))

    def interrupt(self, w: WorkerState) -> None:
        """Cancel the pass in flight; the loop starts the next one at once."""
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

    # ------------------------------------------------------------------ one pass

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
                    self.launch(w.next_life)
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
        if self.mirrors is not None and w.source != "api" and w.uid not in self.mirroring:
            # In the background: the pod runs whether or not the apiserver is there to show it.
            self.mirroring[w.uid] = asyncio.ensure_future(self._ensure_mirror(w, self.mirrors))
        actions = compute_pod_actions(
            w.pod,
            snapshot,
            now,
            backoff=w.backoff,
            probe_failures=self._probe_failures(w.uid),
            started=self._sidecars_started(w.pod, snapshot),
        )
        if actions.create_sandbox:
            await kill_containers(self.runtime, w.uid, snapshot, w.grace_period()[0])
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
            self.mirroring.pop(w.uid, None)

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
        await kill_containers(self.runtime, w.uid, snapshot, grace, w.pod)
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

    # ------------------------------------------------------------------ probes

    def _probe_failures(self, uid: str) -> dict[str, str]:
        """Running containers whose liveness (or startup) result is Failure, by runtime id."""
        return {} if self.prober is None else dict(self.prober.probe_failures(uid))

    def _sidecars_started(self, pod: JSONDict, snapshot: RuntimeSnapshot | None) -> dict[str, bool]:
        """Which running sidecars count as started (`decisions.sidecars_started`); none without a prober."""
        if self.prober is None:
            return {}
        results = self.prober.startup_results(pod["metadata"]["uid"])
        return decisions.sidecars_started(pod, snapshot, results)

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
