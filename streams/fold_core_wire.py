"""The wire format between the live fold worker and its native core (`podfold --serve`): requests
made of plain data, answers read back into what the Python fold would have made, its outputs
sealed already as Kafka record batches. The format is written down in streams/foldcore/serve.go
and serve_sealed.go: little-endian, lengths u32, 0xFFFFFFFF for None."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from podledger.record_batch import RecordBatch
from podledger.schemas.origin import Proof
from podledger.streams.batch import Batch
from podledger.streams.outputs import Coordinates
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

_U32 = struct.Struct("<I")
_INPUT_HEAD = struct.Struct("<BIqqI")  # topic code, partition, offset, ts_ms, value length
_TWO_U32 = struct.Struct("<II")  # a changed record's partition and key length
_PARTITION_TIME = struct.Struct("<Iq")
_U64 = struct.Struct("<Q")

# The topics of a sealed answer's record batches, as the core numbers them; heads use the same.
SEALED_TOPICS: tuple[Topic, ...] = (Topic.JOURNAL, Topic.POD_STATUS, Topic.POD_STATUS_HISTORY)
_SEALED_CODES = {topic: code for code, topic in enumerate(SEALED_TOPICS)}
_BUILT_HEAD = struct.Struct("<BIIIII")  # topic, partition, records, their CRC, its shift, length
_HEAD = struct.Struct("<BI")  # a chain head's topic and partition (its 32 bytes follow)
HEAD_BYTES = 32

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


@dataclass(frozen=True, slots=True)
class SealedInputs:
    """A batch's inputs as the request that folds and seals it carries them (`sealed_inputs`):
    made before the heads of the chains they go on from are known (`sealed_request`)."""

    body: bytes
    proven: bool
    partitions: tuple[int, ...]  # those the inputs are on, in order


def sealed_inputs(inputs: Sequence[CoreInput]) -> SealedInputs:
    """The inputs part of a sealed request: whether they carry proofs of origin (every one must,
    or none), their count, then each input."""
    proven = bool(inputs) and inputs[0][2] is not None
    parts = [_U32.pack(len(inputs))]
    partitions: set[int] = set()
    head, codes, u32, u64 = _INPUT_HEAD.pack, TOPIC_CODES, _U32.pack, _U64.pack
    for at, value, proof in inputs:
        partitions.add(at.partition)
        size = _NONE if value is None else len(value)
        parts.append(head(codes[at.topic], at.partition, at.offset, at.ts_ms, size))
        if value is not None:
            parts.append(value)
        if proven:
            if proof is None:
                raise ValueError("a batch with proofs of origin has an input without one")
            node = proof.node.encode()
            parts += (u32(len(node)), node, u64(proof.seq))
    return SealedInputs(b"".join(parts), proven, tuple(sorted(partitions)))


def sealed_request(inputs: SealedInputs, heads: Mapping[tuple[str, int], bytes]) -> list[bytes]:
    """The request that folds a batch and seals its outputs ('S'), in parts to write in order:
    whether its inputs carry proofs, the heads of the chains of every partition its inputs are on
    (those `heads` holds), then the inputs."""
    given = [
        (topic, p, heads[(topic, p)])
        for p in inputs.partitions
        for topic in (Topic.JOURNAL, Topic.POD_STATUS_HISTORY)
        if (topic, p) in heads
    ]
    request = [b"S", b"\x01" if inputs.proven else b"\x00", _U32.pack(len(given))]
    for topic, p, chain_head in given:
        request += (_HEAD.pack(_SEALED_CODES[topic], p), chain_head)
    return [b"".join(request), inputs.body]


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


def decode_sealed(answer: bytes, clock: dict[int, int]) -> Batch:
    """A sealed answer as a Batch: its outputs as the core's record batches (`built`, with the
    chains' heads after them), its changed records as fold-state bytes."""
    batch = Batch(newest=dict(clock))
    view = memoryview(answer)
    batch.built_events, batch.built_versions, count = struct.unpack_from("<III", answer, 1)
    pos = 13
    for _ in range(count):
        topic, partition, records, crc, shift, size = _BUILT_HEAD.unpack_from(answer, pos)
        pos += _BUILT_HEAD.size
        data = view[pos : pos + size]
        pos += size
        batch.built.append(RecordBatch(SEALED_TOPICS[topic], partition, records, data, crc, shift))
    (count,) = _U32.unpack_from(answer, pos)
    pos += 4
    for _ in range(count):
        topic, partition = _HEAD.unpack_from(answer, pos)
        pos += _HEAD.size
        batch.heads[(SEALED_TOPICS[topic], partition)] = answer[pos : pos + HEAD_BYTES]
        pos += HEAD_BYTES
    _decode_changed(answer, pos, batch)
    return batch


def _decode_changed(answer: bytes, pos: int, batch: Batch) -> None:
    """The end of a folded batch's answer: the records it changed and its newest times."""
    changed, u32 = batch.changed, _U32.unpack_from
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
