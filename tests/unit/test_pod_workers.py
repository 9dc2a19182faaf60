"""Pod workers and the apiserver source restoring state, without Kafka: the replay rules in memory.

These drive `PodWorkers.apply_update/apply_lifecycle` (what the node agent calls while replaying its
log) and `ApiserverSource._handle` (what a listing turns into), with the sim runtime and a list as the
publisher; the Kafka round trips are covered by tests/integration/test_node_agent.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

from podledger.agents.runtime.sim import SimRuntime
from podledger.agents.sources.apiserver import ApiserverSource
from podledger.agents.sources.pod_config import PodStorage
from podledger.agents.worker.pod_workers import PodWorkers
from podledger.schemas import models
from podledger.types import JSONDict
from tests import pods


def pod(uid: str, name: str | None = None) -> JSONDict:
    return pods.pod(
        ("main",),
        name=name or uid,
        uid=uid,
        node="n1",
        image="app:1",
        metadata={"resourceVersion": "1"},
        status={"phase": "Pending"},
    )


def update(op: str, uid: str, ts_ms: int, source: str = "file") -> models.PodUpdate:
    return models.PodUpdate(op, source, "n1", pod(uid), ts_ms)


def lifecycle(kind: str, uid: str, ts_ms: int) -> models.PodLifecycle:
    return models.PodLifecycle(uid, "n1", kind, ts_ms)


async def _published(*_: Any) -> None:
    return None


def test_a_uid_back_after_removal_does_not_inherit_its_earlier_life() -> None:
    workers = PodWorkers(SimRuntime(), "n1", _published)
    # Replay: added, terminated, removed (nothing left in the runtime), added again with the same UID.
    workers.apply_update(update("ADD", "u1", 1000))
    workers.apply_update(update("REMOVE", "u1", 3000))
    workers.apply_update(update("ADD", "u1", 4000))
    workers.apply_lifecycle(lifecycle("terminating", "u1", 2000))
    workers.apply_lifecycle(lifecycle("terminated", "u1", 2500))
    w = workers.workers["u1"]
    assert not w.terminating and not w.terminated  # the new life runs
    workers.apply_lifecycle(lifecycle("terminated", "u1", 5000))
    assert w.terminated  # its own facts do apply


def test_a_removed_pod_still_in_the_runtime_is_stopped_before_its_next_life() -> None:
    async def scenario() -> None:
        runtime = SimRuntime()
        await runtime.create_sandbox(pod("u1"))
        workers = PodWorkers(runtime, "n1", _published)
        workers.apply_update(update("ADD", "u1", 1000))
        workers.apply_update(update("REMOVE", "u1", 3000))
        workers.apply_update(update("ADD", "u1", 4000))
        old = workers.workers["u1"]
        assert old.removed and old.next_life is not None and old.next_life.since_ms == 4000
        workers.apply_lifecycle(lifecycle("terminated", "u1", 2000))  # the old life's
        workers.apply_lifecycle(lifecycle("terminating", "u1", 4500))  # the new life's
        assert old.terminated and old.next_life.terminating
        # Running: the old life is cleaned out of the runtime, then the new one takes its place.
        workers.start()
        for _ in range(50):
            await asyncio.sleep(0.02)
            if workers.workers.get("u1") is old.next_life:
                break
        assert workers.workers["u1"] is old.next_life
        await workers.stop()

    asyncio.run(scenario())


def test_a_listing_is_merged_once_so_a_restart_sees_no_removals() -> None:
    async def scenario(seeded: bool) -> list[tuple[str, str]]:
        ops: list[tuple[str, str]] = []

        async def publish(u: models.PodUpdate) -> None:
            ops.append((u.op, u.uid))

        storage = PodStorage()
        if seeded:  # what the node agent restores from pod-updates before the source starts
            storage.pods["api"] = {uid: pod(uid) for uid in ("a", "b", "c")}
        source = ApiserverSource(None, "n1", publish, storage)  # type: ignore[arg-type]
        for uid in ("a", "b", "c"):
            await source._handle("LISTED", pod(uid))
        assert ops == []  # nothing while the list is incomplete
        await source._handle("RELISTED", {"uids": ["a", "b", "c"]})
        return ops

    assert asyncio.run(scenario(seeded=True)) == []
    assert asyncio.run(scenario(seeded=False)) == [("ADD", "a"), ("ADD", "b"), ("ADD", "c")]
