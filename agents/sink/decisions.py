"""Pure decisions of the status manager's API side (status_manager.go syncBatch and syncPod) over
plain dicts; docs/kubelet-rules.md#sink-and-api-sync.

The kubelet's syncPod reads the pod from the apiserver, merges its cached status into what the
API holds (`merge_pod_status`), and sends the strategic two-way merge patch between the two
(`status_patch`, what pkg/util/pod PatchPodStatus builds), or nothing when that patch is only
the UID precondition. Once the pod's API phase is terminal and the pod worker is finished, it
deletes the pod (`can_be_deleted`). Every 10s it also rewrites pods whose API status drifted
from the cache (`needs_reconcile`). `sync_decision` strings these together for one pod.

Everything here is Kubernetes API JSON (camelCase dicts). No I/O and no clock: the caller
passes `now` (RFC 3339) where upstream reads the time. Inputs are never mutated.

Static pods (docs/kubelet-rules.md#mirror-pods) are the caller's business: their status is written
through the mirror pod (pass the mirror's UID and API copy), a static pod without a mirror is not
synced at all, and mirror pods are never deleted here (`can_be_deleted` refuses them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from podledger.streams.status import (
    KUBELET_OWNED_CONDITIONS,
    POD_COMPLETED,
    POD_FAILED,
    SHARED_CONDITIONS,
    condition,
    json_copy,
    replace_or_append_condition,
)
from podledger.streams.status_manager import (
    _semantic as semantic_form,
)
from podledger.streams.status_manager import (
    is_pod_status_by_kubelet_equal,
    normalize_status,
    update_last_transition_times,
)
from podledger.types import CONFIG_MIRROR_ANNOTATION, TERMINAL_PHASES, JSONDict

DISRUPTION_TARGET = "DisruptionTarget"

# PodStatus lists with patchStrategy "merge": field -> (patchMergeKey, also retainKeys).
# Every other list of the status (containerStatuses, initContainerStatuses,
# ephemeralContainerStatuses, ...) has no strategy and is replaced whole.
POD_STATUS_MERGE_LISTS: dict[str, tuple[str, bool]] = {
    "conditions": ("type", False),
    "podIPs": ("ip", False),
    "hostIPs": ("ip", False),
    "resourceClaimStatuses": ("name", True),
}

_SET_ELEMENT_ORDER = "$setElementOrder/"
_RETAIN_KEYS = "$retainKeys"
_PATCH = "$patch"


# --------------------------------------------------------------------------- mergePodStatus (from syncPod)


def _is_terminal(phase: Any) -> bool:
    return phase in TERMINAL_PHASES


def _condition_true(conditions: list[JSONDict], type_: str) -> bool:
    """The first condition of that type exists and is True (podutil.Is*ConditionTrue)."""
    found = next((c for c in conditions if c.get("type") == type_), None)
    return found is not None and found.get("status") == "True"


def merge_pod_status(
    api_status: JSONDict, new_status: JSONDict, could_have_running_containers: bool, *, now: str
) -> JSONDict:
    """mergePodStatus: the status syncPod writes, from the API's status and the cached one.

    - Conditions: the API's conditions the kubelet does not own (DisruptionTarget, readiness
      gates, other controllers'), in API order, then the cached kubelet-owned ones.
    - The cached DisruptionTarget replaces the API's (or is appended) only when the phase moves
      from non-terminal (API) to terminal (cache) and no container can be running; its
      lastTransitionTime is recomputed against the API's (same status keeps it, else `now`).
    - resourceClaimStatuses are the API's: the kubelet neither owns nor changes them.
    - Moving to a terminal phase while containers may still run keeps the API's phase, reason
      and message (the transition waits for the pod worker).
    - A terminal result whose Ready or ContainersReady is True gets both set to False with
      reason PodFailed (Failed) or PodCompleted (Succeeded), ContainersReady first, each
      replaced in place or appended (podutil.UpdatePodCondition).
    """
    api = json_copy(api_status or {})
    merged = json_copy(new_status or {})
    api_conditions: list[JSONDict] = api.get("conditions") or []
    new_conditions: list[JSONDict] = merged.get("conditions") or []

    conditions = [c for c in api_conditions if c.get("type") not in KUBELET_OWNED_CONDITIONS]
    to_terminal = not _is_terminal(api.get("phase")) and _is_terminal(merged.get("phase"))
    for cond in new_conditions:
        kind = cond.get("type")
        if kind in KUBELET_OWNED_CONDITIONS:
            conditions.append(cond)
        elif (
            kind in SHARED_CONDITIONS
            and kind == DISRUPTION_TARGET
            and to_terminal
            and not could_have_running_containers
        ):
            # Sent only together with the terminal phase, so no patch adds it while the
            # phase transition is still held back. Its time may be stale by now: recompute.
            update_last_transition_times(api, {"conditions": [cond]}, now)
            replace_or_append_condition(conditions, cond)
        # Anything else in the cache is not the kubelet's to write.
    if conditions:
        merged["conditions"] = conditions
    else:
        merged.pop("conditions", None)

    if api.get("resourceClaimStatuses") is not None:
        merged["resourceClaimStatuses"] = api["resourceClaimStatuses"]
    else:
        merged.pop("resourceClaimStatuses", None)

    if to_terminal and could_have_running_containers:
        for key in ("phase", "reason", "message"):
            if api.get(key) is not None:
                merged[key] = api[key]
            else:
                merged.pop(key, None)

    if _is_terminal(merged.get("phase")) and (
        _condition_true(conditions, "Ready") or _condition_true(conditions, "ContainersReady")
    ):
        reason = POD_FAILED if merged["phase"] == "Failed" else POD_COMPLETED
        for kind in ("ContainersReady", "Ready"):
            forced = condition(kind, "False", reason)
            update_last_transition_times({"conditions": conditions}, {"conditions": [forced]}, now)
            replace_or_append_condition(conditions, forced)
        merged["conditions"] = conditions
    return merged


# --------------------------------------------------------------------------- strategic two-way merge patch


def _absent(value: Any) -> bool:
    """Absent as Go's typed JSON sees it: an omitted field, null, "" and [] marshal alike (the
    same notion of equality as status_manager's canonical statuses)."""
    return value is None or value == "" or value == []


