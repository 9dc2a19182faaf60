"""The live fold's native core: a long-lived `podfold --serve` process per fold worker.

The fold loop (streams/fold_loop.py) hands it each batch of input records; the core folds them as
BatchFold would with no keyring and answers with the batch's outputs already encoded and the pod
records it changed, as fold-state bytes. It holds every record of the worker's partitions: the loop
loads them on restore and after any batch it folded itself.

Like the offline core (streams/native_replay.py) it gives up rather than guesses: on an input the
Python fold would dead-letter, an event held for a pod not announced yet, or anything else it does
not model, it answers "gave up" having forgotten every pod that batch touched, and the loop folds
the batch with the Python fold and loads those pods again. The protocol (little-endian, lengths
u32, 0xFFFFFFFF for None) is written down in streams/foldcore/serve.go.
"""

from __future__ import annotations

import logging
import struct
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from podledger.errors import UserError
from podledger.schemas.cloud_events import StatusFacts
from podledger.streams.batch import Batch, BatchFold
from podledger.streams.outputs import Coordinates, Output
from podledger.types import Topic

log = logging.getLogger(__name__)

# The ingress topics as the core numbers them.
TOPIC_CODES: dict[str, int] = {
    Topic.POD_UPDATES: 0,
    Topic.PLEG: 1,
    Topic.PROBE_RESULTS: 2,
    Topic.POD_LIFECYCLE: 3,
}

_NONE = 0xFFFFFFFF
_OK, _GAVE_UP = 0, 3
_JOURNAL, _VERSION, _TOMBSTONE = 0, 1, 2

_U32 = struct.Struct("<I")
_I64 = struct.Struct("<q")
_INPUT_HEAD = struct.Struct("<BIqq")  # topic code, partition, offset, ts_ms
_OUTPUT_HEAD = struct.Struct("<BII")  # kind, partition, key length
_VERSION_FACTS = struct.Struct("<qqI")  # version, ts_ms, node length


@dataclass(frozen=True, slots=True)
class CoreGaveUp:
    """The core did not fold the batch: why, and the pods it forgot (to be loaded again)."""

    reason: str
    dropped: list[bytes]


