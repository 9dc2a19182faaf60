"""`podledger run --roles fold --workers 2` on the real broker (podledger/workers.py): two fold
worker processes share the partitions of one consumer group, every pod is folded once (versions
1..n, no gap, never two statuses under one version), a worker killed with SIGKILL is started
again and takes its partitions back, and SIGTERM to the supervisor stops both."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
from pathlib import Path

import pytest

from podledger.bench.recovery import fold_group_members
from podledger.config import Settings
from podledger.local import free_port
from podledger.schemas import decode, encode
from podledger.streams.topics import admin_client
from podledger.workload import produce, workload
from tests.support import wait_for
from tests.support.history import assert_versions_have_no_gaps, history_by_version, offline_fold
from tests.support.kafka import read_topic, wait_for_topic, with_topics
from tests.support.metrics import http_get, prometheus_samples, sample_value
from tests.support.processes import podledger_env

pytestmark = pytest.mark.kafka

PODS, EVENTS = 240, 3000
STARTED = re.compile(r"fold worker (\d) started: pid (\d+)")


def ports_for_two() -> int:
    """A loopback port whose successor is free too: worker i serves health on port + i."""
    while True:
        port = free_port()
        with contextlib.suppress(OSError), socket.socket() as s:
            s.bind(("127.0.0.1", port + 1))
            return port


def folded_by(port: int) -> float:
    """Events a worker has folded, from its /metrics."""
    status, body = http_get(port, "/metrics")
    assert status == 200, body
    return sample_value(prometheus_samples(body), "podledger_fold_events_total") or 0.0


def members(settings: Settings) -> set[str]:
    """The fold group's member ids once it is stable."""

    async def ask() -> set[str]:
        admin = admin_client(settings)
        await admin.start()
        try:
            return await fold_group_members(admin, settings)
        finally:
            await admin.close()

    return asyncio.run(ask())


def two_members(settings: Settings) -> set[str]:
    """The fold group's two member ids, or nothing while it has another number of them."""
    found = members(settings)
    return found if len(found) == 2 else set()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_two_fold_workers_share_the_partitions_and_fold_every_pod_once(
    settings: Settings, podledger_process, tmp_path: Path
) -> None:
    settings = with_topics(settings, 6)
    port = ports_for_two()
    env = podledger_env(
        settings,
        None,
        PODLEDGER_LOG_LEVEL="info",
        PODLEDGER_SESSION_TIMEOUT_MS="6000",
        PODLEDGER_HEALTH_PORT=str(port),
    )
    supervisor = podledger_process(["run", "--roles", "fold", "--workers", "2"], env=env)
    group = wait_for(lambda: two_members(settings), 120, 0.5, "both workers in the fold's group", supervisor)
    pids = dict(STARTED.findall(supervisor.output()))
    assert set(pids) == {"0", "1"}, supervisor.output()[-3000:]

    events = list(workload(PODS, EVENTS, nodes=12, seed=15))
    half = EVENTS // 2
    asyncio.run(produce(settings, events[:half]))
    wait_for_topic(settings, "journal", half, alive=supervisor)
    # Both own partitions: each has folded part of the input, and together all of it.
    first = [folded_by(port), folded_by(port + 1)]
    assert all(n > 0 for n in first) and sum(first) >= half, first
    for health_port in (port, port + 1):
        # Once its partitions are restored, what a worker holds leaves the collector's sight
        # (podledger/heap.py): its full passes no longer walk it, and its metrics say so.
        samples = prometheus_samples(http_get(health_port, "/metrics")[1])
        assert (sample_value(samples, "podledger_gc_frozen_objects") or 0) > 10_000, samples
        assert sample_value(samples, "podledger_gc_passes_total", generation="0") is not None

    # A worker killed hard is started again by the supervisor and takes its partitions back.
    os.kill(int(pids["1"]), signal.SIGKILL)
    wait_for(
        lambda: len(STARTED.findall(supervisor.output())) == 3,
        60,
        what="worker 1 started again",
        alive=supervisor,
    )
    restarted = int(STARTED.findall(supervisor.output())[-1][1])
    assert STARTED.findall(supervisor.output())[-1][0] == "1" and restarted != int(pids["1"])
    # Once the group has dropped the dead worker and taken the new one in, the new one owns
    # partitions: the second half is folded by both.
    back = wait_for(lambda: two_members(settings) - group, 120, 0.5, "worker 1 back in the group", supervisor)
    assert len(back) == 1
    asyncio.run(produce(settings, events[half:]))
    journal = wait_for(
        lambda: (
            (msgs := asyncio.run(read_topic(settings, "journal", EVENTS, idle=1.0, timeout=60)))
            and len({(p, decode("journal", v).topic, decode("journal", v).offset) for p, _, v in msgs})
            >= EVENTS
            and msgs
        ),
        timeout=240,
        interval=2,
        what=f"{EVENTS} distinct journal entries",
        alive=supervisor,
    )
    wait_for(lambda: folded_by(port + 1) > 0, 60, what="the restarted worker folding", alive=supervisor)

    history = history_by_version(wait_for_topic(settings, "pod-status-history", PODS, idle=2.0))
    latest = assert_versions_have_no_gaps(history)  # and history_by_version: one status per version
    assert len(latest) == PODS
    final_offline = {}
    for line in offline_fold(journal, tmp_path):
        vs = decode("pod-status-history", line)
        final_offline[vs.uid] = (vs.version, encode(vs.status))
    assert final_offline == {uid: (v, history[(uid, v)]) for uid, v in latest.items()}
    out = supervisor.output()
    assert re.search(r"^worker=0 .*restored \d+ records", out, re.M) and re.search(
        r"^worker=1 .*restored \d+ records", out, re.M
    ), out[-3000:]

    # SIGTERM stops the supervisor and every worker.
    children = [int(pids["0"]), restarted]
    assert supervisor.stop(signal.SIGTERM, timeout=90) == 0, supervisor.output()[-3000:]
    wait_for(lambda: not any(alive(pid) for pid in children), 10, what="both workers gone")
    assert supervisor.output().count("stopped with") == 2
