"""The PLEG on the real broker: a relist large enough to be queued in several chunks lands on the
pleg topic whole, in the diff's order, each event with its pod's snapshot; a later relist sends only
what changed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from podledger.agents.pleg import Pleg, relist_events
from podledger.agents.pleg.loop import QUEUE_CHUNK
from podledger.agents.runtime.sim import SimRuntime
from podledger.config import Settings
from podledger.kafka import Publisher
from podledger.schemas import decode, models
from podledger.streams.topics import ensure_topics
from podledger.types import PlegEventType, Topic
from tests import pods
from tests.support.kafka import read_topic

pytestmark = pytest.mark.kafka


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_relist_of_many_pods_lands_whole_and_in_order(settings: Settings) -> None:
    clock = Clock()
    sim = SimRuntime(seed=3, clock=clock)
    node = settings.node
    count = QUEUE_CHUNK * 2  # a sandbox and a container each: four chunks of events

    async def scenario() -> tuple[list[Any], list[Any], list[Any]]:
        await ensure_topics(settings)
        made = []
        for i in range(count):
            pod = pods.pod(("app",), name=f"p{i}", uid=f"pleg-{i:04d}", image="app:1")
            await sim.create_sandbox(pod)
            await sim.start_container(pod, pod["spec"]["containers"][0], attempt=0)
            made.append(pod)
        publisher = Publisher(settings)
        await publisher.start()

        async def publish(event: models.PlegEvent) -> asyncio.Future[Any]:
            return await publisher.send(Topic.PLEG, event.uid, event, node)

        try:
            pleg = Pleg(sim, node, publish, clock=clock)
            clock.now += 2
            started = await pleg.relist_once()
            before = sim.relist(clock.now)
            for pod in made[:5]:  # five containers stop: only their deaths go out next
                uid = pod["metadata"]["uid"]
                await sim.stop_container(uid, before[uid]["containers"][0]["id"], 0)
            clock.now += 1
            died = await pleg.relist_once()
        finally:
            await publisher.stop()
        return started, relist_events({}, before), died

    started, expected, died = asyncio.run(scenario())
    assert started == expected
    assert len(started) == 2 * count
    assert [(e.pod_uid, e.type) for e in died] == [
        (f"pleg-{i:04d}", PlegEventType.CONTAINER_DIED) for i in range(5)
    ]

    records = asyncio.run(read_topic(settings, Topic.PLEG, at_least=len(started) + len(died)))
    assert len({partition for partition, _, _ in records}) == 1  # one node: one partition, one order
    values = [decode(Topic.PLEG, value) for _, _, value in records]
    assert [(v.uid, v.type, v.container_id) for v in values] == [
        (e.pod_uid, e.type, e.container_id) for e in [*started, *died]
    ]
    for value in values:
        assert value.node == node
        ids = {c["id"] for c in value.runtime["containers"]} | {value.runtime["sandbox"]["id"]}
        assert value.container_id in ids  # each event carries the snapshot of its own pod
    final = {v.uid: v.runtime for v in values[len(started) :]}
    assert all(s["containers"][0]["state"] == "exited" for s in final.values())
