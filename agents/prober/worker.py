"""One probe worker's rules (pkg/kubelet/prober/worker.go doProbe) as pure functions over plain data.

A worker's `ProbeWorkerState`, the container spec, the pod and its cached API status go in with
`now`; the result-cache operations come out. The probe itself is I/O, so doProbe is split around
it: `before_probe` (may the probe run at all?) and `after_probe` (thresholds and hold).
`verdict_for` maps a handler's outcome to what the worker counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from podledger.agents.prober.results import INITIAL_RESULTS, CheckOutcome, CheckResult, ResultCache
from podledger.agents.prober.specs import probe_settings, probe_spec
from podledger.streams.status import is_sidecar
from podledger.types import TERMINAL_PHASES, JSONDict, ProbeResult, ProbeType


@dataclass(frozen=True, slots=True)
class ProbeWorkerState:
    """What a worker remembers between ticks.

    `last_result` starts as Success because that is the zero value of the kubelet's Result type; it only
    matters for counting `result_run`, and either start counts the first probe as a run of one.
    """

    probe_type: ProbeType
    container_id: str = ""
    last_result: str = ProbeResult.SUCCESS
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
    state: ProbeWorkerState,
    container: Mapping[str, Any],
    pod: Mapping[str, Any],
    status: Mapping[str, Any] | None,
    now: float,
) -> tuple[ProbeWorkerState, Step]:
    """worker.go doProbe up to the probe call; `status` is the pod's cached API status or None.

    `Step.run_probe` means: run the probe now, then hand its result to `after_probe`. Otherwise the step
    is final for this tick and `keep_going` says whether the worker lives on.
    """
    probe_type = state.probe_type
    if status is None:
        return state, Step(True)  # the pod has not been seen yet, or is already gone
    if status.get("phase") in TERMINAL_PHASES:
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
        ops.append(_set(container_id, ProbeResult.FAILURE))
        # Only a container that will never run again ends the worker; sidecars are always restarted.
        terminated = container_state.get("terminated") is not None
        never = ((pod.get("spec") or {}).get("restartPolicy") or "Always") == "Never"
        return state, Step(not (terminated and never and not is_sidecar(container)), ops=tuple(ops))

    deleting = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
    if deleting and probe_type in (ProbeType.LIVENESS, ProbeType.STARTUP):
        # A quiet shutdown: no restarts while the pod goes away.
        ops.append(_set(container_id, ProbeResult.SUCCESS))
        return state, Step(False, ops=tuple(ops))

    started_at = _epoch(running.get("startedAt"))
    settings = probe_settings(probe_spec(container, probe_type))
    if started_at is not None and int(now - started_at) < settings.initial_delay_s:
        return state, Step(True, ops=tuple(ops))

    started = cs.get("started") is True
    if started and probe_type == ProbeType.STARTUP:
        return state, Step(True, ops=tuple(ops))  # startup is done; the worker stays for a restart
    if not started and probe_type != ProbeType.STARTUP:
        return state, Step(True, ops=tuple(ops))  # liveness and readiness wait for startup
    return state, Step(True, run_probe=True, ops=tuple(ops))


def after_probe(
    state: ProbeWorkerState, container: Mapping[str, Any], result: str, error: str | None = None
) -> tuple[ProbeWorkerState, Step]:
    """worker.go doProbe from the probe call on: an errored probe is discarded; otherwise the result is
    counted against its threshold, and set once reached. Liveness Failure, or any startup result
    that gets set, then holds the worker until a new container ID appears."""
    if error is not None:
        return state, Step(True)
    if state.last_result == result:
        state = replace(state, result_run=state.result_run + 1)
    else:
        state = replace(state, last_result=result, result_run=1)
    settings = probe_settings(probe_spec(container, state.probe_type))
    if (result == ProbeResult.FAILURE and state.result_run < settings.failure_threshold) or (
        result == ProbeResult.SUCCESS and state.result_run < settings.success_threshold
    ):
        return state, Step(True)
    ops = (_set(state.container_id, result),)
    holds = state.probe_type == ProbeType.STARTUP
    holds |= state.probe_type == ProbeType.LIVENESS and result == ProbeResult.FAILURE
    if holds:
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


@dataclass(frozen=True, slots=True)
class ProbeVerdict:
    """A probe's result as the worker counts it (Success or Failure), the error that voids it, and the
    event the kubelet would record (reason Unhealthy or ProbeWarning), if any."""

    result: ProbeResult
    error: str | None = None
    event_reason: str | None = None
    event_message: str = ""


def verdict_for(probe_type: ProbeType, outcome: CheckOutcome) -> ProbeVerdict:
    """Map a handler outcome as prober.go runProbe does: Warning counts as Success, Failure and Unknown
    as Failure, and an error is a Failure the worker discards. Unknown without an error records no
    event, as upstream."""
    label = probe_type.capitalize()
    if outcome.error is not None:
        message = f"{label} probe errored and resulted in {outcome.result.lower()} state: {outcome.error}"
        return ProbeVerdict(ProbeResult.FAILURE, outcome.error, "Unhealthy", message)
    if outcome.result == CheckResult.SUCCESS:
        return ProbeVerdict(ProbeResult.SUCCESS)
    if outcome.result == CheckResult.WARNING:
        message = f"{label} probe warning: {outcome.output}"
        return ProbeVerdict(ProbeResult.SUCCESS, None, "ProbeWarning", message)
    if outcome.result == CheckResult.FAILURE:
        message = f"{label} probe failed: {outcome.output}"
        return ProbeVerdict(ProbeResult.FAILURE, None, "Unhealthy", message)
    return ProbeVerdict(ProbeResult.FAILURE)
