"""`podledger bench recovery`: how soon a fold worker that takes over partitions folds again.

The benchmark fills fold-state with the records of `--pods` pods, shaped as the fold writes them:
a sample of pods is folded offline through a crash-looping story, and each sample record is copied
under a new UID, name and node (so the pods spread over every partition by the shared
partitioner). It then puts one input per partition on pod-updates, a graceful deletion of a stored
pod (the fold always makes a version for a pod being deleted, numbered after the stored one),
starts `podledger run --roles fold` and measures two moments: when the consumer group hands the
worker its partitions, and when every partition has folded its input. Between them the worker
restores the partitions' records, chain heads and journal tails, and folds one batch: that is
`restore_s`. Each takeover version must follow its pod's stored version, or the run fails.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from podledger.bench.harness import bench_settings, machine, peak_rss_mb, say, start_service, stop_service
from podledger.config import Settings
from podledger.errors import UserError
from podledger.partitioner import partition_for_node
from podledger.schemas import decode, encode, models
from podledger.streams.fold import Coordinates, PodRecord, fold_event
from podledger.streams.status import rfc3339
from podledger.streams.topics import admin_client, ensure_topics
from podledger.types import PodOp, Topic
from podledger.workload import workload

SAMPLE_PODS = 500  # pods folded offline; the stored records are copies of theirs
SAMPLE_EVENTS_PER_POD = 6  # enough for a pod to start, turn ready and unready, crash and back off


@dataclass
class RecoveryFigures:
    pods: int = 0
    partitions: int = 0
    state_mb: float = 0.0  # the records' bytes on fold-state
    startup_s: float = float("nan")  # worker start -> partitions assigned
    restore_s: float = float("nan")  # partitions assigned -> every partition folding again
    rss_mb: float = float("nan")  # the worker's peak resident set once folding again
    rss_now_mb: float = float("nan")  # and its resident set at that moment

    @property
    def records_per_s(self) -> float:
        return self.pods / self.restore_s if self.restore_s > 0 else float("nan")

    def line(self) -> str:
        return (
            f"recovery pods={self.pods} restore_s={self.restore_s:.2f}"
            f" records_per_s={self.records_per_s:.0f} rss_mb={self.rss_mb:.0f}"
            f" startup_s={self.startup_s:.2f} state_mb={self.state_mb:.0f}"
        )


@dataclass(frozen=True, slots=True)
class Identity:
    """What makes a pod's record its own: the strings copied records must not share."""

    uid: str
    name: str
    node: str


def sample_records(pods: int, seed: int = 1) -> list[PodRecord]:
    """Records of `pods` pods after an offline fold of their stories (podledger.workload)."""
    records: dict[str, PodRecord | None] = {}
    offsets: dict[str, int] = {}
    for event in workload(pods, pods * SAMPLE_EVENTS_PER_POD, nodes=1, seed=seed, start_ms=1_700_000_000_000):
        offsets[event.topic] = offset = offsets.get(event.topic, -1) + 1
        at = Coordinates(event.topic, 0, offset, event.ts_ms)
        decoded = decode(event.topic, encode(event.value))  # as the worker reads it
        records[event.key], _ = fold_event(records.get(event.key), at, decoded)
    return [r for r in records.values() if r]


def identity_of(record: PodRecord) -> Identity:
    return Identity(record["uid"], record["name"], record["node"])


def copy_record(raw: bytes, old: Identity, new: Identity) -> bytes:
    """A stored record (JSON bytes) under another pod's identity; the offsets it applied are
    dropped, as a pod on fresh topics has applied none. The UID's first 8 characters name its
    containers and sandbox (podledger.workload), so they change too."""
    out = (
        raw.replace(old.uid.encode(), new.uid.encode())
        .replace(f"{old.uid[:8]}-".encode(), f"{new.uid[:8]}-".encode())
        .replace(f'"{old.name}'.encode(), f'"{new.name}'.encode())
        .replace(f"={old.name}_".encode(), f"={new.name}_".encode())
        .replace(f'"{old.node}"'.encode(), f'"{new.node}"'.encode())
    )
    record = orjson.loads(out)
    record["applied"] = {}
    return orjson.dumps(record)


def pod_identity(index: int, nodes: int) -> Identity:
    uid = f"{index:08x}-0000-4000-8000-{index:012x}"
    return Identity(uid, f"pod-{index:07d}", f"node-{index % nodes:05d}")


def deletion(record: PodRecord, ts_ms: int) -> models.PodUpdate:
    """A graceful deletion of the record's pod: DELETE with a deletionTimestamp."""
    assert record["pod"] is not None
    meta = {**record["pod"]["metadata"], "deletionTimestamp": rfc3339(ts_ms / 1000)}
    pod = {**record["pod"], "metadata": meta}
    return models.PodUpdate(PodOp.DELETE, record["source"], record["node"], pod, ts_ms)


async def fill_state(settings: Settings, pods: int) -> tuple[int, dict[int, PodRecord]]:
    """Write `pods` records to fold-state; returns their bytes and one stored record per partition."""
    samples = [(identity_of(r), orjson.dumps(r)) for r in sample_records(min(SAMPLE_PODS, pods))]
    nodes = max(pods // 100, settings.partitions)
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.bootstrap,
        acks="all",
        linger_ms=5,
        max_batch_size=1 << 20,
        max_request_size=8 << 20,
        **settings.kafka_client_options(),
    )
    chosen: dict[int, PodRecord] = {}
    size = 0
    await producer.start()
    try:
        for i in range(pods):
            old, raw = samples[i % len(samples)]
            new = pod_identity(i, nodes)
            value = copy_record(raw, old, new)
            partition = partition_for_node(new.node, settings.partitions)
            if partition not in chosen:
                chosen[partition] = orjson.loads(value)
            size += len(value)
            await producer.send(
                settings.topic(Topic.FOLD_STATE), key=new.uid.encode(), value=value, partition=partition
            )
        await producer.flush()
    finally:
        await producer.stop()
    return size, chosen