class LiveCore:
    """One `podfold --serve` process: `load` records into it, `fold` batches through it."""

    def __init__(self, path: str, max_event_bytes: int, hold_max_events: int) -> None:
        self._command = [
            *(path, "--serve", "--max-event-bytes", str(max_event_bytes)),
            *("--hold-max-events", str(hold_max_events)),
        ]
        self._start()

    def _start(self) -> None:
        self._proc = subprocess.Popen(self._command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._in, self._out = self._proc.stdin, self._proc.stdout

    def restart(self) -> None:
        """A new process, holding no record."""
        self.close()
        self._start()

    def load(self, records: Iterable[tuple[bytes, bytes | None]]) -> int:
        """Give the core these pods' records as fold-state holds them (None: the pod has none)."""
        parts: list[bytes] = []
        count = 0
        for key, value in records:
            parts += (_U32.pack(len(key)), key, _nbytes(value), value or b"")
            count += 1
        if count:
            self._ask(b"L" + _U32.pack(count) + b"".join(parts))
        return count

    def fold(
        self, inputs: Sequence[tuple[Coordinates, bytes | None]], clock: dict[int, int]
    ) -> Batch | CoreGaveUp:
        """Fold a batch of ingress records, in order; `clock` is each partition's newest
        pod-updates event time before it (the batch's `newest` starts from it)."""
        parts = [b"B", _U32.pack(len(inputs))]
        for at, value in inputs:
            parts += (
                _INPUT_HEAD.pack(TOPIC_CODES[at.topic], at.partition, at.offset, at.ts_ms),
                _nbytes(value),
            )
            if value is not None:
                parts.append(value)
        answer = self._ask(b"".join(parts))
        if answer[0] == _GAVE_UP:
            return _gave_up(answer)
        return _batch(answer, clock)

    def _ask(self, request: bytes) -> memoryview:
        try:
            self._in.write(request)
            self._in.flush()
            head = self._out.read(4)
            if len(head) < 4:
                raise EOFError
            (size,) = _U32.unpack(head)
            answer = self._out.read(size)
            if len(answer) < size:
                raise EOFError
        except (BrokenPipeError, EOFError):
            code = self._proc.poll()
            raise UserError(f"the native fold core stopped (exit {code}); see its message above") from None
        if answer[0] not in (_OK, _GAVE_UP):
            raise UserError(f"the native fold core answered {answer[0]}, which this podledger does not know")
        return memoryview(answer)

    def close(self) -> None:
        """End the process: it exits at the end of its input."""
        if self._proc.poll() is None:
            try:
                self._in.close()
                self._proc.wait(timeout=5)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()


class InputRecord(Protocol):
    """An input record as the fold reads it (a Kafka consumer record)."""

    key: bytes | None
    value: bytes | None
    headers: Any


def fold_batch(
    core: LiveCore | None,
    fold: BatchFold,
    inputs: Sequence[tuple[Coordinates, InputRecord]],
    waiting: set[bytes],
) -> tuple[Batch, bool]:
    """Fold a batch of inputs into `fold`'s batch: through the core when it covers them, else with
    the Python fold; then give up held events that have waited too long (`waiting`: the records
    holding some, see BatchFold.expire_held). Returns the batch and whether the core folded it.

    The core is then taught what the Python fold changed and what it forgot, so it holds every
    record as the caller's store will."""
    answer = core.fold([(at, r.value) for at, r in inputs], fold.batch.newest) if core and inputs else None
    if isinstance(answer, Batch):
        fold.batch = answer
    else:
        if answer is not None:
            log.debug("the native fold core left a batch to the Python fold: %s", answer.reason)
        for at, record in inputs:
            fold.add_message(at, record.key, record.value, record.headers or ())
    fold.expire_held(waiting)
    if core is not None:
        changed = fold.batch.changed
        keys = [key for key, (_, record) in changed.items() if not isinstance(record, bytes)]
        keys += [
            key for key in (answer.dropped if isinstance(answer, CoreGaveUp) else ()) if key not in changed
        ]
        core.load((key, _encoded(fold.record(key))) for key in keys)
    return fold.batch, isinstance(answer, Batch)


def _encoded(record: Any) -> bytes | None:
    return None if record is None else orjson.dumps(record)


def _nbytes(value: bytes | None) -> bytes:
    return _U32.pack(_NONE if value is None else len(value))


class _Reader:
    """Reads a response's fields in order."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: memoryview, pos: int = 1) -> None:
        self.buf, self.pos = buf, pos

    def u32(self) -> int:
        (n,) = _U32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return int(n)

    def i64(self) -> int:
        (n,) = _I64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return int(n)

    def raw(self, size: int) -> bytes:
        start = self.pos
        self.pos += size
        return bytes(self.buf[start : self.pos])

    def sized(self) -> bytes:
        return self.raw(self.u32())

    def nbytes(self) -> bytes | None:
        size = self.u32()
        return None if size == _NONE else self.raw(size)


def _gave_up(answer: memoryview) -> CoreGaveUp:
    read = _Reader(answer)
    reason = read.sized().decode(errors="replace")
    return CoreGaveUp(reason, [read.sized() for _ in range(read.u32())])


def _batch(answer: memoryview, clock: dict[int, int]) -> Batch:
    """A folded batch's answer as the Batch the Python fold would have made (its outputs carry
    their bytes; its changed records are fold-state bytes)."""
    read = _Reader(answer)
    batch = Batch(newest=dict(clock))
    journal, outputs = batch.journal, batch.outputs
    buf = read.buf
    for _ in range(read.u32()):
        kind, partition, key_size = _OUTPUT_HEAD.unpack_from(buf, read.pos)
        read.pos += _OUTPUT_HEAD.size
        uid = read.raw(key_size).decode()
        if kind == _JOURNAL:
            value = read.sized()
            journal.append((partition, Output(Topic.JOURNAL, uid, value, encoded=value)))
        elif kind == _VERSION:
            value = read.sized()
            version, ts_ms, node_size = _VERSION_FACTS.unpack_from(buf, read.pos)
            read.pos += _VERSION_FACTS.size
            node = read.raw(node_size).decode()
            facts = StatusFacts(uid, version, node, ts_ms, read.sized().decode(), read.sized().decode())
            outputs.append((partition, Output(Topic.POD_STATUS, uid, facts, encoded=value)))
            outputs.append((partition, Output(Topic.POD_STATUS_HISTORY, uid, facts, encoded=value)))
        elif kind == _TOMBSTONE:
            outputs.append((partition, Output(Topic.POD_STATUS, uid, None)))
        else:
            raise UserError(
                f"the native fold core sent an output of kind {kind}, which this podledger does not know"
            )
    for _ in range(read.u32()):
        partition = read.u32()
        key = read.sized()
        batch.changed[key] = (partition, read.nbytes())
    for _ in range(read.u32()):
        partition = read.u32()
        ts_ms = read.i64()
        batch.newest[partition] = max(batch.newest.get(partition, ts_ms), ts_ms)
    return batch
