"""Pure status generation: the kubelet's generateAPIPodStatus over plain dicts.

No I/O and no clock: the caller passes `now` (the input event's time), so replaying the journal
reproduces every status bit for bit. Inputs are the desired pod (API JSON), the cached status,
the runtime snapshot carried by pleg events, probe results and the pod worker's reason cache.
The rules: docs/kubelet-rules.md#status-generation.

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

import time
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from podledger.types import (
    CONFIG_SOURCE_ANNOTATION,
    TERMINAL_PHASES,
    JSONDict,
    ProbeResult,
    ProbeType,
    RuntimeContainer,
    RuntimeSnapshot,
)

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


# --------------------------------------------------------------------------- small helpers


def rfc3339(ts: float) -> str:
    """Seconds-precision UTC RFC 3339, the form the API uses for every status timestamp."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


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
    for key in ("running", "terminated", "waiting"):
        if state.get(key) is not None:
            return key
    return None


def last_terminated(status: JSONDict) -> JSONDict | None:
    return ((status.get("lastState") or {}).get("terminated")) or None


def exit_code(status: JSONDict) -> int:
    return int(((status.get("state") or {}).get("terminated") or {}).get("exitCode", 0))


def by_name(statuses: Iterable[JSONDict] | None) -> dict[str, JSONDict]:
    return {s["name"]: s for s in statuses or []}


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
    known = by_name(statuses)
    for container in (pod.get("spec") or {}).get("containers") or []:
        if state_of(known.get(container["name"])) in ("running", "terminated"):
            return True
    return False


# --------------------------------------------------------------------------- phase (getPhase)


def get_phase(
    pod: JSONDict,
    init_statuses: list[JSONDict] | None,
    statuses: list[JSONDict] | None,
    pod_is_terminal: bool,
) -> str:
    spec = pod.get("spec") or {}
    init_known = by_name(init_statuses)
    known = by_name(statuses)
    pending_init = pending_sidecars = failed_init = 0
    unknown = running = waiting = stopped = succeeded = 0

    for container in spec.get("initContainers") or []:
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

    for container in spec.get("containers") or []:
        status = known.get(container["name"])
        state = state_of(status)
        if status is None or state is None:
            unknown += 1
        elif state == "running":
            running += 1
        elif state == "terminated":
            stopped += 1
            succeeded += exit_code(status) == 0
        elif last_terminated(status):
            stopped += 1  # waiting to restart after a termination (CrashLoopBackOff)
        else:
            waiting += 1

    policy = restart_policy(pod)
    if failed_init > 0 and policy == "Never":
        return "Failed"
    if pending_init > 0 or (pending_sidecars > 0 and not has_any_regular_container_started(pod, statuses)):
        return "Pending"
    if waiting > 0:
        return "Pending"
    if running > 0 and unknown == 0:
        return "Running"
    if running == 0 and stopped > 0 and unknown == 0:
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
    everything = _all_statuses(init_statuses, statuses)
    if everything is None:
        return condition("ContainersReady", "False", UNKNOWN_CONTAINER_STATUSES)
    known = by_name(everything)
    spec = pod.get("spec") or {}
    unknown: list[str] = []
    unready: list[str] = []
    for container in [c for c in spec.get("initContainers") or [] if is_sidecar(c)] + list(
        spec.get("containers") or []
    ):
        status = known.get(container["name"])
        if status is None:
            unknown.append(container["name"])
        elif not status.get("ready"):
            unready.append(container["name"])
    if phase == "Succeeded" and not unknown:
        return condition("ContainersReady", "False", POD_COMPLETED)
    if phase == "Failed":
        return condition("ContainersReady", "False", POD_FAILED)
    return _containers_condition("ContainersReady", CONTAINERS_NOT_READY, unknown, "unready", unready)


def ready_condition(
    pod: JSONDict,
    conditions: list[JSONDict],
    init_statuses: list[JSONDict] | None,
    statuses: list[JSONDict] | None,
    phase: str,
) -> JSONDict:
    containers_ready = containers_ready_condition(pod, init_statuses, statuses, phase)
    if containers_ready["status"] != "True":
        return condition(
            "Ready",
            containers_ready["status"],
            containers_ready.get("reason", ""),
            containers_ready.get("message", ""),
        )
    present = {c.get("type"): c for c in conditions}
    messages = []
    for gate in (pod.get("spec") or {}).get("readinessGates") or []:
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
    everything = _all_statuses(init_statuses, statuses)
    if init_containers and everything is None:
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


# --------------------------------------------------------------------------- container statuses


def container_id(runtime: RuntimeSnapshot | None, cid: str) -> str:
    return f"{(runtime or {}).get('runtime_type') or 'process'}://{cid}"


