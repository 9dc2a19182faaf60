"""Pure status generation: the kubelet's generateAPIPodStatus over plain dicts.

No I/O and no clock: the caller passes `now` (the input event's time), so replaying the journal
reproduces every status bit for bit. Inputs are the desired pod (API JSON), the cached status,
the runtime snapshot carried by pleg events, probe results and the pod worker's reason cache.
The rules: docs/kubelet-rules.md#status-generation.

The work is split by job: container statuses (streams/container_status.py), phase and conditions
(streams/pod_conditions.py), the JSON vocabulary they share (streams/pod_json.py). This module
assembles them, and keeps every name importable from here.

Runtime snapshot (pleg value `runtime`):
    {"containers": [{"id", "name", "state": created|running|exited|unknown, "exit_code",
                     "reason", "message", "created_at", "started_at", "finished_at",
                     "restart_count", "image", "image_id"}],
     "ips": [...], "host_ips": [...], "runtime_type": "process",
     "sandbox": {"id", "ready": bool} | None}
Probe results: {container name: {container id: {probe type: Success|Failure|Unknown}}}
Reason cache: {container name: {"reason": "CrashLoopBackOff", "message": "..."}}
"""

from __future__ import annotations

from podledger.streams.canonical import put
from podledger.streams.container_status import (
    apply_probe_results,
    container_id,
    convert_container_statuses,
    should_container_be_restarted,
)
from podledger.streams.pod_conditions import (
    containers_ready_condition,
    get_phase,
    initialized_condition,
    qos_class,
    ready_condition,
    ready_to_start_containers_condition,
)
from podledger.streams.pod_json import (
    CONTAINER_CREATING,
    CONTAINERS_NOT_INITIALIZED,
    CONTAINERS_NOT_READY,
    GONE_WHEN_DELETED,
    GONE_WHEN_TERMINATED,
    KUBELET_OWNED_CONDITIONS,
    POD_COMPLETED,
    POD_FAILED,
    POD_INITIALIZING,
    READINESS_GATES_NOT_READY,
    SHARED_CONDITIONS,
    STATUS_UNKNOWN_REASON,
    UNKNOWN_CONTAINER_STATUSES,
    UNKNOWN_EXIT_CODE,
    by_name,
    condition,
    exit_code,
    go_list,
    has_any_regular_container_started,
    is_sidecar,
    is_static,
    json_copy,
    last_terminated,
    replace_or_append_condition,
    restart_policy,
    rfc3339,
    state_of,
)
from podledger.types import TERMINAL_PHASES, JSONDict, RuntimeSnapshot

__all__ = [
    "CONTAINERS_NOT_INITIALIZED",
    "CONTAINERS_NOT_READY",
    "CONTAINER_CREATING",
    "GONE_WHEN_DELETED",
    "GONE_WHEN_TERMINATED",
    "KUBELET_OWNED_CONDITIONS",
    "POD_COMPLETED",
    "POD_FAILED",
    "POD_INITIALIZING",
    "READINESS_GATES_NOT_READY",
    "SHARED_CONDITIONS",
    "STATUS_UNKNOWN_REASON",
    "UNKNOWN_CONTAINER_STATUSES",
    "UNKNOWN_EXIT_CODE",
    "apply_probe_results",
    "by_name",
    "condition",
    "container_id",
    "containers_ready_condition",
    "convert_container_statuses",
    "exit_code",
    "generate_api_status",
    "get_phase",
    "go_list",
    "has_any_regular_container_started",
    "initialized_condition",
    "is_sidecar",
    "is_static",
    "json_copy",
    "last_terminated",
    "qos_class",
    "ready_condition",
    "ready_to_start_containers_condition",
    "replace_or_append_condition",
    "restart_policy",
    "rfc3339",
    "should_container_be_restarted",
    "state_of",
]


def generate_api_status(
    pod: JSONDict,
    old: JSONDict | None,
    runtime: RuntimeSnapshot | None,
    *,
    probes: JSONDict | None = None,
    reasons: JSONDict | None = None,
    pod_is_terminal: bool = False,
) -> JSONDict:
    """The API PodStatus the kubelet would generate. Conditions carry no times: the status
    manager (status_manager.set_pod_status) stamps lastTransitionTime and startTime. No field is
    empty (canonical.put): over a canonical `old`, the status is canonical but for its conditions
    and container states, which the status manager finishes (set_pod_status `built`).

    The status, its lists, its container statuses and its conditions are new dicts the caller may
    change; what lies below them may be shared with `old`, `pod` and `runtime`."""
    api_status = pod.get("status") or {}
    old = old if old is not None else api_status
    spec = pod.get("spec") or {}

    status: JSONDict = {}
    if runtime:
        host_ips = runtime.get("host_ips")
        if host_ips:
            put(status, "hostIP", host_ips[0])
            status["hostIPs"] = [_ip(ip) for ip in host_ips[:2]]
        ips = runtime.get("ips")
        if ips:
            put(status, "podIP", ips[0])
            status["podIPs"] = [_ip(ip) for ip in ips[:2]]
    put(status, "qosClass", api_status.get("qosClass") or qos_class(pod))
    init_containers = spec.get("initContainers")
    init_statuses = (
        convert_container_statuses(
            pod, init_containers, old.get("initContainerStatuses"), runtime, reasons, is_init=True
        )
        if init_containers
        else []
    )
    statuses = convert_container_statuses(
        pod, spec.get("containers") or [], old.get("containerStatuses"), runtime, reasons, is_init=False
    )
    if init_statuses:
        status["initContainerStatuses"] = init_statuses
    if statuses:
        status["containerStatuses"] = statuses

    phase = get_phase(pod, init_statuses, statuses, pod_is_terminal)
    old_phase = old.get("phase")
    api_phase = api_status.get("phase")
    if phase not in TERMINAL_PHASES:
        if old_phase in TERMINAL_PHASES:
            phase = old_phase
        elif api_phase in TERMINAL_PHASES:
            phase = api_phase
    if phase == old_phase:
        for key in ("reason", "message"):
            value = old.get(key) or api_status.get(key)
            if value:
                put(status, key, value)
    if api_phase in TERMINAL_PHASES and phase != api_phase:
        phase = api_phase  # the apiserver's terminal phase always wins
    status["phase"] = phase

    apply_probe_results(pod, status, probes)

    # Others' conditions are copied at the top level: the status manager sets their times.
    conditions = [
        dict(c) for c in api_status.get("conditions") or () if c.get("type") not in KUBELET_OWNED_CONDITIONS
    ]
    for c in old.get("conditions") or ():
        if c.get("type") == "DisruptionTarget":
            replace_or_append_condition(conditions, dict(c))
            break
    conditions.append(ready_to_start_containers_condition(runtime))
    conditions.append(initialized_condition(pod, init_statuses, statuses, phase))
    containers_ready = containers_ready_condition(pod, init_statuses, statuses, phase)
    conditions.append(ready_condition(pod, conditions, init_statuses, statuses, phase, containers_ready))
    conditions.append(containers_ready)
    conditions.append({"type": "PodScheduled", "status": "True"})  # what condition() builds, without the call
    status["conditions"] = conditions
    return status


def _ip(ip: object) -> JSONDict:
    entry: JSONDict = {}
    put(entry, "ip", ip)
    return entry
