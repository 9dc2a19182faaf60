"""The PLEG loop over the sim runtime: each event goes out with the pod's whole snapshot, in the
pleg v1 contract, and relist health follows the relists."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from podledger.agents.pleg import Pleg, PodLifecycleEvent, RelistTiming, relist_events
from podledger.agents.pleg.loop import QUEUE_CHUNK
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


def running_pods(sim: SimRuntime, count: int) -> list[JSONDict]:
    """`count` pods with one container each, started on `sim` (running once the start delay passed)."""

    async def start() -> list[JSONDict]:
        made = []
        for i in range(count):
            pod = pods.pod(("app",), name=f"p{i}", uid=f"u{i:04d}", image="app:1")
            await sim.create_sandbox(pod)
            await sim.start_container(pod, pod["spec"]["containers"][0], attempt=0)
            made.append(pod)
        return made

    return asyncio.run(start())


def test_events_go_out_in_the_plain_diffs_order() -> None:
    """Per pod UID, then container ID (generic.go's order), across chunks of queued events."""
    clock = Clock()
    sim = SimRuntime(seed=1, clock=clock)
    running_pods(sim, QUEUE_CHUNK * 2 + 5)
    published: list[Any] = []

    async def publish(event: Any) -> None:
        published.append(event)

    async def scenario() -> list[PodLifecycleEvent]:
        pleg = Pleg(sim, "node-1", publish, clock=clock)
        clock.now += 2
        return await pleg.relist_once()

    events = asyncio.run(scenario())
    expected = relist_events({}, sim.relist(clock.now))
    assert events == expected and len(expected) > QUEUE_CHUNK * 2
    assert [(e.uid, e.type, e.container_id) for e in published] == [
        (e.pod_uid, e.type, e.container_id) for e in expected
    ]


def test_a_long_relist_lets_other_agents_run_while_it_queues() -> None:
    """Pod workers and the prober share the loop: they run between chunks, not only after the relist."""
    clock = Clock()
    sim = SimRuntime(seed=1, clock=clock)
    running_pods(sim, QUEUE_CHUNK * 3)
    published: list[Any] = []
    seen_by_others: list[int] = []

    async def publish(event: Any) -> None:
        published.append(event)

    async def other_agent() -> None:
        while True:
            seen_by_others.append(len(published))
            await asyncio.sleep(0)

    async def scenario() -> int:
        pleg = Pleg(sim, "node-1", publish, clock=clock)
        clock.now += 2
        other = asyncio.ensure_future(other_agent())
        await asyncio.sleep(0)
        try:
            return len(await pleg.relist_once())
        finally:
            other.cancel()

    total = asyncio.run(scenario())
    assert [n for n in seen_by_others if 0 < n < total]  # it ran while the relist was queueing


def test_a_relist_whose_events_were_not_delivered_is_published_again() -> None:
    """A failed delivery fails the relist (health keeps its last success) and the next relist sends
    the same events again, diffed from the last delivered relist."""
    clock = Clock()
    sim = SimRuntime(seed=1, clock=clock)
    running_pods(sim, 3)
    sent: list[list[tuple[str, str, str]]] = []
    failing = True

    async def publish(event: Any) -> asyncio.Future[None]:
        sent[-1].append((event.uid, event.type, event.container_id))
        delivery = asyncio.get_running_loop().create_future()
        if failing:
            delivery.set_exception(ConnectionError("broker away"))
        else:
            delivery.set_result(None)
        return delivery

    async def scenario() -> None:
        nonlocal failing
        pleg = Pleg(sim, "node-1", publish, clock=clock)
        clock.now += 2
        sent.append([])
        with pytest.raises(ConnectionError):
            await pleg.relist_once()
        assert pleg.health.healthy(clock.now)[0] is False  # never successful yet
        failing = False
        clock.now += 1
        sent.append([])
        await pleg.relist_once()
        assert pleg.health.healthy(clock.now)[0] is True
        sent.append([])
        assert await pleg.relist_once() == []

    asyncio.run(scenario())
    assert len(sent[0]) == 6  # a sandbox and a container started in each of 3 pods
    assert sent[1] == sent[0]
    assert sent[2] == []


def test_timings_split_queueing_from_the_acknowledgement() -> None:
    clock = Clock()
    sim = SimRuntime(seed=1, clock=clock)
    running_pods(sim, 10)
    timings: list[RelistTiming] = []

    async def publish(event: Any) -> asyncio.Future[None]:
        delivery = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(0.05, delivery.set_result, None)
        return delivery

    async def scenario() -> None:
        pleg = Pleg(sim, "node-1", publish, clock=clock, on_relist=timings.append)
        clock.now += 2
        await pleg.relist_once()

    asyncio.run(scenario())
    [timing] = timings
    assert timing.published == 20
    assert 0 <= timing.list_s <= timing.queued_s < timing.total_s
    assert timing.total_s - timing.queued_s >= 0.04  # the acknowledgement wait, not counted as queueing


def test_between_relists_runs_after_every_relist_even_a_failed_one() -> None:
    """The node agent wakes pod workers and runs its collector passes there: after a relist has
    finished (acknowledgements included), before the next one starts."""
    clock = Clock()
    sim = SimRuntime(seed=1, clock=clock)
    running_pods(sim, 2)
    order: list[str] = []
    listings = 0

    def relist(now: float) -> dict[str, Any]:
        nonlocal listings
        listings += 1
        order.append("relist")
        if listings == 2:
            raise OSError("runtime away")
        return SimRuntime.relist(sim, now)

    sim.relist = relist  # type: ignore[method-assign,unused-ignore]

    def acknowledge(delivery: asyncio.Future[None]) -> None:
        order.append("acked")
        delivery.set_result(None)

    async def publish(event: Any) -> asyncio.Future[None]:
        delivery = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(0.01, acknowledge, delivery)
        return delivery

    async def scenario() -> None:
        pleg = Pleg(
            sim,
            "node-1",
            publish,
            clock=clock,
            period_s=0.02,
            between_relists=lambda: order.append("between"),
        )
        clock.now += 2
        task = asyncio.ensure_future(pleg.run())
        while listings < 4:
            await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(scenario())
    assert order[:7] == ["relist", "acked", "acked", "acked", "acked", "between", "relist"]
    assert order[7:9] == ["between", "relist"]  # the failed relist, then its hook
