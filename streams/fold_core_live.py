"""The live fold's native core: a long-lived `podfold --serve` process per fold worker.

The fold loop (streams/fold_loop.py) hands it each batch of input records with the heads of their
partitions' hash chains; the core folds them as BatchFold would, seals the outputs as
streams/seal.py would, and answers with them as whole Kafka record batches, and with the pod
records it changed, as fold-state bytes. It holds every record of the worker's partitions: the
loop loads them on restore and after any batch it folded itself. With a keyring, the worker checks each
record's proof of origin here (`core_inputs`: its MAC, and that its node writes to its partition)
and hands the core the proven node and sequence number; the core checks that the event names that
node and refuses what BatchFold would refuse as `replayed`, by giving up.

Like the offline core (streams/native_replay.py) it gives up rather than guesses: on an input the
Python fold would dead-letter, an event held for a pod not announced yet, or anything else it does
not model, it answers "gave up" having forgotten every pod that batch touched, and the loop folds
the batch with the Python fold and loads those pods again. What goes over the pipes is
streams/fold_core_wire.py's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

import orjson

from podledger.delivery import MAX_BATCH_BYTES
from podledger.errors import UserError
from podledger.schemas.origin import Forged, verify
from podledger.streams.batch import Batch, BatchFold, Waiting, placed
from podledger.streams.fold_core_wire import (
    GAVE_UP,
    OK,
    CoreGaveUp,
    CoreInput,
    SealedInputs,
    decode_gave_up,
    decode_sealed,
    load_request,
    sealed_inputs,
    sealed_request,
)
from podledger.streams.outputs import Coordinates

log = logging.getLogger(__name__)


class LiveCore:
    """One `podfold --serve` process: `load` records into it, `fold` batches through it.

    It speaks over the event loop's pipes, so the loop goes on (broker acknowledgements, earlier
    batches' writes) while the core folds. One request at a time; a batch may be handed over
    (`start_fold`) before its answer is wanted (`result`), so the core folds it while the loop
    sends the batch before. `close` ends the process, a batch handed over included."""

    def __init__(
        self,
        path: str,
        max_event_bytes: int,
        hold_max_events: int,
        topic_prefix: str,
        record_batch_bytes: int = MAX_BATCH_BYTES,
    ) -> None:
        self._command = [
            *(path, "--serve", "--max-event-bytes", str(max_event_bytes)),
            *("--hold-max-events", str(hold_max_events)),
            *("--topic-prefix", topic_prefix, "--record-batch-bytes", str(record_batch_bytes)),
        ]
        self._proc: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()  # held while a request is written or an answer read
        self._started: Started | None = None  # the batch handed over whose answer is not read yet

    async def _process(self) -> asyncio.subprocess.Process:
        if self._proc is None:
            # The core widens both pipes to 1 MiB itself (cmd/podfold/pipe_linux.go).
            self._proc = await asyncio.create_subprocess_exec(
                *self._command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
            )
        return self._proc

    async def load(self, records: Iterable[tuple[bytes, bytes | None]]) -> int:
        """Give the core these pods' records as fold-state holds them (None: the pod has none)."""
        request, count = load_request(records)
        if count:
            async with self._lock:
                proc = await self._send(request)
                await self._answer(proc)
        return count

    async def fold(
        self, inputs: Sequence[CoreInput], clock: dict[int, int], heads: Mapping[tuple[str, int], bytes]
    ) -> Batch | CoreGaveUp:
        """Fold a batch of ingress records, in order, and seal its outputs; `clock` is each
        partition's newest pod-updates event time before it (the batch's `newest` starts from
        it), `heads` the hash chains' heads before it (streams/seal.py)."""
        return await self.result(await self.start_fold(sealed_inputs(inputs), clock, heads))

    async def start_fold(
        self, inputs: SealedInputs, clock: dict[int, int], heads: Mapping[tuple[str, int], bytes]
    ) -> Started:
        """Hand the core a batch (as `fold`, its inputs made ready with `sealed_inputs`, as early
        as the caller likes) and return at once; its answer is `result`, which must be read before
        any other request."""
        request = sealed_request(inputs, heads)
        async with self._lock:
            proc = await self._send(*request)
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
        if answer[0] == GAVE_UP:
            return decode_gave_up(answer)
        return decode_sealed(answer, started.clock)

    async def _send(self, *parts: bytes) -> asyncio.subprocess.Process:
        if self._started is not None:
            raise RuntimeError("the native fold core's answer to the batch handed over is not read yet")
        proc = await self._process()
        assert proc.stdin is not None
        # The pipe takes it now (a broken pipe shows when the answer is read); drained then too.
        for part in parts:  # one write each: no copy of the inputs into one request
            proc.stdin.write(part)
        return proc

    async def _answer(self, proc: asyncio.subprocess.Process) -> bytes:
        assert proc.stdin is not None and proc.stdout is not None
        try:
            await proc.stdin.drain()
            size = int.from_bytes(await proc.stdout.readexactly(4), "little")  # the answer's length
            answer = await proc.stdout.readexactly(size)
        except (BrokenPipeError, ConnectionResetError, asyncio.IncompleteReadError):
            await self._died(proc)
        if answer[0] not in (OK, GAVE_UP):
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
    heads: Mapping[tuple[str, int], bytes],
    started: Started | None = None,
) -> tuple[Batch, bool]:
    """Fold a batch of inputs into `fold`'s batch: through the core when it covers them (its
    outputs then sealed from the chains' `heads`), else with the Python fold; then give up held
    events that have waited too long (`waiting`: the records holding some and since when, see
    BatchFold.expire_held). Returns the batch and whether the core folded it. `started`: these
    inputs were handed to the core already (`core_inputs`).

    The core is then taught what the Python fold changed and what it forgot, so it holds every
    record as the caller's store will."""
    answer = None
    if started is not None and core is not None:
        answer = await core.result(started)
    elif core is not None and inputs:
        handed = core_inputs(inputs, fold.keyring, fold.partitions)
        if handed is not None:
            answer = await core.fold(handed, fold.batch.newest, heads)
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


def core_inputs(
    inputs: Sequence[tuple[Coordinates, InputRecord]], keyring: Mapping[str, bytes] | None, partitions: int
) -> list[CoreInput] | None:
    """A batch's inputs as the core takes them. With a keyring each carries its proven writer
    (BatchFold's origin check, but for the node the event names, which the core checks); None
    when one cannot be proven: BatchFold dead-letters it as `forged`, so the batch is its."""
    if keyring is None:
        return [(at, r.value, None) for at, r in inputs]
    handed: list[CoreInput] = []
    for at, r in inputs:
        try:
            proof = placed(verify(keyring, at.topic, r.key, r.value, r.headers or ()), at, partitions)
        except Forged:
            return None
        handed.append((at, r.value, proof))
    return handed


def _encoded(record: Any) -> bytes | None:
    return None if record is None else orjson.dumps(record)
