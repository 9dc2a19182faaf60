"""The apiserver sink: the only writer of pod status to the kube-apiserver.

Walking-skeleton subset of the status manager's syncPod (spec R5.9): GET the pod, drop the
status when the API pod's UID differs (the pod was recreated), merge the kubelet-owned
conditions over the API's others, and PATCH pods/status with the UID as a precondition.
Version bookkeeping, coalescing, reconcile and deletions arrive with the sink issue.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from podledger.agents.kube import Kube, KubeError
from podledger.schemas.models import VersionedPodStatus
from podledger.streams.status import KUBELET_OWNED_CONDITIONS

log = logging.getLogger("podledger.sink")
JSONDict = dict[str, Any]


def merge_pod_status(api_status: JSONDict, cached: JSONDict) -> JSONDict:
    """Conditions the kubelet does not own stay as the API has them; the rest is ours."""
    others = [c for c in api_status.get("conditions") or [] if c.get("type") not in KUBELET_OWNED_CONDITIONS]
    owned = [c for c in cached.get("conditions") or [] if c.get("type") in KUBELET_OWNED_CONDITIONS]
    return {**cached, "conditions": others + owned}


def status_patch(uid: str, merged: JSONDict) -> JSONDict:
    """The strategic-merge patch body; metadata.uid makes the apiserver refuse a recreated pod."""
    return {"metadata": {"uid": uid}, "status": merged}


class Sink:
    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    async def write(self, vs: VersionedPodStatus) -> bool:
        """Write one versioned status; True when the apiserver now holds it."""
        return await asyncio.to_thread(self._sync_pod, vs)

    def _sync_pod(self, vs: VersionedPodStatus) -> bool:
        try:
            api_pod = self.kube.get_pod(vs.namespace, vs.name)
        except KubeError as exc:
            if not exc.not_found:
                log.warning("get pod %s/%s failed: %s", vs.namespace, vs.name, exc)
            return False
        api_uid = api_pod["metadata"]["uid"]
        if api_uid != (vs.mirror_uid or vs.uid):
            log.info(
                "pod %s/%s was recreated (uid %s, status for %s): dropped",
                vs.namespace,
                vs.name,
                api_uid,
                vs.uid,
            )
            return False
        merged = merge_pod_status(api_pod.get("status") or {}, vs.status)
        try:
            self.kube.patch_pod_status(vs.namespace, vs.name, status_patch(api_uid, merged))
        except KubeError as exc:
            log.warning("patch status of %s/%s v%d failed: %s", vs.namespace, vs.name, vs.version, exc)
            return False
        log.info("patched %s/%s to version %d", vs.namespace, vs.name, vs.version)
        return True
