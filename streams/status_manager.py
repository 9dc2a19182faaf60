"""Pure status-manager rules (the kubelet's pkg/kubelet/status) over plain dicts.

`set_pod_status` is updateStatusInternal: it keeps condition transition times, fixes startTime,
and bumps the version only when the kubelet-owned view of the status changed (or when forced,
as for a pod being deleted). Walking-skeleton subset; checkContainerStateTransition and
normalizeStatus arrive with the fold issue (spec §5).
"""

from __future__ import annotations

from typing import Any

from podledger.streams.status import KUBELET_OWNED_CONDITIONS

JSONDict = dict[str, Any]

# Conditions whose lastTransitionTime the status manager maintains (spec R5.2 step 3).
TRANSITION_TIMED = KUBELET_OWNED_CONDITIONS | {"DisruptionTarget", "PodHasNetwork"}
SHARED_CONDITIONS = frozenset({"DisruptionTarget"})


def update_last_transition_times(old: JSONDict | None, new: JSONDict, now: str) -> None:
    old_by_type = {c["type"]: c for c in (old or {}).get("conditions") or []}
    for cond in new.get("conditions") or []:
        if cond.get("type") not in TRANSITION_TIMED:
            continue
        previous = old_by_type.get(cond["type"])
        if previous is not None and previous.get("status") == cond.get("status"):
            cond["lastTransitionTime"] = previous.get("lastTransitionTime")
        else:
            cond["lastTransitionTime"] = now


def is_pod_status_by_kubelet_equal(old: JSONDict, new: JSONDict) -> bool:
    """Spec R5.5: owned conditions of `new` match `old` (times ignored), then the rest is equal."""
    old_conditions = {c["type"]: c for c in old.get("conditions") or []}
    for cond in new.get("conditions") or []:
        if cond.get("type") in KUBELET_OWNED_CONDITIONS or cond.get("type") in SHARED_CONDITIONS:
            before = old_conditions.get(cond["type"])
            if before is None or any(before.get(k) != cond.get(k) for k in ("status", "reason", "message")):
                return False
    return {**old, "conditions": new.get("conditions")} == new


def set_pod_status(
    cached: JSONDict | None, version: int, new: JSONDict, now: str, *, force: bool = False
) -> tuple[JSONDict, int] | None:
    """The status to cache and its version, or None when nothing changed (no new version)."""
    status = dict(new)
    update_last_transition_times(cached, status, now)
    old_start = (cached or {}).get("startTime")
    status["startTime"] = old_start or status.get("startTime") or now
    if cached is not None and not force and is_pod_status_by_kubelet_equal(cached, status):
        return None
    return status, version + 1
