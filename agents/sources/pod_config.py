"""The kubelet's pod config merge (podStorage, Incremental mode) and static-pod defaults, pure.

Upstream pkg/kubelet/config/config.go (podStorage.merge, checkAndUpdatePod, seenSources) and common.go
(applyDefaults); docs/kubelet-rules.md#pod-config-sources states the rules. Pods are plain JSON dicts
(docs/architecture.md#plain-data). Nothing here does I/O or reads a clock: callers pass `now`
(RFC3339) so a replay of the same inputs produces the same outputs.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import orjson

from podledger.types import CONFIG_MIRROR_ANNOTATION, CONFIG_SOURCE_ANNOTATION, JSONDict, PodOp

SET = "SET"  # a source's whole listing (kubetypes.SET); merged, never published as such
INPUT_OPS = frozenset({SET, PodOp.ADD, PodOp.UPDATE, PodOp.DELETE, PodOp.REMOVE})

FILE_SOURCE = "file"
HTTP_SOURCE = "http"
API_SOURCE = "api"
ALL_SOURCE = "*"

SEEN_ANNOTATION = "kubernetes.io/config.seen"
HASH_ANNOTATION = "kubernetes.io/config.hash"
# config.go's local annotations: set by the kubelet itself, so a source sending them differently is
# not a change.
LOCAL_ANNOTATIONS = (CONFIG_SOURCE_ANNOTATION, CONFIG_MIRROR_ANNOTATION, SEEN_ANNOTATION)

# Toleration given to file pods so node-problem taints never evict them (applyDefaults).
STATIC_POD_TOLERATION: JSONDict = {"operator": "Exists", "effect": "NoExecute"}


@dataclass(frozen=True)
class MergedUpdate:
    """One merged update as the kubelet's sync loop receives it (in memory; on Kafka: models.PodUpdate)."""

    op: str
    source: str
    pods: tuple[JSONDict, ...] = ()


def _copy(obj: Any) -> Any:
    # orjson round trip: much faster than copy.deepcopy for JSON-shaped data.
    return orjson.loads(orjson.dumps(obj))


def _meta(pod: JSONDict) -> JSONDict:
    meta = pod.get("metadata")
    if meta is None:
        meta = pod["metadata"] = {}
    return meta


def _uid(pod: JSONDict) -> str:
    return (pod.get("metadata") or {}).get("uid") or ""


def pod_full_name(pod: JSONDict) -> str:
    """The kubelet's `name_namespace` key, unique per node."""
    meta = pod.get("metadata") or {}
    return f"{meta.get('name', '')}_{meta.get('namespace', '')}"


def is_annotation_map_equal(existing: JSONDict | None, candidate: JSONDict | None) -> bool:
    """Equal ignoring local annotations; a missing map counts as empty."""
    existing = existing or {}
    candidate = candidate or {}
    for key, value in candidate.items():
        if key not in LOCAL_ANNOTATIONS and (key not in existing or existing[key] != value):
            return False
    return all(key in LOCAL_ANNOTATIONS or key in candidate for key in existing)


def pods_differ_semantically(existing: JSONDict, ref: JSONDict) -> bool:
    """podsDifferSemantically: spec, labels, deletion fields or non-local annotations differ.

    Missing spec/labels count as empty: Go's omitempty makes nil and empty identical on the wire,
    so a JSON pod cannot carry the distinction reflect.DeepEqual would see.
    """
    em, rm = existing.get("metadata") or {}, ref.get("metadata") or {}
    return not (
        (existing.get("spec") or {}) == (ref.get("spec") or {})
        and (em.get("labels") or {}) == (rm.get("labels") or {})
        and em.get("deletionTimestamp") == rm.get("deletionTimestamp")
        and em.get("deletionGracePeriodSeconds") == rm.get("deletionGracePeriodSeconds")
        and is_annotation_map_equal(em.get("annotations"), rm.get("annotations"))
    )


