"""The PLEG loop over the sim runtime: each event goes out with the pod's whole snapshot, in the
pleg v1 contract, and relist health follows the relists."""

from __future__ import annotations

import asyncio
from typing import Any

from podledger.agents.pleg import Pleg, RelistTiming
from podledger.agents.runtime.sim import ANNOTATION_EXIT_CODE, ANNOTATION_RUN_SECONDS, SimRuntime
from podledger.schemas import decode, encode
from podledger.types import JSONDict, PlegEventType
from tests import pods


def exiting_pod() -> JSONDict:
    """One container that runs for 10 s on the sim runtime, then exits with code 3."""
    annotations = {ANNOTATION_RUN_SECONDS: "10", ANNOTATION_EXIT_CODE: "3"}
    return pods.pod(("app",), name="p", uid="u1", image="app:1", annotations=annotations)


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def test_pleg_publishes_started_then_died_with_snapshots() -> None:
    clock = Clock()
    sim = SimRuntime(seed=1, clock=clock)
    pod = exiting_pod()
    published: list[Any] = []

    async def publish(event: Any) -> None:
        published.append(decode("pleg", encode(event)))  # the value satisfies the pleg v1 schema

    async def scenario() -> None:
        pleg = Pleg(sim, "node-1", publish, clock=clock)
        assert pleg.health.healthy(clock.now)[0] is False  # no relist yet
        await sim.create_sandbox(pod)
        await sim.start_container(pod, pod["spec"]["containers"][0], attempt=0)
        clock.now += 2
        await pleg.relist_once()
        assert pleg.health.healthy(clock.now)[0] is True
        clock.now += 20
        await pleg.relist_once()
        assert await pleg.relist_once() == []  # nothing changed: nothing published

    asyncio.run(scenario())
    app_events = [e for e in published if e.container_id != published[0].runtime["sandbox"]["id"]]
    assert [e.type for e in app_events] == [PlegEventType.CONTAINER_STARTED, PlegEventType.CONTAINER_DIED]
    died = app_events[1]
    [app] = [c for c in died.runtime["containers"] if c["name"] == "app"]
    assert (app["state"], app["exit_code"], died.uid, died.node) == ("exited", 3, "u1", "node-1")
    assert died.ts_ms - app_events[0].ts_ms == 20_000  # event time is the relist time


def test_each_relist_reports_its_timing_to_the_observer() -> None:
    """Benchmarks watch the PLEG through `on_relist`: one timing per relist, with the events it published."""
    clock = Clock()
    sim = SimRuntime(seed=1, clock=clock)
    pod = exiting_pod()
    timings: list[RelistTiming] = []

    async def publish(event: Any) -> None:
        pass

    async def scenario() -> list[int]:
        pleg = Pleg(sim, "node-1", publish, clock=clock, on_relist=timings.append)
        await sim.create_sandbox(pod)
        await sim.start_container(pod, pod["spec"]["containers"][0], attempt=0)
        counts = [len(await pleg.relist_once())]
        clock.now += 20
        counts.append(len(await pleg.relist_once()))
        counts.append(len(await pleg.relist_once()))
        return counts

    counts = asyncio.run(scenario())
    assert counts[0] >= 1 and counts[1] >= 1 and counts[2] == 0  # app started; app died; nothing new
    assert [t.published for t in timings] == counts
    assert all(0 <= t.list_s <= t.total_s for t in timings)
