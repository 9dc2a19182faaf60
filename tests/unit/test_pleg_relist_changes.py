"""The relist fast path (relist_changes) against the plain diff (relist_events).

The loop diffs through relist_changes, which skips pods whose snapshot is the same object as last
time and compares per-pod state tuples; every case here checks it sends exactly the plain diff's
events, in the same order. Named after pkg/kubelet/pleg/generic_test.go where a case mirrors one.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from podledger.agents.pleg.relist import (
    PodLifecycleEvent,
    Relisted,
    pod_events,
    pod_states,
    relist_changes,
    relist_events,
)
from podledger.types import JSONDict, PlegEventType

Snapshots = dict[str, Any]


def snapshot(*containers: tuple[str, str]) -> JSONDict:
    """A runtime snapshot holding the given (id, state) containers."""
    return {"containers": [{"id": cid, "name": cid, "state": state} for cid, state in containers]}


def run_relists(*relists: Snapshots) -> list[list[PodLifecycleEvent]]:
    """Each relist's events through relist_changes, checked against relist_events on the way."""
    kept, out = Relisted(), []
    previous: Snapshots = {}
    for current in relists:
        events, kept = relist_changes(kept, current)
        assert events == relist_events(previous, current)
        assert kept.snapshots is current
        out.append(events)
        previous = current
    return out


def test_TestRelisting_through_the_fast_path() -> None:
    relist1 = {
        "1234": snapshot(("c1", "exited"), ("c2", "running"), ("c3", "unknown")),
        "4567": snapshot(("c1", "exited")),
    }
    relist3 = {
        "1234": snapshot(("c2", "exited"), ("c3", "running")),
        "4567": snapshot(("c4", "running")),
    }
    first, second, third = run_relists(relist1, dict(relist1), relist3)
    assert [(e.pod_uid, e.type, e.container_id) for e in first] == [
        ("1234", PlegEventType.CONTAINER_DIED, "c1"),
        ("1234", PlegEventType.CONTAINER_STARTED, "c2"),
        ("4567", PlegEventType.CONTAINER_DIED, "c1"),
    ]
    assert second == []
    assert len(third) == 5


def test_an_unchanged_snapshot_object_is_not_looked_into() -> None:
    """The same object as last time is taken as unchanged without reading it: its states are carried."""
    listed = snapshot(("c1", "running"))
    _, kept = relist_changes(Relisted(), {"p": listed})
    listed["containers"] = "not a container list"  # would fail pod_states if it were read again
    events, kept = relist_changes(kept, {"p": listed})
    assert events == []
    assert kept.states["p"] == (("c1", "running"),)


def test_a_rebuilt_snapshot_with_the_same_states_sends_nothing() -> None:
    """The process runtime builds new snapshots every relist; equal states mean no event."""
    before = {"p": snapshot(("c1", "running"), ("c2", "created"))}
    after = {"p": snapshot(("c2", "unknown"), ("c1", "running"))}  # created and unknown are one PLEG state
    assert run_relists(before, after)[1] == []


def test_a_pod_gone_from_the_runtime_reports_died_and_removed() -> None:
    assert run_relists({"p": snapshot(("c1", "running"))}, {})[1] == [
        PodLifecycleEvent("p", PlegEventType.CONTAINER_DIED, "c1"),
        PodLifecycleEvent("p", PlegEventType.CONTAINER_REMOVED, "c1"),
    ]


def test_a_none_snapshot_is_a_pod_without_containers() -> None:
    """None is a snapshot (no containers), not a missing pod: the identity check must not confuse them."""
    assert run_relists({"p": None}, {"p": None}, {"p": snapshot(("c1", "running"))}, {}) == [
        [],
        [],
        [PodLifecycleEvent("p", PlegEventType.CONTAINER_STARTED, "c1")],
        [
            PodLifecycleEvent("p", PlegEventType.CONTAINER_DIED, "c1"),
            PodLifecycleEvent("p", PlegEventType.CONTAINER_REMOVED, "c1"),
        ],
    ]


def test_pod_states_are_sorted_pleg_states_with_the_first_occurrence_of_an_id() -> None:
    listed = {
        "containers": [
            {"id": "b", "state": "created"},
            {"id": "a", "state": "running"},
            {"id": "a", "state": "exited"},  # a repeated ID: the first one counts
        ],
        "sandbox": {"id": "s", "ready": False},
        "sandboxes": [{"id": "r", "state": "running"}, {"name": "no id"}],
    }
    assert pod_states(listed) == (("a", "running"), ("b", "unknown"), ("r", "running"), ("s", "exited"))
    assert pod_states(None) == pod_states({}) == ()


def test_pod_events_drop_container_changed() -> None:
    """generateEvents produces ContainerChanged for unknown; the relist never sends it."""
    assert pod_events("p", (("c1", "running"),), (("c1", "unknown"),)) == []


# Property: any sequence of relists gives the plain diff's events, in its order. Snapshots come from
# a small alphabet so IDs collide, repeat and move between containers and sandboxes.
STATES = st.sampled_from(["created", "running", "exited", "unknown", "paused", ""])
IDS = st.sampled_from(["c1", "c2", "c3", "s1"])
CONTAINER = st.fixed_dictionaries({"id": IDS, "state": STATES})
SANDBOX = st.one_of(
    st.fixed_dictionaries({"id": IDS, "ready": st.booleans()}),
    st.fixed_dictionaries({"id": IDS, "state": STATES}),
)
SNAPSHOT = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {"containers": st.lists(CONTAINER, max_size=4)},
        optional={"sandbox": SANDBOX, "sandboxes": st.lists(SANDBOX, max_size=2)},
    ),
)
# Per pod and relist: absent, the previous relist's very object (when there was one), or a new one.
STEP = st.dictionaries(st.sampled_from(["pa", "pb", "pc", "pd"]), st.one_of(st.just("same"), SNAPSHOT))


@settings(max_examples=400, deadline=None)
@given(st.lists(STEP, min_size=1, max_size=6))
def test_relist_changes_equals_the_plain_diff(steps: list[dict[str, Any]]) -> None:
    relists: list[Snapshots] = []
    previous: Snapshots = {}
    for step in steps:
        current = {
            uid: previous[uid] if value == "same" else value
            for uid, value in step.items()
            if value != "same" or uid in previous
        }
        relists.append(current)
        previous = current
    run_relists(*relists)
