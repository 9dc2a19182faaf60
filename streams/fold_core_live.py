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

import asyncio
import contextlib
import fcntl
import logging
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

import orjson

from podledger.errors import UserError
from podledger.schemas.cloud_events import StatusFacts
from podledger.streams.batch import Batch, BatchFold, Waiting
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
_INPUT_HEAD = struct.Struct("<BIqqI")  # topic code, partition, offset, ts_ms, value length
_OUTPUT_HEAD = struct.Struct("<BII")  # kind, partition, key length
_VERSION_FACTS = struct.Struct("<qqI")  # version, ts_ms, node length
_TWO_U32 = struct.Struct("<II")  # a changed record's partition and key length
_PARTITION_TIME = struct.Struct("<Iq")


@dataclass(frozen=True, slots=True)
class CoreGaveUp:
    """The core did not fold the batch: why, and the pods it forgot (to be loaded again)."""

    reason: str
    dropped: list[bytes]


class LiveCore:
    """One `podfold --serve` process: `load` records into it, `fold` batches through it.

    It speaks over the event loop's pipes, so the loop goes on (broker acknowledgements, earlier
    batches' writes) while the core folds. One request at a time; a batch may be handed over
    (`start_fold`) before its answer is wanted (`result`), so the core folds it while the loop
    seals and sends the batch before. `close` ends the process, a batch handed over included."""

    def __init__(self, path: str, max_event_bytes: int, hold_max_events: int) -> None:
        self._command = [
            *(path, "--serve", "--max-event-bytes", str(max_event_bytes)),
            *("--hold-max-events", str(hold_max_events)),
        ]
        self._proc: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()  # held while a request is written or an answer read
        self._started: Started | None = None  # the batch handed over whose answer is not read yet

    async def _process(self) -> asyncio.subprocess.Process:
        if self._proc is None:
            proc = await asyncio.create_subprocess_exec(
                *self._command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
            )
            assert proc.stdin is not None and proc.stdout is not None
            _widen(proc.stdin.transport.get_extra_info("pipe"))
            self._proc = proc
        return self._proc

    async def load(self, records: Iterable[tuple[bytes, bytes | None]]) -> int:
        """Give the core these pods' records as fold-state holds them (None: the pod has none)."""
        parts: list[bytes] = []
        count = 0
        for key, value in records:
            parts += (_U32.pack(len(key)), key, _nbytes(value), value or b"")
            count += 1
        if count:
            async with self._lock:
                proc = await self._send(b"L" + _U32.pack(count) + b"".join(parts))
                await self._answer(proc)
        return count

    async def fold(
        self, inputs: Sequence[tuple[Coordinates, bytes | None]], clock: dict[int, int]
    ) -> Batch | CoreGaveUp:
        """Fold a batch of ingress records, in order; `clock` is each partition's newest
        pod-updates event time before it (the batch's `newest` starts from it)."""
        return await self.result(await self.start_fold(inputs, clock))

    async def start_fold(
        self, inputs: Sequence[tuple[Coordinates, bytes | None]], clock: dict[int, int]
    ) -> Started:
        """Hand the core a batch (as `fold`) and return at once; its answer is `result`, which
        must be read before any other request."""
        parts = [b"B", _U32.pack(len(inputs))]
        head, codes = _INPUT_HEAD.pack, TOPIC_CODES
        for at, value in inputs:
            size = _NONE if value is None else len(value)
            parts.append(head(codes[at.topic], at.partition, at.offset, at.ts_ms, size))
            if value is not None:
                parts.append(value)
        async with self._lock:
            proc = await self._send(b"".join(parts))
            started = self._started = Started(proc, dict(clock))
        return started

    async def result(self, started: Started) -> Batch | CoreGaveUp:
        """The core's answer to a batch handed over; if the core was closed meanwhile, a give-up
        that forgot nothing (the new core holds no record to forget)."""
        async with self._lock:
            if self._started is not started:
                return CoreGaveUp("the core was closed while it folded the batch", [])
            try:
                answer = await self._answer(started.proc)
            finally:
                self._started = None
        if answer[0] == _GAVE_UP:
            return _gave_up(answer)
        return _batch(answer, started.clock)

    async def _send(self, request: bytes) -> asyncio.subprocess.Process:
        if self._started is not None:
            raise RuntimeError("the native fold core's answer to the batch handed over is not read yet")
        proc = await self._process()
        assert proc.stdin is not None
        # The pipe takes it now (a broken pipe shows when the answer is read); drained then too.
        proc.stdin.write(request)
        return proc

    async def _answer(self, proc: asyncio.subprocess.Process) -> bytes:
        assert proc.stdin is not None and proc.stdout is not None
        try:
            await proc.stdin.drain()
            (size,) = _U32.unpack(await proc.stdout.readexactly(4))
            answer = await proc.stdout.readexactly(size)
        except (BrokenPipeError, ConnectionResetError, asyncio.IncompleteReadError):
            await self._died(proc)
        if answer[0] not in (_OK, _GAVE_UP):
            raise UserError(f"the native fold core answered {answer[0]}, which this podledger does not know")
        return answer

    async def _died(self, proc: asyncio.subprocess.Process) -> NoReturn:
        await self._stop()
        raise UserError(f"the native fold core stopped (exit {proc.returncode}); see its message above")

    async def close(self) -> None:
        """End the process (it exits at the end of its input); the next request starts a new one,
        holding no record. A batch handed over and not read is forgotten (`result`)."""
        async with self._lock:
            started, self._started = self._started, None
            if started is not None and self._proc is not None:
                # Its answer is read and dropped: a core whose output nobody reads cannot exit.
                with contextlib.suppress(UserError, TimeoutError):
                    await asyncio.wait_for(self._answer(started.proc), timeout=5)
            await self._stop()

    async def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.returncode is None:
            assert proc.stdin is not None
            proc.stdin.close()
            try:
                await asyncio.wait_for(proc.wait(), timeout=5)
            except TimeoutError:
                proc.kill()
                await proc.wait()


