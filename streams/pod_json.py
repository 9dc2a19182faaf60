"""The API's pod and status JSON as status generation and the status manager read it: the condition
and reason names the kubelet uses, and small pure helpers over plain dicts.

Statuses, pods and runtime snapshots are values here: no function changes one it was given (the
fold shares them between a record, its outputs and the next event's status), except where a
docstring says "in place" of a dict its caller has just built.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

import orjson

from podledger.types import CONFIG_SOURCE_ANNOTATION, JSONDict

# Conditions the kubelet owns (types/pod_status.go PodConditionByKubelet); everything else in the API
# status belongs to others.
KUBELET_OWNED_CONDITIONS = frozenset(
    {"PodScheduled", "Ready", "Initialized", "ContainersReady", "PodReadyToStartContainers"}
)
# Owned by the kubelet and other controllers alike.
SHARED_CONDITIONS = frozenset({"DisruptionTarget"})

CONTAINER_CREATING = "ContainerCreating"
POD_INITIALIZING = "PodInitializing"
STATUS_UNKNOWN_REASON = "ContainerStatusUnknown"
GONE_WHEN_DELETED = (
    "The container could not be located when the pod was deleted.  The container used to be Running"
)
GONE_WHEN_TERMINATED = "The container could not be located when the pod was terminated"
UNKNOWN_EXIT_CODE = 137

# Condition reasons (pkg/kubelet/status/generate.go).
UNKNOWN_CONTAINER_STATUSES = "UnknownContainerStatuses"
POD_COMPLETED = "PodCompleted"
POD_FAILED = "PodFailed"
CONTAINERS_NOT_READY = "ContainersNotReady"
CONTAINERS_NOT_INITIALIZED = "ContainersNotInitialized"
READINESS_GATES_NOT_READY = "ReadinessGatesNotReady"


def rfc3339(ts: float) -> str:
    """Seconds-precision UTC RFC 3339, the form the API uses for every status timestamp."""
    return _rfc3339_second(int(ts // 1))


@lru_cache(maxsize=4096)
def _rfc3339_second(second: int) -> str:
    # Events come many to a second: the fold formats each second once.
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))


def json_copy(value: Any) -> Any:
    """A deep copy of JSON-shaped data (several times faster than copy.deepcopy)."""
    return orjson.loads(orjson.dumps(value))


def is_sidecar(container: Mapping[str, Any]) -> bool:
    """A restartable init container (init container with restartPolicy Always)."""
    return container.get("restartPolicy") == "Always"


def is_static(pod: JSONDict) -> bool:
    source = ((pod.get("metadata") or {}).get("annotations") or {}).get(CONFIG_SOURCE_ANNOTATION)
    return source is not None and source != "api"


def restart_policy(pod: JSONDict) -> str:
    return str((pod.get("spec") or {}).get("restartPolicy") or "Always")


def state_of(status: JSONDict | None) -> str | None:
    """'running', 'waiting', 'terminated', or None for a status without a state."""
    state = (status or {}).get("state") or {}
    if state.get("running") is not None:
        return "running"
    if state.get("terminated") is not None:
        return "terminated"
    if state.get("waiting") is not None:
        return "waiting"
    return None


def last_terminated(status: JSONDict) -> JSONDict | None:
    return ((status.get("lastState") or {}).get("terminated")) or None


def exit_code(status: JSONDict) -> int:
    return int(((status.get("state") or {}).get("terminated") or {}).get("exitCode", 0))


def by_name(statuses: Iterable[JSONDict] | None) -> dict[str, JSONDict]:
    """Each status (or container) by its name, the last of a name winning."""
    known: dict[str, JSONDict] = {}
    if statuses:
        for s in statuses:  # a plain loop: cheaper than a comprehension on these short lists
            known[s["name"]] = s
    return known


def go_list(names: list[str]) -> str:
    """Go's %s formatting of a []string: [a b c]."""
    return "[" + " ".join(names) + "]"


def condition(type_: str, status: str, reason: str = "", message: str = "") -> JSONDict:
    cond: JSONDict = {"type": type_, "status": status}
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def replace_or_append_condition(conditions: list[JSONDict], cond: JSONDict) -> None:
    """Put `cond` where a condition of its type is, or at the end; in place."""
    for i, existing in enumerate(conditions):
        if existing.get("type") == cond.get("type"):
            conditions[i] = cond
            return
    conditions.append(cond)


def has_any_regular_container_started(pod: JSONDict, statuses: Iterable[JSONDict] | None) -> bool:
    """Some regular container is running or terminated now (lastState is not consulted)."""
    if not statuses:
        return False
    known = by_name(statuses)
    for container in (pod.get("spec") or {}).get("containers") or ():
        if state_of(known.get(container["name"])) in ("running", "terminated"):
            return True
    return False
