"""The pod worker's pure decisions (agents/worker/decisions.py), as table tests."""

from __future__ import annotations

from typing import Any

import pytest

from podledger.agents.worker.decisions import (
    kill_order,
    pod_grace_period,
    sidecars_started,
    wants_termination,
)
from podledger.types import JSONDict, ProbeResult
from tests import pods


def _pod(phase: str | None = None, **meta: Any) -> JSONDict:
    pod = pods.pod(["app"])
    pod["metadata"].update(meta)
    if phase is not None:
        pod["status"] = {"phase": phase}
    return pod


@pytest.mark.parametrize(
    ("pod", "source", "removed", "wanted"),
    [
        (_pod("Running"), "api", False, False),
        (_pod("Running"), "api", True, True),  # removed from the node's config
        (_pod("Running", deletionTimestamp="2026-11-27T08:00:00Z"), "api", False, True),
        (_pod("Succeeded"), "api", False, True),  # terminal in the API
        (_pod("Failed"), "file", False, False),  # a static pod is never ended by an API phase
        (_pod("Failed"), "file", True, True),
    ],
)
def test_wants_termination(pod: JSONDict, source: str, removed: bool, wanted: bool) -> None:
    assert wants_termination(pod, source, removed) is wanted


@pytest.mark.parametrize(
    ("deletion_grace", "spec_grace", "stored", "expected"),
    [
        (None, None, None, (30, False)),  # the default
        (None, 10, None, (10, False)),
        (5, 10, None, (5, False)),  # the deletion's own grace period wins
        (20, 10, 8, (8, False)),  # never longer than the stored one
        (3, 10, 8, (3, True)),  # shortened: an in-flight sync is cancelled
        (0, 10, None, (10, False)),  # 0 asks for nothing: the spec's
    ],
)
def test_pod_grace_period(
    deletion_grace: int | None, spec_grace: int | None, stored: int | None, expected: tuple[int, bool]
) -> None:
    pod = _pod()
    if deletion_grace is not None:
        pod["metadata"]["deletionGracePeriodSeconds"] = deletion_grace
    if spec_grace is not None:
        pod["spec"]["terminationGracePeriodSeconds"] = spec_grace
    assert pod_grace_period(pod, stored) == expected


def _rc(cid: str, name: str, state: str = "running") -> JSONDict:
    return {"id": cid, "name": name, "state": state}


def test_kill_order_stops_regular_containers_together_then_sidecars_in_reverse_start_order() -> None:
    pod = pods.pod(["app", "web"], [pods.sidecar("logs"), pods.container("init"), pods.sidecar("mesh")])
    snapshot: Any = {
        "containers": [
            _rc("a1", "app"),
            _rc("l1", "logs"),
            _rc("w1", "web"),
            _rc("m1", "mesh"),
            _rc("a0", "app", "exited"),  # not running: nothing to stop
        ]
    }
    assert kill_order(snapshot, pod) == (["a1", "w1"], ["m1", "l1"])
    assert kill_order(snapshot, None) == (["a1", "l1", "w1", "m1"], [])  # no pod: all regular
    assert kill_order(None, pod) == ([], [])


def test_sidecars_with_a_startup_probe_start_only_once_it_succeeded() -> None:
    probe = {"exec": {"command": ["true"]}}
    pod = pods.pod(["app"], [pods.sidecar("probed", startupProbe=probe), pods.sidecar("plain")])
    snapshot: Any = {
        "containers": [
            _rc("p1", "probed"),
            _rc("p0", "probed", "exited"),
            _rc("s1", "plain"),
            _rc("a1", "app"),
        ]
    }
    assert sidecars_started(pod, snapshot, {}) == {"p1": False}  # no result yet: not started
    assert sidecars_started(pod, snapshot, {"p1": ProbeResult.SUCCESS}) == {"p1": True}
    assert sidecars_started(pod, snapshot, {"p1": ProbeResult.FAILURE}) == {"p1": False}
