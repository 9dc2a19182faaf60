"""Liveness, readiness and startup probing for one node's pods (spec §3, R3.1-R3.3).

The per-worker rules of pkg/kubelet/prober/worker.go (doProbe) are pure functions over plain data: a
worker's `WorkerState`, the container spec, the pod and its cached API status go in with `now`, and the
result-cache operations come out. Because the probe itself is I/O, doProbe is split in two around it:
`before_probe` (steps 1-9: may the probe run at all?) and `after_probe` (steps 11-12: thresholds and
hold). `ResultCache` is the results manager: it reports a change only for a new container ID or a
different result, which is exactly when a ProbeResult goes to the probe-results topic.

`Prober` at the bottom is the I/O shell: one asyncio task per (pod UID, container, probe type) for
regular containers and sidecars, ticking every periodSeconds, running the handlers of
agents/probe_checks.py with retries on error, and publishing every change.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from podledger.agents.probe_checks import (
    FAILURE,
    SUCCESS,
    UNKNOWN,
    WARNING,
    CheckOutcome,
    run_check,
)
from podledger.agents.runtime.process import POD_IP
from podledger.schemas import models
from podledger.streams.status import is_sidecar

__all__ = [
    "FAILURE",
    "INITIAL_RESULTS",
    "LIVENESS",
    "MAX_PROBE_RETRIES",
    "PROBE_TYPES",
    "READINESS",
    "STARTUP",
    "SUCCESS",
    "UNKNOWN",
    "ProbeSettings",
    "ProbeVerdict",
    "ProbeWorker",
    "Prober",
    "ResultCache",
    "ResultOp",
    "Step",
    "WorkerState",
    "after_probe",
    "apply_ops",
    "before_probe",
    "execute_probe",
    "find_container_status",
    "probe_settings",
    "probe_spec",
    "probe_termination_grace_seconds",
    "verdict_for",
    "workers_for_pod",
]

log = logging.getLogger("podledger.prober")

JSONDict = dict[str, Any]
CheckFn = Callable[..., Awaitable[CheckOutcome]]

LIVENESS = "liveness"
READINESS = "readiness"
STARTUP = "startup"
PROBE_TYPES = (STARTUP, READINESS, LIVENESS)  # the order AddPod creates workers in

# What a worker reports for a container it has just found, before any probe ran (R3.1).
INITIAL_RESULTS = {READINESS: FAILURE, LIVENESS: SUCCESS, STARTUP: UNKNOWN}
MAX_PROBE_RETRIES = 3  # attempts per probe, repeated only while the attempt errors

# API defaults for a probe (podledger may see specs that were never defaulted).
DEFAULT_PERIOD_S = 10.0
DEFAULT_SUCCESS_THRESHOLD = 1
DEFAULT_FAILURE_THRESHOLD = 3

_TERMINAL_PHASES = frozenset({"Failed", "Succeeded"})


# --------------------------------------------------------------------------- probe specs


def probe_spec(container: Mapping[str, Any] | None, probe_type: str) -> JSONDict | None:
    """The container's livenessProbe, readinessProbe or startupProbe, or None."""
    return (container or {}).get(f"{probe_type}Probe")


@dataclass(frozen=True, slots=True)
class ProbeSettings:
    """The timing and threshold fields of a probe, with the API's defaults filled in."""

    initial_delay_s: int = 0
    period_s: float = DEFAULT_PERIOD_S
    success_threshold: int = DEFAULT_SUCCESS_THRESHOLD
    failure_threshold: int = DEFAULT_FAILURE_THRESHOLD


def probe_settings(spec: Mapping[str, Any] | None) -> ProbeSettings:
    """Settings of one probe spec; zero or missing values take the API defaults.

    periodSeconds may be fractional here (the API allows whole seconds only), which tests use to tick fast.
    """
    spec = spec or {}
    return ProbeSettings(
        initial_delay_s=int(spec.get("initialDelaySeconds") or 0),
        period_s=float(spec.get("periodSeconds") or DEFAULT_PERIOD_S),
        success_threshold=int(spec.get("successThreshold") or DEFAULT_SUCCESS_THRESHOLD),
        failure_threshold=int(spec.get("failureThreshold") or DEFAULT_FAILURE_THRESHOLD),
    )


