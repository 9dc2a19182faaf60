"""SimRuntime.relist looks only at pods changed since the last relist and pods whose snapshot
expired; here it is checked against every pod's snapshot asked for one by one, over random runs
of starts, stops, removals and clock moves (backwards included)."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from podledger.agents.runtime.sim import ANNOTATION_RUN_SECONDS, ANNOTATION_START_DELAY, SimRuntime
from podledger.types import JSONDict
from tests import pods

T0 = 1_700_000_000.0
UIDS = ("u0", "u1", "u2", "u3")


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def pod(uid: str, run_s: float, delay_s: float) -> JSONDict:
    annotations = {ANNOTATION_RUN_SECONDS: str(run_s), ANNOTATION_START_DELAY: str(delay_s)}
    return pods.pod(("app", "side"), name=uid, uid=uid, image="app:1", annotations=annotations)


operation = st.one_of(
    st.tuples(st.just("tick"), st.floats(min_value=-3, max_value=8)),
    st.tuples(st.just("relist"), st.just(0)),
    st.tuples(st.just("create"), st.sampled_from(UIDS)),
    st.tuples(st.just("start"), st.sampled_from(UIDS), st.sampled_from(("app", "side")), st.floats(0, 6)),
    st.tuples(st.just("stop"), st.sampled_from(UIDS)),
    st.tuples(st.just("remove_oldest"), st.sampled_from(UIDS)),
    st.tuples(st.just("stop_sandbox"), st.sampled_from(UIDS)),
    st.tuples(st.just("remove_sandbox"), st.sampled_from(UIDS)),
    st.tuples(st.just("peek"), st.sampled_from(UIDS), st.floats(min_value=-5, max_value=5)),
)


async def apply(rt: SimRuntime, clock: Clock, op: tuple[Any, ...], known: dict[str, JSONDict]) -> None:
    kind = op[0]
    if kind == "tick":
        clock.now += op[1]
    elif kind == "relist":
        rt.relist(clock.now)
    elif kind == "create":
        known.setdefault(op[1], pod(op[1], 4.0, 0.5))
        await rt.create_sandbox(known[op[1]])
    elif kind == "peek":  # a pod worker reading one pod, possibly at another time than the relists'
        rt.pod_snapshot(op[1], clock.now + op[2])
    elif op[1] in known and (snapshot := rt.pod_snapshot(op[1], clock.now)) is not None:
        uid, containers = op[1], snapshot["containers"]
        if kind == "start" and snapshot["sandbox"]["ready"]:
            spec = pods.container(op[2], "app:1")
            await rt.start_container(pod(uid, op[3], op[3] / 2), spec, attempt=len(containers))
        elif kind == "stop" and containers:
            await rt.stop_container(uid, containers[0]["id"], 0)
        elif kind == "remove_oldest" and containers:
            await rt.remove_container(uid, containers[-1]["id"])
        elif kind == "stop_sandbox":
            await rt.stop_sandbox(uid)
        elif kind == "remove_sandbox":
            await rt.remove_sandbox(uid)


@settings(max_examples=300, deadline=None)
@given(st.lists(operation, max_size=60), st.floats(min_value=-2, max_value=10))
def test_relist_equals_every_pod_asked_for_alone(ops: list[tuple[Any, ...]], last_tick: float) -> None:
    clock = Clock()
    incremental, reference = SimRuntime(seed=3, clock=clock), SimRuntime(seed=3, clock=clock)
    known: dict[str, JSONDict] = {}

    async def scenario() -> None:
        for op in [*ops, ("tick", last_tick)]:
            # The same operations on both; only `incremental` relists (and is peeked at) in between.
            await apply(incremental, clock, op, known)
            if op[0] not in ("relist", "peek"):
                await apply(reference, clock, op, known)
            listed = incremental.relist(clock.now)
            alive = [uid for uid in known if reference.pod_snapshot(uid, clock.now) is not None]
            expected = {uid: reference.pod_snapshot(uid, clock.now) for uid in alive}
            assert listed == expected
            assert set(listed) == set(expected)

    asyncio.run(scenario())


def test_an_unchanged_pod_is_listed_as_the_same_object_and_a_changed_one_anew() -> None:
    clock = Clock()
    rt = SimRuntime(seed=1, clock=clock)
    still, moving = pod("still", 1000, 0), pod("moving", 2, 0)

    async def scenario() -> None:
        for p in (still, moving):
            await rt.create_sandbox(p)
            await rt.start_container(p, p["spec"]["containers"][0], attempt=0)

    asyncio.run(scenario())
    clock.now += 1
    first = rt.relist(clock.now)
    clock.now += 3  # past the moving pod's exit (2 s, jitter at most 20 %)
    second = rt.relist(clock.now)
    assert second["still"] is first["still"]
    assert second["moving"] is not first["moving"]
    assert second["moving"]["containers"][0]["state"] == "exited"
    assert list(second) == ["still", "moving"]  # creation order, as the pods were created