def _convert_runtime_container(
    rc: RuntimeContainer, old: JSONDict | None, runtime: RuntimeSnapshot | None
) -> JSONDict:
    cid = container_id(runtime, rc["id"])
    status: JSONDict = {
        "name": rc["name"],
        "restartCount": int(rc.get("restart_count") or 0),
        "image": rc.get("image") or "",
        "imageID": rc.get("image_id") or "",
        "containerID": cid,
        "state": {},
        "lastState": {},
        "ready": False,
    }
    state = rc["state"]
    if state == "running":
        status["state"] = {"running": {"startedAt": rc.get("started_at")}}
    elif state == "exited":
        terminated: JSONDict = {"exitCode": int(rc.get("exit_code") or 0)}
        if rc.get("reason"):
            terminated["reason"] = rc["reason"]
        if rc.get("message"):
            terminated["message"] = rc["message"]
        terminated["startedAt"] = rc.get("started_at")
        terminated["finishedAt"] = rc.get("finished_at")
        terminated["containerID"] = cid
        status["state"] = {"terminated": terminated}
    elif state == "unknown" and old is not None and state_of(old) == "running":
        # It ran and vanished between relists: terminated with an unknown reason, never waiting,
        # so a run-once pod is not run twice.
        status["state"] = {
            "terminated": {
                "exitCode": UNKNOWN_EXIT_CODE,
                "reason": STATUS_UNKNOWN_REASON,
                "message": GONE_WHEN_TERMINATED,
            }
        }
        status["restartCount"] = int(old.get("restartCount") or 0) + 1
    else:  # created, or unknown without a running past: waiting to run
        status["state"] = {"waiting": {}}
    return status


