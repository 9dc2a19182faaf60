"""Pure status generation: the kubelet's generateAPIPodStatus over plain dicts.

No I/O, no clock: the caller passes `now` (the input event's time) so a replay of the journal
reproduces every status bit for bit.

This is the walking-skeleton subset: a pod the node has accepted but not yet run is Pending with
PodScheduled=True. Phases from container statuses, the other conditions and the container
statuses arrive with the fold issue (spec §4).
"""

from __future__ import annotations

from typing import Any

JSONDict = dict[str, Any]

# Conditions the kubelet owns (spec R4.3); everything else in the API status belongs to others.
KUBELET_OWNED_CONDITIONS = frozenset(
    {"PodScheduled", "Ready", "Initialized", "ContainersReady", "PodReadyToStartContainers"}
)
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


def condition(type_: str, status: str, now: str, reason: str = "", message: str = "") -> JSONDict:
    cond: JSONDict = {"type": type_, "status": status, "lastProbeTime": None, "lastTransitionTime": now}
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def qos_class(pod: JSONDict) -> str:
    """GetPodQOS over cpu and memory of every container (init containers included)."""
    spec = pod.get("spec") or {}
    containers = list(spec.get("initContainers") or []) + list(spec.get("containers") or [])
    any_set = False
    guaranteed = True
    for c in containers:
        resources = c.get("resources") or {}
        requests = resources.get("requests") or {}
        limits = resources.get("limits") or {}
        for res in ("cpu", "memory"):
            if res in requests or res in limits:
                any_set = True
            if res not in limits or requests.get(res, limits.get(res)) != limits.get(res):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def generate_api_status(pod: JSONDict, old: JSONDict | None, now: str) -> JSONDict:
    """The API PodStatus the kubelet would generate for `pod` before any container runs."""
    api_status = pod.get("status") or {}
    phase = "Pending"
    previous = (old or {}).get("phase") or api_status.get("phase")
    if previous in TERMINAL_PHASES:
        phase = previous  # a terminal phase is never left (spec R4.3 steps 3 and 6)
    conditions = [
        c for c in api_status.get("conditions") or [] if c.get("type") not in KUBELET_OWNED_CONDITIONS
    ]
    conditions.append(condition("PodScheduled", "True", now))
    return {"phase": phase, "conditions": conditions, "qosClass": qos_class(pod)}