def workers_for_pod(pod: Mapping[str, Any]) -> list[tuple[str, str, JSONDict]]:
    """(container name, probe type, container spec) for every worker a pod needs.

    Regular containers and sidecars (restartable init containers) get one worker per probe they define;
    plain init containers never do.
    """
    spec = pod.get("spec") or {}
    containers = list(spec.get("containers") or [])
    containers += [c for c in spec.get("initContainers") or [] if is_sidecar(c)]
    return [
        (str(c["name"]), probe_type, c)
        for c in containers
        for probe_type in PROBE_TYPES
        if probe_spec(c, probe_type) is not None
    ]


def probe_termination_grace_seconds(
    pod: Mapping[str, Any] | None, container_name: str, probe_type: str
) -> int | None:
    """The probe's own terminationGracePeriodSeconds, which replaces the pod's when its failure kills the
    container (R3.3; pass it to lifecycle.liveness_kill_grace). None when the probe does not set one."""
    spec = (pod or {}).get("spec") or {}
    for container in list(spec.get("containers") or []) + list(spec.get("initContainers") or []):
        if container.get("name") == container_name:
            value = (probe_spec(container, probe_type) or {}).get("terminationGracePeriodSeconds")
            return None if value is None else int(value)
    return None


# --------------------------------------------------------------------------- the results manager


class ResultCache:
    """One results manager (R3.1): container ID -> result for one probe type.

    `set` answers whether the value changed (a new ID or a different result), which is when an update is
    due; `remove` forgets an ID silently.
    """

    def __init__(self) -> None:
        self._results: dict[str, str] = {}

    def get(self, container_id: str) -> str | None:
        return self._results.get(container_id)

    def set(self, container_id: str, result: str) -> bool:
        if container_id in self._results and self._results[container_id] == result:
            return False
        self._results[container_id] = result
        return True

    def remove(self, container_id: str) -> None:
        self._results.pop(container_id, None)

    def __contains__(self, container_id: object) -> bool:
        return container_id in self._results

    def __len__(self) -> int:
        return len(self._results)


# --------------------------------------------------------------------------- the worker state machine


@dataclass(frozen=True, slots=True)
class WorkerState:
    """What a worker remembers between ticks.

    `last_result` starts as Success because that is the zero value of the kubelet's Result type; it only
    matters for counting `result_run`, and either start counts the first probe as a run of one.
    """

    probe_type: str
    container_id: str = ""
    last_result: str = SUCCESS
    result_run: int = 0
    on_hold: bool = False


@dataclass(frozen=True, slots=True)
class ResultOp:
    """A write to the worker's results manager: kind "set" (with a result) or "remove"."""

    kind: str
    container_id: str
    result: str | None = None


@dataclass(frozen=True, slots=True)
class Step:
    """What one half of doProbe decided: keep the worker going, run the probe now, and the cache writes."""

    keep_going: bool
    run_probe: bool = False
    ops: tuple[ResultOp, ...] = ()


def _set(container_id: str, result: str) -> ResultOp:
    return ResultOp("set", container_id, result)


def find_container_status(status: Mapping[str, Any], name: str) -> JSONDict | None:
    """The named container's status with a container ID: regular statuses first, then init ones."""
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in status.get(key) or []:
            if cs.get("name") == name and cs.get("containerID"):
                return cs
    return None