def should_container_be_restarted(
    pod: JSONDict, container: JSONDict, latest: RuntimeContainer | None
) -> bool:
    """ShouldContainerBeRestarted, over the newest runtime container of that name."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    if latest is None:
        return True
    state = latest["state"]
    if state == "running":
        return False
    if state in ("unknown", "created"):
        return True
    policy = "Always" if is_sidecar(container) else restart_policy(pod)
    if policy == "Never":
        return False
    return not (policy == "OnFailure" and int(latest.get("exit_code") or 0) == 0)


def convert_container_statuses(
    pod: JSONDict,
    containers: list[JSONDict],
    old_statuses: list[JSONDict] | None,
    runtime: RuntimeSnapshot | None,
    reasons: JSONDict | None,
    *,
    is_init: bool,
) -> list[JSONDict]:
    """convertToAPIContainerStatuses for one list (init or regular containers) of the spec."""
    spec = pod.get("spec") or {}
    has_init = bool(spec.get("initContainers"))
    default_reason = POD_INITIALIZING if has_init else CONTAINER_CREATING
    old_by_name = by_name(old_statuses)
    runtime_containers = list((runtime or {}).get("containers") or [])
    statuses: dict[str, JSONDict] = {}
    for container in containers:
        name = container["name"]
        status: JSONDict = {
            "name": name,
            "state": {"waiting": {"reason": default_reason}},
            "lastState": {},
            "ready": False,
            "restartCount": 0,
            "image": container.get("image") or "",
            "imageID": "",
        }
        old = old_by_name.get(name)
        if old is not None:
            if state_of(old) == "terminated":
                status = json_copy(old)
            else:
                status["restartCount"] = old.get("restartCount", 0)
                status["lastState"] = json_copy(old.get("lastState") or {})
        statuses[name] = status

    # A container that was running and that the runtime no longer reports.
    runtime_names = {rc["name"] for rc in runtime_containers}
    deleted = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
    for container in containers:
        name = container["name"]
        old = old_by_name.get(name)
        if name in runtime_names or old is None or state_of(old) != "running":
            continue
        status = statuses[name]
        old_waiting = (status.get("state") or {}).get("waiting")
        if old_waiting is None or old_waiting.get("reason") != default_reason or last_terminated(status):
            continue
        status["lastState"] = {
            "terminated": {
                "exitCode": UNKNOWN_EXIT_CODE,
                "reason": STATUS_UNKNOWN_REASON,
                "message": GONE_WHEN_DELETED,
            }
        }
        if not deleted:
            status["restartCount"] = int(status.get("restartCount") or 0) + 1

    # Runtime containers, newest first: the newest of a name is its state, the next its lastState.
    newest_first = sorted(runtime_containers, key=lambda rc: rc.get("created_at") or "", reverse=True)
    seen: dict[str, int] = {}
    latest: dict[str, RuntimeContainer] = {}
    for rc in newest_first:
        name = rc["name"]
        if name not in statuses or seen.get(name, 0) >= 2:
            continue
        converted = _convert_runtime_container(rc, old_by_name.get(name), runtime)
        if seen.get(name, 0) == 0:
            statuses[name] = converted
            latest[name] = rc
        else:
            statuses[name]["lastState"] = converted["state"]
        seen[name] = seen.get(name, 0) + 1

    # Containers that will restart show the pod worker's last sync error (the reason cache).
    for container in containers:
        name = container["name"]
        newest = latest.get(name)
        if is_init and newest is not None and newest["state"] == "exited" and not newest.get("exit_code"):
            continue  # an init container that succeeded is not restarted
        if not should_container_be_restarted(pod, container, newest):
            continue
        reason = (reasons or {}).get(name)
        if not reason:
            continue
        status = statuses[name]
        if state_of(status) == "terminated":
            status["lastState"] = status["state"]
        waiting: JSONDict = {"reason": reason.get("reason", "")}
        if reason.get("message"):
            waiting["message"] = reason["message"]
        status["state"] = {"waiting": waiting}

    ordered = [statuses[c["name"]] for c in containers]
    return ordered if is_init else sorted(ordered, key=lambda s: s["name"])


# --------------------------------------------------------------------------- probes (prober UpdatePodStatus)


def _probe_result(probes: JSONDict | None, status: JSONDict, kind: str) -> str | None:
    results = ((probes or {}).get(status["name"]) or {}).get(status.get("containerID") or "") or {}
    return results.get(kind)


def _has_probe(container: JSONDict, kind: str) -> bool:
    return container.get(f"{kind}Probe") is not None


def apply_probe_results(pod: JSONDict, status: JSONDict, probes: JSONDict | None) -> None:
    """Set `started` and `ready` on every container status from probe results, in place."""
    spec = pod.get("spec") or {}
    containers = by_name(spec.get("containers"))
    init_containers = by_name(spec.get("initContainers"))

    def started(cs: JSONDict, container: JSONDict) -> bool:
        if state_of(cs) != "running":
            return False
        result = _probe_result(probes, cs, ProbeType.STARTUP)
        if result is not None:
            return result == ProbeResult.SUCCESS
        return not _has_probe(container, ProbeType.STARTUP)

    def ready(cs: JSONDict, container: JSONDict) -> bool:
        if state_of(cs) != "running":
            return False
        if _probe_result(probes, cs, ProbeType.READINESS) == ProbeResult.SUCCESS:
            return True
        return not _has_probe(container, ProbeType.READINESS)

    for cs in status.get("containerStatuses") or []:
        container = containers.get(cs["name"], {})
        cs["started"] = started(cs, container)
        if cs["started"]:
            cs["ready"] = ready(cs, container)
    for cs in status.get("initContainerStatuses") or []:
        container = init_containers.get(cs["name"], {})
        cs["started"] = started(cs, container)
        if not is_sidecar(container):
            if state_of(cs) == "terminated" and exit_code(cs) == 0:
                cs["ready"] = True
            continue
        if cs["started"]:
            cs["ready"] = ready(cs, container)


# --------------------------------------------------------------------------- QoS


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


# --------------------------------------------------------------------------- generateAPIPodStatus


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
    manager (status_manager.set_pod_status) stamps lastTransitionTime and startTime."""
    api_status = pod.get("status") or {}
    old = old if old is not None else api_status
    spec = pod.get("spec") or {}

    status: JSONDict = {}
    ips = list((runtime or {}).get("ips") or [])
    host_ips = list((runtime or {}).get("host_ips") or [])
    if host_ips:
        status["hostIP"] = host_ips[0]
        status["hostIPs"] = [{"ip": ip} for ip in host_ips[:2]]
    if ips:
        status["podIP"] = ips[0]
        status["podIPs"] = [{"ip": ip} for ip in ips[:2]]
    status["qosClass"] = api_status.get("qosClass") or qos_class(pod)
    init_statuses = convert_container_statuses(
        pod,
        spec.get("initContainers") or [],
        old.get("initContainerStatuses"),
        runtime,
        reasons,
        is_init=True,
    )
    statuses = convert_container_statuses(
        pod, spec.get("containers") or [], old.get("containerStatuses"), runtime, reasons, is_init=False
    )
    if init_statuses:
        status["initContainerStatuses"] = init_statuses
    status["containerStatuses"] = statuses

    phase = get_phase(pod, init_statuses, statuses, pod_is_terminal)
    if phase not in TERMINAL_PHASES:
        if old.get("phase") in TERMINAL_PHASES:
            phase = old["phase"]
        elif api_status.get("phase") in TERMINAL_PHASES:
            phase = api_status["phase"]
    if phase == old.get("phase"):
        for key in ("reason", "message"):
            value = old.get(key) or api_status.get(key)
            if value:
                status[key] = value
    if api_status.get("phase") in TERMINAL_PHASES and phase != api_status["phase"]:
        phase = api_status["phase"]  # the apiserver's terminal phase always wins
    status["phase"] = phase

    apply_probe_results(pod, status, probes)

    conditions = [
        json_copy(c)
        for c in api_status.get("conditions") or []
        if c.get("type") not in KUBELET_OWNED_CONDITIONS
    ]
    disruption = next((c for c in old.get("conditions") or [] if c.get("type") == "DisruptionTarget"), None)
    if disruption is not None:
        replace_or_append_condition(conditions, json_copy(disruption))
    conditions.append(ready_to_start_containers_condition(runtime))
    conditions.append(initialized_condition(pod, init_statuses, statuses, phase))
    conditions.append(ready_condition(pod, conditions, init_statuses, statuses, phase))
    conditions.append(containers_ready_condition(pod, init_statuses, statuses, phase))
    conditions.append(condition("PodScheduled", "True"))
    status["conditions"] = conditions
    return status
