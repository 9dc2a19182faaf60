"""Mirror pods: how a node's static pods (file and http sources) show up in the apiserver
(docs/kubelet-rules.md#mirror-pods).

A mirror pod is a copy of the static pod bound to the node, annotated `kubernetes.io/config.mirror` with
the static pod's config hash and owned by the Node. The pod worker of a static pod makes sure its mirror
exists and is current on every pass (recreating one that is missing, being deleted or of another hash);
housekeeping deletes mirrors whose static pod is gone. The sink writes the static pod's status through
the mirror; nothing ever runs a mirror pod. The decisions are pure functions; `MirrorPods` does the calls.
"""

from __future__ import annotations

import asyncio
import logging

from podledger.agents.kube import Kube
from podledger.agents.kube_client import KubeError
from podledger.agents.sink.decisions import is_mirror_pod
from podledger.agents.sources.pod_config import HASH_ANNOTATION
from podledger.logs import pod_logger
from podledger.streams.status import json_copy
from podledger.types import CONFIG_MIRROR_ANNOTATION, JSONDict

__all__ = ["MirrorPods", "build_mirror_pod", "config_hash", "is_mirror_of", "mirror_action"]

log = logging.getLogger(__name__)


def config_hash(static_pod: JSONDict) -> str:
    """The static pod's config hash (its UID when no hash annotation was set)."""
    meta = static_pod.get("metadata") or {}
    return str((meta.get("annotations") or {}).get(HASH_ANNOTATION) or meta["uid"])


def is_mirror_of(api_pod: JSONDict | None, static_pod: JSONDict) -> bool:
    """The API pod is the current mirror of this static pod: a mirror carrying its hash."""
    if api_pod is None or not is_mirror_pod(api_pod):
        return False
    return api_pod["metadata"]["annotations"][CONFIG_MIRROR_ANNOTATION] == config_hash(static_pod)


def mirror_action(api_pod: JSONDict | None, static_pod: JSONDict) -> str:
    """What SyncPod does about the mirror: "keep", "create", or "replace" (delete, then create)."""
    if api_pod is None:
        return "create"
    if api_pod["metadata"].get("deletionTimestamp") or not is_mirror_of(api_pod, static_pod):
        return "replace"
    return "keep"


def build_mirror_pod(static_pod: JSONDict, node: JSONDict) -> JSONDict:
    """The mirror of a static pod: its metadata and spec, bound to and owned by the Node."""
    meta = static_pod.get("metadata") or {}
    annotations = dict(meta.get("annotations") or {})
    annotations[CONFIG_MIRROR_ANNOTATION] = config_hash(static_pod)
    mirror_meta: JSONDict = {
        "name": meta["name"],
        "namespace": meta.get("namespace") or "default",
        "annotations": annotations,
        "ownerReferences": [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "name": node["metadata"]["name"],
                "uid": node["metadata"]["uid"],
            }
        ],
    }
    if meta.get("labels"):
        mirror_meta["labels"] = dict(meta["labels"])
    spec = json_copy(static_pod.get("spec") or {})
    spec["nodeName"] = node["metadata"]["name"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": mirror_meta, "spec": spec}


def _identity(pod: JSONDict) -> tuple[str | None, str | None, str | None]:
    meta = pod.get("metadata") or {}
    return meta.get("namespace"), meta.get("name"), meta.get("uid")


class MirrorPods:
    """Creates, replaces and deletes the mirror pods of one node (the kubelet's mirror client)."""

    def __init__(self, kube: Kube, node_name: str) -> None:
        self.kube = kube
        self.node_name = node_name
        self.seen: dict[tuple[str, str], JSONDict] = {}  # mirrors on this node, as the API source sees them

    def observe(self, kind: str, pod: JSONDict) -> None:
        """A mirror pod event from the apiserver source."""
        meta = pod["metadata"]
        key = (meta.get("namespace") or "default", meta["name"])
        if kind == "DELETED":
            if (self.seen.get(key) or {}).get("metadata", {}).get("uid") == meta.get("uid"):
                self.seen.pop(key, None)
        else:
            self.seen[key] = pod

    async def ensure(self, static_pod: JSONDict) -> str:
        """Make the static pod's mirror current; returns the action taken. Skipped while the Node is
        missing or being deleted (as the kubelet's SyncPod does)."""
        return await asyncio.to_thread(self._ensure, static_pod)

    def _ensure(self, static_pod: JSONDict) -> str:
        meta = static_pod["metadata"]
        namespace = meta.get("namespace") or "default"
        try:
            api_pod: JSONDict | None = self.kube.get_pod(namespace, meta["name"])
        except KubeError as exc:
            if not exc.not_found:
                raise
            api_pod = None
        action = mirror_action(api_pod, static_pod)
        if action == "keep":
            return action
        node = self._current_node()
        if node is None:
            return "no-node"
        if action == "replace":
            assert api_pod is not None
            if not is_mirror_pod(api_pod):
                pod_logger(log, namespace, meta["name"], meta.get("uid")).warning(
                    "a pod of this name exists in the apiserver and is not its mirror pod"
                )
                return "conflict"
            self._delete(api_pod)
            if api_pod["metadata"].get("deletionTimestamp"):
                return "replace"  # created on a later pass, once the old one is gone
        try:
            self.kube.create_pod(build_mirror_pod(static_pod, node))
        except KubeError as exc:
            if not exc.conflict:
                raise
            return "conflict"  # the old one still exists; the next pass tries again
        pod_logger(log, namespace, meta["name"], meta.get("uid")).info("mirror pod created")
        return action

    def _current_node(self) -> JSONDict | None:
        """The Node as it is now (mirrors must be owned by its current UID); None while it is missing or
        being deleted, when no mirror is made (as in the kubelet's SyncPod)."""
        try:
            node = self.kube.get_node(self.node_name)
        except KubeError:
            return None
        return None if node["metadata"].get("deletionTimestamp") else node

    def _delete(self, api_pod: JSONDict) -> None:
        meta = api_pod["metadata"]
        try:
            self.kube.delete_pod(
                meta.get("namespace") or "default", meta["name"], grace_seconds=0, uid=meta["uid"]
            )
        except KubeError as exc:
            if not (exc.not_found or exc.conflict):
                raise

    async def delete_orphans(self, static_hashes: set[str]) -> list[str]:
        """Delete the mirrors whose static pod (by hash) this node no longer runs."""
        orphans = [
            pod
            for pod in list(self.seen.values())
            if pod["metadata"]["annotations"].get(CONFIG_MIRROR_ANNOTATION) not in static_hashes
            and not pod["metadata"].get("deletionTimestamp")
        ]
        for pod in orphans:
            try:
                await asyncio.to_thread(self._delete, pod)
            except KubeError as exc:
                pod_logger(log, *_identity(pod)).warning("could not delete orphaned mirror pod: %s", exc)
                continue
            pod_logger(log, *_identity(pod)).info("orphaned mirror pod deleted")
        return [pod["metadata"]["name"] for pod in orphans]
