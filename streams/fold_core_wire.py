"""The wire format between the live fold worker and its native core (`podfold --serve`): requests
made of plain data, answers read back into what the Python fold would have made. The format is
written down in streams/foldcore/serve.go: little-endian, lengths u32, 0xFFFFFFFF for None."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from podledger.errors import UserError
from podledger.schemas.cloud_events import StatusFacts
from podledger.schemas.origin import Proof, proof_headers
from podledger.streams.batch import Batch
from podledger.streams.outputs import Coordinates, Output
from podledger.types import Topic

# The ingress topics as the core numbers them.
TOPIC_CODES: dict[str, int] = {
    Topic.POD_UPDATES: 0,
    Topic.PLEG: 1,
    Topic.PROBE_RESULTS: 2,
    Topic.POD_LIFECYCLE: 3,
}

_NONE = 0xFFFFFFFF
OK, GAVE_UP = 0, 3  # an answer's first byte
_JOURNAL, _VERSION, _TOMBSTONE, _PROVEN_JOURNAL = 0, 1, 2, 3

_U32 = struct.Struct("<I")
_INPUT_HEAD = struct.Struct("<BIqqI")  # topic code, partition, offset, ts_ms, value length
_OUTPUT_HEAD = struct.Struct("<BII")  # kind, partition, key length
_VERSION_FACTS = struct.Struct("<qqI")  # version, ts_ms, node length
_TWO_U32 = struct.Struct("<II")  # a changed record's partition and key length
_PARTITION_TIME = struct.Struct("<Iq")
_U64 = struct.Struct("<Q")

# An input as the core takes it: where it sits, its value, and its proven writer (with a keyring).
CoreInput = tuple[Coordinates, bytes | None, Proof | None]


@dataclass(frozen=True, slots=True)
class CoreGaveUp:
    """The core did not fold the batch: why, and the pods it forgot (to be loaded again)."""

    reason: str
    dropped: list[bytes]


def load_request(records: Iterable[tuple[bytes, bytes | None]]) -> tuple[bytes, int]:
    """The request that loads these pods' records (None: the pod has none), and how many."""
    parts: list[bytes] = []
    count = 0
    for key, value in records:
        parts += (_U32.pack(len(key)), key, _nbytes(value), value or b"")
        count += 1
    return b"L" + _U32.pack(count) + b"".join(parts), count


def batch_request(inputs: Sequence[CoreInput]) -> bytes:
    """The request that folds a batch: 'P' when its inputs carry proofs of origin (every one must),
    'B' when none does."""
    proven = bool(inputs) and inputs[0][2] is not None
    parts = [b"P" if proven else b"B", _U32.pack(len(inputs))]
    head, codes, u32, u64 = _INPUT_HEAD.pack, TOPIC_CODES, _U32.pack, _U64.pack
    for at, value, proof in inputs:
        size = _NONE if value is None else len(value)
        parts.append(head(codes[at.topic], at.partition, at.offset, at.ts_ms, size))
        if value is not None:
            parts.append(value)
        if proven:
            if proof is None:
                raise ValueError("a batch with proofs of origin has an input without one")
            node = proof.node.encode()
            parts += (u32(len(node)), node, u64(proof.seq))
    return b"".join(parts)


def _nbytes(value: bytes | None) -> bytes:
    return _U32.pack(_NONE if value is None else len(value))


def decode_gave_up(answer: bytes) -> CoreGaveUp:
    """A give-up answer: why, and the pods the core forgot."""
    size = _U32.unpack_from(answer, 1)[0]
    reason, pos = answer[5 : 5 + size].decode(errors="replace"), 5 + size
    dropped = []
    for _ in range(_U32.unpack_from(answer, pos)[0]):
        size = _U32.unpack_from(answer, pos + 4)[0]
        dropped.append(answer[pos + 8 : pos + 8 + size])
        pos += 4 + size
    return CoreGaveUp(reason, dropped)


def decode_batch(answer: bytes, clock: dict[int, int]) -> Batch:
    """A folded batch's answer as the Batch the Python fold would have made (its outputs carry
    their bytes; its changed records are fold-state bytes). A tight loop over the answer's fields,
    several outputs an event: the worker's time per event is what this is about."""
    batch = Batch(newest=dict(clock))
    journal, outputs, changed = batch.journal, batch.outputs, batch.changed
    u32, head, facts_of = _U32.unpack_from, _OUTPUT_HEAD.unpack_from, _VERSION_FACTS.unpack_from
    pos = 1
    (count,) = u32(answer, pos)
    pos += 4
    for _ in range(count):
        kind, partition, size = head(answer, pos)
        pos += 9
        uid = answer[pos : pos + size].decode()
        pos += size
        if kind == _TOMBSTONE:
            outputs.append((partition, Output(Topic.POD_STATUS, uid, None)))
            continue
        (size,) = u32(answer, pos)
        value = answer[pos + 4 : pos + 4 + size]
        pos += 4 + size
        if kind == _JOURNAL:
            journal.append((partition, Output(Topic.JOURNAL, uid, value, encoded=value)))
            continue
        if kind == _PROVEN_JOURNAL:
            (size,) = u32(answer, pos)
            node = answer[pos + 4 : pos + 4 + size].decode()
            pos += 4 + size
            proof = Proof(node, _U64.unpack_from(answer, pos)[0])
            pos += 8
            headers = proof_headers(proof)
            journal.append((partition, Output(Topic.JOURNAL, uid, value, headers, encoded=value)))
            continue
        if kind != _VERSION:
            raise UserError(
                f"the native fold core sent an output of kind {kind}, which this podledger does not know"
            )
        version, ts_ms, size = facts_of(answer, pos)
        pos += 20
        node = answer[pos : pos + size].decode()
        pos += size
        (size,) = u32(answer, pos)
        namespace = answer[pos + 4 : pos + 4 + size].decode()
        pos += 4 + size
        (size,) = u32(answer, pos)
        name = answer[pos + 4 : pos + 4 + size].decode()
        pos += 4 + size
        facts = StatusFacts(uid, version, node, ts_ms, namespace, name)
        outputs.append((partition, Output(Topic.POD_STATUS, uid, facts, encoded=value)))
        outputs.append((partition, Output(Topic.POD_STATUS_HISTORY, uid, facts, encoded=value)))
    (count,) = u32(answer, pos)
    pos += 4
    for _ in range(count):
        partition, size = _TWO_U32.unpack_from(answer, pos)
        key = answer[pos + 8 : pos + 8 + size]
        pos += 8 + size
        (size,) = u32(answer, pos)
        pos += 4
        if size == _NONE:
            changed[key] = (partition, None)
        else:
            changed[key] = (partition, answer[pos : pos + size])
            pos += size
    (count,) = u32(answer, pos)
    pos += 4
    newest = batch.newest
    for _ in range(count):
        partition, ts_ms = _PARTITION_TIME.unpack_from(answer, pos)
        pos += 12
        newest[partition] = max(newest.get(partition, ts_ms), ts_ms)
    return batch