def _epoch(ts: str | None) -> float | None:
    if not ts:
        return None
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def before_probe(
    state: WorkerState,
    container: Mapping[str, Any],
    pod: Mapping[str, Any],
    status: Mapping[str, Any] | None,
    now: float,
) -> tuple[WorkerState, Step]:
    """doProbe up to the probe itself (R3.2 steps 1-9); `status` is the pod's cached API status or None.

    `Step.run_probe` means: run the probe now, then hand its result to `after_probe`. Otherwise the step
    is final for this tick and `keep_going` says whether the worker lives on.
    """
    probe_type = state.probe_type
    if status is None:
        return state, Step(True)  # the pod has not been seen yet, or is already gone
    if status.get("phase") in _TERMINAL_PHASES:
        return state, Step(False)
    cs = find_container_status(status, str(container["name"]))
    if cs is None:
        return state, Step(True)  # not created yet, or deleted: wait for more information

    ops: list[ResultOp] = []
    container_id = str(cs["containerID"])
    if state.container_id != container_id:
        if state.container_id:
            ops.append(ResultOp("remove", state.container_id))
        state = replace(state, container_id=container_id, on_hold=False)
        ops.append(_set(container_id, INITIAL_RESULTS[probe_type]))
    if state.on_hold:
        return state, Step(True, ops=tuple(ops))  # waits for a new container

    container_state = cs.get("state") or {}
    running = container_state.get("running")
    if running is None:
        ops.append(_set(container_id, FAILURE))
        # Only a container that will never run again ends the worker; sidecars are always restarted.
        terminated = container_state.get("terminated") is not None
        never = ((pod.get("spec") or {}).get("restartPolicy") or "Always") == "Never"
        return state, Step(not (terminated and never and not is_sidecar(container)), ops=tuple(ops))

    if (pod.get("metadata") or {}).get("deletionTimestamp") and probe_type in (LIVENESS, STARTUP):
        ops.append(_set(container_id, SUCCESS))  # a quiet shutdown: no restarts while the pod goes away
        return state, Step(False, ops=tuple(ops))

    started_at = _epoch(running.get("startedAt"))
    settings = probe_settings(probe_spec(container, probe_type))
    if started_at is not None and int(now - started_at) < settings.initial_delay_s:
        return state, Step(True, ops=tuple(ops))

    started = cs.get("started") is True
    if started and probe_type == STARTUP:
        return state, Step(True, ops=tuple(ops))  # startup is done; the worker stays for a restart
    if not started and probe_type != STARTUP:
        return state, Step(True, ops=tuple(ops))  # liveness and readiness wait for startup
    return state, Step(True, run_probe=True, ops=tuple(ops))


def after_probe(
    state: WorkerState, container: Mapping[str, Any], result: str, error: str | None = None
) -> tuple[WorkerState, Step]:
    """doProbe after the probe (R3.2 steps 10-12): an errored probe is discarded; otherwise the result
    is counted against its threshold, and set once reached. Liveness Failure, or any startup result
    that gets set, then holds the worker until a new container ID appears."""
    if error is not None:
        return state, Step(True)
    if state.last_result == result:
        state = replace(state, result_run=state.result_run + 1)
    else:
        state = replace(state, last_result=result, result_run=1)
    settings = probe_settings(probe_spec(container, state.probe_type))
    if (result == FAILURE and state.result_run < settings.failure_threshold) or (
        result == SUCCESS and state.result_run < settings.success_threshold
    ):
        return state, Step(True)
    ops = (_set(state.container_id, result),)
    if (state.probe_type == LIVENESS and result == FAILURE) or state.probe_type == STARTUP:
        state = replace(state, on_hold=True, result_run=0)
    return state, Step(True, ops=ops)


def apply_ops(cache: ResultCache, ops: Iterable[ResultOp]) -> list[tuple[str, str]]:
    """Apply a step's writes to a results manager; returns the (container ID, result) that changed."""
    changed: list[tuple[str, str]] = []
    for op in ops:
        if op.kind == "remove":
            cache.remove(op.container_id)
        elif op.result is not None and cache.set(op.container_id, op.result):
            changed.append((op.container_id, op.result))
    return changed


# --------------------------------------------------------------------------- running one probe


@dataclass(frozen=True, slots=True)
class ProbeVerdict:
    """A probe's result as the worker counts it (Success or Failure), the error that voids it, and the
    event the kubelet would record (reason Unhealthy or ProbeWarning), if any."""

    result: str
    error: str | None = None
    event_reason: str | None = None
    event_message: str = ""


def verdict_for(probe_type: str, outcome: CheckOutcome) -> ProbeVerdict:
    """Map a handler outcome (R3.3): Warning counts as Success, Failure and Unknown as Failure, and an
    error is a Failure the worker discards. Unknown without an error records no event, as upstream."""
    label = probe_type.capitalize()
    if outcome.error is not None:
        message = f"{label} probe errored and resulted in {outcome.result.lower()} state: {outcome.error}"
        return ProbeVerdict(FAILURE, outcome.error, "Unhealthy", message)
    if outcome.result == SUCCESS:
        return ProbeVerdict(SUCCESS)
    if outcome.result == WARNING:
        return ProbeVerdict(SUCCESS, None, "ProbeWarning", f"{label} probe warning: {outcome.output}")
    if outcome.result == FAILURE:
        return ProbeVerdict(FAILURE, None, "Unhealthy", f"{label} probe failed: {outcome.output}")
    return ProbeVerdict(FAILURE)


