"""Nothing stops, nothing is lost: a short `podledger chaos` on the real parts.

Sim node agents, two fold workers and the sink run against a real Kafka broker and kube-apiserver
while API pods come and go; meanwhile fold workers, the sink and node agents are SIGKILLed at
seeded random moments, the broker is restarted on its data directory and the apiserver is stopped
for a while. The run must lose no input, leave no gap and no version with two statuses, agree with
the offline fold of its journal, and the apiserver must catch up within 30 s of the last fault.

The command starts a broker and an apiserver of its own (it must restart them), not the session's.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support.processes import run_podledger

pytestmark = [pytest.mark.kafka, pytest.mark.kube]

SECONDS, KILLS, OUTAGE_S = 100, 8, 12


@pytest.mark.timeout(900)
def test_chaos_kills_restarts_and_an_outage_lose_nothing_and_converge(tmp_path: Path) -> None:
    args = [
        "--seconds",
        str(SECONDS),
        "--kills",
        str(KILLS),
        "--seed",
        "2024",
        "--nodes",
        "3",
        "--pods",
        "30",
    ]
    args += ["--apiserver-outage-s", str(OUTAGE_S), "--broker-restarts", "1", "--workdir", str(tmp_path)]
    done = run_podledger("chaos", *args, timeout=840)
    sys.stderr.write(f"\n--- podledger chaos ---\n{done.stderr[-12000:]}\n{done.stdout}\n")
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("chaos kills="), done.stdout
    figures = dict(field.split("=", 1) for field in last.split()[1:])

    assert figures["lost"] == "0", done.stdout
    assert figures["gaps"] == "0", done.stdout
    assert figures["conflicts"] == "0", done.stdout
    assert figures["converge_s"] != "never" and float(figures["converge_s"]) <= 30, done.stdout
    # The faults happened: a kill is skipped only when its target was already down.
    assert int(figures["kills"]) >= KILLS - 2
    assert figures["broker_restarts"] == "1"
    assert int(figures["apiserver_outage_s"]) >= OUTAGE_S
    # And the rest of the checks: the history equals the offline fold, the apiserver shows the last
    # versions, everything drained.
    assert done.returncode == 0, done.stdout
