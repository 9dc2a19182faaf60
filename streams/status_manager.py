"""Pure status-manager rules (the kubelet's pkg/kubelet/status) over plain dicts.

`set_pod_status` is updateStatusInternal: it refuses illegal container state transitions,
keeps condition transition times and startTime, normalizes, and bumps the version only when the
kubelet-owned view of the status changed (or when forced, as for a pod being deleted).
`terminate_pod_status` is TerminatePod's status rewrite. No I/O, no clock.
The rules: docs/kubelet-rules.md#status-manager.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from podledger.streams.canonical import (
    MAX_TERMINATION_MESSAGE_BYTES,
    canonical_condition,
    is_canonical,
    is_canonical_condition,
    normalize_generated,
    normalize_in_place,
    normalize_status,
    semantic,
    truncate_time,
)
from podledger.streams.pod_json import (
    GONE_WHEN_TERMINATED,
    KUBELET_OWNED_CONDITIONS,
    SHARED_CONDITIONS,
    STATUS_UNKNOWN_REASON,
    UNKNOWN_EXIT_CODE,
    is_sidecar,
    is_static,
    json_copy,
    last_terminated,
    restart_policy,
    state_of,
)
from podledger.types import TERMINAL_PHASES, JSONDict

# Conditions whose lastTransitionTime the status manager maintains (updateLastTransitionTime).
TRANSITION_TIMED = KUBELET_OWNED_CONDITIONS | SHARED_CONDITIONS | {"PodHasNetwork"}
# Kept importable from here (the sink's decisions use them); they live in streams/canonical.py.
_semantic = semantic
__all__ = [
    "MAX_TERMINATION_MESSAGE_BYTES",
    "StatusUpdate",
    "check_container_state_transition",
    "is_pod_status_by_kubelet_equal",
    "normalize_status",
    "set_pod_status",
    "terminate_pod_status",
    "truncate_time",
    "update_last_transition_times",
]


# --------------------------------------------------------------------------- checkContainerStateTransition


def check_container_state_transition(old: JSONDict, new: JSONDict, pod: JSONDict) -> str | None:
    """The error that makes the status manager drop an update, or None (checkContainerStateTransition)."""
    policy = restart_policy(pod)
    if policy == "Always":
        return None

    def may_not_restart(status: JSONDict) -> bool:
        if state_of(status) != "terminated":
            return False
        code = int(status["state"]["terminated"].get("exitCode", 0))
        return not (code != 0 and policy == "OnFailure")

    new_regular = {s["name"]: s for s in new.get("containerStatuses") or []}
    for status in old.get("containerStatuses") or []:
        if may_not_restart(status) and state_of(new_regular.get(status["name"], status)) != "terminated":
            return (
                f"terminated container {status['name']} attempted illegal transition to non-terminated state"
            )

    spec_init = (pod.get("spec") or {}).get("initContainers") or []
    old_init = old.get("initContainerStatuses") or []
    new_init = {s["name"]: s for s in new.get("initContainerStatuses") or []}
    for i, status in enumerate(old_init):
        if i >= len(spec_init) or spec_init[i]["name"] != status["name"]:
            return f"found mismatch between pod spec and status, container: {status['name']}"
        if is_sidecar(spec_init[i]):
            continue
        if may_not_restart(status) and state_of(new_init.get(status["name"], status)) != "terminated":
            return (
                f"terminated init container {status['name']} attempted illegal transition"
                " to non-terminated state"
            )
    return None


# --------------------------------------------------------------------------- isPodStatusByKubeletEqual


def _owned_conditions_match(old: JSONDict, new: JSONDict) -> bool:
    """Every kubelet-owned or shared condition of `new` is in `old` with the same status,
    reason and message (times are ignored)."""
    old_conditions = {c.get("type"): c for c in old.get("conditions") or []}
    for cond in new.get("conditions") or []:
        if cond.get("type") in KUBELET_OWNED_CONDITIONS or cond.get("type") in SHARED_CONDITIONS:
            before = old_conditions.get(cond["type"])
            if before == cond:  # equal conditions match (the common case)
                continue
            if (
                before is None
                or before.get("status", "") != cond.get("status", "")
                or before.get("reason", "") != cond.get("reason", "")
                or before.get("message", "") != cond.get("message", "")
            ):
                return False
    return True


def is_pod_status_by_kubelet_equal(old: JSONDict, new: JSONDict) -> bool:
    """isPodStatusByKubeletEqual: owned and shared conditions of `new` match `old` (times ignored),
    and the rest of the status is semantically equal. Conditions only in `old` do not count."""
    if not _owned_conditions_match(old, new):
        return False
    replaced = {**old, "conditions": new.get("conditions")}
    return replaced == new or semantic(replaced) == semantic(new)


def _kubelet_equal_canonical(old: JSONDict, new: JSONDict) -> bool:
    """is_pod_status_by_kubelet_equal for two canonical statuses: plain dict equality suffices.
    The rest of the status first: it tells most changes apart in one comparison."""
    if "conditions" in new:
        replaced = {**old, "conditions": new["conditions"]}
    else:
        replaced = dict(old)
        replaced.pop("conditions", None)
    return replaced == new and _owned_conditions_match(old, new)


# --------------------------------------------------------------------------- updateStatusInternal


def update_last_transition_times(old: JSONDict | None, new: JSONDict, now: str) -> None:
    """In place: a condition keeps its old time while its status stays; otherwise `now`."""
    old_by_type = {c.get("type"): c for c in (old or {}).get("conditions") or []}
    for cond in new.get("conditions") or []:
        if cond.get("type") not in TRANSITION_TIMED:
            continue
        cond.setdefault("lastProbeTime", None)
        cond["lastTransitionTime"] = _transition_time(old_by_type, cond, now)


def _transition_time(old_by_type: JSONDict, cond: JSONDict, now: str) -> Any:
    """A condition keeps its old time while its status stays; otherwise `now`."""
    previous = old_by_type.get(cond["type"])
    if (
        previous is not None
        and previous.get("status") == cond.get("status")
        and previous.get("lastTransitionTime")
    ):
        return previous["lastTransitionTime"]
    return now


def _canonical_conditions(old: JSONDict, conditions: list[JSONDict], now: str) -> list[JSONDict]:
    """update_last_transition_times, normalized and in canonical form, condition by condition. A
    condition whose status, reason and message stay keeps its time: when `old` holds it in exactly
    the canonical form it would get, that stored dict is the answer, shared (a stored status is
    never changed)."""
    old_by_type = {c.get("type"): c for c in old.get("conditions") or ()}
    out = []
    for cond in conditions:
        kind = cond.get("type")
        if kind not in TRANSITION_TIMED:
            out.append(canonical_condition(cond, None))
            continue
        previous = old_by_type.get(kind)
        if previous is None:
            out.append(canonical_condition(cond, now))
        elif is_canonical_condition(previous, cond):  # the same status: it keeps its time
            out.append(previous)
        else:
            out.append(canonical_condition(cond, _transition_time(old_by_type, cond, now)))
    return out


@dataclass(frozen=True, slots=True)
class StatusUpdate:
    """What updateStatusInternal decided: a new version, nothing new, or an illegal update."""

    status: JSONDict | None  # the status to cache under `version`; None when nothing changes
    version: int
    dropped: str | None = None  # why the update was refused (checkContainerStateTransition)


def set_pod_status(
    pod: JSONDict,
    cached: JSONDict | None,
    version: int,
    new: JSONDict,
    now: str,
    *,
    force: bool = False,
    built: bool = False,
) -> StatusUpdate:
    """updateStatusInternal (SetPodStatus) for a freshly generated status `new`, which it takes over:
    it may change `new`, its lists, container statuses and conditions, never what lies below them
    (generate_api_status shares that with the cached status). The stored status is canonical:
    normalized, and without null or empty fields, so two statuses are semantically equal exactly
    when they are equal dicts.

    `built` says that `new` is generate_api_status's: over a canonical old status (the cached one,
    or an API status without empty fields) it is canonical already but for its conditions and
    container states, and no walk over all of it is needed; a condition that did not change is
    the old status's own dict, shared like the rest. Otherwise (TerminatePod's status, an API
    status with empty fields) the whole status is made canonical and new."""
    old = cached if cached is not None else (pod.get("status") or {})
    error = check_container_state_transition(old, new, pod)
    if error is not None:
        return StatusUpdate(None, version, error)
    status = new
    if built and (cached is not None or is_canonical(old)):
        if "conditions" in status:
            status["conditions"] = _canonical_conditions(old, status["conditions"], now)
        start = old.get("startTime") or status.get("startTime") or now
        status["startTime"] = truncate_time(start) if type(start) is str and "." in start else start
        normalize_generated(pod, status)
    else:
        update_last_transition_times(old, status, now)
        if old.get("startTime"):
            status["startTime"] = old["startTime"]
        elif not status.get("startTime"):
            status["startTime"] = now
        status = semantic(normalize_in_place(pod, status))
        for cond in status.get("conditions") or []:
            cond.setdefault("lastProbeTime", None)  # as the API shows it; the same shape every time
    if cached is not None and not force and _kubelet_equal_canonical(cached, status):
        return StatusUpdate(None, version)
    return StatusUpdate(status, version + 1)


# --------------------------------------------------------------------------- TerminatePod


def _unknown_terminated() -> JSONDict:
    return {
        "terminated": {
            "exitCode": UNKNOWN_EXIT_CODE,
            "reason": STATUS_UNKNOWN_REASON,
            "message": GONE_WHEN_TERMINATED,
        }
    }


def has_pod_initialized(pod: JSONDict) -> bool:
    """From the API status: has the pod ever got past its init containers?"""
    spec = pod.get("spec") or {}
    init_spec = spec.get("initContainers") or []
    if not init_spec:
        return True
    api = pod.get("status") or {}
    for cs in api.get("containerStatuses") or []:
        if last_terminated(cs) or state_of(cs) != "waiting":
            return True
    init = api.get("initContainerStatuses") or []
    if init:
        i = len(init) - 1
        if i >= len(init_spec) or init_spec[i]["name"] != init[i]["name"]:
            return False
        last = init[i]
        if is_sidecar(init_spec[i]):
            return state_of(last) == "running" and bool(last.get("started"))
        for which in ("state", "lastState"):
            terminated = (last.get(which) or {}).get("terminated")
            if terminated and int(terminated.get("exitCode", 0)) == 0:
                return True
    return False


def initialized_containers(statuses: list[JSONDict]) -> list[JSONDict]:
    """The prefix up to the last init container that ever tried to start (at least the first)."""
    for i in range(len(statuses) - 1, -1, -1):
        if state_of(statuses[i]) != "waiting" or last_terminated(statuses[i]):
            return statuses[: i + 1]
    return statuses[:1]


def terminate_pod_status(pod: JSONDict, cached: JSONDict | None) -> JSONDict:
    """TerminatePod: every container gets a terminated state, the phase a terminal one."""
    status = json_copy(cached if cached is not None else (pod.get("status") or {}))
    if has_pod_initialized(pod):
        for cs in status.get("containerStatuses") or []:
            if state_of(cs) != "terminated":
                cs["state"] = _unknown_terminated()
    for cs in initialized_containers(status.get("initContainerStatuses") or []):
        if state_of(cs) != "terminated":
            cs["state"] = _unknown_terminated()
    if not is_static(pod) and status.get("phase") not in TERMINAL_PHASES:
        status["phase"] = "Failed"
    return status
