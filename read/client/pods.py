"""Pod changes as a consumer sees them, and the Kubernetes Pod object of a versioned status.

pod-status carries the status alone; the Pod's metadata (labels, annotations, owners) and spec
come from the latest desired pod of the same UID on pod-updates. The object is the join of the
two at the moment the status version is read (docs/consuming.md, "The Pod object").

Pure: the readers (read/client/reader.py, read/kubeapi/) pass records in, changes come out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from podledger.read.client.select import PodFilter
from podledger.schemas import models
from podledger.types import JSONDict

STATUS_VERSION_ANNOTATION = "podledger.io/status-version"
# Server-side bookkeeping of the apiserver that means nothing for an object served from the ledger.
DROPPED_METADATA = frozenset({"managedFields", "resourceVersion", "selfLink"})


class StatusVersion(Protocol):
    """What a Pod object takes from a status version: a VersionedPodStatus, or the few fields
    `podledger serve` reads of one (read/kubeapi/records.py)."""

    @property
    def uid(self) -> str: ...
    @property
    def namespace(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def node(self) -> str: ...
    @property
    def version(self) -> int: ...
    @property
    def status(self) -> JSONDict: ...


def pod_object(vs: StatusVersion, desired: JSONDict | None, resource_version: str) -> JSONDict:
    """The Pod as the apiserver would serve it once the sink wrote this version: the desired pod's
    metadata and spec (when pod-updates has announced it) with the ledger's identity and status."""
    desired_meta = (desired or {}).get("metadata") or {}
    meta = {k: v for k, v in desired_meta.items() if k not in DROPPED_METADATA}
    meta["name"], meta["namespace"], meta["uid"] = vs.name, vs.namespace, vs.uid
    meta["resourceVersion"] = resource_version
    meta["annotations"] = {
        **(desired_meta.get("annotations") or {}),
        STATUS_VERSION_ANNOTATION: str(vs.version),
    }
    if not meta.get("creationTimestamp") and vs.status.get("startTime"):
        meta["creationTimestamp"] = vs.status["startTime"]
    spec = (desired or {}).get("spec") or {}
    if "nodeName" not in spec or "containers" not in spec:
        spec = {"nodeName": vs.node, "containers": [], **spec}
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta, "spec": spec, "status": vs.status}


class ChangeType(StrEnum):
    LISTED = "LISTED"  # a pod as it is at the list point (list-then-watch)
    SYNCED = "SYNCED"  # the list is complete: every LISTED came before; changes follow
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"


@dataclass(frozen=True, slots=True)
class PodChange:
    """One change of one pod, and the token to resume right after it.

    `status` is the new version (for DELETED: the last version this reader saw, None if it saw
    none); `desired` the desired pod from pod-updates, when known."""

    type: ChangeType
    uid: str
    token: str
    status: models.VersionedPodStatus | None = None
    desired: JSONDict | None = field(default=None, repr=False)

    @property
    def namespace(self) -> str:
        return "" if self.status is None else self.status.namespace

    @property
    def name(self) -> str:
        return "" if self.status is None else self.status.name

    @property
    def node(self) -> str:
        return "" if self.status is None else self.status.node

    def pod(self) -> JSONDict | None:
        """The Kubernetes Pod object (resourceVersion: this change's token)."""
        return None if self.status is None else pod_object(self.status, self.desired, self.token)


class Selection:
    """The pods one reader shows, and the change each new record makes to that view.

    Like a Kubernetes watch with a selector: a pod that stops matching is DELETED from the view,
    one that starts matching is ADDED. A reader resumed from a token does not know what the
    previous session showed: a first version is ADDED, a later one MODIFIED, and every removal is
    passed on (a DELETED for a pod the consumer never had is harmless)."""

    def __init__(self, pod_filter: PodFilter, *, resumed: bool = False) -> None:
        self.filter = pod_filter
        self.resumed = resumed
        self.shown: dict[str, models.VersionedPodStatus] = {}
        self._trivial = pod_filter == PodFilter(node=pod_filter.node)

    def _matches(self, vs: models.VersionedPodStatus, desired: JSONDict | None) -> bool:
        if self._trivial:
            return self.filter.node is None or vs.node == self.filter.node
        return self.filter.matches(pod_object(vs, desired, ""))

    def listed(
        self, uid: str, vs: models.VersionedPodStatus, desired: JSONDict | None, token: str
    ) -> PodChange | None:
        """A pod of the list; None when the filter leaves it out."""
        if not self._matches(vs, desired):
            return None
        self.shown[uid] = vs
        return PodChange(ChangeType.LISTED, uid, token, vs, desired)

    def changed(
        self, uid: str, vs: models.VersionedPodStatus | None, desired: JSONDict | None, token: str
    ) -> PodChange | None:
        """A new version (or a tombstone: `vs` None) of a pod; None when the view does not change."""
        before = self.shown.get(uid)
        if vs is None:
            if before is not None or self.resumed:
                self.shown.pop(uid, None)
                return PodChange(ChangeType.DELETED, uid, token, before, desired)
            return None
        if not self._matches(vs, desired):
            if before is None:
                return None
            del self.shown[uid]
            return PodChange(ChangeType.DELETED, uid, token, before, desired)
        self.shown[uid] = vs
        if before is not None or (self.resumed and vs.version > 1):
            return PodChange(ChangeType.MODIFIED, uid, token, vs, desired)
        return PodChange(ChangeType.ADDED, uid, token, vs, desired)
