"""SimRuntime: timed stages, seeded jitter, restarts, stops, sandboxes, and the snapshot contract.

Time comes from a fake clock, so every stage boundary is checked exactly where the timeline puts it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

from podledger import schemas
from podledger.agents.pleg import PodLifecycleEvent, relist_events
from podledger.agents.runtime.base import Runtime, rfc3339
from podledger.agents.runtime.sim import (
    ANNOTATION_EXIT_CODE,
    ANNOTATION_RUN_SECONDS,
    ANNOTATION_START_DELAY,
    SimRuntime,
)
from podledger.types import JSONDict, PlegEventType
from tests import pods

T = TypeVar("T")
T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z


class FakeClock:
    """A settable clock, so the runtime's notion of 'now' is under the test's control."""

    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def make_pod(uid: str = "pod-1", **annotations: str) -> JSONDict:
    return pods.pod(("app",), name=uid, uid=uid, image="busybox:1.36", annotations=annotations)


APP = pods.container("app", "busybox:1.36")


def started(rt: SimRuntime, pod: JSONDict, container: JSONDict = APP, attempt: int = 0) -> str:
    """Create the sandbox if needed and start one container; returns its id."""
    uid = pod["metadata"]["uid"]
    known = rt.relist(T0).get(uid)  # sandbox state does not depend on the time relisted at
    if known is None or not known["sandbox"]["ready"]:
        run(rt.create_sandbox(pod))
    return run(rt.start_container(pod, container, attempt=attempt))


def container(rt: SimRuntime, now: float, cid: str, uid: str = "pod-1") -> JSONDict:
    (found,) = [c for c in rt.relist(now)[uid]["containers"] if c["id"] == cid]
    return found


def timeline(seed: int) -> tuple[float, float]:
    """(start, finish) offsets from start_container of one container, found by relisting at 1 ms steps."""
    rt = SimRuntime(seed=seed, clock=FakeClock())
    cid = started(rt, make_pod(**{ANNOTATION_START_DELAY: "1", ANNOTATION_RUN_SECONDS: "10"}))
    start = finish = None
    for ms in range(0, 20_000):
        state = container(rt, T0 + ms / 1000, cid)["state"]
        if start is None and state == "running":
            start = ms / 1000
        if state == "exited":
            finish = ms / 1000
            break
    assert start is not None and finish is not None
    return start, finish


def test_satisfies_runtime_protocol() -> None:
    rt = SimRuntime()
    assert isinstance(rt, Runtime)
    assert rt.runtime_type == "sim"


def test_rfc3339_is_utc_seconds() -> None:
    assert rfc3339(T0) == "2023-11-14T22:13:20Z"
    assert rfc3339(T0 + 0.999) == "2023-11-14T22:13:20Z"


def test_container_goes_created_running_exited_at_configured_times() -> None:
    clock = FakeClock()
    rt = SimRuntime(seed=1, clock=clock)
    pod = make_pod(**{ANNOTATION_START_DELAY: "2", ANNOTATION_RUN_SECONDS: "10", ANNOTATION_EXIT_CODE: "3"})
    cid = started(rt, pod, attempt=0)

    c = container(rt, T0 + 1.59, cid)  # jitter keeps the delay within 2 s +-20%: 1.6..2.4
    assert c["state"] == "created"
    assert c["created_at"] == rfc3339(T0)
    assert (c["started_at"], c["finished_at"], c["exit_code"], c["reason"]) == (None, None, None, None)

    c = container(rt, T0 + 2.41, cid)
    assert c["state"] == "running"
    assert c["started_at"] in {rfc3339(T0 + 1), rfc3339(T0 + 2)}
    assert c["finished_at"] is None

    c = container(rt, T0 + 2.4 + 7.99, cid)  # run >= 8 s after a start <= 2.4 s
    assert c["state"] == "running"

    c = container(rt, T0 + 2.4 + 12.01, cid)  # run <= 12 s
    assert c["state"] == "exited"
    assert (c["exit_code"], c["reason"], c["restart_count"]) == (3, "Error", 0)
    assert c["finished_at"] is not None and c["finished_at"] > c["started_at"]


def test_exit_code_zero_is_completed_and_default_runs_forever() -> None:
    rt = SimRuntime(seed=2, clock=FakeClock())
    done = started(rt, make_pod("done", **{ANNOTATION_RUN_SECONDS: "1"}))
    forever = started(rt, make_pod("forever"))
    later = T0 + 10_000
    assert container(rt, later, done, "done")["exit_code"] == 0
    assert container(rt, later, done, "done")["reason"] == "Completed"
    assert container(rt, T0 + 0.39, forever, "forever")["state"] == "created"  # default delay 0.5 s
    assert container(rt, later, forever, "forever")["state"] == "running"


def test_jitter_is_reproducible_for_a_seed_and_differs_across_seeds() -> None:
    a, b, c = timeline(7), timeline(7), timeline(8)
    assert a == b
    assert a != c
    for start, finish in (a, c):
        assert 0.8 <= start <= 1.2
        assert 8.0 <= finish - start <= 12.0 + 0.001


def test_per_container_annotation_overrides_pod_level() -> None:
    rt = SimRuntime(clock=FakeClock())
    pod = make_pod(**{ANNOTATION_RUN_SECONDS: "1", f"{ANNOTATION_RUN_SECONDS}.sidecar": "1000"})
    app = started(rt, pod, APP)
    side = started(rt, pod, pods.container("sidecar", "busybox:1.36"))
    assert container(rt, T0 + 100, app)["state"] == "exited"
    assert container(rt, T0 + 100, side)["state"] == "running"


@pytest.mark.parametrize(
    "annotations",
    [{ANNOTATION_RUN_SECONDS: "soon"}, {ANNOTATION_START_DELAY: "-1"}, {ANNOTATION_EXIT_CODE: "256"}],
)
def test_malformed_annotation_fails_the_start(annotations: dict[str, str]) -> None:
    rt = SimRuntime(clock=FakeClock())
    pod = make_pod(**annotations)
    run(rt.create_sandbox(pod))
    with pytest.raises(ValueError):
        run(rt.start_container(pod, APP, attempt=0))
    assert rt.relist(T0)["pod-1"]["containers"] == []


def test_restart_gets_new_id_and_keeps_old_instance_until_removed() -> None:
    clock = FakeClock()
    rt = SimRuntime(clock=clock)
    pod = make_pod(**{ANNOTATION_RUN_SECONDS: "1", ANNOTATION_EXIT_CODE: "1"})
    first = started(rt, pod, attempt=0)
    clock.t = T0 + 5  # the first instance has exited
    second = run(rt.start_container(pod, APP, attempt=1))
    assert second != first

    snap = rt.relist(T0 + 5.01)["pod-1"]
    by_id = {c["id"]: c for c in snap["containers"]}
    assert set(by_id) == {first, second}
    assert [c["id"] for c in snap["containers"]] == [second, first]  # newest first
    assert (by_id[first]["state"], by_id[first]["restart_count"]) == ("exited", 0)
    assert (by_id[second]["state"], by_id[second]["restart_count"]) == ("created", 1)

    run(rt.remove_container("pod-1", first))
    run(rt.remove_container("pod-1", first))  # idempotent, as CRI RemoveContainer is
    assert [c["id"] for c in rt.relist(T0 + 5.01)["pod-1"]["containers"]] == [second]


def test_stop_container_gives_exit_143_now_and_leaves_exited_ones_alone() -> None:
    clock = FakeClock()
    rt = SimRuntime(clock=clock)
    running = started(rt, make_pod())
    done = started(rt, make_pod("done", **{ANNOTATION_RUN_SECONDS: "1", ANNOTATION_EXIT_CODE: "2"}))
    clock.t = T0 + 30
    run(rt.stop_container("pod-1", running, grace_s=30))
    run(rt.stop_container("done", done, grace_s=30))
    run(rt.stop_container("pod-1", "no-such-container", grace_s=30))  # idempotent

    c = container(rt, T0 + 30, running)
    assert (c["state"], c["exit_code"], c["reason"]) == ("exited", 143, "Error")
    assert c["finished_at"] == rfc3339(T0 + 30)
    d = container(rt, T0 + 30, done, "done")
    assert (d["exit_code"], d["finished_at"] < rfc3339(T0 + 30)) == (2, True)


def test_stop_before_start_never_reports_a_start() -> None:
    rt = SimRuntime(clock=FakeClock())
    cid = started(rt, make_pod(**{ANNOTATION_START_DELAY: "5"}))
    run(rt.stop_container("pod-1", cid, grace_s=0))
    c = container(rt, T0 + 100, cid)
    assert (c["state"], c["exit_code"], c["started_at"]) == ("exited", 143, None)


def test_sandbox_ready_then_not_ready() -> None:
    clock = FakeClock()
    rt = SimRuntime(clock=clock)
    pod = make_pod()
    sandbox_id = run(rt.create_sandbox(pod))
    cid = run(rt.start_container(pod, APP, attempt=0))
    snap = rt.relist(T0 + 1)["pod-1"]
    assert snap["sandbox"] == {"id": sandbox_id, "ready": True}
    assert len(snap["ips"]) == 1

    clock.t = T0 + 2
    run(rt.stop_sandbox("pod-1"))
    snap = rt.relist(T0 + 2)["pod-1"]
    assert snap["sandbox"] == {"id": sandbox_id, "ready": False}
    assert snap["ips"] == []
    assert (snap["containers"][0]["id"], snap["containers"][0]["exit_code"]) == (cid, 137)
    with pytest.raises(RuntimeError):
        run(rt.start_container(pod, APP, attempt=1))

    run(rt.remove_sandbox("pod-1"))
    assert rt.relist(T0 + 3) == {}


def test_relist_reuses_snapshot_until_a_stage_changes() -> None:
    clock = FakeClock()
    rt = SimRuntime(clock=clock)
    cid = started(rt, make_pod(**{ANNOTATION_START_DELAY: "1"}))
    a, b = rt.relist(T0 + 0.1)["pod-1"], rt.relist(T0 + 0.2)["pod-1"]
    assert a is b
    c = rt.relist(T0 + 2)["pod-1"]
    assert c is not a and c["containers"][0]["state"] == "running"
    assert a["containers"][0]["state"] == "created"  # earlier snapshots are never mutated
    clock.t = T0 + 2
    run(rt.stop_container("pod-1", cid, grace_s=1))
    assert rt.relist(T0 + 2)["pod-1"]["containers"][0]["state"] == "exited"
    assert rt.relist(T0 + 0.1)["pod-1"]["containers"][0]["state"] == "created"  # time may go backwards


def test_snapshot_validates_against_pleg_schema() -> None:
    rt = SimRuntime(clock=FakeClock())
    pod = make_pod(**{ANNOTATION_RUN_SECONDS: "1", ANNOTATION_EXIT_CODE: "1"})
    first = started(rt, pod)
    second = run(rt.start_container(pod, APP, attempt=1))
    for now in (T0, T0 + 0.7, T0 + 5):
        snapshot = rt.relist(now)["pod-1"]
        event = schemas.from_dict(
            "pleg",
            {
                "uid": "pod-1",
                "node": "node-a",
                "type": "ContainerStarted",
                "container_id": second,
                "runtime": snapshot,
                "ts_ms": int(now * 1000),
            },
        )
        assert event.runtime["runtime_type"] == "sim"
        assert {c["id"] for c in event.runtime["containers"]} == {first, second}


def test_relist_feeds_pleg_started_then_died() -> None:
    rt = SimRuntime(clock=FakeClock())
    cid = started(rt, make_pod(**{ANNOTATION_RUN_SECONDS: "3"}))
    previous: dict[str, JSONDict] = {}
    events: list[PodLifecycleEvent] = []
    for step in range(0, 10):
        current = rt.relist(T0 + step)
        events += relist_events(previous, current)
        previous = current
    container_events = [e.type for e in events if e.container_id == cid]
    assert container_events == [PlegEventType.CONTAINER_STARTED, PlegEventType.CONTAINER_DIED]
