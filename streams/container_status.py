"""Container statuses: the kubelet's convertToAPIContainerStatuses over a runtime snapshot, and the
prober manager's UpdatePodStatus (started and ready from probe results).

The statuses built here are new dicts; parts of the old statuses they keep (a terminated status, a
lastState) are shared, never changed. They hold no empty field (canonical.put): over a canonical
old status they are canonical but for their times and messages (canonical.normalize_generated).
The rules: docs/kubelet-rules.md#status-generation.
"""

from __future__ import annotations

from operator import itemgetter

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

_NOT_BUILT: JSONDict = {}  # holds a container's place in convert_container_statuses; always replaced
_NAME = itemgetter("name")


def container_id(runtime: RuntimeSnapshot | None, cid: str) -> str:
    return f"{_id_prefix(runtime)}{cid}"


def _id_prefix(runtime: RuntimeSnapshot | None) -> str:
    return f"{(runtime or {}).get('runtime_type') or 'process'}://"


def _runtime_state(rc: RuntimeContainer, cid: str, old: JSONDict | None) -> JSONDict:
    """The API state of runtime container `rc` (`cid` its container ID, `old` the old status of its
    name)."""
    state = rc["state"]
    if state == "running":
        running: JSONDict = {}
        put(running, "startedAt", rc.get("started_at"))
        return {"running": running}
    if state == "exited":
        terminated: JSONDict = {"exitCode": int(rc.get("exit_code") or 0)}
        if rc.get("reason"):
            put(terminated, "reason", rc["reason"])
        if rc.get("message"):
            put(terminated, "message", rc["message"])
        put(terminated, "startedAt", rc.get("started_at"))
        put(terminated, "finishedAt", rc.get("finished_at"))
        terminated["containerID"] = cid
        return {"terminated": terminated}
    if state == "unknown" and old is not None and state_of(old) == "running":
        # It ran and vanished between relists: terminated with an unknown reason, never waiting,
        # so a run-once pod is not run twice.
        return {
            "terminated": {
                "exitCode": UNKNOWN_EXIT_CODE,
                "reason": STATUS_UNKNOWN_REASON,
                "message": GONE_WHEN_TERMINATED,
            }
        }
    return {"waiting": {}}  # created, or unknown without a running past: waiting to run


def _convert_runtime_container(rc: RuntimeContainer, old: JSONDict | None, id_prefix: str) -> JSONDict:
    """The status of the container whose newest runtime container is `rc`."""
    cid = f"{id_prefix}{rc['id']}"
    status: JSONDict = {"name": rc["name"], "restartCount": int(rc.get("restart_count") or 0)}
    put(status, "image", rc.get("image") or "")
    put(status, "imageID", rc.get("image_id") or "")
    status["containerID"] = cid
    status["state"] = state = _runtime_state(rc, cid, old)
    status["lastState"] = {}
    status["ready"] = False
    if old is not None and rc["state"] == "unknown" and "terminated" in state:  # it vanished running
        status["restartCount"] = int(old.get("restartCount") or 0) + 1
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
    if not containers:
        return []  # (a pod without init containers)
    old_by_name = by_name(old_statuses)
    statuses: dict[str, JSONDict] = {c["name"]: _NOT_BUILT for c in containers}

    # Runtime containers, newest first: the newest of a name is its state, the next its lastState.
    latest: dict[str, RuntimeContainer] = {}
    runtime_containers = (runtime or {}).get("containers")
    if runtime_containers:
        id_prefix = _id_prefix(runtime)
        seen: dict[str, int] = {}
        newest_first = (
            sorted(runtime_containers, key=_created_at, reverse=True)
            if len(runtime_containers) > 1
            else runtime_containers
        )
        for rc in newest_first:
            name = rc["name"]
            if name not in statuses:
                continue
            count = seen.get(name, 0)
            if count == 0:
                statuses[name] = _convert_runtime_container(rc, old_by_name.get(name), id_prefix)
                latest[name] = rc
            elif count == 1:
                statuses[name]["lastState"] = _runtime_state(
                    rc, f"{id_prefix}{rc['id']}", old_by_name.get(name)
                )
            seen[name] = count + 1

    # The others, from their old status: a terminated one is kept; any other waits to be created.
    if len(latest) < len(statuses):
        default_reason = (
            POD_INITIALIZING if (pod.get("spec") or {}).get("initContainers") else CONTAINER_CREATING
        )
        deleted = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
        for container in containers:
            name = container["name"]
            if name in latest:
                continue
            old = old_by_name.get(name)
            statuses[name] = _status_without_runtime(container, old, default_reason, deleted)

    # Containers that will restart show the pod worker's last sync error (the reason cache).
    if reasons:
        for container in containers:
            name = container["name"]
            reason = reasons.get(name)
            if not reason:
                continue
            newest = latest.get(name)
            if is_init and newest is not None and newest["state"] == "exited" and not newest.get("exit_code"):
                continue  # an init container that succeeded is not restarted
            if not should_container_be_restarted(pod, container, newest):
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
    if not is_init:
        ordered.sort(key=_NAME)
    return ordered


