"""What a consumer may rely on (docs/guarantees.md), checked from the consumer's side on the real broker.

Two fold workers share the partitions while a workload streams in; both are SIGKILLed mid-burst
and started again. Some pods are then removed, and one pod is removed and announced again under the
same UID, as a static pod whose manifest comes back. Meanwhile a consumer group reads
pod-status-history, commits less than it processed, stops, and a second member of the group
resumes. Then, reading the topics as a consumer would:

- pod-status-history: per pod UID in offset order, each version is the previous one plus 1, or an
  exact copy of one already seen (at-least-once), or version 1 with a cause never seen: the pod's
  next life after its removal. One (uid, life, version) never carries two values;
- pod-status: per UID, versions rise within a life and a tombstone ends it; the last record of each
  UID is the newest version of a live pod, or the tombstone of a removed one;
- journal: per pod and input topic, input offsets rise, except exact copies;
- the resumed group member starts at the committed offsets, and what both members saw covers every
  offset of the topic: no gap.
"""

from __future__ import annotations

import asyncio
import random
import signal
import sys
import time
from dataclasses import dataclass

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from podledger.config import Settings
from podledger.schemas import decode, models
from podledger.streams.topics import ensure_topics
from podledger.types import PodOp, Topic
from podledger.workload import IngressEvent, PodLife, produce, workload
from tests.support import wait_for
from tests.support.kafka import read_records
from tests.support.processes import podledger_env

pytestmark = pytest.mark.kafka

PODS, EVENTS, REMOVED = 40, 1200, 6
GROUP_REDELIVERED = 2  # per partition, records the first group member processed but did not commit


@dataclass(frozen=True, slots=True)
class Record:
    partition: int
    offset: int
    key: bytes
    value: bytes | None


def records_of(settings: Settings, topic: str) -> list[Record]:
    return [Record(r.partition, r.offset, r.key, r.value) for r in asyncio.run(read_records(settings, topic))]


def in_offset_order(records: list[Record]) -> list[Record]:
    return sorted(records, key=lambda r: (r.partition, r.offset))


def lives_of_history(records: list[Record]) -> tuple[dict[tuple[str, int], list[int]], int]:
    """{(uid, life): versions in first-seen order} and the number of exact copies, asserting the
    per-pod rules of pod-status-history."""
    last: dict[str, tuple[int, int]] = {}  # uid -> (life, newest version)
    seen: dict[tuple[str, int, int], models.VersionedPodStatus] = {}
    lives: dict[tuple[str, int], list[int]] = {}
    copies = 0
    for record in in_offset_order(records):
        assert record.value is not None, f"a tombstone on pod-status-history at {record}"
        vs = decode(Topic.POD_STATUS_HISTORY, record.value)
        assert record.key == vs.uid.encode(), f"keyed by UID: {record}"
        life, newest = last.get(vs.uid, (0, 0))
        earlier = seen.get((vs.uid, life, vs.version))
        if life and vs.version == newest + 1:
            pass
        elif earlier is not None and earlier.cause == vs.cause:  # republished: the same input's version
            assert earlier == vs, f"{vs.uid} v{vs.version} (life {life}) carries two values"
            copies += 1
            continue
        elif vs.version == 1:
            life += 1  # the UID's next life: an input never seen before caused its first version
        else:
            where = f"{record.partition}/{record.offset}"
            raise AssertionError(f"{vs.uid}: v{vs.version} after v{newest} (life {life}) at {where}")
        seen[(vs.uid, life, vs.version)] = vs
        last[vs.uid] = (life, vs.version)
        lives.setdefault((vs.uid, life), []).append(vs.version)
    return lives, copies


def check_pod_status(records: list[Record]) -> dict[str, models.VersionedPodStatus | None]:
    """The last pod-status record of each UID (None: a tombstone), asserting that within a life
    versions rise (they may skip once compaction has run) or repeat as exact copies, that a
    tombstone ends a life, and that the last record of a live pod is its newest version."""
    newest: dict[str, int] = {}  # uid -> newest version of its current life (0: none yet)
    life: dict[tuple[str, int], models.VersionedPodStatus] = {}  # the current lives' versions
    last: dict[str, models.VersionedPodStatus | None] = {}
    for record in in_offset_order(records):
        uid = record.key.decode()
        if record.value is None:
            newest[uid], last[uid] = 0, None
            life = {key: vs for key, vs in life.items() if key[0] != uid}
            continue
        vs = decode(Topic.POD_STATUS, record.value)
        if vs.version <= newest.get(uid, 0):
            assert life.get((uid, vs.version)) == vs, f"{uid}: v{vs.version} again, not a copy"
        newest[uid] = max(newest.get(uid, 0), vs.version)
        life[(uid, vs.version)] = last[uid] = vs
    for uid, vs in last.items():
        assert vs is None or vs.version == newest[uid], f"{uid}: pod-status ends at v{vs.version}"
    return last


