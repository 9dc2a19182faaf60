"""`kubectl get pods` columns: the apiserver's Table for pods (NAME READY STATUS RESTARTS AGE, and
IP NODE NOMINATED NODE READINESS GATES for -o wide), computed as the apiserver's pod printer does
(printPod in pkg/printers/internalversion/printers.go).

Pure: `now` is passed in. The time-independent part of a row is computed once per pod version
(RowBasis, then RowParts: its JSON); AGE and "3 (5m ago)" are formatted per answer (Clock).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from podledger.types import JSONDict


def _column(name: str, description: str, priority: int = 0, fmt: str = "") -> JSONDict:
    return {"name": name, "type": "string", "format": fmt, "description": description, "priority": priority}


COLUMNS: list[JSONDict] = [
    _column("Name", "Name must be unique within a namespace.", fmt="name"),
    _column("Ready", "The aggregate readiness state of this pod for accepting traffic."),
    _column("Status", "The aggregate status of the containers in this pod."),
    _column(
        "Restarts",
        "The number of times the containers in this pod have been restarted and when the last"
        " container in this pod has restarted.",
    ),
    _column("Age", "CreationTimestamp is the server time when this object was created."),
    _column("IP", "podIP address allocated to the pod.", priority=1),
    _column("Node", "NodeName indicates in which node this pod is scheduled.", priority=1),
    _column("Nominated Node", "nominatedNodeName is set only when this pod preempts other pods.", priority=1),
    _column(
        "Readiness Gates",
        "If specified, all readiness gates will be evaluated for pod readiness.",
        priority=1,
    ),
]


def parse_time(value: Any) -> float | None:
    """An RFC 3339 time as epoch seconds; None when absent or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


