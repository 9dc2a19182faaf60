"""The one way tests build pods, container statuses and versioned pod statuses.

A suite that needs its own defaults (upstream's test pods differ from file to file) binds them
once with `functools.partial(pods.pod, ...)` rather than writing another builder.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from podledger.schemas import models
from podledger.types import CONFIG_SOURCE_ANNOTATION, JSONDict

API_TIME = "2026-01-01T00:00:00Z"


def container(name: str, image: str | None = None, **fields: Any) -> JSONDict:
    """A container spec; `fields` are its other keys as the API spells them (e.g. readinessProbe)."""
    spec: JSONDict = {"name": name}
    if image is not None:
        spec["image"] = image
    return {**spec, **fields}


def sidecar(name: str, image: str | None = None, **fields: Any) -> JSONDict:
    """An init container with restartPolicy Always (a restartable init container)."""
    return container(name, image, restartPolicy="Always", **fields)


def pod(
    containers: Sequence[str | JSONDict] = ("c",),
    init_containers: Sequence[str | JSONDict] = (),
    *,
    name: str = "pod",
    namespace: str = "default",
    uid: str | None = "uid-1",
    node: str | None = None,
    image: str | None = None,
    restart_policy: str | None = None,
    readiness_gates: Sequence[str] = (),
    annotations: Mapping[str, str] | None = None,
    source: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    status: JSONDict | None = None,
    **spec_fields: Any,
) -> JSONDict:
    """A Pod as the API serves it. Containers and init containers are given by name (each then
    gets `image`) or as whole specs; `uid=None` leaves the uid for the apiserver to assign;
    `source` is the config source annotation (file and http make a static pod);
    `spec_fields` are further spec keys (terminationGracePeriodSeconds, dnsPolicy, ...)."""

    def spec_of(c: str | JSONDict) -> JSONDict:
        return container(c, image) if isinstance(c, str) else dict(c)

    meta: JSONDict = {"name": name, "namespace": namespace}
    if uid is not None:
        meta["uid"] = uid
    if annotations is not None or source is not None:
        meta["annotations"] = {
            **(annotations or {}),
            **({CONFIG_SOURCE_ANNOTATION: source} if source else {}),
        }
    meta.update(metadata or {})
    spec: JSONDict = {}
    if node is not None:
        spec["nodeName"] = node
    if restart_policy is not None:
        spec["restartPolicy"] = restart_policy
    spec["containers"] = [spec_of(c) for c in containers]
    if init_containers:
        spec["initContainers"] = [spec_of(c) for c in init_containers]
    if readiness_gates:
        spec["readinessGates"] = [{"conditionType": gate} for gate in readiness_gates]
    spec.update(spec_fields)
    out: JSONDict = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    if status is not None:
        out["status"] = dict(status)
    return out


def api_condition(type_: str, status: str, **extra: Any) -> JSONDict:
    """A pod condition as the status manager writes it."""
    return {"type": type_, "status": status, "lastProbeTime": None, "lastTransitionTime": API_TIME, **extra}


def running_status(ready: str = "True", container_name: str = "main", image: str = "app:1") -> JSONDict:
    """The status of a one-container pod whose container runs (and is ready unless `ready` is "False")."""
    return {
        "phase": "Running",
        "conditions": [
            api_condition("Initialized", "True"),
            api_condition("Ready", ready),
            api_condition("ContainersReady", ready),
            api_condition("PodScheduled", "True"),
        ],
        "containerStatuses": [
            {
                "name": container_name,
                "ready": ready == "True",
                "restartCount": 0,
                "image": image,
                "imageID": "",
                "started": True,
                "state": {"running": {"startedAt": API_TIME}},
                "lastState": {},
            }
        ],
        "startTime": API_TIME,
        "qosClass": "BestEffort",
    }


def runtime_container(
    container_id: str,
    name: str,
    image: str,
    state: str,
    *,
    exit_code: int | None = None,
    restarts: int = 0,
    stamp: str = "2024-05-01T14:02:00Z",
) -> JSONDict:
    """One container of a runtime snapshot (a pleg event's), started and, if `state` is "exited",
    finished at `stamp` with reason Error."""
    exited = state == "exited"
    return {
        "id": container_id,
        "name": name,
        "image": image,
        "image_id": "",
        "state": state,
        "exit_code": exit_code,
        "reason": "Error" if exited else None,
        "message": None,
        "created_at": stamp,
        "started_at": stamp,
        "finished_at": stamp if exited else None,
        "restart_count": restarts,
    }


OOM_KILLED = {
    "exitCode": 137,
    "reason": "OOMKilled",
    "startedAt": API_TIME,
    "finishedAt": "2026-01-01T00:01:00Z",
    "containerID": "process://first",
}


def oom_status(
    *, ready: bool | None = None, restarts: int = 0, cid: str = "process://first", oom: str = ""
) -> JSONDict:
    """A one-container pod's status running container `cid`; oom="now": that container terminated
    by the OOM killer; oom="last": running again after it. `ready` defaults to not while killed."""
    ready = oom != "now" if ready is None else ready
    out = running_status(ready="True" if ready else "False")
    main = out["containerStatuses"][0]
    main.update(containerID=cid, restartCount=restarts)
    if oom == "now":
        main["state"] = {"terminated": OOM_KILLED}
    elif oom == "last":
        main["lastState"] = {"terminated": OOM_KILLED}
    return out


def versioned(
    pod: JSONDict,
    node: str,
    version: int,
    status: JSONDict,
    *,
    running: bool = True,
    finished: bool = False,
    static: bool = False,
    mirror_uid: str | None = None,
    deleting: bool = False,
) -> models.VersionedPodStatus:
    """`status` as version `version` of `pod` on `node`, as the fold would publish it."""
    meta = pod["metadata"]
    return models.VersionedPodStatus(
        uid=meta["uid"],
        namespace=meta["namespace"],
        name=meta["name"],
        node=node,
        version=version,
        status=status,
        could_have_running_containers=running,
        finished=finished,
        static=static,
        mirror_uid=mirror_uid,
        deleting=deleting,
        cause=models.Cause("test", "pod-updates", 0, version, 0),
        ts_ms=int(time.time() * 1000),
    )
