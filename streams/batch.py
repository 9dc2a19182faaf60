"""A batch of fold steps against a record store: pure bookkeeping, no I/O.

The Faust agent (streams/app.py) feeds it a batch of input messages, or, after a crash, the
tail of the journal; it hands back what to publish and which records changed. Keeping this apart
from Faust lets the exactly-once protocol below be read, and tested, in one place.

The protocol, per batch:
1. fold every event; collect its outputs and the records that changed; `seal` (streams/seal.py)
   gives them their headers: CloudEvents attributes on versions, and on journal entries and
   history versions the link of their partition's hash chain (the head is read from the topic on
   restore);
2. publish the journal entries and wait for the broker's acknowledgement;
3. publish every other output (versions, tombstones, dead letters) and wait;
4. write the changed records, then a per-partition marker with the last journal offset and the
   newest input offset folded per topic, to the table's changelog (before Faust may commit the
   input offsets, which it does seconds later).

Hence a version exists only if its journal entry does, and a record in the changelog is never
ahead of the journal. After a crash the changelog restores records up to a marker; the journal
entries after that marker are re-applied in their journal order (the order the live fold really
used). Inputs Faust redelivers from its older commit (after a crash or any rebalance) are skipped
by the marker's input offsets, and past them by the offsets each record has applied: a removed
pod has no record left, and its redelivered input would otherwise start it again at version 1.
The live history is then the same, version for version, whatever moment the worker died.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from podledger.partitioner import partition_for_node
from podledger.record_batch import RecordBatch
from podledger.schemas import from_dict, models
from podledger.schemas.origin import Forged, Headers, Proof, claimed, verify
from podledger.streams.fold import (
    Coordinates,
    HoldLimits,
    Output,
    PodRecord,
    dead_letter,
    decode_input,
    expire_held,
    fold_event,
    held_since,
    unusable,
)
from podledger.types import Topic

# How a record holding events for an unannounced pod starts its `held` list as orjson writes it: no
# record without it can hold any, so only the few stored records with it are decoded to be sure.
HELD_MARK = b'"held":[['

MARKER_PREFIX = b"\x00journal:"  # table keys of the per-partition journal markers; no UID starts so


def marker_key(partition: int) -> bytes:
    return MARKER_PREFIX + str(partition).encode()


def is_marker(key: bytes) -> bool:
    return key.startswith(MARKER_PREFIX)


def advance_marker(
    marker: Mapping[str, Any],
    journal_offset: int | None,
    inputs: Mapping[str, int],
    reapplied: Mapping[str, Iterable[int]] | None = None,
) -> dict[str, Any]:
    """A partition's marker after a stored batch: the last journal offset whose batch's records
    are stored (unchanged for None), the newest input offset folded per topic, and the input
    offsets re-applied from the journal after a restart that lie above those.

    A restart re-applies exactly the journaled inputs of the lost batch, so exactly those are
    remembered one by one: advancing the newest input offset past them would also skip, when
    Faust redelivers the batch, the inputs it held for pods not yet announced, which the journal
    does not have (they would be lost). Re-applied offsets at or below the newest folded one are
    dropped: that offset covers them."""
    out = dict(marker)
    if journal_offset is not None:
        out["journal_offset"] = journal_offset
    folded = {str(t): int(o) for t, o in (marker.get("inputs") or {}).items()}
    for topic, offset in inputs.items():
        folded[str(topic)] = max(folded.get(str(topic), -1), offset)
    out["inputs"] = folded
    remembered: dict[str, set[int]] = {t: set(o) for t, o in (marker.get("reapplied") or {}).items()}
    for topic, offsets in (reapplied or {}).items():
        remembered.setdefault(str(topic), set()).update(offsets)
    kept = {t: sorted(o for o in offs if o > folded.get(t, -1)) for t, offs in remembered.items()}
    if any(kept.values()):
        out["reapplied"] = {t: offs for t, offs in sorted(kept.items()) if offs}
    else:
        out.pop("reapplied", None)
    return out


def is_redelivery(marker: Mapping[str, Any], topic: str, offset: int) -> bool:
    """Whether an input at `offset` of `topic` is already folded and stored, by the marker."""
    if offset <= int((marker.get("inputs") or {}).get(topic, -1)):
        return True
    return offset in ((marker.get("reapplied") or {}).get(topic) or ())


@dataclass
class Batch:
    """The result of folding one batch; `changed` maps table key -> (partition, record or None).
    A record the native fold core changed is its fold-state bytes (streams/fold_core_live.py);
    `stored_record` decodes either and `holds_events` reads either."""

    journal: list[tuple[int, Output]] = field(default_factory=list)
    outputs: list[tuple[int, Output]] = field(default_factory=list)
    changed: dict[bytes, tuple[int, PodRecord | bytes | None]] = field(default_factory=dict)
    newest: dict[int, int] = field(default_factory=dict)  # partition -> newest pod-updates event time
    # What the native core sealed itself (streams/foldcore/serve_sealed.go), published before
    # `journal` and `outputs`: its record batches (topic: the logical name), the chains' heads after
    # them, and how many journal entries and versions they hold.
    built: list[RecordBatch] = field(default_factory=list)
    heads: dict[tuple[str, int], bytes] = field(default_factory=dict)
    built_events: int = 0
    built_versions: int = 0


def placed(proof: Proof, at: Coordinates, partitions: int) -> Proof:
    """`proof` when its node writes to the partition the message sits on (of `partitions`; 0: not
    checked); raises Forged otherwise."""
    if partitions and partition_for_node(proof.node, partitions) != at.partition:
        raise Forged(f"node {proof.node!r} writes to partition {partition_for_node(proof.node, partitions)}")
    return proof


class BatchFold:
    """Folds events against `lookup` (the table) plus the records changed earlier in the batch."""

    def __init__(
        self,
        lookup: Callable[[bytes], PodRecord | None],
        limits: HoldLimits,
        max_bytes: int,
        clock: dict[int, int] | None = None,
        keyring: Mapping[str, bytes] | None = None,
        partitions: int = 0,
        encode_journal: bool = True,
    ) -> None:
        """`clock`: each partition's newest pod-updates event time before this batch. Held
        events expire by it (see fold.HoldLimits), not just by this batch's events.

        `keyring` (node -> status key) turns on the origin check: a message must prove its
        writer (schemas/origin.py), that writer must be the node the event names, and the
        message must sit on that node's partition (of `partitions`); anything else is `forged`.

        `encode_journal` False skips checking here that journal entries encode, for a driver whose
        every event comes decoded from JSON (such a value always encodes again); they are encoded
        when, and if, they are published."""
        self.lookup = lookup
        self.limits = limits
        self.max_bytes = max_bytes
        self.keyring = keyring
        self.partitions = partitions
        self.encode_journal = encode_journal
        self.batch = Batch(newest=dict(clock or {}))

    def record(self, key: bytes) -> PodRecord | None:
        changed = self.batch.changed.get(key)
        return stored_record(changed[1]) if changed is not None else self.lookup(key)

    def add_message(
        self, at: Coordinates, key: bytes | None, value: bytes | None, headers: Headers = ()
    ) -> None:
        """One input message: decoded, folded, or dead-lettered."""
        decoded = decode_input(at.topic, at, key, value, self.max_bytes)
        if isinstance(decoded, Output):
            self.batch.outputs.append((at.partition, decoded))
            return
        proof = None
        if self.keyring is not None:
            try:
                proof = self._prove(at, key, value, headers, decoded.node)
            except Forged as exc:
                self.batch.outputs.append((at.partition, dead_letter("forged", str(exc), at, key, value)))
                return
        self.add_event(at, decoded, journal=True, proof=proof)

    def _prove(
        self, at: Coordinates, key: bytes | None, value: bytes | None, headers: Headers, node: str
    ) -> Proof:
        assert self.keyring is not None
        proof = verify(self.keyring, at.topic, key, value, headers)
        if proof.node != node:
            raise Forged(f"written by node {proof.node!r} but speaks for node {node!r}")
        placed(proof, at, self.partitions)
        return proof

    def add_journal_entry(self, partition: int, entry: models.JournalEntry, headers: Headers = ()) -> None:
        """Re-apply a journal entry during recovery: its outputs, but not itself, are republished.

        The entry's origin was checked when it was first folded; its headers keep the claim."""
        at = Coordinates(entry.topic, entry.partition, entry.offset, entry.ts_ms)
        event = from_dict(entry.topic, entry.event)
        self.add_event(at, event, journal=False, partition=partition, proof=claimed(headers))

    def add_event(
        self,
        at: Coordinates,
        event: Any,
        *,
        journal: bool,
        partition: int | None = None,
        proof: Proof | None = None,
    ) -> None:
        partition = at.partition if partition is None else partition
        key = event.uid.encode()
        before = self.record(key)
        try:
            record, outputs = fold_event(before, at, event, self.limits, proof)
            for out in outputs:  # a status the wire cannot carry (an integer past 64 bits) is poison too
                if self.encode_journal or out.topic != Topic.JOURNAL:
                    out.wire_value()
        except Exception as exc:  # poison: parked with its coordinates, the batch goes on
            record, outputs = before, [unusable(at, event, exc)]
        if record is not before:
            self.batch.changed[key] = (partition, record)
        for out in outputs:
            if out.topic == Topic.JOURNAL:
                if journal:
                    self.batch.journal.append((partition, out))
            else:
                self.batch.outputs.append((partition, out))
        if at.topic == Topic.POD_UPDATES:  # held events expire by what pod-updates has shown
            self.batch.newest[partition] = max(self.batch.newest.get(partition, 0), at.ts_ms)

    def expire_held(self, waiting: Waiting) -> None:
        """Dead-letter held events that pod-updates of their partition has passed by too far.

        `waiting` maps the records known to hold events to (partition, stamp of the oldest held
        event); it is kept true here. The records this batch changed are read again, as they may
        have started or stopped holding; the others only once their oldest event may have expired,
        so a batch does not decode every waiting record again."""
        for key, (_, record) in self.batch.changed.items():
            note_waiting(waiting, key, record)
        newest, max_ms = self.batch.newest, self.limits.max_ms
        for key, (partition, oldest) in list(waiting.items()):
            now = newest.get(partition)
            if now is None or now - oldest <= max_ms:
                continue
            record, outputs = expire_held(self.record(key) or {}, now, self.limits)
            if outputs:
                self.batch.changed[key] = (partition, record)
                self.batch.outputs += [(partition, out) for out in outputs]
            note_waiting(waiting, key, record)


# Records holding events for pods not announced yet: key -> (partition, stamp of the oldest held).
Waiting = dict[bytes, tuple[int, int]]


def note_waiting(waiting: Waiting, key: bytes, record: PodRecord | bytes | None) -> None:
    """Keep `waiting` true for one record (or its stored bytes), as it is now."""
    since = held_since(_if_holding(record))
    if since is None:
        waiting.pop(key, None)
    else:
        waiting[key] = since


def stored_record(record: PodRecord | bytes | None) -> PodRecord | None:
    """A changed record as the Python fold reads it: the core's bytes decoded, a dict as it is."""
    return orjson.loads(record) if isinstance(record, bytes) else record


def holds_events(record: PodRecord | bytes | None) -> bool:
    """Whether a record (or its stored bytes) holds events for a pod not announced yet."""
    return bool((_if_holding(record) or {}).get("held"))


def _if_holding(record: PodRecord | bytes | None) -> PodRecord | None:
    """A record as it is, or its stored bytes decoded if they may hold events (HELD_MARK), else None."""
    if isinstance(record, bytes):
        return orjson.loads(record) if HELD_MARK in record else None
    return record
