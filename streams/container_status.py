"""Container statuses: the kubelet's convertToAPIContainerStatuses over a runtime snapshot, and the
prober manager's UpdatePodStatus (started and ready from probe results).

The statuses built here are new dicts; parts of the old statuses they keep (a terminated status, a
lastState) are shared, never changed. They hold no empty field (canonical.put): over a canonical
old status they are canonical but for their times and messages (canonical.normalize_generated).
The rules: docs/kubelet-rules.md#status-generation.
"""

from __future__ import annotations

from typing import Any

from podledger.streams.canonical import put
from podledger.streams.pod_json import (
    CONTAINER_CREATING,
    GONE_WHEN_DELETED,
    GONE_WHEN_TERMINATED,
    POD_INITIALIZING,
    STATUS_UNKNOWN_REASON,
    UNKNOWN_EXIT_CODE,
    by_name,
    exit_code,
    is_sidecar,
    last_terminated,
    restart_policy,
    state_of,
)
from podledger.types import JSONDict, ProbeResult, ProbeType, RuntimeContainer, RuntimeSnapshot


def container_id(runtime: RuntimeSnapshot | None, cid: str) -> str:
    return f"{(runtime or {}).get('runtime_type') or 'process'}://{cid}"


def _convert_runtime_container(
    rc: RuntimeContainer, old: JSONDict | None, runtime: RuntimeSnapshot | None
) -> JSONDict:
    cid = container_id(runtime, rc["id"])
    status: JSONDict = {"name": rc["name"], "restartCount": int(rc.get("restart_count") or 0)}
    put(status, "image", rc.get("image") or "")
    put(status, "imageID", rc.get("image_id") or "")
    status["containerID"] = cid
    status["state"] = {}
    status["lastState"] = {}
    status["ready"] = False
    state = rc["state"]
    if state == "running":
        running: JSONDict = {}
        put(running, "startedAt", rc.get("started_at"))
        status["state"] = {"running": running}
    elif state == "exited":
        terminated: JSONDict = {"exitCode": int(rc.get("exit_code") or 0)}
        if rc.get("reason"):
            put(terminated, "reason", rc["reason"])
        if rc.get("message"):
            put(terminated, "message", rc["message"])
        put(terminated, "startedAt", rc.get("started_at"))
        put(terminated, "finishedAt", rc.get("finished_at"))
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


def _created_at(rc: RuntimeContainer) -> str:
    return rc.get("created_at") or ""


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
    default_reason = POD_INITIALIZING if spec.get("initContainers") else CONTAINER_CREATING
    old_by_name = by_name(old_statuses)
    if not containers:
        return []  # (a pod without init containers)
    runtime_containers = list((runtime or {}).get("containers") or [])
    statuses: dict[str, JSONDict] = {}
    for container in containers:
        name = container["name"]
        image = container.get("image") or ""
        old = old_by_name.get(name)
        if old is not None and state_of(old) == "terminated":
            status = dict(old)  # a copy of the top level only: the fields below are replaced, not changed
        else:
            status = {
                "name": name,
                "state": {"waiting": {"reason": default_reason}},
                "lastState": {},
                "ready": False,
                "restartCount": 0,
            }
            put(status, "image", image)  # and no imageID: it is empty
            if old is not None:
                status["restartCount"] = old.get("restartCount", 0)
                status["lastState"] = old.get("lastState") or {}
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
    seen: dict[str, int] = {}
    latest: dict[str, RuntimeContainer] = {}
    for rc in sorted(runtime_containers, key=_created_at, reverse=True):
        name = rc["name"]
        count = seen.get(name, 0)
        if name not in statuses or count >= 2:
            continue
        converted = _convert_runtime_container(rc, old_by_name.get(name), runtime)
        if count == 0:
            statuses[name] = converted
            latest[name] = rc
        else:
            statuses[name]["lastState"] = converted["state"]
        seen[name] = count + 1

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
        waiting: JSONDict = {}
        put(waiting, "reason", reason.get("reason", ""))
        if reason.get("message"):
            put(waiting, "message", reason["message"])
        status["state"] = {"waiting": waiting}

    ordered = [statuses[c["name"]] for c in containers]
    return ordered if is_init else sorted(ordered, key=_name)


def _name(status: JSONDict) -> Any:
    return status["name"]


# --------------------------------------------------------------------------- probes (prober UpdatePodStatus)


def _probe_result(probes: JSONDict | None, status: JSONDict, kind: str) -> str | None:
    return _results(probes, status).get(kind)


def _results(probes: JSONDict | None, status: JSONDict) -> JSONDict:
    """The probe results of a container status's instance (its container ID)."""
    return ((probes or {}).get(status["name"]) or {}).get(status.get("containerID") or "") or {}


def _started(cs: JSONDict, container: JSONDict, probes: JSONDict | None) -> bool:
    return state_of(cs) == "running" and _started_by(_results(probes, cs), container)


def _started_by(results: JSONDict, container: JSONDict) -> bool:
    """Started, for a running container with these probe results."""
    result = results.get(ProbeType.STARTUP)
    if result is not None:
        return bool(result == ProbeResult.SUCCESS)
    return container.get("startupProbe") is None


def _ready(cs: JSONDict, container: JSONDict, probes: JSONDict | None) -> bool:
    return state_of(cs) == "running" and _ready_by(_results(probes, cs), container)


def _ready_by(results: JSONDict, container: JSONDict) -> bool:
    """Ready, for a running and started container with these probe results."""
    return results.get(ProbeType.READINESS) == ProbeResult.SUCCESS or container.get("readinessProbe") is None


def apply_probe_results(pod: JSONDict, status: JSONDict, probes: JSONDict | None) -> None:
    """Set `started` and `ready` on every container status from probe results, in place (on the
    container status dicts, which the caller has just built)."""
    spec = pod.get("spec") or {}
    statuses = status.get("containerStatuses") or []
    init_statuses = status.get("initContainerStatuses") or []
    if statuses:
        containers = by_name(spec.get("containers"))
        for cs in statuses:
            container = containers.get(cs["name"], {})
            if state_of(cs) != "running":
                cs["started"] = False
                continue
            results = _results(probes, cs)  # looked up once for both
            cs["started"] = started = _started_by(results, container)
            if started:
                cs["ready"] = _ready_by(results, container)
    if init_statuses:
        init_containers = by_name(spec.get("initContainers"))
        for cs in init_statuses:
            container = init_containers.get(cs["name"], {})
            cs["started"] = _started(cs, container, probes)
            if not is_sidecar(container):
                if state_of(cs) == "terminated" and exit_code(cs) == 0:
                    cs["ready"] = True
                continue
            if cs["started"]:
                cs["ready"] = _ready(cs, container, probes)