def _set_or_drop(target: JSONDict, key: str, value: Any) -> None:
    # Go assigns a nil field; for a JSON dict that means the key disappears.
    if value is None:
        target.pop(key, None)
    else:
        target[key] = value


def check_and_update_pod(existing: JSONDict, ref: JSONDict) -> str | None:
    """Fold `ref` into the stored `existing` in place; return UPDATE, DELETE, RECONCILE or None.

    Only the fields the kubelet compares are taken from ref; the rest of existing's metadata
    (resourceVersion and the like) stays, as upstream does.
    """
    if not pods_differ_semantically(existing, ref):
        # Status is checked only when nothing else changed: an update already carries it.
        if (existing.get("status") or {}) != (ref.get("status") or {}):
            _set_or_drop(existing, "status", ref.get("status"))
            return PodOp.RECONCILE
        return None

    em, rm = _meta(existing), _meta(ref)
    existing["spec"] = ref.get("spec") or {}
    _set_or_drop(existing, "status", ref.get("status"))
    for key in ("labels", "deletionTimestamp", "deletionGracePeriodSeconds"):
        _set_or_drop(em, key, rm.get(key))
    # The source's annotations win, except the kubelet's own (first-seen time in particular).
    annotations = dict(rm.get("annotations") or {})
    old = em.get("annotations") or {}
    for key in LOCAL_ANNOTATIONS:
        if key in old:
            annotations[key] = old[key]
    em["annotations"] = annotations
    return PodOp.DELETE if rm.get("deletionTimestamp") else PodOp.UPDATE


class PodStorage:
    """podStorage in Incremental mode: `pods[source][uid]` plus the sources that sent a SET.

    `rejected` holds the pods the last merge dropped as duplicate name_namespace, for the caller
    to log or record as a FailedValidation event.
    """

    def __init__(self) -> None:
        self.pods: dict[str, dict[str, JSONDict]] = {}
        self.sources_seen: set[str] = set()
        self.rejected: tuple[JSONDict, ...] = ()

    def merge(self, source: str, op: str, pods: list[JSONDict], now: str) -> list[MergedUpdate]:
        """Apply one source update; return the updates to emit, in podStorage.merge's order.

        Raises ValueError for an op outside SET/ADD/UPDATE/DELETE/REMOVE before touching state,
        so the caller can dead-letter it (upstream logs and drops it).
        """
        if op not in INPUT_OPS:
            raise ValueError(f"unsupported pod update op {op!r}")
        self.rejected = ()
        first_set = op == SET and source not in self.sources_seen
        old = self.pods.get(source, {})
        # Work on copies: the caller's dicts are never mutated nor aliased by the store.
        incoming = [_copy(p) for p in pods]
        out: dict[str, list[JSONDict]] = {op: [] for op in PodOp}

        if op == PodOp.REMOVE:
            current = old
            for pod in incoming:
                existing = current.pop(_uid(pod), None)
                if existing is not None:
                    out[PodOp.REMOVE].append(existing)
        else:
            # SET rebuilds the map, so anything it omits falls out as a removal below.
            current = {} if op == SET else old
            for ref in self._filter_duplicates(incoming):
                # Annotated before comparing, so the source never reads as a change.
                annotations = _meta(ref).get("annotations") or {}
                annotations[CONFIG_SOURCE_ANNOTATION] = source
                ref["metadata"]["annotations"] = annotations
                uid = _uid(ref)
                existing = old.get(uid)
                if existing is None:
                    annotations[SEEN_ANNOTATION] = now
                    current[uid] = ref
                    out[PodOp.ADD].append(ref)
                    continue
                current[uid] = existing
                result = check_and_update_pod(existing, ref)
                if result is not None:
                    out[result].append(existing)
            if op == SET:
                self.sources_seen.add(source)
                out[PodOp.REMOVE].extend(pod for uid, pod in old.items() if uid not in current)
        self.pods[source] = current

        updates: list[MergedUpdate] = []

        def emit(kind: str) -> None:
            if out[kind]:
                updates.append(MergedUpdate(kind, source, tuple(_copy(p) for p in out[kind])))

        emit(PodOp.REMOVE)
        emit(PodOp.ADD)
        emit(PodOp.UPDATE)
        emit(PodOp.DELETE)
        if first_set and not (out[PodOp.ADD] or out[PodOp.UPDATE] or out[PodOp.DELETE]):
            # The sync loop learns a source is ready from seeing any update from it.
            updates.append(MergedUpdate(PodOp.ADD, source, ()))
        emit(PodOp.RECONCILE)
        return updates

    def _filter_duplicates(self, pods: list[JSONDict]) -> list[JSONDict]:
        # Each source validated its pods alone; only a name clash within one update is caught here.
        seen: set[str] = set()
        kept: list[JSONDict] = []
        dropped: list[JSONDict] = []
        for pod in pods:
            name = pod_full_name(pod)
            if name in seen:
                dropped.append(pod)
                continue
            seen.add(name)
            kept.append(pod)
        self.rejected = tuple(dropped)
        return kept

    def sync(self) -> MergedUpdate:
        """`Sync()`: every stored pod as SET from the all-sources marker."""
        return MergedUpdate(
            SET, ALL_SOURCE, tuple(_copy(p) for by_uid in self.pods.values() for p in by_uid.values())
        )

    def sources_ready(self, expected: set[str]) -> bool:
        """seenSources (AllReady): every expected source has sent at least one SET.

        The other half (the sync loop consumed an update from each source) is the caller's, and
        follows from this one when merge() output is consumed: a first SET always emits something.
        """
        return expected <= self.sources_seen