def check_journal(records: list[Record]) -> int:
    """Distinct journal entries, asserting that each pod's events of each input topic are journaled
    in their input order (copies are exact). Across pods the order may differ from the input's: an
    event held for its pod's announcement is applied, and journaled, once the pod is announced."""
    newest: dict[tuple[int, bytes, str], int] = {}
    values: dict[tuple[int, str, int], bytes] = {}
    for record in in_offset_order(records):
        assert record.value is not None
        entry = decode(Topic.JOURNAL, record.value)
        assert entry.partition == record.partition, f"a journal entry off its input's partition: {record}"
        where, pod = (
            (record.partition, entry.topic, entry.offset),
            (record.partition, record.key, entry.topic),
        )
        if where in values:
            assert values[where] == record.value, f"two journal entries for input {where}"
            continue
        assert entry.offset > newest.get(pod, -1), f"a pod's input out of order in the journal at {record}"
        newest[pod] = entry.offset
        values[where] = record.value
    return len(values)


async def group_read(
    settings: Settings, group: str, *, until: dict[int, int] | None = None, at_most: int = 0
) -> tuple[list[Record], dict[int, int]]:
    """A consumer group member on pod-status-history: the records it processed, and the offsets it
    committed. With `at_most`, it stops after about that many and commits all but a few per
    partition (a consumer that dies between processing and committing); with `until`, it reads up
    to those end offsets and commits them."""
    consumer = AIOKafkaConsumer(
        settings.topic(Topic.POD_STATUS_HISTORY),
        bootstrap_servers=settings.bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    got: list[Record] = []
    try:
        async with asyncio.timeout(90):
            while True:
                batch = await consumer.getmany(timeout_ms=1000, max_records=50)
                got += [Record(r.partition, r.offset, r.key, r.value) for rs in batch.values() for r in rs]
                if at_most and len(got) >= at_most:
                    break
                reached = {
                    p: max((r.offset for r in got if r.partition == p), default=-1) for p in until or {}
                }
                if until is not None and all(reached[p] + 1 >= end for p, end in until.items()):
                    break
        commit: dict[int, int] = {}
        for partition in {r.partition for r in got}:
            offsets = sorted(r.offset for r in got if r.partition == partition)
            keep = GROUP_REDELIVERED if at_most else 0
            commit[partition] = offsets[max(len(offsets) - keep, 0)] if keep else offsets[-1] + 1
        topic = settings.topic(Topic.POD_STATUS_HISTORY)
        await consumer.commit({TopicPartition(topic, p): offset for p, offset in commit.items()})
        return got, commit
    finally:
        await consumer.stop()


def settled(settings: Settings, topic: str) -> list[Record] | None:
    """The topic's records once two reads two seconds apart find the same number."""
    before = len(records_of(settings, topic))
    time.sleep(2)
    records = records_of(settings, topic)
    return records if len(records) == before else None


def static_pod_lives(node: str, start_ms: int) -> tuple[list[IngressEvent], list[IngressEvent]]:
    """A pod's first life (announced, five events, removed) and its second (announced again with
    the same UID, three events), as a static pod whose manifest is removed and put back."""
    first = PodLife(PODS, node, random.Random(99), start_ms)
    second = PodLife(PODS, node, random.Random(99), start_ms)  # same seed: same UID
    assert first.uid == second.uid
    ts = start_ms
    one = [first.next_event(ts := ts + 5) for _ in range(6)] + [first.remove(ts := ts + 5)]
    return one, [second.next_event(start_ms + 10_000 + 5 * i) for i in range(4)]


def removal(add: IngressEvent, ts: int) -> IngressEvent:
    value = models.PodUpdate(PodOp.REMOVE, add.value.source, add.node, add.value.pod, ts)
    return IngressEvent(Topic.POD_UPDATES, add.key, add.node, value, ts)


def test_a_consumer_sees_ordered_versions_one_value_each_and_resumes_without_a_gap(
    settings: Settings, podledger_process
) -> None:
    asyncio.run(ensure_topics(settings))
    env = podledger_env(settings, None, PODLEDGER_SESSION_TIMEOUT_MS="6000", PODLEDGER_FOLD_BATCH_SIZE="20")
    workers = {name: podledger_process(["run", "--roles", "fold"], env=env) for name in ("a", "b")}
    events = list(workload(PODS, EVENTS, nodes=6, seed=7))
    first_life, second_life = static_pod_lives("node-static", events[0].ts_ms)
    end_ms = events[-1].ts_ms + 20_000
    removals = [removal(add, end_ms + i) for i, add in enumerate(events[:REMOVED])]
    total = EVENTS + len(first_life) + len(second_life) + REMOVED

    # A burst, SIGKILL while it is folded, the rest of the workload, new workers.
    asyncio.run(produce(settings, events[: EVENTS * 5 // 6] + first_life[:-1]))
    wait_for(lambda: len(records_of(settings, Topic.JOURNAL)) >= 40, 180, 0.1, "folding under way")
    for name in workers:  # both: whichever is folding is cut mid-batch
        workers[name].stop(signal.SIGKILL, timeout=10)
    asyncio.run(produce(settings, events[EVENTS * 5 // 6 :]))
    workers = {name: podledger_process(["run", "--roles", "fold"], env=env) for name in workers}

    # The first group member processes part of the history, commits less than it processed, stops.
    wait_for(lambda: len(records_of(settings, Topic.POD_STATUS_HISTORY)) >= 300, 180, 1, "300 versions")
    group = f"{settings.topic_prefix}consumer"
    first_seen, committed = asyncio.run(group_read(settings, group, at_most=200))

    # Removals only once their pods' events are folded: the ingress topics are read independently,
    # so a REMOVE sent earlier could overtake them (docs/guarantees.md, "Per-pod order").
    def journaled(n: int) -> None:
        wait_for(
            lambda: check_journal(records_of(settings, Topic.JOURNAL)) >= n, 240, 1, f"{n} journal entries"
        )

    journaled(EVENTS + len(first_life) - 1)
    asyncio.run(produce(settings, [*removals, first_life[-1]]))
    journaled(EVENTS + len(first_life) + REMOVED)
    asyncio.run(produce(settings, second_life))
    journaled(total)
    history = wait_for(lambda: settled(settings, Topic.POD_STATUS_HISTORY), 60, 1, "the history to settle")

    # Resuming: the second member starts where the group committed; together they saw every offset.
    ends = {p: max(r.offset for r in history if r.partition == p) + 1 for p in {r.partition for r in history}}
    second_seen, _ = asyncio.run(group_read(settings, group, until=ends))
    for partition, offset in committed.items():
        first_after = min(r.offset for r in second_seen if r.partition == partition)
        assert first_after == offset, f"partition {partition}: resumed at {first_after}, committed {offset}"
    union = {(r.partition, r.offset): r.value for r in first_seen + second_seen}
    assert sorted(union) == sorted((r.partition, r.offset) for r in history), "a gap between the two members"
    assert all(union[(r.partition, r.offset)] == r.value for r in history)
    redelivered = len(first_seen) + len(second_seen) - len(union)
    processed = {p: max(r.offset for r in first_seen if r.partition == p) + 1 for p in committed}
    assert redelivered == sum(processed[p] - committed[p] for p in committed) > 0  # uncommitted: again

    # Per-pod order, one value per version, versions 1..N per life, the returning pod's two lives.
    lives, copies = lives_of_history(history)
    returning = first_life[0].key
    assert sorted(life for uid, life in lives if uid == returning) == [1, 2]
    assert {uid for uid, _ in lives} == {e.key for e in events[:PODS]} | {returning}
    assert all(versions == list(range(1, len(versions) + 1)) for versions in lives.values())

    # pod-status: the newest version of each live pod, a tombstone for each removed one.
    latest = check_pod_status(records_of(settings, Topic.POD_STATUS))
    removed = {add.key for add in removals}
    assert {uid for uid, vs in latest.items() if vs is None} == removed
    newest_life = {uid: max(life for u, life in lives if u == uid) for uid, _ in lives}
    for uid, vs in latest.items():
        if vs is not None:
            assert vs.version == len(lives[(uid, newest_life[uid])]), uid

    assert check_journal(records_of(settings, Topic.JOURNAL)) == total
    tails = sum(w.output().count("re-applied journal") for w in workers.values())  # the new workers
    sys.stderr.write(
        f"versions: {len(history)} records, {copies} exact copies after the kill ({tails} journal tails"
        f" re-applied); group: committed {committed}, {redelivered} redelivered; lives: {len(lives)}"
        f" for {len(newest_life)} UIDs\n"
    )
