"""Pure status-manager rules (the kubelet's pkg/kubelet/status) over plain dicts.

`set_pod_status` is updateStatusInternal: it refuses illegal container state transitions,
keeps condition transition times and startTime, normalizes, and bumps the version only when the
kubelet-owned view of the status changed (or when forced, as for a pod being deleted).
`terminate_pod_status` is TerminatePod's status rewrite. No I/O, no clock.
The rules: docs/kubelet-rules.md#status-manager.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

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
MAX_TERMINATION_MESSAGE_BYTES = 12288  # MaxPodTerminationMessageLogLength
_FRACTION = re.compile(r"\.\d+(?=Z|[+-]\d\d:\d\d$)")


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


# --------------------------------------------------------------------------- normalizeStatus


def truncate_time(value: Any) -> Any:
    """RFC 3339 to whole seconds, as the apiserver stores times."""
    return _FRACTION.sub("", value) if isinstance(value, str) and "." in value else value


def _truncate_bytes(text: str, limit: int) -> str:
    raw = text.encode()
    # Cut on bytes like the kubelet; drop a character the cut split rather than emit invalid UTF-8.
    return text if len(raw) <= limit else raw[:limit].decode(errors="ignore")


def normalize_status(pod: JSONDict, status: JSONDict) -> JSONDict:
    """A copy with messages cut to the byte budget, times in seconds, statuses sorted (normalizeStatus)."""
    return _normalize_in_place(pod, json_copy(status))


def _normalize_in_place(pod: JSONDict, status: JSONDict) -> JSONDict:
    """normalizeStatus on `status`, its lists, its container statuses and its conditions, which it
    changes in place; a container's state that needs a change is replaced by a changed copy (states
    may be shared with the cached status, which stays as it was)."""
    spec = pod.get("spec") or {}
    count = sum(len(spec.get(k) or []) for k in ("containers", "initContainers", "ephemeralContainers"))
    budget = MAX_TERMINATION_MESSAGE_BYTES // count if count > 0 else MAX_TERMINATION_MESSAGE_BYTES

    for key in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"):
        for cs in status.get(key) or []:
            for which in ("state", "lastState"):
                state = cs.get(which) or {}
                normalized = _normalized_state(state, budget)
                if normalized is not state:
                    cs[which] = normalized
    if "startTime" in status:
        status["startTime"] = truncate_time(status["startTime"])
    for cond in status.get("conditions") or []:
        for t in ("lastProbeTime", "lastTransitionTime"):
            if t in cond:
                cond[t] = truncate_time(cond[t])

    for key in ("containerStatuses", "ephemeralContainerStatuses"):
        if status.get(key):
            status[key] = sorted(status[key], key=lambda s: s["name"])
    if status.get("initContainerStatuses"):
        order = {c["name"]: i for i, c in enumerate(spec.get("initContainers") or [])}
        status["initContainerStatuses"] = sorted(
            status["initContainerStatuses"], key=lambda s: order.get(s["name"], len(order))
        )
    return status


def _normalized_state(state: JSONDict, budget: int) -> JSONDict:
    """A container state with its terminated message cut and its times in seconds: `state` itself
    when nothing changes, else a changed copy."""
    terminated = state.get("terminated")
    if terminated:
        changed = terminated
        if isinstance(terminated.get("message"), str):
            message = _truncate_bytes(terminated["message"], budget)
            if message != terminated["message"]:
                changed = {**changed, "message": message}
        for t in ("startedAt", "finishedAt"):
            if t in terminated:
                value = truncate_time(terminated[t])
                if value != terminated[t]:
                    changed = {**changed, t: value}
        if changed is not terminated:
            state = {**state, "terminated": changed}
    running = state.get("running")
    if running and "startedAt" in running:
        value = truncate_time(running["startedAt"])
        if value != running["startedAt"]:
            state = {**state, "running": {**running, "startedAt": value}}
    return state


# --------------------------------------------------------------------------- isPodStatusByKubeletEqual


def _semantic(value: Any) -> Any:
    """The canonical form of JSON data under Go's semantic equality: a missing field, null, an
    empty string and an empty list are alike and dropped. An empty object is kept: it stands for
    a set pointer to an empty struct (`waiting: {}`), which Go tells apart from a nil one.
    Every dict and list in the result is new (the status manager stores it)."""
    kind = type(value)
    if kind is list:
        return [_semantic(item) if type(item) is dict or type(item) is list else item for item in value]
    if kind is not dict:
        return value
    out = {}
    for key, item in value.items():
        kind = type(item)
        if kind is str:
            if item:
                out[key] = item
        elif kind is bool or kind is int:
            out[key] = item
        elif kind is dict:
            out[key] = _semantic(item)
        elif kind is list:
            if item:
                out[key] = _semantic(item)
        elif not (item is None or item == "" or item == []):
            out[key] = item
    return out


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
    return replaced == new or _semantic(replaced) == _semantic(new)


def _kubelet_equal_canonical(old: JSONDict, new: JSONDict) -> bool:
    """is_pod_status_by_kubelet_equal for two canonical statuses: plain dict equality suffices."""
    if not _owned_conditions_match(old, new):
        return False
    replaced = {k: v for k, v in old.items() if k != "conditions"}
    if "conditions" in new:
        replaced["conditions"] = new["conditions"]
    return replaced == new


# --------------------------------------------------------------------------- updateStatusInternal


def update_last_transition_times(old: JSONDict | None, new: JSONDict, now: str) -> None:
    """In place: a condition keeps its old time while its status stays; otherwise `now`."""
    old_by_type = {c.get("type"): c for c in (old or {}).get("conditions") or []}
    for cond in new.get("conditions") or []:
        if cond.get("type") not in TRANSITION_TIMED:
            continue
        cond.setdefault("lastProbeTime", None)
        previous = old_by_type.get(cond["type"])
        if (
            previous is not None
            and previous.get("status") == cond.get("status")
            and previous.get("lastTransitionTime")
        ):
            cond["lastTransitionTime"] = previous["lastTransitionTime"]
        else:
            cond["lastTransitionTime"] = now


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
) -> StatusUpdate:
    """updateStatusInternal (SetPodStatus) for a freshly generated status `new`, which it takes over:
    it may change `new`, its lists, container statuses and conditions, never what lies below them
    (generate_api_status shares that with the cached status). The stored status is canonical and
    new throughout: normalized, and without null or empty fields, so two statuses are semantically
    equal exactly when they are equal dicts."""
    old = cached if cached is not None else (pod.get("status") or {})
    error = check_container_state_transition(old, new, pod)
    if error is not None:
        return StatusUpdate(None, version, error)
    status = new
    update_last_transition_times(old, status, now)
    if old.get("startTime"):
        status["startTime"] = old["startTime"]
    elif not status.get("startTime"):
        status["startTime"] = now
    status = _semantic(_normalize_in_place(pod, status))
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
