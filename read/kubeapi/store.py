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

from dataclasses import dataclass

from podledger.read.client.select import PodFilter
from podledger.read.kubeapi.served import PodDoc, selected

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"


@dataclass(slots=True)
class Entry:
    """A pod that exists: its newest version, as served."""

    partition: int
    first_offset: int  # its oldest record still on the topic, as this store read it
    last_offset: int
    doc: PodDoc


@dataclass(frozen=True, slots=True)
class Gone:
    """A pod removed (a tombstone on pod-status), remembered for resumed watches."""

    partition: int
    offset: int
    first_offset: int
    doc: PodDoc  # its last version
    rv: str  # the resourceVersion of its tombstone
    ts_ms: int


@dataclass(frozen=True, slots=True)
class StoreEvent:
    """A change as every watch sees it: `doc` at resourceVersion `rv` (for DELETED, the pod's last
    version); `old` the version before, when the store had one (a watch with a selector sees a pod
    enter or leave by it)."""

    type: str
    doc: PodDoc
    rv: str
    old: PodDoc | None
    partition: int
    offset: int


class PodStore:
    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self.pods: dict[str, Entry] = {}
        self.names: dict[tuple[str, str], str] = {}
        self.gone: dict[str, Gone] = {}
        self.floor = [0] * partitions

    def apply(
        self, partition: int, offset: int, uid: str, doc: PodDoc | None, resource_version: str, ts_ms: int
    ) -> StoreEvent | None:
        """One pod-status record (`doc` None: a tombstone); the event a watch of every pod sees
        (None: nothing changed)."""
        entry = self.pods.get(uid)
        if doc is None:
            if entry is None:
                return None
            del self.pods[uid]
            key = (entry.doc.namespace, entry.doc.name)
            if self.names.get(key) == uid:
                del self.names[key]
            self.gone[uid] = Gone(partition, offset, entry.first_offset, entry.doc, resource_version, ts_ms)
            return StoreEvent(DELETED, entry.doc, resource_version, entry.doc, partition, offset)
        self.gone.pop(uid, None)
        self.names[(doc.namespace, doc.name)] = uid
        if entry is None:
            self.pods[uid] = Entry(partition, offset, offset, doc)
            return StoreEvent(ADDED, doc, doc.rv, None, partition, offset)
        old = entry.doc
        entry.last_offset, entry.doc = offset, doc
        return StoreEvent(MODIFIED, doc, doc.rv, old, partition, offset)

    def forget_gone(self, before_ms: int) -> None:
        """Drop removed pods whose tombstone is older than `before_ms`: resumes from before them
        are refused from now on. `gone` is in the order of removal, so the oldest come first (a
        tombstone with an earlier time behind a later one waits for it: forgetting late is safe)."""
        while self.gone:
            uid, gone = next(iter(self.gone.items()))
            if gone.ts_ms >= before_ms:
                return
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
                out.append(
                    StoreEvent(kind, entry.doc, entry.doc.rv, None, entry.partition, entry.last_offset)
                )
        for gone in self.gone.values():
            start = offsets[gone.partition]
            if gone.offset >= start > gone.first_offset:
                out.append(StoreEvent(DELETED, gone.doc, gone.rv, None, gone.partition, gone.offset))
        out.sort(key=lambda e: (e.partition, e.offset))
        return out

    def select(self, pod_filter: PodFilter) -> list[PodDoc]:
        """The pods that match, as they are now (a list: the store moves on while it is written)."""
        return selected((e.doc for e in self.pods.values()), pod_filter)

    def get(self, namespace: str, name: str) -> PodDoc | None:
        uid = self.names.get((namespace, name))
        entry = None if uid is None else self.pods.get(uid)
        return None if entry is None else entry.doc


def event_for(event: StoreEvent, pod_filter: PodFilter) -> tuple[str, PodDoc, str] | None:
    """The event a watch with `pod_filter` sees, as (type, pod, resourceVersion): a pod that starts
    matching is ADDED, one that stops matching DELETED (as the apiserver's watch cache does),
    others pass or not."""
    matches_now = pod_filter.matches(event.doc.view)
    if event.type == DELETED:
        return (DELETED, event.doc, event.rv) if matches_now else None
    matched_before = event.old is not None and pod_filter.matches(event.old.view)
    if matches_now:
        if event.old is None:  # a new pod, or a replayed event (the store decided its type)
            return event.type, event.doc, event.rv
        return (MODIFIED if matched_before else ADDED), event.doc, event.rv
    if matched_before and event.old is not None:
        return DELETED, event.old, event.rv
    return None
