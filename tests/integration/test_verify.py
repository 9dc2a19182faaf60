"""`podledger verify` on the real broker: what the fold wrote verifies clean, also after a worker
was killed mid-run; each attack someone with write access to the topics can make is named.

A Kafka record cannot be edited or removed from the middle of a partition, so the attacks are
made as such an attacker would: append a forged version to the live history, or publish a copy
of the topics (records, headers and timestamps) under another prefix with one history record
altered, or one journal entry left out, and hand that copy to verify as the ledger."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaProducer, ConsumerRecord, TopicPartition

from podledger.config import Settings
from podledger.kafka import new_consumer
from podledger.schemas import chain
from podledger.streams.topics import ensure_topics
from podledger.workload import produce, workload
from tests.support import wait_for
from tests.support.kafka import read_records
from tests.support.processes import podledger_env, run_podledger

pytestmark = pytest.mark.kafka

PODS, EVENTS = 30, 600


def verify(settings: Settings, *args: str) -> tuple[int, dict[str, str], str]:
    """`podledger verify` as a user runs it: (exit code, the last line's fields, stdout)."""
    done = run_podledger("verify", *args, env=podledger_env(settings), timeout=300)
    lines = done.stdout.strip().splitlines()
    assert lines and lines[-1].startswith("verify versions="), done.stdout + done.stderr
    fields = dict(part.split("=", 1) for part in lines[-1].split()[1:])
    fields |= dict(part.split("=", 1) for part in lines[-2].split()[1:])  # the detail line
    return done.returncode, fields, done.stdout


def journal_count(settings: Settings) -> int:
    return len(asyncio.run(read_records(settings, "journal")))


def reapplied(logs: Path) -> int:
    """How many journal tails the workers logging into `logs` re-applied after a restart."""
    return sum(
        log.read_text(errors="replace").count("re-applied journal") for log in logs.glob("podledger-*.log")
    )


async def journal_grows(settings: Settings, before: int, timeout: float) -> None:
    """Return as soon as the journal's summed end offsets pass `before`."""
    consumer = new_consumer(settings)
    await consumer.start()
    try:
        tps = [TopicPartition(settings.topic("journal"), p) for p in range(settings.partitions)]
        async with asyncio.timeout(timeout):
            while sum((await consumer.end_offsets(tps)).values()) <= before:
                await asyncio.sleep(0.02)
    finally:
        await consumer.stop()


def journal_end(settings: Settings) -> int:
    """The journal's end offsets, summed: it grows while a worker folds."""

    async def ends() -> int:
        consumer = new_consumer(settings)
        await consumer.start()
        try:
            tps = [TopicPartition(settings.topic("journal"), p) for p in range(settings.partitions)]
            return sum((await consumer.end_offsets(tps)).values())
        finally:
            await consumer.stop()

    return asyncio.run(ends())


def fold_workload(settings: Settings, podledger_process: Callable[..., Any], seed: int = 3) -> None:
    """Fold a workload to the end and stop the worker (its last versions published)."""
    asyncio.run(ensure_topics(settings))
    proc = podledger_process(["run", "--roles", "fold"], env=podledger_env(settings))
    asyncio.run(produce(settings, workload(PODS, EVENTS, nodes=5, seed=seed)))
    wait_for(
        lambda: journal_count(settings) >= EVENTS, timeout=180, interval=1, what="the journal", alive=proc
    )
    assert proc.stop() == 0, proc.output()


async def write(
    settings: Settings, topic: str, records: list[tuple[int, bytes, bytes | None, Any, int]]
) -> None:
    """(partition, key, value, headers, timestamp) records onto `topic`, in order."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    try:
        sent = [
            await producer.send(
                settings.topic(topic), key=k, value=v, partition=p, headers=list(h), timestamp_ms=ts
            )
            for p, k, v, h, ts in records
        ]
        await asyncio.gather(*sent)
    finally:
        await producer.stop()


def copy_ledger(
    source: Settings, target: Settings, change: Callable[[str, ConsumerRecord], list[ConsumerRecord]]
) -> None:
    """Journal and history of `source` republished under `target`'s prefix, record by record with
    headers and timestamps; `change(topic, record)` returns what to write in its place."""
    asyncio.run(ensure_topics(target))
    for topic in ("pod-status-history", "journal"):
        records = sorted(asyncio.run(read_records(source, topic)), key=lambda r: (r.partition, r.offset))
        out = [
            (r.partition, r.key, r.value, r.headers, r.timestamp)
            for rec in records
            for r in change(topic, rec)
        ]
        asyncio.run(write(target, topic, out))


def coordinates(record: ConsumerRecord) -> tuple[int, int]:
    return record.partition, record.offset


def input_of(journal_record: ConsumerRecord) -> tuple[str, int, int]:
    entry = orjson.loads(journal_record.value)
    return entry["topic"], entry["partition"], entry["offset"]


def copy_settings(settings: Settings, name: str) -> Settings:
    return Settings.from_env(
        env={}, bootstrap=settings.bootstrap, topic_prefix=f"{settings.topic_prefix}{name}.", partitions=3
    )


def test_verify_is_clean_and_names_a_forged_version_an_edited_record_and_a_left_out_entry(
    settings: Settings, podledger_process
) -> None:
    fold_workload(settings, podledger_process)
    history = asyncio.run(read_records(settings, "pod-status-history"))
    journal = asyncio.run(read_records(settings, "journal"))
    # Every record of the audit trail carries its link, and the links hold.
    assert all(chain.read_link(r.headers) is not None for r in [*history, *journal])
    code, fields, out = verify(settings)
    assert code == 0, out
    assert fields["mismatches"] == "0" and fields["broken_links"] == "0"
    assert int(fields["versions"]) == len(
        {(orjson.loads(r.value)["uid"], orjson.loads(r.value)["version"]) for r in history}
    )
    assert fields["journal_entries"] == str(len(journal)) and float(fields["events_per_s"]) > 0
    duplicates = int(fields["duplicates"])  # resends, if the broker refused a write meanwhile
    code, window, out = verify(settings, "--since", "1h", "--partition", "1")
    assert code == 0 and 0 < int(window["versions"]) < int(fields["versions"]), out

    # 1. A copy with one history record altered: its link and its version are named.
    victim = history[len(history) // 2]

    def alter(topic: str, r: ConsumerRecord) -> list[ConsumerRecord]:
        if topic == "pod-status-history" and (r.partition, r.offset) == (victim.partition, victim.offset):
            value = orjson.loads(r.value)
            value["status"]["phase"] = "Unknown"
            return [dataclasses.replace(r, value=orjson.dumps(value))]
        return [r]

    altered = copy_settings(settings, "altered")
    copy_ledger(settings, altered, alter)
    code, fields, out = verify(altered)
    assert code == 1 and fields["broken_links"] == "1" and fields["mismatches"] == "1", out
    assert f"altered link: pod-status-history partition {victim.partition} offset {victim.offset}:" in out
    assert f"first divergence: pod-status-history partition {victim.partition} offset {victim.offset}:" in out
    assert 'status.phase: "Unknown" |' in out

    # 2. A copy with one journal entry left out (one that made a version): the entry after it no
    # longer links, and the re-fold no longer gives what history says.
    cause = orjson.loads(history[len(history) // 3].value)["cause"]
    made_it = (cause["topic"], cause["partition"], cause["offset"])
    [dropped] = [r for r in journal if input_of(r) == made_it]

    def leave_out(topic: str, r: ConsumerRecord) -> list[ConsumerRecord]:
        return [] if topic == "journal" and coordinates(r) == coordinates(dropped) else [r]

    short = copy_settings(settings, "short")
    copy_ledger(settings, short, leave_out)
    code, fields, out = verify(short)
    assert code == 1 and fields["broken_links"] == "1" and int(fields["mismatches"]) >= 1, out
    # In the copy the next entry takes the left-out one's offset.
    assert f"broken link: journal partition {dropped.partition} offset {dropped.offset}:" in out
    assert "first divergence: pod-status-history" in out

    # 3. A copy with exact re-sends (what deliver_batched leaves after a refused write): benign.
    twice = {("pod-status-history", victim.partition, victim.offset), ("journal", *coordinates(dropped))}

    def resend(topic: str, r: ConsumerRecord) -> list[ConsumerRecord]:
        return [r, r] if (topic, *coordinates(r)) in twice else [r]

    resent = copy_settings(settings, "resent")
    copy_ledger(settings, resent, resend)
    code, fields, out = verify(resent)
    assert code == 0 and fields["mismatches"] == "0" and fields["broken_links"] == "0", out
    assert int(fields["duplicates"]) == duplicates + 2, out

    # 4. A forged version appended to the live history, for an existing (uid, version), with a
    # valid link: the chain cannot tell, the re-fold does.
    target = random.Random(5).choice([r for r in history if orjson.loads(r.value)["version"] >= 2])
    last = max((r for r in history if r.partition == target.partition), key=lambda r: r.offset)
    forged = orjson.loads(target.value)
    real_phase = forged["status"]["phase"]
    forged["status"]["phase"] = "Failed" if real_phase != "Failed" else "Succeeded"
    forged_value = orjson.dumps(forged)
    _, links = chain.link(chain.head_after(last.headers), target.key, forged_value)
    asyncio.run(
        write(
            settings,
            "pod-status-history",
            [(target.partition, target.key, forged_value, links, last.timestamp)],
        )
    )
    code, fields, out = verify(settings)
    assert code == 1 and fields["mismatches"] == "1" and fields["broken_links"] == "0", out
    expected = f"first divergence: pod-status-history partition {target.partition} offset {last.offset + 1}:"
    assert expected in out and f"version {forged['version']}" in out
    assert f'status.phase: "{forged["status"]["phase"]}" | "{real_phase}"' in out


def test_a_worker_killed_mid_run_still_verifies_clean(
    settings: Settings, podledger_process, tmp_path: Path
) -> None:
    """Recovery re-applies the journal tail and publishes its versions again: those are duplicates
    (the same value under the same (uid, version)), and the chains go on from the last record.
    Workers are killed as soon as they publish a burst's first journal entries (the moment a
    batch is published but not yet stored) until a successor has re-applied a tail."""
    asyncio.run(ensure_topics(settings))
    env = podledger_env(settings, PODLEDGER_FOLD_BATCH_SIZE="50", PODLEDGER_SESSION_TIMEOUT_MS="6000")
    pods = PODS * 4
    events = list(workload(pods, EVENTS * 6, nodes=6, seed=21))
    proc = podledger_process(["run", "--roles", "fold"], env=env)
    # The announcements first: no event is held for an unannounced pod when a worker dies (held
    # events live in the dead worker's records; their loss is another matter than this test's).
    asyncio.run(produce(settings, events[:pods]))
    wait_for(lambda: journal_end(settings) >= pods, timeout=180, interval=1, alive=proc)
    rounds = 8
    size = (len(events) - pods) // (rounds + 1)
    kills = 0
    for n in range(rounds):
        before = journal_end(settings)
        asyncio.run(produce(settings, events[pods + n * size : pods + (n + 1) * size]))
        asyncio.run(journal_grows(settings, before, timeout=120))
        if reapplied(tmp_path):
            continue  # a tail was re-applied: no more kills needed
        proc.stop(signal.SIGKILL, timeout=10)
        kills += 1
        proc = podledger_process(["run", "--roles", "fold"], env=env)
    asyncio.run(produce(settings, events[pods + rounds * size :]))
    wait_for(lambda: journal_count(settings) >= len(events), timeout=300, interval=2, alive=proc)
    time.sleep(2)
    assert proc.stop() == 0
    code, fields, out = verify(settings)
    assert code == 0, out
    assert fields["mismatches"] == "0" and fields["broken_links"] == "0"
    tails = reapplied(tmp_path)
    print(f"kills: {kills}; tails re-applied: {tails}; duplicates: {fields['duplicates']}")
    assert tails >= 1  # the kills did land mid-batch: the clean result covers recovery