async def put_takeover_inputs(settings: Settings, chosen: dict[int, PodRecord]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap, **settings.kafka_client_options())
    await producer.start()
    try:
        now = int(time.time() * 1000)
        for partition, record in sorted(chosen.items()):
            await producer.send_and_wait(
                settings.topic(Topic.POD_UPDATES),
                key=record["uid"].encode(),
                value=encode(deletion(record, now)),
                partition=partition,
                timestamp_ms=now,
            )
    finally:
        await producer.stop()


async def fold_group_members(admin: AIOKafkaAdminClient, settings: Settings) -> set[str]:
    """The member ids of the fold's consumer group once it is stable (its partitions handed out);
    none while it rebalances."""
    (described,) = await admin.describe_consumer_groups([settings.fold_app_id])
    _, _, state, _, _, members, *_ = described.groups[0]  # error, id, state, type, protocol, members
    return {member[0] for member in members} if state == "Stable" else set()


async def watch_takeover(
    settings: Settings, worker: Any, started: float, partitions: list[int]
) -> tuple[float, float]:
    """(start -> assigned, assigned -> each of `partitions` folded its input), polled every 50 ms.

    A moment is taken when the poll that sees it begins, and the folding one when its poll ends:
    a worker can restore and fold between two polls, and its restore is then timed as the poll
    that saw both, never as zero."""
    admin = admin_client(settings, "podledger-bench-recovery")
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap, **settings.kafka_client_options())
    await admin.start()
    await consumer.start()
    journal = [TopicPartition(settings.topic(Topic.JOURNAL), p) for p in partitions]
    assigned: float | None = None
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline:
            if worker.poll() is not None:
                raise UserError(f"the fold worker exited with {worker.returncode}")
            polled = time.monotonic()
            if assigned is None and await fold_group_members(admin, settings):
                assigned = polled
            if assigned is not None and all(n > 0 for n in (await consumer.end_offsets(journal)).values()):
                return assigned - started, time.monotonic() - assigned
            await asyncio.sleep(0.05)
    finally:
        await consumer.stop()
        await admin.close()
    raise UserError("the fold worker did not fold the takeover inputs within 600 s")


async def takeover_versions(settings: Settings, chosen: dict[int, PodRecord]) -> dict[str, int]:
    """The version each takeover input made, read from pod-status-history."""
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap, **settings.kafka_client_options())
    await consumer.start()
    versions: dict[str, int] = {}
    try:
        for partition in chosen:
            tp = TopicPartition(settings.topic(Topic.POD_STATUS_HISTORY), partition)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            for record in (await consumer.getmany(tp, timeout_ms=5000)).get(tp, []):
                vs = decode(Topic.POD_STATUS_HISTORY, record.value)
                versions[vs.uid] = vs.version
    finally:
        await consumer.stop()
    return versions


def bench_recovery(base: Settings, *, pods: int, partitions: int) -> RecoveryFigures:
    settings = bench_settings(base, partitions=partitions)
    figures = RecoveryFigures(pods=pods, partitions=partitions)
    asyncio.run(ensure_topics(settings))
    say(f"topics {settings.topic_prefix}* ({partitions} partitions) on {settings.bootstrap}")
    t = time.monotonic()
    size, chosen = asyncio.run(fill_state(settings, pods))
    figures.state_mb = size / 2**20
    say(f"stored {pods} records ({figures.state_mb:.0f} MB) on fold-state in {time.monotonic() - t:.1f}s")
    asyncio.run(put_takeover_inputs(settings, chosen))

    started = time.monotonic()
    worker = start_service(settings, "fold")
    try:
        figures.startup_s, figures.restore_s = asyncio.run(
            watch_takeover(settings, worker, started, sorted(chosen))
        )
        figures.rss_mb, figures.rss_now_mb = peak_rss_mb(worker.pid), rss_mb(worker.pid)
    finally:
        stop_service(worker)
    say(f"assigned after {figures.startup_s:.1f}s, folding again {figures.restore_s:.2f}s later")

    versions = asyncio.run(takeover_versions(settings, chosen))
    wrong = {r["uid"]: (versions.get(r["uid"]), r["version"] + 1) for r in chosen.values()}
    wrong = {uid: pair for uid, pair in wrong.items() if pair[0] != pair[1]}
    if wrong:
        raise UserError(f"takeover versions do not follow the stored ones (got, expected): {wrong}")
    return figures


def rss_mb(pid: int) -> float:
    """A process's resident set now (VmRSS), in MB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def print_recovery(figures: RecoveryFigures) -> None:
    print(f"{machine()}; pods={figures.pods} partitions={figures.partitions}")
    print(f"fold-state:                     {figures.pods:,} records, {figures.state_mb:,.0f} MB")
    print(f"worker start -> assigned:       {figures.startup_s:.2f} s")
    print(
        f"assigned -> folding again:      {figures.restore_s:.2f} s"
        f"  ({figures.records_per_s:,.0f} records/s restored)"
    )
    print(f"fold worker RSS:                peak {figures.rss_mb:,.0f} MB, now {figures.rss_now_mb:,.0f} MB")
    print(figures.line())