async def execute_probe(
    probe_type: str, container: Mapping[str, Any], *, host: str = POD_IP, check: CheckFn = run_check
) -> ProbeVerdict:
    """Run the container's probe of this type, repeating the attempt only while it errors (at most 3)."""
    spec = probe_spec(container, probe_type)
    if spec is None:
        return ProbeVerdict(SUCCESS)
    outcome = CheckOutcome(UNKNOWN, "", "probe was not attempted")
    for _ in range(MAX_PROBE_RETRIES):
        outcome = await check(spec, container, host=host)
        if outcome.error is None:
            break
    return verdict_for(probe_type, outcome)


# --------------------------------------------------------------------------- the probe manager (I/O)


def _raw_id(container_id: str) -> str:
    """A status container ID without its runtime prefix ("process://abc" -> "abc")."""
    return container_id.split("://", 1)[-1]


@dataclass(eq=False)
class ProbeWorker:
    """One probing task. `stop` and `trigger` never block and may be called any number of times."""

    uid: str
    container_name: str
    probe_type: str
    container: JSONDict
    pod: JSONDict
    state: WorkerState
    task: asyncio.Task[None] | None = None
    stopping: bool = False
    triggered: bool = False
    wake: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.uid, self.container_name, self.probe_type)

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
        rng: random.Random | None = None,
    ) -> None:
        self.node = node
        self.publish = publish
        self.on_change = on_change
        self.on_event = on_event  # (pod uid, container name, reason, message), e.g. to record an Event
        self.clock = clock
        self.check = check
        self.default_host = default_host
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
            worker = ProbeWorker(uid, name, probe_type, container, pod, WorkerState(probe_type))
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
            if worker.probe_type in (LIVENESS, STARTUP):
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

    def result(self, probe_type: str, container_id: str) -> str | None:
        """The current result for a container ID as it appears in the status ("process://..."), or None."""
        return self.results[probe_type].get(container_id)

    def probe_failures(self, uid: str) -> dict[str, str]:
        """{runtime container ID (no prefix): "liveness" | "startup"} for this pod's containers whose
        liveness or startup result is Failure: the containers the pod worker must kill and restart."""
        failures: dict[str, str] = {}
        for worker in self._pod_workers(uid):
            cid = worker.state.container_id
            if worker.probe_type not in (LIVENESS, STARTUP) or not cid:
                continue
            if self.result(worker.probe_type, cid) == FAILURE:
                failures.setdefault(_raw_id(cid), worker.probe_type)
        return failures

    def startup_results(self, uid: str) -> dict[str, str]:
        """{runtime container ID (no prefix): startup result} for this pod's containers with a startup
        worker that has seen them (Unknown until the probe passes or fails)."""
        out: dict[str, str] = {}
        for worker in self._pod_workers(uid):
            cid = worker.state.container_id
            result = self.result(STARTUP, cid) if worker.probe_type == STARTUP and cid else None
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

    def trigger(self, uid: str, container_name: str, probe_type: str = READINESS) -> bool:
        """Run a worker's probe now (R3.4: a readiness worker without a result); False if there is none."""
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
            verdict = await execute_probe(worker.probe_type, worker.container, host=host, check=self.check)
            if verdict.event_reason is not None:
                self._record_event(worker, verdict.event_reason, verdict.event_message)
            worker.state, step = after_probe(worker.state, worker.container, verdict.result, verdict.error)
            await self._apply(worker, step.ops)
            return step.keep_going
        except Exception:
            log.exception("probe worker %s failed one tick", worker.key)
            return True

    def _record_event(self, worker: ProbeWorker, reason: str, message: str) -> None:
        log.info("pod %s container %s: %s: %s", worker.uid, worker.container_name, reason, message)
        if self.on_event is not None:
            try:
                self.on_event(worker.uid, worker.container_name, reason, message)
            except Exception:
                log.exception("on_event failed")

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
                    log.exception("on_change failed for %s", worker.key)
            if self.publish is not None:
                try:
                    await self.publish(change)
                except Exception:
                    # The local result stands (the pod worker acts on it); the topic misses this change.
                    log.exception("publishing %s %s=%s failed", worker.key, container_id, result)
