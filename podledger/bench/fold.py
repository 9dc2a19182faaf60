"""`podledger bench fold`: the fold through a real broker, compared over the same messages with the
offline fold and a bare aiokafka consume-decode-encode-produce loop (the floor any Kafka pipeline in
Python stands on)."""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from aiokafka import AIOKafkaConsumer

from podledger.bench.floor import fan_out, raw_floor
from podledger.bench.harness import (
    bench_settings,
    native_share,
    peak_rss_mb,
    percentile,
    say,
    start_service,
    stop_service,
    topic_count,
    worker_gc,
)
from podledger.bench.offline import bench_offline
from podledger.bench.pacer import produce_apart
from podledger.config import Settings
from podledger.errors import UserError
from podledger.keys import Signer, new_secret, write_keyring_entry
from podledger.local.processes import free_port
from podledger.schemas import decode, encode
from podledger.schemas.origin import derive_keys, verify
from podledger.streams.topics import ensure_topics
from podledger.types import Topic
from podledger.workload import IngressEvent, produce, workload


@dataclass
class FoldFigures:
    events_per_s: float = 0.0
    p50_ms: float = float("nan")
    p99_ms: float = float("nan")
    offline_events_per_s: float = 0.0  # `podledger fold`: the native core where it covers the input
    offline_python_events_per_s: float = 0.0  # the Python fold (streams/replay.py)
    offline_core_events_per_s: float = float("nan")  # the native fold core (streams/foldcore/)
    offline_core_events_per_cpu_s: float = float("nan")  # ... per second of its CPU time
    offline_identical: int = -1  # the core's history byte for byte Python's: 1 yes, 0 no, -1 no core
    offline_floor_events_per_s: float = 0.0  # offline, inputs read and outputs written, no fold
    raw_events_per_s: float = 0.0
    floor_events_per_s: float = 0.0  # the raw loop producing the fold's output volume
    records_per_event: float = 0.0  # that volume: records and bytes published or stored per input
    bytes_per_event: float = 0.0
    rss_mb: float = float("nan")
    latency_samples: int = 0
    latency_rate: int = 0  # events/s offered in the latency phase (0: none)
    sign_us: float = float("nan")  # proof of origin per record: a node agent signs ...
    verify_us: float = float("nan")  # ... and the fold checks it (schemas/origin.py)
    workers: int = 1  # fold worker processes of the scaling run (podledger run --workers)
    events_per_s_n: float = float("nan")  # the pipeline's events/s with that many
    events_per_cpu_s: float = float("nan")  # one worker's events per second of its own CPU time
    gc_full_passes: int = 0  # the worker's full collector passes over the run ...
    gc_longest_ms: float = float("nan")  # ... and its longest collector pause (it stalls the loop)
    latency_gc_full_passes: int = 0  # the worker's full passes during the latency phase ...
    latency_gc_ms: float = float("nan")  # ... and the ms all its passes stalled it then
    native_share: float = -1.0  # the share of the worker's batches its native core folded (-1: no core)
    python_events_per_s: float = float("nan")  # one worker folding in Python, same backlog, same run
    proven_events_per_s: float = float("nan")  # one worker checking proofs of origin (a keyring), ditto

    def line(self) -> str:
        return (
            f"fold events_per_s={self.events_per_s:.0f} p50_ms={self.p50_ms:.1f} p99_ms={self.p99_ms:.1f}"
            f" offline_events_per_s={self.offline_events_per_s:.0f}"
            f" raw_events_per_s={self.raw_events_per_s:.0f}"
            f" floor_events_per_s={self.floor_events_per_s:.0f}"
            f" rss_mb={self.rss_mb:.0f}"
            f" sign_us={self.sign_us:.1f} verify_us={self.verify_us:.1f}"
            f" workers={self.workers} events_per_s_n={self.events_per_s_n:.0f}"
            f" events_per_cpu_s={self.events_per_cpu_s:.0f}"
            f" gc_full_passes={self.gc_full_passes} gc_longest_ms={self.gc_longest_ms:.1f}"
            f" latency_rate={self.latency_rate}"
            f" offline_floor_events_per_s={self.offline_floor_events_per_s:.0f}"
            f" offline_python_events_per_s={self.offline_python_events_per_s:.0f}"
            f" offline_core_events_per_s={self.offline_core_events_per_s:.0f}"
            f" offline_identical={self.offline_identical}"
            f" offline_core_events_per_cpu_s={self.offline_core_events_per_cpu_s:.0f}"
            f" native_share={self.native_share:.3f} python_events_per_s={self.python_events_per_s:.0f}"
            f" proven_events_per_s={self.proven_events_per_s:.0f}"
            f" latency_gc_full_passes={self.latency_gc_full_passes} latency_gc_ms={self.latency_gc_ms:.1f}"
        )


