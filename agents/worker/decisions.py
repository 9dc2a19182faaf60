"""Pure decisions of a pod worker's pass that `compute_pod_actions` (actions.py) does not make:
whether a pod must terminate, the grace period it terminates with, the order its containers are
killed in, and which sidecars count as started.

Plain data in, plain data out; the worker (pod_worker.py) asks the runtime and the prober and
carries the answers out.
"""

from __future__ import annotations

from collections.abc import Mapping

from podledger.agents.worker.actions import running_container_ids
from podledger.agents.worker.lifecycle import effective_grace_period
from podledger.streams import status as status_gen
from podledger.types import TERMINAL_PHASES, JSONDict, ProbeResult, RuntimeSnapshot

__all__ = ["kill_order", "pod_grace_period", "sidecars_started", "wants_termination"]


def wants_termination(pod: JSONDict, source: str, removed: bool) -> bool:
    """UpdatePod's reasons to terminate: deleted, removed, or terminal in the API. Static pods are
    never ended by an API phase."""
    if removed or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return True
    api_phase = (pod.get("status") or {}).get("phase")
    return source == "api" and api_phase in TERMINAL_PHASES


def pod_grace_period(pod: JSONDict, stored: int | None) -> tuple[int, bool]:
    """The grace period the pod terminates with given the one stored so far, and whether it
    shortened that one (`effective_grace_period` with no kill override)."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    return effective_grace_period(
        stored,
        meta.get("deletionGracePeriodSeconds"),
        None,
        spec.get("terminationGracePeriodSeconds"),
    )


def kill_order(snapshot: RuntimeSnapshot | None, pod: JSONDict | None) -> tuple[list[str], list[str]]:
    """The running containers to stop, by runtime id: the regular ones, stopped together, then the
    sidecars one by one in reverse start order (killPodWithSyncResult). Without the pod every
    container counts as regular."""
    running = running_container_ids(snapshot)
    sidecars = [
        c["name"]
        for c in ((pod or {}).get("spec") or {}).get("initContainers") or []
        if status_gen.is_sidecar(c)
    ]
    by_id = {c["id"]: c["name"] for c in (snapshot or {}).get("containers") or []}
    regular = [cid for cid in running if by_id[cid] not in sidecars]
    last = [cid for name in reversed(sidecars) for cid in running if by_id[cid] == name]
    return regular, last


def sidecars_started(
    pod: JSONDict, snapshot: RuntimeSnapshot | None, startup_results: Mapping[str, str]
) -> dict[str, bool]:
    """Running sidecars with a startup probe, by runtime id: started only once it succeeded (no
    result yet is not started). Containers without a startup probe count as started."""
    init = (pod.get("spec") or {}).get("initContainers") or []
    probed = {c["name"] for c in init if status_gen.is_sidecar(c) and c.get("startupProbe")}
    return {
        c["id"]: startup_results.get(c["id"]) == ProbeResult.SUCCESS
        for c in (snapshot or {}).get("containers") or []
        if c["name"] in probed and c["state"] == "running"
    }
