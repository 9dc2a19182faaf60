"""The pods `podledger serve` answers from: the newest version of every pod of pod-status, joined
with its desired pod, and what each new record changes for a watch.

A resumed watch is answered from memory: every pod whose newest record is at or after the
client's offsets comes once, at its newest version (ADDED when its first record still on the
topic is after the offsets, else MODIFIED), and every pod removed after them comes as DELETED.
Intermediate versions are coalesced, as the compacted topic coalesces them. Removed pods are kept
(as `gone`) for the tombstone retention; forgetting one raises its partition's `floor`, below
which a resume is refused (410 Gone). Pure: records and times come in from the server.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from podledger.read.client.pods import pod_object
from podledger.read.client.select import PodFilter
from podledger.read.kubeapi.table import RowBasis, row_basis
from podledger.schemas import models
from podledger.types import JSONDict

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"


@dataclass(slots=True)
class Entry:
    """A pod that exists: its newest version and the Pod object served for it."""

    partition: int
    first_offset: int  # its oldest record still on the topic, as this store read it
    last_offset: int
    status: models.VersionedPodStatus
    obj: JSONDict
    basis: RowBasis | None = field(default=None, repr=False)  # the table row, made on first use

    def row_basis(self) -> RowBasis:
        if self.basis is None:
            self.basis = row_basis(self.obj)
        return self.basis


@dataclass(frozen=True, slots=True)
class Gone:
    """A pod removed (a tombstone on pod-status), remembered for resumed watches."""

    partition: int
    offset: int
    first_offset: int
    obj: JSONDict
    ts_ms: int


@dataclass(frozen=True, slots=True)
class StoreEvent:
    type: str
    obj: JSONDict
    old: JSONDict | None
    partition: int
    offset: int


def _with_version(obj: JSONDict, resource_version: str) -> JSONDict:
    return {**obj, "metadata": {**obj["metadata"], "resourceVersion": resource_version}}


class PodStore:
    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self.pods: dict[str, Entry] = {}
        self.names: dict[tuple[str, str], str] = {}
        self.gone: dict[str, Gone] = {}
        self.floor = [0] * partitions

    def apply(
        self,
        partition: int,
        offset: int,
        uid: str,
        status: models.VersionedPodStatus | None,
        desired: JSONDict | None,
        resource_version: str,
        ts_ms: int,
    ) -> StoreEvent | None:
        """One pod-status record; the event a watch of every pod sees (None: nothing changed)."""
        entry = self.pods.get(uid)
        if status is None:
            if entry is None:
                return None
            del self.pods[uid]
            key = (entry.status.namespace, entry.status.name)
            if self.names.get(key) == uid:
                del self.names[key]
            obj = _with_version(entry.obj, resource_version)
            self.gone[uid] = Gone(partition, offset, entry.first_offset, obj, ts_ms)
            return StoreEvent(DELETED, obj, entry.obj, partition, offset)
        obj = pod_object(status, desired, resource_version)
        self.gone.pop(uid, None)
        self.names[(status.namespace, status.name)] = uid
        if entry is None:
            self.pods[uid] = Entry(partition, offset, offset, status, obj)
            return StoreEvent(ADDED, obj, None, partition, offset)
        old = entry.obj
        entry.last_offset, entry.status, entry.obj, entry.basis = offset, status, obj, None
        return StoreEvent(MODIFIED, obj, old, partition, offset)

    def forget_gone(self, before_ms: int) -> None:
        """Drop removed pods whose tombstone is older than `before_ms`: resumes from before them
        are refused from now on."""
        for uid, gone in list(self.gone.items()):
            if gone.ts_ms < before_ms:
                del self.gone[uid]
                self.floor[gone.partition] = max(self.floor[gone.partition], gone.offset + 1)

    def refused_below(self, offsets: tuple[int, ...]) -> list[int]:
        """The partitions where `offsets` are below what this store can replay."""
        return [p for p, (o, f) in enumerate(zip(offsets, self.floor, strict=True)) if o < f]

    def since(self, offsets: tuple[int, ...]) -> list[StoreEvent]:
        """What a watch resumed at `offsets` has missed, one event per pod, in topic order."""
        out = []
        for entry in self.pods.values():
            start = offsets[entry.partition]
            if entry.last_offset >= start:
                kind = ADDED if entry.first_offset >= start else MODIFIED
                out.append(StoreEvent(kind, entry.obj, None, entry.partition, entry.last_offset))
        for gone in self.gone.values():
            start = offsets[gone.partition]
            if gone.offset >= start > gone.first_offset:
                out.append(StoreEvent(DELETED, gone.obj, None, gone.partition, gone.offset))
        out.sort(key=lambda e: (e.partition, e.offset))
        return out

    def select(self, pod_filter: PodFilter) -> list[Entry]:
        if pod_filter == PodFilter():
            return list(self.pods.values())
        return [e for e in self.pods.values() if pod_filter.matches(e.obj)]

    def get(self, namespace: str, name: str) -> Entry | None:
        uid = self.names.get((namespace, name))
        return None if uid is None else self.pods.get(uid)


def event_for(event: StoreEvent, pod_filter: PodFilter) -> tuple[str, JSONDict] | None:
    """The event a watch with `pod_filter` sees: a pod that starts matching is ADDED, one that
    stops matching DELETED (as the apiserver's watch cache does), others pass or not."""
    matches_now = pod_filter.matches(event.obj)
    if event.type == DELETED:
        return (DELETED, event.obj) if matches_now else None
    matched_before = event.old is not None and pod_filter.matches(event.old)
    if matches_now:
        if event.old is None:  # a new pod, or a replayed event (the store decided its type)
            return event.type, event.obj
        return (MODIFIED if matched_before else ADDED), event.obj
    if matched_before and event.old is not None:
        return DELETED, _with_version(event.old, event.obj["metadata"]["resourceVersion"])
    return None