def _status_without_runtime(
    container: JSONDict, old: JSONDict | None, default_reason: str, deleted: bool
) -> JSONDict:
    """The status of a container the runtime does not report, from its old status."""
    old_state = state_of(old)
    if old is not None and old_state == "terminated":
        return dict(old)  # a copy of the top level only: the fields below are replaced, not changed
    status: JSONDict = {
        "name": container["name"],
        "state": {"waiting": {"reason": default_reason}},
        "lastState": {},
        "ready": False,
        "restartCount": 0,
    }
    put(status, "image", container.get("image") or "")  # and no imageID: it is empty
    if old is not None:
        status["restartCount"] = old.get("restartCount", 0)
        status["lastState"] = old.get("lastState") or {}
        if old_state == "running" and not last_terminated(status):
            # It was running and the runtime no longer reports it.
            status["lastState"] = {
                "terminated": {
                    "exitCode": UNKNOWN_EXIT_CODE,
                    "reason": STATUS_UNKNOWN_REASON,
                    "message": GONE_WHEN_DELETED,
                }
            }
            if not deleted:
                status["restartCount"] = int(status.get("restartCount") or 0) + 1
    return status


# --------------------------------------------------------------------------- probes (prober UpdatePodStatus)

# Plain strings: an enum member costs an attribute lookup on its class at every use.
_STARTUP, _READINESS = ProbeType.STARTUP.value, ProbeType.READINESS.value
_SUCCESS = ProbeResult.SUCCESS.value
_NO_RESULTS: JSONDict = {}  # read only
_NO_CONTAINER: JSONDict = {}  # read only


def _results(probes: JSONDict | None, status: JSONDict) -> JSONDict:
    """The probe results of a container status's instance (its container ID)."""
    by_id = probes.get(status["name"]) if probes else None
    if not by_id:
        return _NO_RESULTS
    return by_id.get(status.get("containerID") or "") or _NO_RESULTS


def _started_by(results: JSONDict, container: JSONDict) -> bool:
    """Started, for a running container with these probe results."""
    result = results.get(_STARTUP)
    if result is not None:
        return bool(result == _SUCCESS)
    return container.get("startupProbe") is None


def _ready_by(results: JSONDict, container: JSONDict) -> bool:
    """Ready, for a running and started container with these probe results."""
    return results.get(_READINESS) == _SUCCESS or container.get("readinessProbe") is None


def apply_probe_results(pod: JSONDict, status: JSONDict, probes: JSONDict | None) -> None:
    """Set `started` and `ready` on every container status from probe results, in place (on the
    container status dicts, which the caller has just built)."""
    spec = pod.get("spec") or {}
    statuses = status.get("containerStatuses")
    if statuses:
        containers = by_name(spec.get("containers"))
        for cs in statuses:
            if state_of(cs) != "running":
                cs["started"] = False
                continue
            container = containers.get(cs["name"], _NO_CONTAINER)
            results = _results(probes, cs)  # looked up once for both
            cs["started"] = started = _started_by(results, container)
            if started:
                cs["ready"] = _ready_by(results, container)
    init_statuses = status.get("initContainerStatuses")
    if init_statuses:
        init_containers = by_name(spec.get("initContainers"))
        for cs in init_statuses:
            container = init_containers.get(cs["name"], _NO_CONTAINER)
            state = state_of(cs)
            if state == "running":
                results = _results(probes, cs)
                cs["started"] = started = _started_by(results, container)
            else:
                cs["started"] = started = False
            if not is_sidecar(container):
                if state == "terminated" and exit_code(cs) == 0:
                    cs["ready"] = True
                continue
            if started:
                cs["ready"] = _ready_by(results, container)
