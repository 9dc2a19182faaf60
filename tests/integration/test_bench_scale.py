"""The scale-out benchmarks at a small size on the real broker: `bench fold --workers 2` drains its
backlog with one worker and then with two and keeps the keys of its machine line; `bench fold`
with a latency phase offers half the drained rate and measures it; `bench recovery`
fills fold-state, starts a fold worker that takes the partitions over and checks that each
takeover version follows the stored one (the benchmark fails otherwise). Figures are printed,
not asserted: only that the runs work, their last lines are machine-readable and they leave
neither topics nor working files behind."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient

pytestmark = pytest.mark.kafka


async def topic_names(bootstrap: str) -> set[str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return set(await admin.list_topics())
    finally:
        await admin.close()


NUMBER = r"(\d+(?:\.\d+)?)"


def bench(kafka_bootstrap: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "podledger.cli", "bench", *args],
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("PODLEDGER_")},
            "PODLEDGER_BOOTSTRAP": kafka_bootstrap,
            **env,
        },
        capture_output=True,
        text=True,
        timeout=420,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def test_bench_fold_with_workers_keeps_its_keys_and_adds_the_scaling(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    result = bench(
        kafka_bootstrap,
        *("fold", "--pods", "200", "--events", "2000", "--rate", "0", "--partitions", "4", "--workers", "2"),
        PODLEDGER_CACHE=str(tmp_path),
    )
    last = result.stdout.strip().splitlines()[-1]
    n = NUMBER
    match = re.fullmatch(
        rf"fold events_per_s={n} p50_ms=nan p99_ms=nan offline_events_per_s={n} raw_events_per_s={n}"
        rf" floor_events_per_s={n} rss_mb={n} sign_us={n} verify_us={n} workers=2 events_per_s_n={n}"
        rf" events_per_cpu_s=(\d+|nan) gc_full_passes=(\d+) gc_longest_ms={n} latency_rate=0"
        rf" offline_floor_events_per_s=[1-9]\d* offline_python_events_per_s=[1-9]\d*"
        rf" offline_core_events_per_s=[1-9]\d* offline_identical=1 offline_core_events_per_cpu_s=[1-9]\d*"
        # The worker folded with the native core (its /metrics), and the same backlog in Python.
        rf" native_share=(0\.\d+|1\.000) python_events_per_s=[1-9]\d*"
        # And once more with every record signed and the worker checking proofs of origin.
        rf" proven_events_per_s=[1-9]\d*"
        # No latency phase (--rate 0): no collector figures of one.
        rf" latency_gc_full_passes=0 latency_gc_ms=nan",
        last,
    )
    assert match, result.stdout
    assert float(match.group(1)) > 0 and float(match.group(8)) > 0  # both drains were timed
    # The worker's collector, from its /metrics: it ran, and settled its heap once restored.
    assert int(match.group(10)) >= 1 and float(match.group(11)) > 0
    assert float(match.group(12)) > 0.5
    assert "pipeline, 2 fold workers:" in result.stdout
    assert "the same worker folding in Python:" in result.stdout
    assert "with proofs of origin (a keyring, every record signed):" in result.stdout
    # Its topics (four drains: one worker, two, the Python fold, proofs checked) are gone once done.
    prefixes = set(re.findall(r"topics (bench-[0-9a-f]+\.)\*", result.stderr))
    assert prefixes and re.search(r"deleted the benchmark's \d+ topics", result.stderr)
    left = asyncio.run(topic_names(kafka_bootstrap))
    assert not [name for name in left if name.startswith(tuple(prefixes))]
    # And so are its workers' Faust working files, which they kept in the cache while they ran.
    working = tmp_path / "faust"
    assert working.is_dir() and not [p.name for p in working.iterdir() if p.name.startswith("bench-")]


def test_bench_fold_measures_latency_at_half_the_drained_rate(kafka_bootstrap: str) -> None:
    result = bench(kafka_bootstrap, "fold", "--pods", "200", "--events", "2000", "--latency-seconds", "2")
    figures = dict(pair.split("=") for pair in result.stdout.strip().splitlines()[-1].split()[1:])
    drained, offered = float(figures["events_per_s"]), int(figures["latency_rate"])
    # The default --rate: half of what the backlog drained at (the line prints that rate rounded).
    assert offered in {max(int((drained + d) / 2), 1) for d in (-0.5, 0.0, 0.5)}
    # Every version of the phase's events was measured, from a pod-status record the worker wrote.
    p50, p99 = float(figures["p50_ms"]), float(figures["p99_ms"])
    assert 0 <= p50 <= p99
    # The worker's collector during the phase, from its /metrics before and after it: read, not nan.
    assert int(figures["latency_gc_full_passes"]) >= 0 and float(figures["latency_gc_ms"]) >= 0
    assert "synced the backlog's writes to disk" in result.stderr  # the phase began after the sync
    assert f"versions at {offered:,} events/s offered" in result.stdout


def test_bench_recovery_prints_a_machine_readable_last_line(kafka_bootstrap: str) -> None:
    result = bench(kafka_bootstrap, "recovery", "--pods", "2000", "--partitions", "3")
    last = result.stdout.strip().splitlines()[-1]
    number = NUMBER
    match = re.fullmatch(
        rf"recovery pods=2000 restore_s={number} records_per_s={number} rss_mb={number}"
        rf" startup_s={number} state_mb={number}",
        last,
    )
    assert match, result.stdout
    assert float(match.group(1)) > 0 and float(match.group(3)) > 0  # timed, and the worker measured
    assert "nan" not in result.stdout
