"""The live fold's native core (streams/fold_core_live.py, `podfold --serve`) against the Python
fold, batch by batch as the fold loop drives them: the same journal entries, versions, tombstones,
dead letters and headers, byte for byte, and the same records on fold-state, with proofs of origin
checked or not; batches the core does not cover (a malformed value, held events, a pod announced
after its events, a forged or replayed record) fold in Python and the core goes on from what that
fold stored; a new core loaded from fold-state goes on as the old one."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from aiokafka.record.default_records import DefaultRecordBatch
from aiokafka.record.util import calc_crc32c

from podledger.errors import UserError
from podledger.partitioner import partition_for_node
from podledger.record_batch import RecordBatch
from podledger.schemas import encode
from podledger.schemas.origin import derive_keys, sign
from podledger.streams.batch import BatchFold, Waiting
from podledger.streams.fold import DEFAULT_HOLD, HoldLimits
from podledger.streams.fold_core_live import LiveCore, Started, core_inputs, fold_batch
from podledger.streams.fold_core_wire import CoreGaveUp, sealed_inputs
from podledger.streams.native_replay import find_core
from podledger.streams.outputs import Coordinates
from podledger.streams.seal import seal
from podledger.types import Topic
from podledger.workload import workload
from tests.unit.test_rules_version import T0, fixed_input

PARTITIONS = 4
MAX_BYTES = 1_048_576
PREFIX = "test."
GENESIS_HEADS = {
    (topic, p): b"\0" * 32 for topic in (Topic.JOURNAL, Topic.POD_STATUS_HISTORY) for p in range(PARTITIONS)
}


@dataclass(frozen=True)
class Message:
    """An input record as the consumer hands it."""

    key: bytes | None
    value: bytes | None
    headers: Any = ()


Inputs = list[tuple[Coordinates, Message]]


@pytest.fixture(scope="module")
def core_path() -> str:
    found = find_core("auto")
    assert found, "the native fold core is not built: `make install` builds it (it needs Go)"
    return found


def new_core(path: str) -> LiveCore:
    return LiveCore(path, MAX_BYTES, HoldLimits().max_events, PREFIX)


def records_of(built: RecordBatch) -> list[tuple[str, int, str, bytes | None, list[tuple[str, bytes]]]]:
    """A record batch the core built, read as a consumer reads it once a producer has set its state
    (its checksum checked), as (topic, partition, key, value, headers)."""
    header = built.header_for(4242, 3, 17, 1_700_000_000_000, calc_crc32c)
    batch = DefaultRecordBatch(bytearray(header + bytes(built.data[len(header) :])))
    assert batch.validate_crc(), "the checksum does not match once the producer's state is set"
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (4242, 3, 17)
    records = list(batch)
    assert {r.timestamp for r in records} == {1_700_000_000_000}
    assert len(records) == built.count
    return [
        (built.topic, built.partition, (r.key or b"").decode(), r.value, list(r.headers)) for r in records
    ]


def as_inputs(values: Iterable[tuple[str, str, bytes]]) -> Inputs:
    """(topic, node, value) in order, placed as the producers place them, stamped 5 ms later."""
    offsets: dict[tuple[str, int], int] = {}
    out: Inputs = []
    ts = T0
    for topic, node, value in values:
        partition = partition_for_node(node, PARTITIONS)
        offset = offsets.get((topic, partition), -1) + 1
        offsets[(topic, partition)] = offset
        if value.startswith(b'{"'):  # a malformed value keeps the stamp before it
            ts = orjson.loads(value).get("ts_ms", ts - 5) + 5
        out.append((Coordinates(topic, partition, offset, ts), Message(node.encode(), value)))
    return out


def workload_inputs(pods: int, events: int, seed: int) -> Inputs:
    return as_inputs(
        (e.topic, e.node, encode(e.value)) for e in workload(pods, events, nodes=6, seed=seed, start_ms=T0)
    )


class Loop:
    """The fold loop's bookkeeping without Kafka: fold-state as bytes, the clock, held records."""

    def __init__(
        self,
        core: LiveCore | None,
        limits: HoldLimits = DEFAULT_HOLD,
        keyring: dict[str, bytes] | None = None,
    ) -> None:
        self.core = core
        self.limits = limits
        self.keyring = keyring
        self.state: dict[bytes, bytes] = {}
        self.clock: dict[int, int] = {}
        self.waiting: Waiting = {}
        self.heads: dict[tuple[str, int], bytes] = dict(GENESIS_HEADS)
        self.native = 0
        self.written: list[tuple[str, int, str, bytes | None, list[tuple[str, bytes]]]] = []

    def lookup(self, key: bytes) -> Any:
        raw = self.state.get(key)
        return None if raw is None else orjson.loads(raw)

    async def fold(
        self, inputs: Inputs, started: Started | None = None, following: Inputs = ()
    ) -> Started | None:
        """Fold a batch (handed to the core already: `started`); with `following`, hand that batch
        to the core once this one is sealed, before it is stored, as the fold loop does, and
        return it."""
        fold = BatchFold(
            self.lookup, self.limits, MAX_BYTES, self.clock, keyring=self.keyring, partitions=PARTITIONS
        )
        batch, native = await fold_batch(self.core, fold, inputs, self.waiting, self.heads, started)
        self.native += native
        seal(batch, self.heads, PREFIX)
        self.clock.update(batch.newest)
        ahead = None
        handed = core_inputs(following, self.keyring, PARTITIONS) if following else None
        if handed is not None and self.core is not None:  # the fold loop hands no forged batch ahead
            ahead = await self.core.start_fold(sealed_inputs(handed), self.clock, self.heads)
        for built in batch.built:
            self.written += records_of(built)
        for partition, out in [*batch.journal, *batch.outputs]:
            self.written.append((out.topic, partition, out.key, out.wire_value(), list(out.headers or [])))
        for key, (_, record) in batch.changed.items():
            if record is None:
                self.state.pop(key, None)
            else:
                self.state[key] = record if isinstance(record, bytes) else orjson.dumps(record)
        return ahead

    async def run(self, inputs: Inputs, size: int, ahead: bool = False) -> Loop:
        batches = [inputs[start : start + size] for start in range(0, len(inputs), size)]
        started = None
        for n, batch in enumerate(batches):
            following = batches[n + 1] if ahead and n + 1 < len(batches) else []
            started = await self.fold(batch, started, following)
        return self


