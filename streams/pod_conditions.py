"""Pod phase and the kubelet-owned pod conditions: the kubelet's getPhase, the condition
generators of pkg/kubelet/status/generate.go, and GetPodQOS. Pure functions over the pod and the
container statuses just generated. The rules: docs/kubelet-rules.md ("Phase" and "Conditions").
"""

from __future__ import annotations

from podledger.streams.pod_json import (
    CONTAINERS_NOT_INITIALIZED,
    CONTAINERS_NOT_READY,
    POD_COMPLETED,
    POD_FAILED,
    READINESS_GATES_NOT_READY,
    UNKNOWN_CONTAINER_STATUSES,
    by_name,
    condition,
    exit_code,
    go_list,
    has_any_regular_container_started,
    is_sidecar,
    is_static,
    last_terminated,
    restart_policy,
    state_of,
)
from podledger.types import JSONDict, RuntimeSnapshot

# --------------------------------------------------------------------------- phase (getPhase)


def get_phase(
    pod: JSONDict,
    init_statuses: list[JSONDict] | None,
    statuses: list[JSONDict] | None,
    pod_is_terminal: bool,
) -> str:
    spec = pod.get("spec") or {}
    pending_init = pending_sidecars = failed_init = 0
    unknown = running = waiting = stopped = succeeded = 0

    init_containers = spec.get("initContainers") or ()
    init_known = by_name(init_statuses) if init_containers else {}
    for container in init_containers:
        status = init_known.get(container["name"])
        state = state_of(status)
        if is_sidecar(container):
            if status is None:
                unknown += 1
            elif state == "running":
                running += 1
                if not status.get("started"):
                    pending_sidecars += 1
            elif state == "terminated" or (state == "waiting" and last_terminated(status)):
                pass  # a stopped sidecar does not count toward the phase
            elif state == "waiting":
                pending_sidecars += 1
                waiting += 1
            else:
                pending_sidecars += 1
                unknown += 1
            continue
        if status is None or state in ("running", None):
            pending_init += 1
        elif state == "terminated":
            failed_init += exit_code(status) != 0
        else:  # waiting
            last = last_terminated(status)
            if last is None:
                pending_init += 1
            elif int(last.get("exitCode", 0)) != 0:
                failed_init += 1

    known = by_name(statuses)
    for container in spec.get("containers") or ():
        status = known.get(container["name"])
        if status is None:
            unknown += 1
            continue
        current = status.get("state") or {}  # state_of, inline
        if current.get("running") is not None:
            running += 1
        elif current.get("terminated") is not None:
            stopped += 1
            succeeded += exit_code(status) == 0
        elif current.get("waiting") is None:
            unknown += 1  # a status without a state
        elif last_terminated(status):
            stopped += 1  # waiting to restart after a termination (CrashLoopBackOff)
        else:
            waiting += 1

    if failed_init > 0 and restart_policy(pod) == "Never":
        return "Failed"
    if pending_init > 0 or (pending_sidecars > 0 and not has_any_regular_container_started(pod, statuses)):
        return "Pending"
    if waiting > 0:
        return "Pending"
    if running > 0 and unknown == 0:
        return "Running"
    if running == 0 and stopped > 0 and unknown == 0:
        policy = restart_policy(pod)
        if pod_is_terminal and not is_static(pod):
            return "Succeeded" if stopped == succeeded else "Failed"
        if policy == "Always":
            return "Running"
        if stopped == succeeded:
            return "Succeeded"
        if policy == "Never":
            return "Failed"
        return "Running"
    return "Pending"


# --------------------------------------------------------------------------- conditions (status/generate.go)


def _all_statuses(
    init_statuses: list[JSONDict] | None, statuses: list[JSONDict] | None
) -> list[JSONDict] | None:
    if init_statuses is None and statuses is None:
        return None
    return [*(init_statuses or []), *(statuses or [])]


def _containers_condition(
    type_: str, reason: str, unknown: list[str], what: str, names: list[str]
) -> JSONDict:
    """True, or False with `reason` and "containers with unknown status: [..], containers with
    <what> status: [..]"."""
    messages = []
    if unknown:
        messages.append(f"containers with unknown status: {go_list(unknown)}")
    if names:
        messages.append(f"containers with {what} status: {go_list(names)}")
    if messages:
        return condition(type_, "False", reason, ", ".join(messages))
    return condition(type_, "True")


