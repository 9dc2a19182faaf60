"""The container garbage collector: which dead containers a pod keeps (retention, as vectors) and
the sweep that removes the rest through a runtime (over the sim runtime and a fake clock)."""

from __future__ import annotations

import asyncio

import pytest

from podledger.agents.pleg import relist_events
from podledger.agents.runtime.container_gc import ContainerGC
from podledger.agents.runtime.retention import dead_containers_to_remove
from podledger.agents.runtime.sim import ANNOTATION_EXIT_CODE, ANNOTATION_RUN_SECONDS, SimRuntime
from podledger.types import JSONDict, PlegEventType
from tests import pods


def snapshot(containers: str) -> JSONDict:
    """ "id:name:state ..." containers, newest first as runtimes list them."""
    return {
        "containers": [
            {"id": cid, "name": name, "state": state}
            for cid, name, state in (c.split(":") for c in containers.split())
        ]
    }


@pytest.mark.parametrize(
    ("containers", "keep", "removed"),
    [
        ("", 1, []),
        ("c3:app:running c2:app:exited c1:app:exited", 1, ["c1"]),
        # Oldest first, as the kubelet removes them.
        ("c4:app:running c3:app:exited c2:app:exited c1:app:exited", 1, ["c1", "c2"]),
        # The newest instance is kept whatever its state: it is the status's state (or lastState).
        ("c3:app:exited c2:app:exited c1:app:exited", 1, ["c1", "c2"]),
        # Per container name.
        ("a2:app:exited s2:side:exited a1:app:exited s1:side:exited", 1, ["s1", "a1"]),
        # Unknown is dead too; created and running are never collected.
        ("c4:app:created c3:app:unknown c2:app:running c1:app:exited", 1, ["c1"]),
        ("c3:app:running c2:app:exited c1:app:exited", 2, []),
    ],
)
def test_dead_containers_beyond_the_newest_of_each_name_go(
    containers: str, keep: int, removed: list[str]
) -> None:
    assert dead_containers_to_remove(snapshot(containers), keep) == removed


def test_the_newest_dead_container_is_always_kept() -> None:
    assert dead_containers_to_remove(None) == []
    with pytest.raises(ValueError):
        dead_containers_to_remove(snapshot("c1:app:exited"), keep=0)


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def crash_looping(uid: str) -> JSONDict:
    annotations = {ANNOTATION_RUN_SECONDS: "1", ANNOTATION_EXIT_CODE: "1"}
    return pods.pod(("app",), name=uid, uid=uid, image="app:1", annotations=annotations)


async def restart_three_times(sim: SimRuntime, clock: Clock, pod: JSONDict) -> list[str]:
    """Run the pod's container four times, each to its exit; returns their ids, oldest first."""
    await sim.create_sandbox(pod)
    ids = []
    for attempt in range(4):
        ids.append(await sim.start_container(pod, pod["spec"]["containers"][0], attempt=attempt))
        clock.now += 5  # past its start (0.5 s) and its run (1 s), jitter included
    return ids


def test_a_sweep_visits_every_pod_a_slice_at_a_time_and_keeps_the_newest_dead() -> None:
    clock = Clock()
    sim = SimRuntime(seed=2, clock=clock)
    uids = [f"pod-{i}" for i in range(10)]

    async def scenario() -> None:
        ids = {uid: await restart_three_times(sim, clock, crash_looping(uid)) for uid in uids}
        before = sim.relist(clock.now)
        collector = ContainerGC(sim, slices=4, clock=clock)
        removed = [await collector.step() for _ in range(4)]  # one sweep: ceil(10 / 4) = 3 pods a step
        assert removed == [9, 9, 9, 3]
        after = sim.relist(clock.now)
        for uid in uids:
            assert [c["id"] for c in after[uid]["containers"]] == [ids[uid][-1]]
        # The PLEG reports each removal once, as ContainerRemoved of a container it saw exit.
        events = relist_events(before, after)
        assert {e.type for e in events} == {PlegEventType.CONTAINER_REMOVED}
        assert len(events) == 30
        assert await collector.step() == 0  # the next sweep finds nothing more to remove
        assert collector.removed == 30

    asyncio.run(scenario())


def test_a_running_container_keeps_its_last_terminated_instance() -> None:
    clock = Clock()
    sim = SimRuntime(seed=2, clock=clock)
    pod = crash_looping("p")
    forever = pods.pod(("app",), name="p", uid="p", image="app:1")  # no run-seconds: runs until stopped

    async def scenario() -> None:
        ids = await restart_three_times(sim, clock, pod)
        running = await sim.start_container(forever, forever["spec"]["containers"][0], attempt=4)
        clock.now += 1
        await ContainerGC(sim, slices=1, clock=clock).step()
        listed = sim.relist(clock.now)["p"]["containers"]
        assert [(c["id"], c["state"]) for c in listed] == [(running, "running"), (ids[-1], "exited")]

    asyncio.run(scenario())


def test_pods_not_wanted_keep_their_dead_containers() -> None:
    """The node agent leaves terminating and terminated pods alone: their last status stands."""
    clock = Clock()
    sim = SimRuntime(seed=2, clock=clock)

    async def scenario() -> None:
        for uid in ("kept", "swept"):
            await restart_three_times(sim, clock, crash_looping(uid))
        collector = ContainerGC(sim, slices=1, clock=clock, wanted=lambda uid: uid != "kept")
        assert await collector.step() == 3
        listed = sim.relist(clock.now)
        assert (len(listed["kept"]["containers"]), len(listed["swept"]["containers"])) == (4, 1)

    asyncio.run(scenario())