def both(
    core_path: str,
    inputs: Inputs,
    size: int,
    limits: HoldLimits = DEFAULT_HOLD,
    ahead: bool = False,
    keyring: dict[str, bytes] | None = None,
) -> tuple[Loop, Loop]:
    """The Python fold and the core (each batch handed to it ahead, with `ahead`) over `inputs`."""

    async def run() -> tuple[Loop, Loop]:
        core = new_core(core_path)
        try:
            python = await Loop(None, limits, keyring).run(inputs, size)
            return python, await Loop(core, limits, keyring).run(inputs, size, ahead)
        finally:
            await core.close()

    return asyncio.run(run())


def by_partition(written: list[Any]) -> dict[tuple[str, int], list[Any]]:
    """What was written, per topic-partition in order: the order Kafka keeps."""
    out: dict[tuple[str, int], list[Any]] = {}
    for w in written:
        out.setdefault((w[0], w[1]), []).append(w)
    return out


def assert_same(python: Loop, native: Loop) -> None:
    assert len(native.written) == len(python.written)
    got, want = by_partition(native.written), by_partition(python.written)
    assert got.keys() == want.keys()
    for where, records in want.items():
        assert len(got[where]) == len(records), where
        for mine, theirs in zip(got[where], records, strict=True):
            assert mine == theirs
    assert native.state.keys() == python.state.keys()
    for key, raw in python.state.items():
        assert orjson.loads(native.state[key]) == orjson.loads(raw), key
    assert native.state == python.state  # byte for byte, key order included


@pytest.mark.parametrize(
    ("seed", "size", "ahead"), [(1, 500, False), (2, 97, True), (3, 1, False), (4, 50, True)]
)
def test_the_core_folds_live_batches_as_the_python_fold_does(
    core_path: str, seed: int, size: int, ahead: bool
) -> None:
    """With `ahead`, each batch is handed to the core once the one before it is sealed, before that
    one is stored."""
    inputs = workload_inputs(200, 3000, seed)
    python, native = both(core_path, inputs, size, ahead=ahead)
    assert_same(python, native)
    assert native.native == (len(inputs) + size - 1) // size  # every batch natively
    assert sum(1 for w in python.written if w[0] == Topic.POD_STATUS_HISTORY) > 1000


