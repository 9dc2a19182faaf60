"""The pure half of SyncPod: what a pod worker does next (agents/pod_actions.py)."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from podledger.agents.runtime.base import ContainerRecord
from podledger.agents.worker.actions import (
    backoff_active,
    backoff_next,
    compute_pod_actions,
    phase_from_runtime,
)
from tests import pods

NOW = 1_700_000_000.0


# pod_actions' test pods: one namespace, uid and image throughout.
make_pod = partial(pods.pod, name="p", namespace="ns", uid="u1", image="i", restart_policy="Always")


def c(
    name: str,
    state: str,
    *,
    exit_code: int | None = None,
    finished: float | None = None,
    restarts: int = 0,
    cid: str | None = None,
    started: float | None = NOW - 100,
) -> dict[str, Any]:
    return ContainerRecord(
        id=cid or f"{name}-{restarts}",
        name=name,
        image="i",
        state=state,
        restart_count=restarts,
        created_at=NOW - 200,
        started_at=started,
        finished_at=finished,
        exit_code=exit_code,
    ).snapshot()


def snap(*containers: dict[str, Any], ready: bool = True) -> dict[str, Any]:
    return {"containers": list(containers), "ips": ["127.0.0.1"], "sandbox": {"id": "s", "ready": ready}}


def test_no_sandbox_creates_one_first() -> None:
    actions = compute_pod_actions(make_pod(["a"]), None, NOW)
    assert actions.create_sandbox and actions.start == []


def test_a_never_pod_whose_sandbox_died_after_running_is_left_alone() -> None:
    pod = make_pod(["a"], restart_policy="Never")
    actions = compute_pod_actions(pod, snap(c("a", "exited", exit_code=0, finished=NOW), ready=False), NOW)
    assert not actions.create_sandbox and actions.start == []
    # ... but any other policy gets a new sandbox.
    pod = make_pod(["a"], restart_policy="Always")
    assert compute_pod_actions(pod, snap(c("a", "exited", exit_code=0), ready=False), NOW).create_sandbox


def test_regular_containers_start_together_without_init_containers() -> None:
    assert compute_pod_actions(make_pod(["a", "b"]), snap(), NOW).start == ["a", "b"]


def test_init_containers_run_one_at_a_time_in_order() -> None:
    pod = make_pod(["main"], init_containers=["i1", "i2"])
    assert compute_pod_actions(pod, snap(), NOW).start == ["i1"]
    assert compute_pod_actions(pod, snap(c("i1", "running")), NOW).start == []
    done1 = c("i1", "exited", exit_code=0, finished=NOW - 1)
    assert compute_pod_actions(pod, snap(done1), NOW).start == ["i2"]
    done2 = c("i2", "exited", exit_code=0, finished=NOW)
    assert compute_pod_actions(pod, snap(done2, done1), NOW).start == ["main"]
    # Once the regular container exists, plain init containers are done even if their records went away.
    assert compute_pod_actions(pod, snap(c("main", "running")), NOW).start == []


def test_a_failed_init_container_is_retried_unless_the_pod_never_restarts() -> None:
    failed = c("i1", "exited", exit_code=1, finished=NOW - 1)
    actions = compute_pod_actions(make_pod(["main"], ["i1"], restart_policy="OnFailure"), snap(failed), NOW)
    assert actions.start == ["i1"]
    assert actions.backoff["i1"] == {"delay": 10.0, "last_update": NOW}
    never = compute_pod_actions(make_pod(["main"], ["i1"], restart_policy="Never"), snap(failed), NOW)
    assert never.start == [] and never.reasons == {}
    assert phase_from_runtime(make_pod(["main"], ["i1"], restart_policy="Never"), snap(failed)) == "Failed"


def test_a_sidecar_must_have_started_before_the_next_init_container() -> None:
    pod = make_pod(["main"], [pods.sidecar("side", "i"), "i2"])
    assert compute_pod_actions(pod, snap(), NOW).start == ["side"]
    running = c("side", "running", cid="side-x")
    # Its startup probe has not passed yet: wait.
    assert compute_pod_actions(pod, snap(running), NOW, started={"side-x": False}).start == []
    assert compute_pod_actions(pod, snap(running), NOW, started={"side-x": True}).start == ["i2"]
    # No startup probe: running counts as started.
    assert compute_pod_actions(pod, snap(running), NOW).start == ["i2"]
    # An exited sidecar restarts whatever the pod's policy, also after the regular containers started.
    never = make_pod(["main"], [pods.sidecar("side", "i")], restart_policy="Never")
    dead = c("side", "exited", exit_code=0, finished=NOW - 1)
    assert compute_pod_actions(never, snap(c("main", "running"), dead), NOW).start == ["side"]


@pytest.mark.parametrize(
    ("policy", "exit_code", "restarts"),
    [
        ("Always", 0, True),
        ("Always", 1, True),
        ("OnFailure", 0, False),
        ("OnFailure", 2, True),
        ("Never", 1, False),
    ],
)
def test_exited_containers_restart_per_restart_policy(policy: str, exit_code: int, restarts: bool) -> None:
    exited = c("a", "exited", exit_code=exit_code, finished=NOW - 1)
    actions = compute_pod_actions(make_pod(["a"], restart_policy=policy), snap(exited), NOW)
    assert actions.start == (["a"] if restarts else [])


def test_nothing_restarts_once_the_pod_is_being_deleted() -> None:
    pod = make_pod(["a"])
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert compute_pod_actions(pod, snap(c("a", "exited", exit_code=1, finished=NOW)), NOW).start == []


def test_crash_loop_back_off_holds_a_container_that_fails_again_within_the_delay() -> None:
    pod = make_pod(["a"])
    # First failure: restarted at once, with a 10 s entry.
    first = compute_pod_actions(pod, snap(c("a", "exited", exit_code=1, finished=NOW)), NOW)
    assert first.start == ["a"] and first.backoff["a"]["delay"] == 10.0
    # It fails again 3 s later: held, with upstream's message, and the worker is told when to come back.
    again = c("a", "exited", exit_code=1, finished=NOW + 3, restarts=1)
    held = compute_pod_actions(pod, snap(again), NOW + 4, backoff=first.backoff)
    assert held.start == []
    assert held.reasons == {
        "a": {
            "reason": "CrashLoopBackOff",
            "message": "back-off 10s restarting failed container=a pod=p_ns(u1)",
        }
    }
    assert held.wait_s == pytest.approx(9.0)
    # After the delay it restarts and the next delay doubles.
    later = compute_pod_actions(pod, snap(again), NOW + 13.5, backoff=first.backoff)
    assert later.start == ["a"] and later.backoff["a"] == {"delay": 20.0, "last_update": NOW + 13.5}


def test_back_off_doubles_to_the_cap_and_resets_after_ten_quiet_minutes() -> None:
    entry = None
    delays = []
    t = NOW
    for _ in range(8):
        entry = backoff_next(entry, t, t)
        delays.append(entry["delay"])
        t += entry["delay"] + 1
    assert delays == [10, 20, 40, 80, 160, 300, 300, 300]
    assert backoff_active(entry, t - 1, t)
    # A container that finished more than 10 minutes after the last bump starts over from 10 s.
    late = t + 601
    assert not backoff_active(entry, late, late)
    assert backoff_next(entry, late, late)["delay"] == 10


def test_a_liveness_failure_kills_the_container_with_its_probe_named() -> None:
    running = c("a", "running", cid="a-1")
    actions = compute_pod_actions(make_pod(["a"]), snap(running), NOW, probe_failures={"a-1": "liveness"})
    assert [(k.container_id, k.name, k.probe) for k in actions.kill] == [("a-1", "a", "liveness")]
    assert actions.start == []


def test_phase_from_runtime_is_terminal_only_when_nothing_will_run_again() -> None:
    pod = make_pod(["a"], restart_policy="OnFailure")
    assert phase_from_runtime(pod, snap(c("a", "exited", exit_code=0, finished=NOW))) == "Succeeded"
    assert phase_from_runtime(pod, snap(c("a", "exited", exit_code=1, finished=NOW))) == "Running"
    assert phase_from_runtime(pod, None) == "Pending"