def _toleration_key(tol: JSONDict) -> tuple[str, str, str, str]:
    return (tol.get("key") or "", tol.get("operator") or "", tol.get("value") or "", tol.get("effect") or "")


def apply_static_defaults(pod: JSONDict, node: str, *, source: str, path_or_url: str) -> JSONDict:
    """applyDefaults for a file or http pod; returns a new dict (validation, its last step, is separate).

    The UID is md5 over a deterministic hash of the pod followed by "host:<node>file:<path>"
    (http: "url:<url>" alone, as upstream). Our pod hash is orjson with sorted keys, not Go's
    DeepHashObject, so UIDs differ from a real kubelet's byte for byte, but keep its properties:
    stable for an unchanged manifest, and different once the manifest is edited (REMOVE + ADD).
    """
    if source not in (FILE_SOURCE, HTTP_SOURCE):
        raise ValueError(f"static defaults apply to file and http pods, not {source!r}")
    out: JSONDict = _copy(pod)
    meta = _meta(out)
    if not meta.get("uid"):
        hasher = hashlib.md5(orjson.dumps(pod, option=orjson.OPT_SORT_KEYS))
        suffix = f"host:{node}file:{path_or_url}" if source == FILE_SOURCE else f"url:{path_or_url}"
        hasher.update(suffix.encode())
        meta["uid"] = hasher.hexdigest()
    meta["name"] = f"{meta.get('name') or ''}-{node.lower()}"
    if not meta.get("namespace"):
        meta["namespace"] = "default"
    spec = out.get("spec")
    if spec is None:
        spec = out["spec"] = {}
    spec["nodeName"] = node
    annotations = meta.get("annotations")
    if annotations is None:
        annotations = meta["annotations"] = {}
    annotations[HASH_ANNOTATION] = meta["uid"]
    if source == FILE_SOURCE:
        # Add-or-update: one with the same key/operator/value/effect is replaced where it stands.
        wanted = _toleration_key(STATIC_POD_TOLERATION)
        tolerations = list(spec.get("tolerations") or [])
        matched = [i for i, t in enumerate(tolerations) if _toleration_key(t) == wanted]
        for i in matched:
            tolerations[i] = dict(STATIC_POD_TOLERATION)
        if not matched:
            tolerations.append(dict(STATIC_POD_TOLERATION))
        spec["tolerations"] = tolerations
    status = out.get("status")
    if status is None:
        status = out["status"] = {}
    status["phase"] = "Pending"
    return out
