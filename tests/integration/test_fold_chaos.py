"""Effectively once with two fold workers killed with SIGKILL at random moments (docs/architecture.md,
"State and recovery").

Two `podledger run --roles fold` processes share the partitions (one consumer group). While
events for hundreds of pods stream in, a seeded killer SIGKILLs one worker or the other and
restarts it. Afterwards pod-status-history must hold versions 1..N for every pod with no gap,
never two statuses under one (uid, version), and final statuses equal to the offline fold of the
journal.
"""

from __future__ import annotations

import asyncio
import random
import signal
import sys
import time
from pathlib import Path

import pytest

from podledger.config import Settings
from podledger.schemas import decode, encode
from podledger.workload import produce, workload
from tests.support import wait_for
from tests.support.history import assert_versions_have_no_gaps, history_by_version, offline_fold
from tests.support.kafka import read_topic, with_topics
from tests.support.processes import podledger_env

pytestmark = pytest.mark.kafka

PODS, EVENTS, KILLS = 300, 6000, 4


def test_two_workers_killed_at_random_lose_nothing_and_never_disagree(
    settings: Settings, podledger_process, tmp_path: Path
) -> None:
    settings = with_topics(settings, 6)
    env = podledger_env(settings, None, PODLEDGER_SESSION_TIMEOUT_MS="6000", PODLEDGER_FOLD_BATCH_SIZE="200")
    workers = {name: podledger_process(["run", "--roles", "fold"], env=env) for name in ("a", "b")}
    events = list(workload(PODS, EVENTS, nodes=12, seed=11))

    # Each round lands a burst of events, then kills a worker while it is folding them (when the
    # kill lands mid-batch, published outputs are ahead of the stored records), then restarts it.
    rng = random.Random(2024)
    victims = ["a", "b"] * (KILLS // 2)
    rng.shuffle(victims)
    kills: list[tuple[str, int]] = []
    burst = EVENTS // (KILLS + 1)
    for round_no, name in enumerate(victims):
        asyncio.run(produce(settings, events[round_no * burst : (round_no + 1) * burst]))
        time.sleep(rng.uniform(0.05, 0.6))
        workers[name].stop(signal.SIGKILL, timeout=10)
        kills.append((name, round_no * burst))
        time.sleep(rng.uniform(0.2, 1.5))
        workers[name] = podledger_process(["run", "--roles", "fold"], env=env)
    asyncio.run(produce(settings, events[KILLS * burst :]))
    assert {name for name, _ in kills} == {"a", "b"}

    journal = wait_for(
        lambda: (
            (msgs := asyncio.run(read_topic(settings, "journal", EVENTS, idle=1.0, timeout=60)))
            and len({(decode("journal", v).topic, decode("journal", v).offset, p) for p, _, v in msgs})
            >= EVENTS
            and msgs
        ),
        timeout=240,
        interval=2,
        what=f"{EVENTS} distinct journal entries after kills at {kills}",
    )
    time.sleep(3)  # let the last versions land
    history_msgs = asyncio.run(read_topic(settings, "pod-status-history", 1, idle=2.0, timeout=60))
    history = history_by_version(history_msgs)  # asserts: one status per (uid, version)
    latest = assert_versions_have_no_gaps(history)
    assert len(latest) == PODS

    final_offline: dict[str, tuple[int, bytes]] = {}
    for line in offline_fold(journal, tmp_path):
        vs = decode("pod-status-history", line)
        final_offline[vs.uid] = (vs.version, encode(vs.status))
    final_live = {uid: (version, history[(uid, version)]) for uid, version in latest.items()}
    assert final_offline == final_live

    sys.stderr.write(
        f"kills: {kills}; versions: {len(history)}; duplicates in journal: {len(journal) - EVENTS};"
        f" tails re-applied: {sum(w.output().count('re-applied journal') for w in workers.values())}\n"
    )
