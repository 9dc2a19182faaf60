"""`podledger bench node` end to end at a tiny size: it runs a whole node agent and prints its figures.

Figures are not asserted (benchmarks measure, tests check); only that the run works and its last line
is machine-readable.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.kafka


def test_bench_node_prints_a_machine_readable_last_line(kafka_bootstrap: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "podledger.cli", "bench", "node", "--pods", "30", "--seconds", "3"],
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("PODLEDGER_")},
            "PODLEDGER_BOOTSTRAP": kafka_bootstrap,
            "PODLEDGER_PARTITIONS": "2",
        },
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    last = result.stdout.strip().splitlines()[-1]
    match = re.fullmatch(r"node pods=30 relist_p99_ms=(\d+\.\d) events_per_s=(\d+) cpu_pct=(\d+)", last)
    assert match, result.stdout
    # Relists happened and were timed (an idle relist of 30 pods can take under 0.05 ms: p99 0.0).
    relists = re.search(r"\(sim runtime\), (\d+) relists", result.stdout)
    assert relists and int(relists.group(1)) > 0, result.stdout
    assert "relist time:" in result.stdout and "nan" not in result.stdout


def test_bench_audit_prints_a_machine_readable_last_line() -> None:
    """`podledger bench audit` needs no broker: it folds, indexes and queries in-process."""
    result = subprocess.run(
        [sys.executable, "-m", "podledger.cli", "bench", "audit", "--versions", "3000", "--pods", "60"],
        env={k: v for k, v in os.environ.items() if not k.startswith("PODLEDGER_")},
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    last = result.stdout.strip().splitlines()[-1]
    number = r"(\d+(?:\.\d+)?)"
    match = re.fullmatch(
        rf"audit versions=3000 index_versions_per_s={number} history_p50_ms={number}"
        rf" history_p99_ms={number} why_p99_ms={number} index_mb={number}",
        last,
    )
    assert match, result.stdout
    assert float(match.group(1)) > 0 and float(match.group(4)) > 0  # indexed, and why was timed
    assert "nan" not in result.stdout
