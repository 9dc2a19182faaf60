"""`podledger bench audit`: fill an audit index with N versions, then time history and why.

The history is real fold output, made without Kafka: a template of pods living through the
synthetic workload (podledger/workload.py: start, readiness, crash, back-off) is folded with the
fold's own step, then cloned under fresh UIDs and names until N versions exist, with all pods
living at once (their records interleave on the topics, as on a cluster). Every record goes
through the index's insert path (`AuditIndex.add`, as `podledger index` uses it) in the
builder's catch-up batches, inside one `catching_up` block as the builder's catch-up from an
empty index; the rate counts the time spent there (wall and CPU, the pod indexes built at the
end included), not the making of the copies. Then `history` and `why` of random pods are timed
through the same query functions the commands call, on the file opened read-only.
"""

from __future__ import annotations

import gc
import os
import random
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from podledger.bench.harness import machine, percentile, say
from podledger.partitioner import partition_for_node
from podledger.read.audit import queries, render
from podledger.read.audit.parse import PodRef
from podledger.read.index import RawRecord, SqliteIndex
from podledger.read.index.builder import CATCH_UP_RECORDS
from podledger.streams.fold import Coordinates, PodRecord, fold_event
from podledger.types import Topic
from podledger.workload import workload

TEMPLATE_PODS = 100
T = TypeVar("T")
PARTITIONS = 6


@dataclass
class AuditFigures:
    versions: int
    entries: int
    pods: int
    index_s: float
    index_cpu_s: float  # this process's CPU time while indexing (the machine is shared: wall time varies)
    history_ms: list[float]
    why_ms: list[float]
    index_mb: float


@dataclass(frozen=True, slots=True)
class Template:
    """Template pods' fold output: (uid, topic, partition, value) in the order the fold wrote
    them (pods interleaved, as on a node), and each pod's name."""

    records: list[tuple[str, str, int, bytes]]
    names: dict[str, str]