def test_the_core_holds_events_that_come_before_their_pods_announcement(core_path: str) -> None:
    """Live, a fetch often has a pod's pleg or probe result before the pod-update that announces
    it: the core holds them as the Python fold does and applies them after the announcement, in the
    same batch or a later one. A pod never announced has its held events given up by time (in
    Python, after the core's batch) and the core goes on from that record."""
    values = [(e.topic, e.node, encode(e.value)) for e in workload(60, 1500, nodes=6, seed=11, start_ms=T0)]
    announcements = [row for row in values if row[0] == Topic.POD_UPDATES][:60]
    rest = [row for row in values if row not in announcements]
    # Each ADD comes after the first events of its pod, some in the same batch, some batches later.
    ordered = rest[:150] + announcements[:30] + rest[150:400] + announcements[30:] + rest[400:]
    stranger = orjson.loads(rest[0][2]) | {"uid": "never-announced"}
    ordered.insert(10, (rest[0][0], rest[0][1], orjson.dumps(stranger)))
    # A later pod-update on the stranger's node passes it by far enough: its event is given up.
    later = next(row for row in announcements if row[1] == rest[0][1])
    ordered.append((later[0], later[1], orjson.dumps(orjson.loads(later[2]) | {"ts_ms": T0 + 60_000})))
    inputs = as_inputs(ordered)
    limits = HoldLimits(max_events=100, max_ms=400)
    python, native = both(core_path, inputs, 100, limits, ahead=True)
    assert_same(python, native)
    assert native.native == (len(inputs) + 99) // 100  # every batch natively
    letters = [orjson.loads(w[3]) for w in native.written if w[0] == Topic.DEAD_LETTER and w[3]]
    assert {d["reason"] for d in letters} == {"unknown_pod"}
    assert any(b"never-announced" in w[3] for w in native.written if w[0] == Topic.DEAD_LETTER and w[3])
    journaled = sum(1 for w in native.written if w[0] == Topic.JOURNAL)
    assert journaled == len(inputs) - len(letters) > len(inputs) - 10  # the rest applied, held or not


def test_batches_the_core_does_not_cover_fold_in_python_and_the_core_goes_on(core_path: str) -> None:
    """The rules-version input: deletions, terminations, static pods, removals and events held
    for pods announced later; plus a malformed value and an oversize one in the middle."""
    values = [orjson.loads(v) for v in fixed_input()]
    rows = [(topic_of(v), node_of(v), orjson.dumps(v)) for v in values]
    rows.insert(700, (Topic.PLEG, "node-001", b"{not json"))
    rows.insert(1500, (Topic.PROBE_RESULTS, "node-002", b'{"uid":"' + b"x" * MAX_BYTES + b'"}'))
    inputs = as_inputs(rows)
    python, native = both(core_path, inputs, 50, ahead=True)
    assert_same(python, native)
    batches = (len(inputs) + 49) // 50
    assert 0 < native.native < batches  # some batches in Python, most natively
    assert native.native > batches // 2
    letters = {orjson.loads(w[3])["reason"] for w in native.written if w[0] == Topic.DEAD_LETTER and w[3]}
    assert {"malformed", "oversize"} <= letters


@pytest.mark.parametrize("proven", [False, True])
def test_a_new_core_loaded_from_fold_state_goes_on_as_the_old_one(core_path: str, proven: bool) -> None:
    """`proven`: with a keyring, the records it loads carry sequence numbers and held events with
    their proofs."""
    inputs, keyring = signed_inputs(100, 2000, 7) if proven else (workload_inputs(100, 2000, 7), None)

    async def run() -> tuple[Loop, Loop]:
        python = await Loop(None, keyring=keyring).run(inputs, 100)
        first, second = new_core(core_path), new_core(core_path)
        try:
            native = await Loop(first, keyring=keyring).run(inputs[:1000], 100)
            # A worker that takes the partitions over restores fold-state and loads it into its core.
            assert await second.load(list(native.state.items())) == len(native.state)
            native.core = second
            await native.run(inputs[1000:], 100)
        finally:
            await first.close()
            await second.close()
        return python, native

    assert_same(*asyncio.run(run()))