def _same(left: Any, right: Any) -> bool:
    return left == right or semantic_form(left) == semantic_form(right)


def _diff_maps(
    original: JSONDict,
    modified: JSONDict,
    merge_lists: Mapping[str, tuple[str, bool]],
    *,
    retain_keys: bool = False,
) -> JSONDict:
    """diffMaps: what turns `original` into `modified`. Added or changed values are taken from
    `modified` as they are; a field missing from `modified` becomes null."""
    patch: JSONDict = {}
    for key, new in modified.items():
        old = original.get(key)
        if _absent(new):
            if not _absent(old):
                patch[key] = None
            continue
        if _absent(old):
            patch[key] = new
        elif isinstance(old, dict) and isinstance(new, dict):
            nested = _diff_maps(old, new, {})
            if nested:
                patch[key] = nested
        elif isinstance(old, list) and isinstance(new, list) and key in merge_lists:
            merge_key, retain = merge_lists[key]
            patch.update(_diff_merge_list(key, old, new, merge_key, retain))
        elif not _same(old, new):
            patch[key] = new  # scalars, atomic lists, and values whose type changed
    for key, old in original.items():
        if key not in modified and not _absent(old):
            patch[key] = None
    if retain_keys and patch:
        # retainKeys strategy: a changed element names every field it keeps.
        patch[_RETAIN_KEYS] = sorted(k for k, v in modified.items() if v is not None)
    return patch


def _merge_value(element: Any, merge_key: str, field: str) -> Any:
    if not isinstance(element, dict) or merge_key not in element:
        raise ValueError(f"{field}: element without merge key {merge_key!r}: {element!r}")
    return element[merge_key]


