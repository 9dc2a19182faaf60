"""Test vectors for the pure PLEG pieces (docs/kubelet-rules.md, "PLEG").

Test names follow pkg/kubelet/pleg/generic_test.go. Upstream sorts expected and actual events by
(pod UID, container ID) before comparing; relist_events already returns that order, so the expected
lists below are written sorted.
"""

from __future__ import annotations

import pytest

from podledger.agents.pleg import (
    RELIST_THRESHOLD_S,
    PodLifecycleEvent,
    RelistHealth,
    generate_events,
    pleg_state,
    relist_events,
)
from podledger.types import JSONDict, PlegEventType


def snapshot(*containers: tuple[str, str]) -> JSONDict:
    """A runtime snapshot holding the given (id, state) containers."""
    return {"containers": [{"id": cid, "name": cid, "state": state} for cid, state in containers]}


def ev(uid: str, kind: str, cid: str) -> PodLifecycleEvent:
    return PodLifecycleEvent(uid, kind, cid)


@pytest.mark.parametrize(
    ("runtime_state", "expected"),
    [
        ("created", "unknown"),
        ("running", "running"),
        ("exited", "exited"),
        ("unknown", "unknown"),
        (None, "non-existent"),
    ],
)
def test_pleg_state_mapping(runtime_state: str | None, expected: str) -> None:
    assert pleg_state(runtime_state) == expected


def test_TestRelisting() -> None:
    relist1 = {
        "1234": snapshot(("c1", "exited"), ("c2", "running"), ("c3", "unknown")),
        "4567": snapshot(("c1", "exited")),
    }
    # Step 1: every running/exited container seen for the first time is reported; c3 (unknown) is not.
    assert relist_events({}, relist1) == [
        ev("1234", PlegEventType.CONTAINER_DIED, "c1"),
        ev("1234", PlegEventType.CONTAINER_STARTED, "c2"),
        ev("4567", PlegEventType.CONTAINER_DIED, "c1"),
    ]
    # Step 2: nothing changed, nothing sent.
    assert relist_events(relist1, relist1) == []
    # Step 3: only transitions are reported.
    relist3 = {
        "1234": snapshot(("c2", "exited"), ("c3", "running")),
        "4567": snapshot(("c4", "running")),
    }
    assert relist_events(relist1, relist3) == [
        ev("1234", PlegEventType.CONTAINER_REMOVED, "c1"),
        ev("1234", PlegEventType.CONTAINER_DIED, "c2"),
        ev("1234", PlegEventType.CONTAINER_STARTED, "c3"),
        ev("4567", PlegEventType.CONTAINER_REMOVED, "c1"),
        ev("4567", PlegEventType.CONTAINER_STARTED, "c4"),
    ]


@pytest.mark.parametrize("num_relists", [1, 3])
def test_TestReportMissingContainers(num_relists: int) -> None:
    first = {"1234": snapshot(("c1", "running"), ("c2", "running"), ("c3", "exited"))}
    previous: dict[str, JSONDict] = {}
    for _ in range(num_relists):
        relist_events(previous, first)
        previous = first
    # c2 stopped and was removed between relists: Died then Removed. c3 was already exited: Removed only.
    assert relist_events(previous, {"1234": snapshot(("c1", "running"))}) == [
        ev("1234", PlegEventType.CONTAINER_DIED, "c2"),
        ev("1234", PlegEventType.CONTAINER_REMOVED, "c2"),
        ev("1234", PlegEventType.CONTAINER_REMOVED, "c3"),
    ]


@pytest.mark.parametrize("num_relists", [1, 3])
def test_TestReportMissingPods(num_relists: int) -> None:
    first = {"1234": snapshot(("c2", "running"))}
    previous: dict[str, JSONDict] = {}
    for _ in range(num_relists):
        relist_events(previous, first)
        previous = first
    assert relist_events(previous, {}) == [
        ev("1234", PlegEventType.CONTAINER_DIED, "c2"),
        ev("1234", PlegEventType.CONTAINER_REMOVED, "c2"),
    ]


def test_unknown_state_yields_no_event() -> None:
    # New unknown container, running -> unknown, and created (maps to unknown): never an event.
    assert relist_events({}, {"p": snapshot(("c1", "unknown"), ("c2", "created"))}) == []
    assert relist_events({"p": snapshot(("c1", "running"))}, {"p": snapshot(("c1", "unknown"))}) == []
    # The lower-level generator does produce ContainerChanged; the relist drops it.
    assert [e.type for e in generate_events("p", "c1", "running", "unknown")] == ["ContainerChanged"]


def test_unknown_then_gone_reports_died_and_removed() -> None:
    """generateEvents: non-existent after anything but exited is Died then Removed."""
    assert relist_events({"p": snapshot(("c1", "unknown"))}, {}) == [
        ev("p", PlegEventType.CONTAINER_DIED, "c1"),
        ev("p", PlegEventType.CONTAINER_REMOVED, "c1"),
    ]


def test_sandbox_is_diffed_like_a_container() -> None:
    old = {"p": {"containers": [], "sandbox": {"id": "s1", "ready": True}}}
    new = {"p": {"containers": [], "sandbox": {"id": "s1", "ready": False}}}
    assert relist_events({}, old) == [ev("p", PlegEventType.CONTAINER_STARTED, "s1")]
    assert relist_events(old, new) == [ev("p", PlegEventType.CONTAINER_DIED, "s1")]
    assert relist_events(new, {}) == [ev("p", PlegEventType.CONTAINER_REMOVED, "s1")]


def test_PodLifecycleEvent_is_frozen() -> None:
    event = ev("p", PlegEventType.CONTAINER_STARTED, "c1")
    with pytest.raises(AttributeError):
        event.type = PlegEventType.CONTAINER_DIED  # type: ignore[misc]


def test_TestHealthy() -> None:
    health = RelistHealth()
    assert health.threshold_s == RELIST_THRESHOLD_S == 180.0
    # Unhealthy before any relist, even after 10 minutes.
    ok, reason = health.healthy(0.0)
    assert not ok
    assert reason == "pleg has yet to be successful"
    assert health.healthy(600.0) == (False, "pleg has yet to be successful")
    # Relist, then one minute later: healthy.
    health.record_relist(600.0)
    assert health.healthy(660.0) == (True, "")
    # Exactly at the threshold is still healthy (strictly greater fails).
    assert health.healthy(600.0 + RELIST_THRESHOLD_S)[0]
    # Another threshold without relisting: unhealthy.
    ok, reason = health.healthy(660.0 + RELIST_THRESHOLD_S)
    assert not ok
    assert reason == "pleg was last seen active 4m0s ago; threshold is 3m0s"