def bench_fold(
    base: Settings,
    *,
    pods: int,
    events: int,
    rate: int | None,
    latency_seconds: float,
    partitions: int,
    workers: int = 1,
) -> FoldFigures:
    settings = bench_settings(base, partitions=partitions)
    figures = FoldFigures(workers=workers)
    asyncio.run(ensure_topics(settings))
    say(f"topics {settings.topic_prefix}* ({partitions} partitions) on {settings.bootstrap}")

    t = time.monotonic()
    # Events are 1 ms apart in event time; the backlog ends now, so later events are newer.
    start_ms = int(time.time() * 1000) - events
    backlog = list(workload(pods, events, nodes=max(1, pods // 100), seed=1, start_ms=start_ms))
    say(f"generated {len(backlog)} events for {pods} pods in {time.monotonic() - t:.1f}s")
    t = time.monotonic()
    asyncio.run(produce(settings, backlog))
    say(f"produced them in {time.monotonic() - t:.1f}s ({len(backlog) / (time.monotonic() - t):.0f}/s)")

    health_port = free_port()
    worker = start_service(settings, "fold", PODLEDGER_HEALTH_PORT=str(health_port))
    try:
        figures.events_per_s, figures.events_per_cpu_s = drain_backlog(settings, worker, len(backlog))
        say(f"pipeline: {figures.events_per_s:.0f} events/s ({figures.events_per_cpu_s:.0f} per CPU second)")
        if rate is None:  # the measure: latency at half the capacity just measured
            rate = max(int(figures.events_per_s / 2), 1)
        figures.latency_rate = rate
        if rate > 0 and latency_seconds > 0:
            settle_disk()
            before = worker_gc(health_port)
            latencies = measure_latency(settings, worker, pods, rate, latency_seconds)
            after = worker_gc(health_port)
            figures.latency_gc_full_passes = after.full_passes - before.full_passes
            figures.latency_gc_ms = (after.paused_s - before.paused_s) * 1000
            figures.latency_samples = len(latencies)
            figures.p50_ms, figures.p99_ms = percentile(latencies, 50), percentile(latencies, 99)
            say(
                f"latency at {rate}/s: p50 {figures.p50_ms:.1f} ms, p99 {figures.p99_ms:.1f} ms;"
                f" the collector stalled the worker {figures.latency_gc_ms:.0f} ms"
                f" ({figures.latency_gc_full_passes} full passes)"
            )
        figures.rss_mb = peak_rss_mb(worker.pid)
        gc = worker_gc(health_port)
        figures.gc_full_passes, figures.gc_longest_ms = gc.full_passes, gc.longest_ms
        figures.native_share = native_share(health_port)
    finally:
        stop_service(worker)
    figures.events_per_s_n = figures.events_per_s
    if workers > 1:
        figures.events_per_s_n = drain_anew(base, backlog, partitions, PODLEDGER_FOLD_WORKERS=str(workers))
        say(f"pipeline with {workers} workers: {figures.events_per_s_n:.0f} events/s")
    if figures.native_share >= 0:  # the worker folded natively: the Python fold beside it
        figures.python_events_per_s = drain_anew(base, backlog, partitions, PODLEDGER_FOLD_CORE="off")
        say(f"pipeline folding in Python: {figures.python_events_per_s:.0f} events/s")
    figures.proven_events_per_s = drain_proven(base, backlog, partitions)
    say(f"pipeline checking proofs of origin: {figures.proven_events_per_s:.0f} events/s")

    offline = bench_offline([encode(e.value) for e in backlog], base.fold_core)
    figures.offline_events_per_s = offline.events_per_s
    figures.offline_python_events_per_s = offline.python_events_per_s
    figures.offline_core_events_per_s = offline.core_events_per_s
    figures.offline_core_events_per_cpu_s = offline.core_events_per_cpu_s
    figures.offline_identical = offline.identical
    figures.offline_floor_events_per_s = offline.floor_events_per_s

    figures.raw_events_per_s = asyncio.run(raw_floor(settings, len(backlog)))
    say(f"raw aiokafka floor: {figures.raw_events_per_s:.0f} events/s")
    volume = fan_out(backlog)
    figures.records_per_event = sum(len([s for s in sizes if s]) for sizes in volume.values()) / len(volume)
    figures.bytes_per_event = sum(sum(sizes) for sizes in volume.values()) / len(volume)
    figures.floor_events_per_s = asyncio.run(raw_floor(settings, len(backlog), volume))
    say(
        f"same-volume floor: {figures.floor_events_per_s:.0f} events/s"
        f" ({figures.records_per_event:.2f} records, {figures.bytes_per_event:.0f} bytes per event)"
    )
    figures.sign_us, figures.verify_us = origin_cost(backlog)
    say(f"proof of origin: sign {figures.sign_us:.1f} us, verify {figures.verify_us:.1f} us per record")
    return figures


def drain_anew(
    base: Settings,
    backlog: list[IngressEvent],
    partitions: int,
    signers: dict[str, Signer] | None = None,
    **env: str,
) -> float:
    """Events/s of the fold (with `env`: more workers, or the Python fold) over the same backlog on
    topics of its own, measured as for the first worker; with `signers`, each record signed by its
    node. Says what share of a single worker's batches its native core folded."""
    settings = bench_settings(base, partitions=partitions)
    asyncio.run(ensure_topics(settings))
    say(f"topics {settings.topic_prefix}* for a drain with {' '.join(f'{k}={v}' for k, v in env.items())}")
    asyncio.run(produce(settings, backlog, signers))
    single = "PODLEDGER_FOLD_WORKERS" not in env
    port = free_port()
    supervisor = start_service(
        settings, "fold", **env, **({"PODLEDGER_HEALTH_PORT": str(port)} if single else {})
    )
    try:
        rate = drain_backlog(settings, supervisor, len(backlog))[0]
        if single and (share := native_share(port)) >= 0:
            say(f"the native core folded {share:.1%} of that worker's batches")
        return rate
    finally:
        stop_service(supervisor, timeout=90)


def drain_proven(base: Settings, backlog: list[IngressEvent], partitions: int) -> float:
    """Events/s of one worker with a keyring over the backlog, each record signed by its node: what
    a deployment that proves origins (README, "Node isolation") gets from a worker."""
    with tempfile.TemporaryDirectory(prefix="podledger-bench-keys-") as folder:
        keyring = Path(folder) / "keyring.json"
        signers = {}
        for node in sorted({e.node for e in backlog}):
            keys = derive_keys(node, new_secret())
            write_keyring_entry(keyring, keys)
            signers[node] = Signer(keys)
        return drain_anew(base, backlog, partitions, signers, PODLEDGER_KEYRING_FILE=str(keyring))


def origin_cost(events: list[IngressEvent], sample: int = 50_000) -> tuple[float, float]:
    """Microseconds per record to sign (node side) and verify (fold side) the benchmark's records."""
    records = [(e.topic, e.key.encode(), encode(e.value)) for e in events[:sample]]
    if not records:
        return float("nan"), float("nan")
    keys = {e.node: derive_keys(e.node, secrets.token_bytes(32)) for e in events[:sample]}
    signers = {node: Signer(k) for node, k in keys.items()}
    nodes = [e.node for e in events[:sample]]
    t = time.perf_counter()
    signed = [signers[n].headers(topic, k, v) for n, (topic, k, v) in zip(nodes, records, strict=True)]
    sign_us = (time.perf_counter() - t) / len(records) * 1e6
    keyring = {node: k.status for node, k in keys.items()}
    t = time.perf_counter()
    for (topic, k, v), headers in zip(records, signed, strict=True):
        verify(keyring, topic, k, v, headers)
    verify_us = (time.perf_counter() - t) / len(records) * 1e6
    return sign_us, verify_us


def drain_backlog(settings: Settings, worker: subprocess.Popen[bytes], total: int) -> tuple[float, float]:
    """Events/s from the worker's first journal entry to its last (start-up excluded), and
    events per second of the worker process's own CPU time over the same span (for a
    supervisor, whose workers are other processes, meaningless)."""
    first: tuple[float, int, float] | None = None  # (when, journal entries, worker CPU seconds)
    last_report = time.monotonic()
    while True:
        if worker.poll() is not None:
            raise UserError(f"the fold worker exited with {worker.returncode}")
        done = asyncio.run(topic_count(settings, Topic.JOURNAL))
        now = time.monotonic()
        if first is None and done > 0:
            first = (now, done, cpu_seconds(worker.pid))
        if done >= total:
            assert first is not None
            cpu = cpu_seconds(worker.pid) - first[2]
            per_cpu_s = (done - first[1]) / cpu if cpu > 0.5 else float("nan")
            return (done - first[1]) / max(now - first[0], 1e-9), per_cpu_s
        if now - last_report > 5:
            say(f"folded {done}/{total} ...")
            last_report = now
        time.sleep(0.05)


def settle_disk() -> None:
    """Write what the backlog phase left in the page cache to disk now. The drain writes hundreds of
    MB in seconds; the kernel would write them back about 30 s later, in bursts that stall a broker
    sharing the disk for 100-300 ms (seen on the test machine) in the middle of the latency phase,
    which is meant to measure the steady state at the offered rate."""
    t = time.monotonic()
    os.sync()
    say(f"synced the backlog's writes to disk in {time.monotonic() - t:.1f}s")


def cpu_seconds(pid: int) -> float:
    """The CPU time (user and system) a process has used so far, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()  # after the command name, from field 3 (state)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def measure_latency(
    settings: Settings, worker: subprocess.Popen[bytes], pods: int, rate: int, seconds: float
) -> list[float]:
    """Produce at `rate` events/s for `seconds`; latency = pod-status append - ingress append."""
    count = int(rate * seconds)
    events = list(workload(max(pods // 10, 1), count, nodes=max(1, pods // 1000), seed=2))
    before = asyncio.run(topic_count(settings, Topic.JOURNAL))
    produce_apart(settings, events, rate)
    deadline = time.monotonic() + 120
    while asyncio.run(topic_count(settings, Topic.JOURNAL)) < before + count and time.monotonic() < deadline:
        if worker.poll() is not None:
            raise UserError(f"the fold worker exited with {worker.returncode}")
        time.sleep(0.2)
    return asyncio.run(_latencies(settings, {e.ts_ms for e in events}))


async def _latencies(settings: Settings, since: set[int]) -> list[float]:
    floor = min(since)
    consumer = AIOKafkaConsumer(
        settings.topic(Topic.POD_STATUS),
        bootstrap_servers=settings.bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        group_id=None,
        **settings.kafka_client_options(),
    )
    await consumer.start()
    out: list[float] = []
    try:
        while True:
            batch = await consumer.getmany(timeout_ms=1000, max_records=10_000)
            if not batch:
                return out
            for records in batch.values():
                for record in records:
                    if record.value is None:
                        continue
                    vs = decode(Topic.POD_STATUS, record.value)
                    if vs.cause.ts_ms >= floor:
                        out.append(record.timestamp - vs.cause.ts_ms)
    finally:
        await consumer.stop()