def _diff_merge_list(
    field: str, original: list[Any], modified: list[Any], merge_key: str, retain_keys: bool
) -> JSONDict:
    """A list with patchStrategy merge: changed or new elements (changed ones carry only their
    changes plus the merge key), then deletion directives, and the new order of all elements."""
    for element in (*original, *modified):
        _merge_value(element, merge_key, field)

    def sort_key(element: JSONDict) -> str:
        return str(element[merge_key])

    old_sorted = sorted(original, key=sort_key)
    new_sorted = sorted(modified, key=sort_key)
    changes: list[JSONDict] = []
    deletions: list[JSONDict] = []
    i = j = 0
    while i < len(old_sorted) or j < len(new_sorted):
        old_key = sort_key(old_sorted[i]) if i < len(old_sorted) else None
        new_key = sort_key(new_sorted[j]) if j < len(new_sorted) else None
        if old_key is not None and old_key == new_key:
            element_patch = _diff_maps(old_sorted[i], new_sorted[j], {}, retain_keys=retain_keys)
            if element_patch:
                element_patch[merge_key] = new_sorted[j][merge_key]
                changes.append(element_patch)
            i += 1
            j += 1
        elif new_key is not None and (old_key is None or old_key > new_key):
            changes.append(new_sorted[j])  # a new element goes in whole
            j += 1
        else:
            deletions.append({merge_key: old_sorted[i][merge_key], _PATCH: "delete"})
            i += 1

    order = [element[merge_key] for element in modified]
    changes.sort(key=lambda element: order.index(element[merge_key]))
    entries = changes + deletions
    same_order = len(original) == len(modified) and all(
        a[merge_key] == b[merge_key] for a, b in zip(original, modified, strict=True)
    )
    patch: JSONDict = {}
    if entries:
        patch[field] = entries
    if (entries or not same_order) and modified:
        patch[_SET_ELEMENT_ORDER + field] = [{merge_key: value} for value in order]
    return patch


def status_patch(uid: str, api_status: JSONDict, merged: JSONDict) -> JSONDict | None:
    """PatchPodStatus's patch: the strategic two-way merge patch from {"status": api_status} to
    {"metadata": {"uid": uid}, "status": merged} for the Pod type, or None when it would carry
    nothing but the UID precondition (no call needed).

    Nested maps are diffed field by field (a field missing from `merged` becomes null).
    conditions (by type), podIPs and hostIPs (by ip) and resourceClaimStatuses (by name, with
    $retainKeys) are merge lists; every other list is atomic and sent whole when it differs.
    null, "" and [] count as absent on both sides, as Go's omitempty marshalling makes them.
    """
    patch: JSONDict = {"metadata": {"uid": uid}}
    status = _diff_maps(api_status or {}, merged or {}, POD_STATUS_MERGE_LISTS)
    if not status:
        return None
    patch["status"] = status
    return json_copy(patch)  # values come from `merged`: do not hand out shared references


_GO_HTML_ESCAPES = (
    (b"<", b"\\u003c"),
    (b">", b"\\u003e"),
    (b"&", b"\\u0026"),
    ("\u2028".encode(), b"\\u2028"),
    ("\u2029".encode(), b"\\u2029"),
)


def patch_bytes(patch: JSONDict) -> bytes:
    """The patch as Go's json.Marshal writes it: compact, map keys sorted, and <, >, &, U+2028
    and U+2029 escaped (they can only occur inside strings, so replacing bytes is safe)."""
    raw = orjson.dumps(patch, option=orjson.OPT_SORT_KEYS)
    for plain, escaped in _GO_HTML_ESCAPES:
        raw = raw.replace(plain, escaped)
    return raw


# --------------------------------------------------------------------------- needsReconcile (from syncBatch)


def needs_reconcile(api_status: JSONDict, cached_status: JSONDict, pod: JSONDict) -> bool:
    """Whether the API copy lost what the kubelet wrote: its status, normalized like the cache
    (times cut to seconds, messages to the byte budget, container statuses sorted), is not
    equal to the cached one by isPodStatusByKubeletEqual. Only kubelet-owned and shared
    conditions of the cache count; other controllers' conditions never trigger a rewrite.

    `pod` is the API pod whose spec drives normalization. The caller handles the cases
    upstream handles before comparing: an unknown pod, or a static pod without a mirror, needs
    no reconcile; for a static pod pass the mirror pod's status and the mirror pod. The cached
    status is normalized too, which is a no-op for one set_pod_status produced.
    """
    api = normalize_status(pod, api_status or {})
    cached = normalize_status(pod, cached_status or {})
    return not is_pod_status_by_kubelet_equal(api, cached)