def containers_ready_condition(
    pod: JSONDict, init_statuses: list[JSONDict] | None, statuses: list[JSONDict] | None, phase: str
) -> JSONDict:
    if init_statuses is None and statuses is None:
        return condition("ContainersReady", "False", UNKNOWN_CONTAINER_STATUSES)
    if phase == "Failed":
        return condition("ContainersReady", "False", POD_FAILED)
    known = by_name(_all_statuses(init_statuses, statuses) if init_statuses else statuses)
    spec = pod.get("spec") or {}
    unknown: list[str] = []
    unready: list[str] = []
    init_containers = spec.get("initContainers")
    sidecars = [c for c in init_containers if is_sidecar(c)] if init_containers else ()
    for group in (sidecars, spec.get("containers") or ()):
        for container in group:
            status = known.get(container["name"])
            if status is None:
                unknown.append(container["name"])
            elif not status.get("ready"):
                unready.append(container["name"])
    if phase == "Succeeded" and not unknown:
        return condition("ContainersReady", "False", POD_COMPLETED)
    return _containers_condition("ContainersReady", CONTAINERS_NOT_READY, unknown, "unready", unready)


def ready_condition(
    pod: JSONDict,
    conditions: list[JSONDict],
    init_statuses: list[JSONDict] | None,
    statuses: list[JSONDict] | None,
    phase: str,
    containers_ready: JSONDict | None = None,
) -> JSONDict:
    """Ready: ContainersReady's verdict, then the readiness gates. `containers_ready` is that
    condition when the caller has it already."""
    if containers_ready is None:
        containers_ready = containers_ready_condition(pod, init_statuses, statuses, phase)
    if containers_ready["status"] != "True":
        return condition(
            "Ready",
            containers_ready["status"],
            containers_ready.get("reason", ""),
            containers_ready.get("message", ""),
        )
    gates = (pod.get("spec") or {}).get("readinessGates")
    if not gates:
        return condition("Ready", "True")
    present = {c.get("type"): c for c in conditions}
    messages = []
    for gate in gates:
        kind = gate.get("conditionType", "")
        found = present.get(kind)
        if found is None:
            messages.append(f'corresponding condition of pod readiness gate "{kind}" does not exist.')
        elif found.get("status") != "True":
            messages.append(
                f'the status of pod readiness gate "{kind}" is not "True", but {found.get("status")}'
            )
    if messages:
        return condition("Ready", "False", READINESS_GATES_NOT_READY, ", ".join(messages))
    return condition("Ready", "True")


def initialized_condition(
    pod: JSONDict, init_statuses: list[JSONDict] | None, statuses: list[JSONDict] | None, phase: str
) -> JSONDict:
    init_containers = (pod.get("spec") or {}).get("initContainers") or []
    if not init_containers:  # nothing to wait for: what the rules below give without one
        return condition("Initialized", "True", POD_COMPLETED if phase == "Succeeded" else "")
    everything = _all_statuses(init_statuses, statuses)
    if everything is None:
        return condition("Initialized", "False", UNKNOWN_CONTAINER_STATUSES)
    known = by_name(everything)
    unknown: list[str] = []
    incomplete: list[str] = []
    for container in init_containers:
        status = known.get(container["name"])
        if status is None:
            unknown.append(container["name"])
        elif (is_sidecar(container) and not status.get("started")) or (
            not is_sidecar(container) and not status.get("ready")
        ):
            incomplete.append(container["name"])
    if phase == "Succeeded" and not unknown:
        return condition("Initialized", "True", POD_COMPLETED)
    if has_any_regular_container_started(pod, everything):
        return condition("Initialized", "True")
    return _containers_condition("Initialized", CONTAINERS_NOT_INITIALIZED, unknown, "incomplete", incomplete)


def ready_to_start_containers_condition(runtime: RuntimeSnapshot | None) -> JSONDict:
    """True iff the pod has a ready sandbox, i.e. the runtime needs no new one."""
    sandbox = (runtime or {}).get("sandbox")
    ready = sandbox is not None and sandbox.get("ready")
    return condition("PodReadyToStartContainers", "True" if ready else "False")


# --------------------------------------------------------------------------- QoS


def qos_class(pod: JSONDict) -> str:
    """GetPodQOS over cpu and memory of every container (init containers included)."""
    spec = pod.get("spec") or {}
    any_set = False
    guaranteed = True
    for c in (*(spec.get("initContainers") or ()), *(spec.get("containers") or ())):
        resources = c.get("resources")
        if not resources:  # neither requests nor limits: not guaranteed, nothing set
            guaranteed = False
            continue
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