def human_duration(seconds: float) -> str:
    """duration.HumanDuration of k8s.io/apimachinery: how kubectl shows an age."""
    whole = int(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 120:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        s = whole % 60
        return f"{minutes}m" if s == 0 else f"{minutes}m{s}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if dy == 0 else f"{hours // 24 // 365}y{dy}d"
    return f"{hours // 24 // 365}y"


def since(timestamp: float | None, now: float) -> str:
    """translateTimestampSince."""
    return "<unknown>" if timestamp is None else human_duration(now - timestamp)


@dataclass(frozen=True, slots=True)
class RowBasis:
    """The cells of one pod version that do not depend on the time of the request."""

    name: str
    ready: str
    reason: str
    restarts: int
    last_restart: float | None
    created: float | None
    ip: str
    node: str
    nominated: str
    gates: str
    phase: str


def _last_terminated(cs: JSONDict) -> float | None:
    terminated = (cs.get("lastState") or {}).get("terminated")
    return None if not terminated else parse_time(terminated.get("finishedAt"))


def _later(a: float | None, b: float | None) -> float | None:
    return b if a is None or (b is not None and b > a) else a


def _init_reason(cs: JSONDict, index: int, total: int) -> str | None:
    """The STATUS of a pod still initializing at this init container; None when it is done."""
    state = cs.get("state") or {}
    terminated, waiting = state.get("terminated"), state.get("waiting")
    if terminated is not None and terminated.get("exitCode", 0) == 0:
        return None
    if terminated is not None:
        if terminated.get("reason"):
            return "Init:" + terminated["reason"]
        if terminated.get("signal"):
            return f"Init:Signal:{terminated['signal']}"
        return f"Init:ExitCode:{terminated.get('exitCode', 0)}"
    if waiting is not None and waiting.get("reason") and waiting["reason"] != "PodInitializing":
        return "Init:" + waiting["reason"]
    return f"Init:{index}/{total}"


def row_basis(pod: JSONDict) -> RowBasis:
    """printPod, up to the time-dependent cells."""
    spec, status, meta = pod.get("spec") or {}, pod.get("status") or {}, pod.get("metadata") or {}
    phase = status.get("phase") or ""
    reason = status.get("reason") or phase
    conditions = status.get("conditions") or []
    for c in conditions:
        if c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    init_specs = {c.get("name"): c for c in spec.get("initContainers") or []}
    sidecars = {name for name, c in init_specs.items() if c.get("restartPolicy") == "Always"}
    total = len(spec.get("containers") or []) + len(sidecars)
    ready = restarts = sidecar_restarts = 0
    last_restart: float | None = None
    last_sidecar_restart: float | None = None
    initializing = False
    for i, cs in enumerate(status.get("initContainerStatuses") or []):
        restarts += int(cs.get("restartCount") or 0)
        last_restart = _later(last_restart, _last_terminated(cs))
        is_sidecar = cs.get("name") in sidecars
        if is_sidecar:
            sidecar_restarts += int(cs.get("restartCount") or 0)
            last_sidecar_restart = _later(last_sidecar_restart, _last_terminated(cs))
        terminated = (cs.get("state") or {}).get("terminated")
        if terminated is not None and terminated.get("exitCode", 0) == 0:
            continue
        if is_sidecar and cs.get("started"):
            ready += 1 if cs.get("ready") else 0
            continue
        init_reason = _init_reason(cs, i, len(init_specs))
        if init_reason is not None:
            reason, initializing = init_reason, True
            break
    initialized = any(c.get("type") == "Initialized" and c.get("status") == "True" for c in conditions)
    if not initializing or initialized:
        restarts, last_restart = sidecar_restarts, last_sidecar_restart
        has_running = False
        for cs in reversed(status.get("containerStatuses") or []):
            restarts += int(cs.get("restartCount") or 0)
            last_restart = _later(last_restart, _last_terminated(cs))
            state = cs.get("state") or {}
            waiting, terminated = state.get("waiting"), state.get("terminated")
            if waiting is not None and waiting.get("reason"):
                reason = waiting["reason"]
            elif terminated is not None and terminated.get("reason"):
                reason = terminated["reason"]
            elif terminated is not None:
                signal = terminated.get("signal")
                reason = f"Signal:{signal}" if signal else f"ExitCode:{terminated.get('exitCode', 0)}"
            elif cs.get("ready") and state.get("running") is not None:
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            pod_ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
            reason = "Running" if pod_ready else "NotReady"
    if meta.get("deletionTimestamp") and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif meta.get("deletionTimestamp") and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    gates = spec.get("readinessGates") or []
    gates_text = "<none>"
    if gates:
        by_type = {c.get("type"): c.get("status") for c in reversed(conditions)}
        true_gates = sum(1 for g in gates if by_type.get(g.get("conditionType")) == "True")
        gates_text = f"{true_gates}/{len(gates)}"
    ips = status.get("podIPs") or []
    return RowBasis(
        name=meta.get("name", ""),
        ready=f"{ready}/{total}",
        reason=reason,
        restarts=restarts,
        last_restart=last_restart,
        created=parse_time(meta.get("creationTimestamp")),
        ip=(ips[0].get("ip") if ips else "") or "<none>",
        node=spec.get("nodeName") or "<none>",
        nominated=status.get("nominatedNodeName") or "<none>",
        gates=gates_text,
        phase=phase,
    )


_COMPLETED = {
    "Succeeded": [{"type": "Completed", "status": "True", "reason": "Succeeded",
                   "message": "The pod has completed successfully."}],
    "Failed": [{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}],
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class RowParts:
    """One pod version's Table row as JSON around its time-dependent cells (RESTARTS, AGE): made
    once per version, completed per answer by row_json."""

    head: bytes  # '{"cells":[NAME,READY,STATUS,'
    tail: bytes  # ',IP,NODE,NOMINATED,GATES]' and the row's conditions
    restarts: int
    last_restart: float | None
    created: float | None


def row_parts(basis: RowBasis) -> RowParts:
    head = orjson.dumps([basis.name, basis.ready, basis.reason])[:-1]
    tail = b"," + orjson.dumps([basis.ip, basis.node, basis.nominated, basis.gates])[1:]
    if basis.phase in _COMPLETED:
        tail += b',"conditions":' + orjson.dumps(_COMPLETED[basis.phase])
    return RowParts(b'{"cells":' + head + b",", tail, basis.restarts, basis.last_restart, basis.created)


class Clock:
    """The moment of one answer: formats each distinct time of its rows once (a list of many pods
    created together formats one AGE)."""

    def __init__(self, now: float) -> None:
        self.now = now
        self._since: dict[float | None, str] = {}
        self._cells: dict[tuple[int, float | None, float | None], bytes] = {}

    def since(self, timestamp: float | None) -> str:
        """translateTimestampSince."""
        text = self._since.get(timestamp)
        if text is None:
            text = self._since[timestamp] = since(timestamp, self.now)
        return text

    def cells(self, parts: RowParts) -> bytes:
        """The RESTARTS and AGE cells of a row, as JSON (`"3 (5m ago)","2d"`)."""
        key = (parts.restarts, parts.last_restart, parts.created)
        text = self._cells.get(key)
        if text is None:
            restarts = str(parts.restarts)
            if parts.restarts and parts.last_restart is not None:
                restarts = f"{parts.restarts} ({self.since(parts.last_restart)} ago)"
            text = self._cells[key] = orjson.dumps(restarts) + b"," + orjson.dumps(self.since(parts.created))
        return text


def row_json(parts: RowParts, row_object: bytes, clock: Clock) -> bytes:
    """A Table row: the cells at `clock`'s moment, and `row_object` (JSON) as its object."""
    return b"".join((parts.head, clock.cells(parts), parts.tail, b',"object":', row_object, b"}"))


def partial_metadata(metadata: bytes, group_version: str) -> bytes:
    """A row's object by default (includeObject=Metadata): the pod's metadata alone."""
    return b"".join(
        (b'{"kind":"PartialObjectMetadata","apiVersion":"', group_version.encode(), b'","metadata":',
         metadata, b"}")
    )  # fmt: skip


_COLUMNS_JSON = orjson.dumps(COLUMNS)


def table_open(resource_version: str, group_version: str, *, headers: bool = True) -> bytes:
    """A meta.k8s.io Table up to its first row (then rows, comma-separated, then TABLE_CLOSE); a
    watch sends the column definitions with its first event only."""
    return b"".join(
        (b'{"kind":"Table","apiVersion":', orjson.dumps(group_version), b',"metadata":{"resourceVersion":',
         orjson.dumps(resource_version), b'},"columnDefinitions":', _COLUMNS_JSON if headers else b"[]",
         b',"rows":[')
    )  # fmt: skip


TABLE_CLOSE = b"]}"