@dataclass(frozen=True, slots=True)
class Started:
    """A batch handed to the core (LiveCore.start_fold) whose answer has not been read: the
    process it went to, and the clock it was folded from."""

    proc: asyncio.subprocess.Process
    clock: dict[int, int]


class InputRecord(Protocol):
    """An input record as the fold reads it (a Kafka consumer record)."""

    key: bytes | None
    value: bytes | None
    headers: Any


async def fold_batch(
    core: LiveCore | None,
    fold: BatchFold,
    inputs: Sequence[tuple[Coordinates, InputRecord]],
    waiting: Waiting,
    started: Started | None = None,
) -> tuple[Batch, bool]:
    """Fold a batch of inputs into `fold`'s batch: through the core when it covers them, else with
    the Python fold; then give up held events that have waited too long (`waiting`: the records
    holding some and since when, see BatchFold.expire_held). Returns the batch and whether the
    core folded it. `started`: these inputs were handed to the core already (`core_inputs`).

    The core is then taught what the Python fold changed and what it forgot, so it holds every
    record as the caller's store will."""
    answer = None
    if started is not None and core is not None:
        answer = await core.result(started)
    elif core is not None and inputs:
        answer = await core.fold(core_inputs(inputs), fold.batch.newest)
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
        dropped = answer.dropped if isinstance(answer, CoreGaveUp) else ()
        keys += [key for key in dropped if key not in changed]
        await core.load((key, _encoded(fold.record(key))) for key in keys)
    return fold.batch, isinstance(answer, Batch)


def core_inputs(inputs: Sequence[tuple[Coordinates, InputRecord]]) -> list[tuple[Coordinates, bytes | None]]:
    """A batch's inputs as the core takes them."""
    return [(at, r.value) for at, r in inputs]


def _encoded(record: Any) -> bytes | None:
    return None if record is None else orjson.dumps(record)


# Pipes hold 64 KiB by default: a batch's request (about 1.5 KB an input) would go over in slices,
# each waiting for the core to be scheduled and read it. The most an unprivileged process may ask
# for is /proc/sys/fs/pipe-max-size (1 MiB unless changed).
_PIPE_BYTES = 1 << 20
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


def _widen(pipe: Any) -> None:
    if pipe is None:
        return
    with contextlib.suppress(OSError, ValueError):  # a lower limit (or a core gone): it works, slower
        fcntl.fcntl(pipe.fileno(), _F_SETPIPE_SZ, _PIPE_BYTES)


def _nbytes(value: bytes | None) -> bytes:
    return _U32.pack(_NONE if value is None else len(value))


def _gave_up(answer: bytes) -> CoreGaveUp:
    size = _U32.unpack_from(answer, 1)[0]
    reason, pos = answer[5 : 5 + size].decode(errors="replace"), 5 + size
    dropped = []
    for _ in range(_U32.unpack_from(answer, pos)[0]):
        size = _U32.unpack_from(answer, pos + 4)[0]
        dropped.append(answer[pos + 8 : pos + 8 + size])
        pos += 4 + size
    return CoreGaveUp(reason, dropped)


def _batch(answer: bytes, clock: dict[int, int]) -> Batch:
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