def test_an_event_for_a_pod_the_core_does_not_model_goes_to_the_python_fold(core_path: str) -> None:
    """A record the core does not model (here one with a sequence number past 63 bits, which the
    Python fold keeps) is not the core's to change: a batch with an event for that pod is given
    up, and the core forgets every pod the batch touched until it is loaded again."""
    inputs = workload_inputs(5, 60, 9)
    rest = inputs[30:]

    async def run() -> tuple[bytes, Any]:
        loop = await Loop(None).run(inputs[:30], 30)
        core = new_core(core_path)
        try:
            await core.load(list(loop.state.items()))
            uid = uid_of(orjson.loads(rest[3][1].value or b"{}")).encode()
            proven = orjson.loads(loop.state[uid]) | {"seqs": {"pleg": 2**64 - 1}}
            await core.load([(uid, orjson.dumps(proven))])
            return uid, await core.fold([(at, m.value, None) for at, m in rest], loop.clock, loop.heads)
        finally:
            await core.close()

    uid, answer = asyncio.run(run())
    assert isinstance(answer, CoreGaveUp)
    assert uid in answer.dropped
    assert set(answer.dropped) <= {uid_of(orjson.loads(m.value or b"{}")).encode() for _, m in rest[:4]}


def test_a_core_that_stops_is_a_clear_error(core_path: str, tmp_path: Any) -> None:
    """The worker must not fold on without its core: a core gone is an error that names it."""
    script = tmp_path / "dies"
    script.write_text("#!/bin/sh\nexit 7\n")
    script.chmod(0o755)

    async def run() -> None:
        core = LiveCore(str(script), MAX_BYTES, 100, PREFIX)
        try:
            await core.load([(b"uid", None)])
        finally:
            await core.close()

    with pytest.raises(UserError, match=r"native fold core stopped \(exit 7\)"):
        asyncio.run(run())


def unproven(inputs: Inputs) -> list[Any]:
    handed = core_inputs(inputs, None, PARTITIONS)
    assert handed is not None
    return handed


