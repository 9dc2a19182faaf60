"""kube-state-metrics' pod series, computed from one versioned pod status.

Names, label names, label order and values follow kube-state-metrics' pod store: every series
starts with namespace, pod and uid; booleans are 1/0; times are Unix seconds; a reason series
exists only while the container is in that state. Only what a pod's *status* holds is here: the
stream carries no pod spec or metadata, so spec-derived series and labels are left out
(docs/metrics.md lists them).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from datetime import datetime

from podledger.read.metrics.text import Family, Labels
from podledger.schemas import models
from podledger.types import JSONDict

__all__ = ["FAMILIES", "PHASES", "Row", "pod_labels", "pod_series", "unix_seconds"]

Row = tuple[str, Labels, float]
"""One sample: family name, label pairs, value."""

PHASES = ("Pending", "Succeeded", "Failed", "Unknown", "Running")  # kube-state-metrics' order
QOS_CLASSES = ("BestEffort", "Burstable", "Guaranteed")
CONDITION_STATUSES = ("True", "False", "Unknown")
STATUS_REASONS = (
    "Evicted",
    "NodeAffinity",
    "NodeLost",
    "PreemptionByScheduler",
    "SchedulingGated",
    "Shutdown",
    "TerminationByKubelet",
    "UnexpectedAdmissionError",
)
DISRUPTION_REASONS = (
    "PreemptionByScheduler",
    "DeletionByTaintManager",
    "EvictionByEvictionAPI",
    "DeletionByPodGC",
    "TerminationByKubelet",
)


def _gauge(name: str, help_: str) -> Family:
    return Family(name, "gauge", help_)


_POD_FAMILIES = (
    _gauge("kube_pod_info", "Information about pod."),
    _gauge("kube_pod_ips", "Pod IP addresses"),
    _gauge("kube_pod_start_time", "Start time in unix timestamp for a pod."),
    _gauge("kube_pod_completion_time", "Completion time in unix timestamp for a pod."),
    _gauge("kube_pod_status_phase", "The pods current phase."),
    _gauge("kube_pod_status_qos_class", "The pods current qosClass."),
    _gauge("kube_pod_status_ready", "Describes whether the pod is ready to serve requests."),
    _gauge("kube_pod_status_scheduled", "Describes the status of the scheduling process for the pod."),
    _gauge("kube_pod_status_initialized_time", "Initialized time in unix timestamp for a pod."),
    _gauge("kube_pod_status_ready_time", "Readiness achieved time in unix timestamp for a pod."),
    _gauge(
        "kube_pod_status_container_ready_time",
        "Readiness achieved time in unix timestamp for a pod containers.",
    ),
    _gauge("kube_pod_status_reason", "The pod status reasons"),
    _gauge("kube_pod_status_disruption_reason", "The pod disruption condition reason"),
)


def _container_families(prefix: str, what: str, article: str) -> tuple[Family, ...]:
    """The per-container families, for `prefix` kube_pod_container_ or kube_pod_init_container_."""
    return (
        _gauge(f"{prefix}info", f"Information about {article} {what} in a pod."),
        _gauge(f"{prefix}state_started", f"Start time in unix timestamp for a pod {what}."),
        _gauge(f"{prefix}status_waiting", f"Describes whether the {what} is currently in waiting state."),
        _gauge(
            f"{prefix}status_waiting_reason",
            f"Describes the reason the {what} is currently in waiting state.",
        ),
        _gauge(f"{prefix}status_running", f"Describes whether the {what} is currently in running state."),
        _gauge(
            f"{prefix}status_terminated", f"Describes whether the {what} is currently in terminated state."
        ),
        _gauge(
            f"{prefix}status_terminated_reason",
            f"Describes the reason the {what} is currently in terminated state.",
        ),
        _gauge(
            f"{prefix}status_last_terminated_reason",
            f"Describes the last reason the {what} was in terminated state.",
        ),
        _gauge(
            f"{prefix}status_last_terminated_exitcode",
            f"Describes the exit code for the last {what} in terminated state.",
        ),
        _gauge(
            f"{prefix}status_last_terminated_timestamp",
            f"Last terminated time for a pod {what} in unix timestamp.",
        ),
        _gauge(f"{prefix}status_ready", f"Describes whether the {what}s readiness check succeeded."),
        Family(f"{prefix}status_restarts_total", "counter", f"The number of restarts for the {what}."),
    )


FAMILIES: tuple[Family, ...] = (
    _POD_FAMILIES
    + _container_families("kube_pod_container_", "container", "a")
    + _container_families("kube_pod_init_container_", "init container", "an")
)


def pod_labels(vs: models.VersionedPodStatus) -> Labels:
    return (("namespace", vs.namespace), ("pod", vs.name), ("uid", vs.uid))


def unix_seconds(value: object) -> int | None:
    """An API timestamp (RFC 3339) as whole Unix seconds, or None when absent or malformed."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return int(datetime.fromisoformat(value).timestamp())
    except ValueError:
        return None


def pod_series(vs: models.VersionedPodStatus) -> list[Row]:
    """Every kube-state-metrics series of this pod that its status can give."""
    return list(_pod_rows(vs, pod_labels(vs)))