def fold_template(pods: int, versions_per_pod: int, seed: int = 1) -> Template:
    """`pods` pods folded through about `versions_per_pod` versions each."""
    records: dict[str, PodRecord | None] = {}
    out: list[tuple[str, str, int, bytes]] = []
    names: dict[str, str] = {}
    offsets: dict[tuple[str, int], int] = {}
    events = pods * (versions_per_pod + versions_per_pod // 10 + 1)
    for e in workload(pods, events, nodes=PARTITIONS * 3, seed=seed, start_ms=1_700_000_000_000):
        partition = partition_for_node(e.node, PARTITIONS)
        offset = offsets.get((e.topic, partition), 0)
        offsets[(e.topic, partition)] = offset + 1
        at = Coordinates(e.topic, partition, offset, e.ts_ms)
        record, outputs = fold_event(records.get(e.key), at, e.value)
        records[e.key] = record
        if e.topic == Topic.POD_UPDATES:
            names[e.key] = e.value.pod["metadata"]["name"]
        out += [
            (e.key, o.topic, partition, o.wire_value() or b"")
            for o in outputs
            if o.topic in (Topic.JOURNAL, Topic.POD_STATUS_HISTORY)
        ]
    return Template(out, names)


def clones(
    template: Template, versions: int, at_once: int = 1, seed: int = 2
) -> Iterator[tuple[str, RawRecord]]:
    """(uid, record) of copies of the template under fresh UIDs and names until `versions`
    versions were made. `at_once` copies live side by side: their records interleave on the
    topics as the pods of many nodes do, each copy's records in the template's order."""
    rng = random.Random(seed)
    offsets: dict[tuple[str, int], int] = {}
    per_copy = max(sum(topic == Topic.POD_STATUS_HISTORY for _, topic, _, _ in template.records), 1)
    made, copy = 0, 0
    while made < versions:
        group = range(copy, copy + min(at_once, -(-(versions - made) // per_copy)))
        renamed = [
            {
                uid: (str(uuid.UUID(int=rng.getrandbits(128), version=4)), f"{name}-c{c:05d}")
                for uid, name in template.names.items()
            }
            for c in group
        ]
        for old_uid, topic, partition, value in template.records:
            old_name = template.names[old_uid].encode()
            for names in renamed:
                if topic == Topic.POD_STATUS_HISTORY:
                    if made >= versions:
                        return
                    made += 1
                uid, name = names[old_uid]
                offset = offsets.get((topic, partition), 0)
                offsets[(topic, partition)] = offset + 1
                copied = value.replace(old_uid.encode(), uid.encode()).replace(old_name, name.encode())
                yield uid, RawRecord(topic, partition, offset, uid.encode(), copied)
        copy += len(group)


class _Clock:
    """Wall and CPU seconds spent inside its `with` block, less what `excluding` leaves out."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0

    def _now(self) -> tuple[float, float]:
        return time.monotonic(), time.process_time()

    def __enter__(self) -> None:
        t, c = self._now()
        self.wall, self.cpu = self.wall - t, self.cpu - c

    def __exit__(self, *_: object) -> None:
        t, c = self._now()
        self.wall, self.cpu = self.wall + t, self.cpu + c

    def wall_so_far(self) -> float:
        """Inside the block: the wall seconds counted up to now."""
        return self.wall + time.monotonic()

    def excluding(self, items: Iterator[T]) -> Iterator[T]:
        """`items`, the time spent making each one left out of the clock."""
        while True:
            self.__exit__()
            item = next(items, None)
            self.__enter__()
            if item is None:
                return
            yield item


@dataclass
class _Feed:
    """The clones in the builder's catch-up batches, counting their pods and journal entries."""

    uids: dict[str, None] = field(default_factory=dict)  # every pod, in order of appearance
    entries: int = 0

    def batches(self, records: Iterator[tuple[str, RawRecord]]) -> Iterator[list[RawRecord]]:
        batch: list[RawRecord] = []
        for uid, record in records:
            self.uids[uid] = None
            self.entries += record.topic == Topic.JOURNAL
            batch.append(record)
            if len(batch) >= CATCH_UP_RECORDS:
                yield batch
                batch = []
        if batch:
            yield batch


def bench_audit(versions: int, pods: int, queries_n: int = 200, index_path: str = "") -> AuditFigures:
    per_pod = max(versions // max(pods, 1), 1)
    template_pods = min(TEMPLATE_PODS, pods)
    say(f"folding {template_pods} template pods through ~{per_pod} versions each ...")
    template = fold_template(template_pods, per_pod)
    template_versions = sum(topic == Topic.POD_STATUS_HISTORY for _, topic, _, _ in template.records)
    records_expected = versions * len(template.records) // max(template_versions, 1)
    workdir = None if index_path else tempfile.TemporaryDirectory(prefix="podledger-bench-audit-")
    path = Path(index_path) if index_path else Path(workdir.name) / "audit.sqlite"  # type: ignore[union-attr]
    try:
        index = SqliteIndex(path, topics="bench")
        feed, clock, stored = _Feed(), _Clock(), 0
        say(f"indexing {versions} versions and their journal entries ...")
        last = time.monotonic()
        copies = clones(template, versions, at_once=max(pods // template_pods, 1))
        # Timed: the insert path as `podledger index` catches up, with the pod indexes built at the
        # end of a bulk load; not the making of the copies.
        with clock, index.catching_up(records_expected):
            for batch in clock.excluding(feed.batches(copies)):
                stored += index.add(batch)
                if time.monotonic() - last > 10:
                    last = time.monotonic()
                    say(f"{stored} versions indexed ({stored / clock.wall_so_far():.0f}/s)")
        index.close()
        unique = list(feed.uids)
        reader = SqliteIndex(path, read_only=True)
        rng = random.Random(3)
        history_ms, why_ms = [], []
        # What exists before the timing (imports, the template, the UIDs) lives to the end: frozen
        # out of the collector's full scans, which would otherwise land in random queries' times,
        # as a long-running reader would freeze what it made at its start.
        gc.collect()
        gc.freeze()
        say(f"timing history and why of {queries_n} random pods among {len(unique)} ...")
        for _ in range(queries_n):
            ref = PodRef(uid=rng.choice(unique))
            t0 = time.perf_counter()
            lives = queries.history(reader, ref)
            render.history_lines(lives)
            history_ms.append((time.perf_counter() - t0) * 1000)
            newest = lives[-1]["versions"][-1]["version"]
            t0 = time.perf_counter()
            render.why_lines(queries.why(reader, ref, version=rng.randint(1, newest)))
            why_ms.append((time.perf_counter() - t0) * 1000)
        size = reader.size_bytes()
        reader.close()
        return AuditFigures(
            stored, feed.entries, len(unique), clock.wall, clock.cpu, history_ms, why_ms, size / 2**20
        )
    finally:
        if workdir is not None:
            workdir.cleanup()


def print_audit(f: AuditFigures) -> None:
    rate = f.versions / f.index_s if f.index_s else float("nan")
    h50, h99 = percentile(f.history_ms, 50), percentile(f.history_ms, 99)
    w50, w99 = percentile(f.why_ms, 50), percentile(f.why_ms, 99)
    print(f"{machine()}, load average {os.getloadavg()[0]:.1f} at the end")
    print(f"history: {f.versions} versions and {f.entries} journal entries of {f.pods} pods")
    per_cpu_s = f.versions / f.index_cpu_s if f.index_cpu_s else float("nan")
    print(
        f"indexing: {f.index_s:.1f}s, {rate:.0f} versions/s ({per_cpu_s:.0f} per CPU second),"
        f" index file {f.index_mb:.0f} MB"
    )
    print(f"history of one pod: p50 {h50:.1f} ms, p99 {h99:.1f} ms; why: p50 {w50:.1f} ms, p99 {w99:.1f} ms")
    print(
        f"audit versions={f.versions} index_versions_per_s={rate:.0f} history_p50_ms={h50:.1f}"
        f" history_p99_ms={h99:.1f} why_p99_ms={w99:.1f} index_mb={f.index_mb:.0f}"
    )