def signed_inputs(pods: int, events: int, seed: int) -> tuple[Inputs, dict[str, bytes]]:
    """A workload whose every record is signed by its node (sequence numbers rising per node as
    Signer makes them), the first 30 pods announced only after 400 other records (their events
    before it are held with their proofs), plus the records an attacker adds: an earlier record of
    a node sent again later (`replayed`), one signed with a key not on the keyring, one whose MAC
    does not match its value and one whose MAC header is null (all three `forged`). Returns the
    inputs and the fold's keyring."""
    rows = [
        (e.topic, e.node, encode(e.value)) for e in workload(pods, events, nodes=6, seed=seed, start_ms=T0)
    ]
    rows = rows[30:430] + rows[:30] + rows[430:]
    keys = {node: derive_keys(node, node.encode().ljust(32, b"k")) for _, node, _ in rows}
    inputs = as_inputs(rows)
    seqs = dict.fromkeys(keys, 1_000)
    signed: Inputs = []
    for at, m in inputs:
        node = m.key.decode() if m.key else ""
        seqs[node] += 1
        signed.append((at, Message(m.key, m.value, sign(keys[node], at.topic, seqs[node], m.key, m.value))))
    keyring = {node: k.status for node, k in keys.items()}

    def again(at: Coordinates, m: Message, headers: Any = None) -> tuple[Coordinates, Message]:
        """`m` sent once more, after everything on its topic-partition so far."""
        offset = 1 + max(a.offset for a, _ in signed if (a.topic, a.partition) == (at.topic, at.partition))
        return Coordinates(at.topic, at.partition, offset, at.ts_ms), Message(
            m.key, m.value, headers or m.headers
        )

    at, m = next((a, m) for a, m in signed[len(signed) // 2 :] if a.topic == Topic.PLEG)
    signed.append(again(at, m))  # replayed: its pod has applied this very sequence number
    at, m = signed[len(signed) // 3]
    stranger = derive_keys(m.key.decode() if m.key else "", b"s" * 32)
    signed.insert(len(signed) // 3 + 50, again(at, m, sign(stranger, at.topic, 10**9, m.key, m.value)))
    at, m = signed[2 * len(signed) // 3]
    tampered = (m.value or b"").replace(b'"ts_ms":', b'"ts_ms":1', 1)
    signed.insert(2 * len(signed) // 3 + 50, again(at, Message(m.key, tampered, m.headers)))
    at, m = signed[3 * len(signed) // 4]  # a null MAC header (Kafka allows null header values)
    nulled = [(name, None if name == "podledger-mac" else value) for name, value in m.headers]
    signed.insert(3 * len(signed) // 4 + 50, again(at, m, nulled))
    return signed, keyring


def test_the_core_folds_proven_batches_as_the_python_fold_does(core_path: str) -> None:
    """With a keyring the worker proves every record's origin and hands the core the writer and
    sequence number: journal entries carry the proof, records keep their sequence numbers in the
    Python fold's key order, and a forged or replayed record leaves its batch to the Python fold,
    which dead-letters it."""
    inputs, keyring = signed_inputs(150, 2500, 21)
    python, native = both(core_path, inputs, 60, ahead=True, keyring=keyring)
    assert_same(python, native)
    batches = (len(inputs) + 59) // 60
    assert batches - 4 <= native.native < batches  # the four batches with an attack in Python
    letters = [orjson.loads(w[3])["reason"] for w in native.written if w[0] == Topic.DEAD_LETTER and w[3]]
    assert sorted(letters) == ["forged", "forged", "forged", "replayed"]
    journal_headers = [dict(w[4]) for w in native.written if w[0] == Topic.JOURNAL]
    assert all("podledger-node" in h and "podledger-seq" in h for h in journal_headers)
    assert all(b'"seqs":{' in raw for raw in native.state.values())
    # Events that waited for their pods' announcements, with their proofs, and were applied then.
    late = {uid_of(orjson.loads(m.value or b"{}")) for _, m in inputs[400:430]}
    early = [m for _, m in inputs[:400] if uid_of(orjson.loads(m.value or b"{}")) in late]
    assert len(early) > 20
    journaled = {orjson.loads(w[3])["offset"] for w in native.written if w[0] == Topic.JOURNAL}
    assert {at.offset for at, m in inputs[:400] if m in early} <= journaled


def uid_of(value: dict[str, Any]) -> str:
    return str(value["pod"]["metadata"]["uid"] if "pod" in value else value["uid"])


def topic_of(value: dict[str, Any]) -> str:
    for marker, topic in (
        ("pod", Topic.POD_UPDATES),
        ("kind", Topic.POD_LIFECYCLE),
        ("probe", Topic.PROBE_RESULTS),
    ):
        if marker in value:
            return topic
    return Topic.PLEG


def node_of(value: dict[str, Any]) -> str:
    return str(value["node"])


def test_a_batch_handed_to_the_core_is_answered_before_any_other_request(core_path: str) -> None:
    """The core answers in order: nothing else may be asked before the batch handed over is read,
    and a core closed meanwhile answers that batch with a give-up that forgets nothing (the next
    request starts a new core, which holds no record)."""
    inputs = workload_inputs(20, 200, 5)

    async def run() -> tuple[Any, Any, Any]:
        core = new_core(core_path)
        try:
            started = await core.start_fold(sealed_inputs(unproven(inputs[:100])), {}, GENESIS_HEADS)
            with pytest.raises(RuntimeError, match="not read yet"):
                await core.load([(b"uid", None)])
            folded = await core.result(started)
            second = await core.start_fold(sealed_inputs(unproven(inputs[100:])), {}, GENESIS_HEADS)
            await core.close()
            again = await core.fold(unproven(inputs[:100]), {}, GENESIS_HEADS)
            return folded, await core.result(second), again
        finally:
            await core.close()

    folded, closed, again = asyncio.run(run())
    assert not isinstance(folded, CoreGaveUp) and folded.built_events == 100
    assert isinstance(closed, CoreGaveUp) and closed.dropped == [] and "closed" in closed.reason
    assert not isinstance(again, CoreGaveUp)
    assert [r for b in again.built for r in records_of(b)] == [r for b in folded.built for r in records_of(b)]
