"""The probe manager of one node (pkg/kubelet/prober/prober_manager.go): the I/O shell.

One asyncio task per (pod UID, container, probe type) for regular containers and sidecars, ticking
every periodSeconds, running the pure halves of doProbe (agents.prober.worker) around
`execute_probe`, and publishing every result change.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from podledger.agents.prober.checks import CheckFn, execute_probe, run_check
from podledger.agents.prober.results import ResultCache
from podledger.agents.prober.specs import (
    PROBE_TYPES,
    probe_settings,
    probe_spec,
    probe_termination_grace_seconds,
    workers_for_pod,
)
from podledger.agents.prober.worker import ProbeWorkerState, ResultOp, after_probe, apply_ops, before_probe
from podledger.agents.runtime.process_spec import DEFAULT_RUN_AS_ID, POD_IP, run_as_ids
from podledger.logs import PodLogger, pod_ref_of
from podledger.schemas import models
from podledger.types import JSONDict, ProbeResult, ProbeType

log = logging.getLogger(__name__)


def _raw_id(container_id: str) -> str:
    """A status container ID without its runtime prefix ("process://abc" -> "abc")."""
    return container_id.split("://", 1)[-1]


@dataclass(eq=False)
class ProbeWorker:
    """One probing task. `stop` and `trigger` never block and may be called any number of times."""

    uid: str
    container_name: str
    probe_type: ProbeType
    container: JSONDict
    pod: JSONDict
    state: ProbeWorkerState
    task: asyncio.Task[None] | None = None
    stopping: bool = False
    triggered: bool = False
    wake: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.uid, self.container_name, self.probe_type)

    @property
    def name(self) -> str:
        """container/probe type, as log lines name a worker within its pod."""
        return f"{self.container_name}/{self.probe_type}"

    @property
    def log(self) -> PodLogger:
        """The manager's logger, for lines about this worker's pod."""
        return PodLogger(log, pod_ref_of(self.pod))

    def stop(self) -> None:
        """Ask the worker to exit; it removes its result and unregisters itself on the way out."""
        self.stopping = True
        self.wake.set()

    def trigger(self) -> None:
        """Probe again now (a manual run) and restart the period from here."""
        self.triggered = True
        self.wake.set()


class Prober:
    """The probe manager of one node: workers, the three results managers, and the change stream.

    The pod worker calls `add_pod` when it syncs a pod, `update_status` whenever the pod's API status
    changes (workers read container IDs, states and `started` from it), `stop_liveness_and_startup` when
    the pod starts terminating, and `remove_pod` / `cleanup_pods` when it is gone. It reads results back
    with `result` / `probe_failures`. Every change is handed to `on_change` (synchronously, for local
    reactions) and to `publish` (a models.ProbeResult for the probe-results topic); nothing else is.

    Must be used from inside a running event loop (workers are asyncio tasks).
    """

    def __init__(
        self,
        node: str,
        publish: Callable[[models.ProbeResult], Awaitable[None]] | None = None,
        *,
        on_change: Callable[[models.ProbeResult], None] | None = None,
        on_event: Callable[[str, str, str, str], None] | None = None,
        clock: Callable[[], float] = time.time,
        check: CheckFn = run_check,
        default_host: str = POD_IP,
        default_run_as: tuple[int, int] = (DEFAULT_RUN_AS_ID, DEFAULT_RUN_AS_ID),
        rng: random.Random | None = None,
    ) -> None:
        """`default_run_as`: the (uid, gid) the runtime runs a container as when its pod sets none;
        a root agent runs the container's exec probes as the same ids."""
        self.node = node
        self.publish = publish
        self.on_change = on_change
        self.on_event = on_event  # (pod uid, container name, reason, message), e.g. to record an Event
        self.clock = clock
        self.check = check
        self.default_host = default_host
        self.default_run_as = default_run_as
        self.rng = rng or random.Random()
        self.started_at = clock()
        self.results = {probe_type: ResultCache() for probe_type in PROBE_TYPES}
        self._workers: dict[tuple[str, str, str], ProbeWorker] = {}
        self._pods: dict[str, JSONDict] = {}
        self._statuses: dict[str, JSONDict] = {}

    # ----------------------------------------------------------------- what the pod worker calls

    def add_pod(self, pod: JSONDict) -> int:
        """Start the workers the pod needs; returns how many were new. Existing keys are skipped.

        Existing workers of the pod see this pod object from now on (its deletionTimestamp matters).
        """
        uid = str(pod["metadata"]["uid"])
        self._pods[uid] = pod
        added = 0
        for name, probe_type, container in workers_for_pod(pod):
            key = (uid, name, probe_type)
            existing = self._workers.get(key)
            if existing is not None:
                existing.pod = pod
                continue
            worker = ProbeWorker(uid, name, probe_type, container, pod, ProbeWorkerState(probe_type))
            self._workers[key] = worker
            worker.task = asyncio.get_running_loop().create_task(
                self._run(worker), name=f"probe {probe_type} {uid}/{name}"
            )
            added += 1
        return added

    def update_status(self, uid: str, api_status: JSONDict | None) -> None:
        """The pod's current API status as workers should see it; None forgets it."""
        if api_status is None:
            self._statuses.pop(uid, None)
        else:
            self._statuses[uid] = api_status

    def stop_liveness_and_startup(self, uid: str) -> None:
        """The pod is terminating: stop its liveness and startup workers; readiness keeps reporting."""
        for worker in self._pod_workers(uid):
            if worker.probe_type in (ProbeType.LIVENESS, ProbeType.STARTUP):
                worker.stop()

    def remove_pod(self, uid: str) -> None:
        """Stop every worker of the pod and forget the pod and its status."""
        for worker in self._pod_workers(uid):
            worker.stop()
        self._pods.pop(uid, None)
        self._statuses.pop(uid, None)

    def cleanup_pods(self, desired_uids: Iterable[str]) -> None:
        """Stop the workers of every pod not in `desired_uids` (and forget those pods)."""
        desired = set(desired_uids)
        for worker in list(self._workers.values()):
            if worker.uid not in desired:
                worker.stop()
        for uid in set(self._pods) | set(self._statuses):
            if uid not in desired:
                self._pods.pop(uid, None)
                self._statuses.pop(uid, None)

    def result(self, probe_type: ProbeType, container_id: str) -> str | None:
        """The current result for a container ID as it appears in the status ("process://..."), or None."""
        return self.results[probe_type].get(container_id)

    def probe_failures(self, uid: str) -> dict[str, str]:
        """{runtime container ID (no prefix): "liveness" | "startup"} for this pod's containers whose
        liveness or startup result is Failure: the containers the pod worker must kill and restart."""
        failures: dict[str, str] = {}
        for worker in self._pod_workers(uid):
            cid = worker.state.container_id
            if worker.probe_type not in (ProbeType.LIVENESS, ProbeType.STARTUP) or not cid:
                continue
            if self.result(worker.probe_type, cid) == ProbeResult.FAILURE:
                failures.setdefault(_raw_id(cid), worker.probe_type)
        return failures

    def startup_results(self, uid: str) -> dict[str, str]:
        """{runtime container ID (no prefix): startup result} for this pod's containers with a startup
        worker that has seen them (Unknown until the probe passes or fails)."""
        out: dict[str, str] = {}
        for worker in self._pod_workers(uid):
            cid = worker.state.container_id
            if worker.probe_type != ProbeType.STARTUP or not cid:
                continue
            result = self.result(ProbeType.STARTUP, cid)
            if result is not None:
                out[_raw_id(cid)] = result
        return out

    def probe_termination_grace(self, uid: str, container_name: str, probe_type: str) -> int | None:
        """The probe-level terminationGracePeriodSeconds for a kill caused by this probe, if set."""
        pod = self._pods.get(uid)
        if pod is None:
            worker = self._workers.get((uid, container_name, probe_type))
            pod = worker.pod if worker is not None else None
        return probe_termination_grace_seconds(pod, container_name, probe_type)

    def worker(self, uid: str, container_name: str, probe_type: str) -> ProbeWorker | None:
        return self._workers.get((uid, container_name, probe_type))

    def has_worker(self, uid: str, container_name: str, probe_type: str) -> bool:
        return (uid, container_name, probe_type) in self._workers

    def worker_keys(self) -> set[tuple[str, str, str]]:
        return set(self._workers)

    def trigger(self, uid: str, container_name: str, probe_type: str = ProbeType.READINESS) -> bool:
        """Run a worker's probe now (prober_manager.go: a readiness worker without a result);
        False if there is none."""
        worker = self._workers.get((uid, container_name, probe_type))
        if worker is None:
            return False
        worker.trigger()
        return True

    def stop(self) -> None:
        """Stop every worker. Idempotent and non-blocking; `close` also waits for them."""
        for worker in list(self._workers.values()):
            worker.stop()

    async def close(self) -> None:
        """Stop every worker and wait until all have exited."""
        self.stop()
        tasks = [w.task for w in list(self._workers.values()) if w.task is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    # ----------------------------------------------------------------- the worker loop

    def _pod_workers(self, uid: str) -> list[ProbeWorker]:
        return [w for w in list(self._workers.values()) if w.uid == uid]

    async def _run(self, worker: ProbeWorker) -> None:
        loop = asyncio.get_running_loop()
        period = probe_settings(probe_spec(worker.container, worker.probe_type)).period_s
        try:
            # Right after a (re)start, spread the workers' first probes over one period.
            if period > self.clock() - self.started_at:
                await self._sleep(worker, self.rng.random() * period)
                worker.triggered = False  # the first probe is about to run anyway
            next_tick = loop.time() + period
            while not worker.stopping:
                if not await self._do_probe(worker):
                    break
                while not worker.stopping:
                    now = loop.time()
                    if worker.triggered:
                        worker.triggered = False
                        next_tick = now + period
                        break
                    if now >= next_tick:
                        next_tick += period * (math.floor((now - next_tick) / period) + 1)
                        break
                    await self._sleep(worker, next_tick - now)
        finally:
            if worker.state.container_id:
                self.results[worker.probe_type].remove(worker.state.container_id)
            if self._workers.get(worker.key) is worker:
                del self._workers[worker.key]

    @staticmethod
    async def _sleep(worker: ProbeWorker, seconds: float) -> None:
        """Sleep, waking early for stop or trigger."""
        if worker.stopping or worker.triggered:
            return
        worker.wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(worker.wake.wait(), max(seconds, 0.0))

    async def _do_probe(self, worker: ProbeWorker) -> bool:
        """One tick; errors in the machinery are logged and the worker keeps going, as upstream."""
        try:
            status = self._statuses.get(worker.uid)
            now = self.clock()
            worker.state, step = before_probe(worker.state, worker.container, worker.pod, status, now)
            await self._apply(worker, step.ops)
            if not step.run_probe:
                return step.keep_going
            host = str((status or {}).get("podIP") or self.default_host)
            container = with_run_as(worker.pod, worker.container, self.default_run_as)
            verdict = await execute_probe(worker.probe_type, container, host=host, check=self.check)
            if verdict.event_reason is not None:
                self._record_event(worker, verdict.event_reason, verdict.event_message)
            worker.state, step = after_probe(worker.state, worker.container, verdict.result, verdict.error)
            await self._apply(worker, step.ops)
            return step.keep_going
        except Exception:
            worker.log.exception("probe worker %s failed one tick", worker.name)
            return True

    def _record_event(self, worker: ProbeWorker, reason: str, message: str) -> None:
        worker.log.info("container %s: %s: %s", worker.container_name, reason, message)
        if self.on_event is not None:
            try:
                self.on_event(worker.uid, worker.container_name, reason, message)
            except Exception:
                worker.log.exception("on_event failed")

    async def _apply(self, worker: ProbeWorker, ops: tuple[ResultOp, ...]) -> None:
        for container_id, result in apply_ops(self.results[worker.probe_type], ops):
            change = models.ProbeResult(
                worker.uid,
                self.node,
                worker.container_name,
                container_id,
                worker.probe_type,
                result,
                int(self.clock() * 1000),
            )
            if self.on_change is not None:
                try:
                    self.on_change(change)
                except Exception:
                    worker.log.exception("on_change failed for %s", worker.name)
            if self.publish is not None:
                try:
                    await self.publish(change)
                except Exception:
                    # The local result stands (the pod worker acts on it); the topic misses this change.
                    worker.log.exception("publishing %s %s=%s failed", worker.name, container_id, result)


def with_run_as(pod: JSONDict, container: JSONDict, default_ids: tuple[int, int]) -> JSONDict:
    """The container with the ids it runs as: its securityContext over the pod's, else the
    runtime's defaults for a pod that sets none (Settings.runtime_default_uid and _gid), exactly as
    the process runtime starts it. An exec probe runs as its container does, never as the agent,
    nor as another unprivileged user than the container's."""
    uid, gid = run_as_ids(pod, container, default_ids)
    own = {**(container.get("securityContext") or {}), "runAsUser": uid, "runAsGroup": gid}
    return {**container, "securityContext": own}