def _pod_rows(vs: models.VersionedPodStatus, pod: Labels) -> Iterator[Row]:
    status: JSONDict = vs.status or {}
    info = (("host_ip", str(status.get("hostIP") or "")), ("pod_ip", str(status.get("podIP") or "")))
    yield "kube_pod_info", (*pod, *info, ("node", vs.node)), 1
    for entry in status.get("podIPs") or []:
        family = _ip_family(str((entry or {}).get("ip") or ""))
        if family:
            yield "kube_pod_ips", (*pod, ("ip", entry["ip"]), ("ip_family", family)), 1
    started = unix_seconds(status.get("startTime"))
    if started is not None:
        yield "kube_pod_start_time", pod, started
    finished = [
        unix_seconds(((c.get("state") or {}).get("terminated") or {}).get("finishedAt"))
        for c in status.get("containerStatuses") or []
    ]
    if any(finished):
        yield "kube_pod_completion_time", pod, max(f for f in finished if f)
    phase = status.get("phase") or ""
    if phase:
        for name in PHASES:
            yield "kube_pod_status_phase", (*pod, ("phase", name)), float(phase == name)
    qos = status.get("qosClass") or ""
    if qos:
        for name in QOS_CLASSES:
            yield "kube_pod_status_qos_class", (*pod, ("qos_class", name)), float(qos == name)
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    for condition in conditions:
        kind, value = condition.get("type"), condition.get("status")
        if kind in ("Ready", "PodScheduled"):
            family = "kube_pod_status_ready" if kind == "Ready" else "kube_pod_status_scheduled"
            for name in CONDITION_STATUSES:
                yield family, (*pod, ("condition", name.lower())), float(value == name)
        timed = {
            "Initialized": "kube_pod_status_initialized_time",
            "Ready": "kube_pod_status_ready_time",
            "ContainersReady": "kube_pod_status_container_ready_time",
        }.get(str(kind))
        at = unix_seconds(condition.get("lastTransitionTime"))
        if timed and value == "True" and at is not None:
            yield timed, pod, at
    yield from _reason_rows(status, conditions, pod)
    yield from _container_rows(status.get("containerStatuses") or [], "kube_pod_container_", pod)
    yield from _container_rows(status.get("initContainerStatuses") or [], "kube_pod_init_container_", pod)


def _reason_rows(status: JSONDict, conditions: list[JSONDict], pod: Labels) -> Iterator[Row]:
    reason = status.get("reason") or ""
    shown = {reason, *(c.get("reason") for c in conditions)}
    shown.update(
        ((c.get("state") or {}).get("terminated") or {}).get("reason")
        for c in status.get("containerStatuses") or []
    )
    for name in STATUS_REASONS:
        if name in shown:
            yield "kube_pod_status_reason", (*pod, ("reason", name)), 1
    if reason and reason not in STATUS_REASONS:
        yield "kube_pod_status_reason", (*pod, ("reason", "Other")), 1
    for condition in conditions:
        if condition.get("type") == "DisruptionTarget":
            why = condition.get("reason") or ""
            why = why if why in DISRUPTION_REASONS else "Other"
            yield "kube_pod_status_disruption_reason", (*pod, ("reason", why)), 1


def _container_rows(statuses: list[JSONDict], prefix: str, pod: Labels) -> Iterator[Row]:
    for cs in statuses:
        if not isinstance(cs, dict) or not cs.get("name"):
            continue
        labels = (*pod, ("container", str(cs["name"])))
        state, last = cs.get("state") or {}, cs.get("lastState") or {}
        waiting, running, terminated = state.get("waiting"), state.get("running"), state.get("terminated")
        info = (
            ("image", str(cs.get("image") or "")),
            ("image_id", str(cs.get("imageID") or "")),
            ("container_id", str(cs.get("containerID") or "")),
        )
        yield f"{prefix}info", (*labels, *info), 1
        started = unix_seconds((running or terminated or {}).get("startedAt"))
        if (running is not None or terminated is not None) and started is not None:
            yield f"{prefix}state_started", labels, started
        yield f"{prefix}status_waiting", labels, float(waiting is not None)
        if waiting is not None:
            reason = str(waiting.get("reason") or "")
            yield f"{prefix}status_waiting_reason", (*labels, ("reason", reason)), 1
        yield f"{prefix}status_running", labels, float(running is not None)
        yield f"{prefix}status_terminated", labels, float(terminated is not None)
        if terminated is not None:
            reason = str(terminated.get("reason") or "")
            yield f"{prefix}status_terminated_reason", (*labels, ("reason", reason)), 1
        previous = last.get("terminated")
        if previous is not None:
            reason = str(previous.get("reason") or "")
            yield f"{prefix}status_last_terminated_reason", (*labels, ("reason", reason)), 1
            yield f"{prefix}status_last_terminated_exitcode", labels, float(previous.get("exitCode") or 0)
            finished = unix_seconds(previous.get("finishedAt"))
            if finished is not None:
                yield f"{prefix}status_last_terminated_timestamp", labels, finished
        yield f"{prefix}status_ready", labels, float(bool(cs.get("ready")))
        yield f"{prefix}status_restarts_total", labels, float(int(cs.get("restartCount") or 0))


def _ip_family(ip: str) -> str:
    """4 or 6 (an IPv4-mapped IPv6 address counts as 4, as in kube-state-metrics), "" if not an IP."""
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return ""
    return "4" if address.version == 4 or getattr(address, "ipv4_mapped", None) else "6"