# --------------------------------------------------------------------------- canBeDeleted (end of syncPod)


def is_mirror_pod(pod: JSONDict) -> bool:
    """kubetypes.IsMirrorPod: the pod carries the config.mirror annotation (any value)."""
    return CONFIG_MIRROR_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {})


def can_be_deleted(api_pod: JSONDict, finished: bool, is_mirror: bool) -> bool:
    """canBeDeleted: the API pod is being deleted, is not a mirror pod (by `is_mirror` or its
    annotation), its API phase is terminal, and the pod worker has finished with it."""
    if not (api_pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    if is_mirror or is_mirror_pod(api_pod):
        return False
    if not _is_terminal((api_pod.get("status") or {}).get("phase")):
        return False  # the deletion waits for the terminal phase to reach the API
    return finished


# --------------------------------------------------------------------------- NodeRestriction


def binding_refusal(api_pod: JSONDict, node: str, static: bool) -> str | None:
    """Why the sink may not write a status version of node `node` to `api_pod`, or None.

    The apiserver's NodeRestriction lets a kubelet touch only pods bound to its own node, and
    mirror pods only of its own static pods; the sink writes for every node, so it applies the
    same rule itself: the API pod's spec.nodeName must be the version's node, a mirror pod takes
    only a static pod's status, and a static pod's status goes only to a mirror pod."""
    bound = (api_pod.get("spec") or {}).get("nodeName") or ""
    if bound != node:
        return f"the API pod is bound to {bound or 'no node'!r}, the status comes from node {node!r}"
    if is_mirror_pod(api_pod) != static:
        if static:
            return "a static pod's status goes only to its mirror pod"
        return "a mirror pod takes only its static pod's status"
    return None


# --------------------------------------------------------------------------- syncPod

SyncAction = Literal["skip-notfound", "drop-recreated", "patch", "unchanged"]


@dataclass(frozen=True, slots=True)
class SyncDecision:
    """What syncPod does with one cached status after its GET.

    skip-notfound   the pod is gone: no call, no version recorded (a later pass retries).
    drop-recreated  the API pod has another UID: forget the cached status, no PATCH.
    patch           PATCH pods/status with `patch` (patch_bytes for the wire).
    unchanged       the patch would be only the UID: no call.
    For patch and unchanged, record `version` for the API UID once the PATCH succeeded (at once
    when unchanged), then check can_be_deleted on the pod the apiserver returned (on the GET
    result when unchanged). `advances` says whether that moves the recorded version forward
    (False: a reconcile rewrite of a version already written).
    """

    action: SyncAction
    patch: JSONDict | None = None
    merged: JSONDict | None = None
    version: int | None = None
    advances: bool = False


def sync_decision(
    uid: str,
    api_pod: JSONDict | None,
    versioned: Mapping[str, Any],
    last_version: int | None,
    *,
    now: str,
) -> SyncDecision:
    """syncPod's decision for the status cached for `uid` (the UID the status is written
    through: the pod's own, or for a static pod its mirror's), given the GET result (None:
    NotFound), the versioned status ({"status", "version", "could_have_running_containers"},
    the pod-status record's fields) and the version last written for that UID (None: none).

    Other GET errors are the caller's: like NotFound they record nothing and a later pass retries.
    """
    if api_pod is None:
        return SyncDecision("skip-notfound")
    api_uid = (api_pod.get("metadata") or {}).get("uid") or ""
    if api_uid and api_uid != uid:
        return SyncDecision("drop-recreated")
    api_status = api_pod.get("status") or {}
    merged = merge_pod_status(
        api_status, versioned["status"], bool(versioned["could_have_running_containers"]), now=now
    )
    version = int(versioned["version"])
    advances = last_version is None or last_version < version
    patch = status_patch(uid, api_status, merged)
    if patch is None:
        return SyncDecision("unchanged", None, merged, version, advances)
    return SyncDecision("patch", patch, merged, version, advances)
