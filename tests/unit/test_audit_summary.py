"""One input event in one line, one status version as a row, and the diff of kubelet-owned
fields between two versions."""

from __future__ import annotations

from typing import Any

import pytest

from podledger.read.audit.diff import change_text, diff, flatten, state_text
from podledger.read.audit.summary import cause_text, container_text, event_line, version_row
from tests import pods

UID = "uid-1"


def entry(topic: str, event: dict[str, Any]) -> dict[str, Any]:
    return {"type": f"{topic}:x", "topic": topic, "partition": 2, "offset": 7, "ts_ms": 1, "event": event}


def runtime(state: str, exit_code: int | None = None) -> dict[str, Any]:
    return {"containers": [{"id": "c1", "name": "worker", "state": state, "exit_code": exit_code}]}


CRASH_MESSAGE = "back-off 20s restarting failed container=worker pod=crashloop_default(uid-1)"


@pytest.mark.parametrize(
    ("value", "line"),
    [
        pytest.param(
            entry("pleg", {"type": "ContainerDied", "container_id": "c1", "runtime": runtime("exited", 1)}),
            "pleg ContainerDied worker exit 1",
            id="pleg_died",
        ),
        pytest.param(
            entry(
                "pleg",
                {"type": "ContainerStarted", "container_id": "process://c1", "runtime": runtime("running")},
            ),
            "pleg ContainerStarted worker",
            id="pleg_started_with_runtime_prefix",
        ),
        pytest.param(
            entry(
                "pleg",
                {"type": "ContainerStarted", "container_id": "s1", "runtime": {"sandbox": {"id": "s1"}}},
            ),
            "pleg ContainerStarted sandbox",
            id="pleg_sandbox",
        ),
        pytest.param(
            entry(
                "pleg", {"type": "ContainerRemoved", "container_id": "gone", "runtime": {"containers": []}}
            ),
            "pleg ContainerRemoved gone",
            id="pleg_container_not_in_snapshot",
        ),
        pytest.param(
            entry(
                "pod-lifecycle",
                {
                    "kind": "sync_result",
                    "sync_results": [
                        {"container": "worker", "reason": "CrashLoopBackOff", "message": CRASH_MESSAGE}
                    ],
                },
            ),
            "pod-lifecycle sync_result CrashLoopBackOff back-off 20s",
            id="sync_result_backoff",
        ),
        pytest.param(
            entry("pod-lifecycle", {"kind": "sync_result", "sync_results": []}),
            "pod-lifecycle sync_result ok",
            id="sync_result_clean",
        ),
        pytest.param(
            entry(
                "pod-lifecycle",
                {
                    "kind": "sync_result",
                    "sync_results": [
                        {"container": "a", "reason": "CrashLoopBackOff", "message": CRASH_MESSAGE},
                        {"container": "b", "reason": "ErrImagePull", "message": "no such image"},
                    ],
                },
            ),
            "pod-lifecycle sync_result a: CrashLoopBackOff back-off 20s; b: ErrImagePull no such image",
            id="sync_result_two_containers",
        ),
        pytest.param(
            entry("pod-lifecycle", {"kind": "terminating", "grace_s": 30}),
            "pod-lifecycle terminating grace 30s",
            id="terminating",
        ),
        pytest.param(
            entry("pod-lifecycle", {"kind": "terminated"}), "pod-lifecycle terminated", id="terminated"
        ),
        pytest.param(
            entry("probe-results", {"probe": "readiness", "container_name": "web", "result": "Failure"}),
            "probe-results readiness web Failure",
            id="probe",
        ),
        pytest.param(
            entry("pod-updates", {"op": "ADD", "source": "file", "pod": pods.pod()}),
            "pod-updates ADD source=file",
            id="pod_update",
        ),
        pytest.param(
            entry(
                "pod-updates",
                {
                    "op": "UPDATE",
                    "source": "api",
                    "pod": pods.pod(metadata={"deletionTimestamp": "2024-01-01T00:00:00Z"}),
                },
            ),
            "pod-updates UPDATE source=api deleting",
            id="pod_update_deleting",
        ),
    ],
)
def test_event_line(value: dict[str, Any], line: str) -> None:
    assert event_line(value) == line


def crashlooping(restarts: int = 3) -> dict[str, Any]:
    status = pods.running_status(ready="False", container_name="worker")
    cs = status["containerStatuses"][0]
    cs["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message": CRASH_MESSAGE}}
    cs["lastState"] = {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": "2024-05-01T14:02:03Z"}}
    cs["restartCount"] = restarts
    return status


def test_version_row_reads_phase_readiness_containers_and_cause() -> None:
    vs = pods.versioned(pods.pod(("worker",), name="crashloop"), "node-a", 5, crashlooping())
    value = {**pods_value(vs), "future_field": {"kept": True}}
    row = version_row(value)
    assert row["version"] == 5 and row["phase"] == "Running" and row["ready"] == "False"
    assert row["containers"] == [
        {"name": "worker", "state": "waiting", "reason": "CrashLoopBackOff", "ready": False, "restarts": 3}
    ]
    assert container_text(row["containers"][0]) == "worker=waiting:CrashLoopBackOff,restarts=3"
    assert (
        cause_text(row["cause"]) == f"{vs.cause.type} {vs.cause.topic}/{vs.cause.partition}@{vs.cause.offset}"
    )


def test_container_text_shows_exit_codes_and_readiness() -> None:
    terminated = {
        "name": "w",
        "state": "terminated",
        "reason": "Error",
        "exit_code": 1,
        "ready": False,
        "restarts": 0,
    }
    running = {"name": "w", "state": "running", "reason": "", "ready": True, "restarts": 2}
    assert container_text(terminated) == "w=terminated:Error(1),restarts=0"
    assert container_text(running) == "w=running,ready,restarts=2"


def pods_value(vs: Any) -> dict[str, Any]:
    from podledger.schemas import to_dict

    return to_dict(vs)


# ------------------------------------------------------------------------------------------- diff


def test_diff_of_a_crash_names_state_restarts_and_readiness() -> None:
    before = pods.running_status(container_name="worker")
    after = crashlooping(restarts=1)
    changes = [change_text(c) for c in diff(before, after)]
    assert changes == [
        "conditions[Ready]: True -> False",
        "conditions[ContainersReady]: True -> False",
        "containerStatuses[worker].ready: true -> false",
        "containerStatuses[worker].restartCount: 0 -> 1",
        f"containerStatuses[worker].state: running since {pods.API_TIME}"
        f" -> waiting CrashLoopBackOff: {CRASH_MESSAGE}",
        "+ containerStatuses[worker].lastState: terminated Error exit 1 at 2024-05-01T14:02:03Z",
    ]


def test_diff_ignores_condition_times_and_conditions_the_kubelet_does_not_own() -> None:
    before = pods.running_status()
    after = pods.running_status()
    after["conditions"] = [
        {**c, "lastTransitionTime": "2030-01-01T00:00:00Z", "lastProbeTime": "2030-01-01T00:00:00Z"}
        for c in after["conditions"]
    ] + [pods.api_condition("example.com/Gate", "False")]
    assert diff(before, after) == []


def test_diff_against_nothing_lists_every_field_as_new() -> None:
    after = pods.running_status()
    changes = diff(None, after)
    assert changes and all(c["before"] == "" for c in changes)
    assert {"path": "phase", "before": "", "after": "Running"} in changes


def test_diff_lists_what_went_away() -> None:
    before = {**pods.running_status(), "podIP": "10.0.0.7"}
    assert diff(before, pods.running_status()) == [{"path": "podIP", "before": "10.0.0.7", "after": ""}]
    assert change_text(diff(before, pods.running_status())[0]) == "- podIP: 10.0.0.7"


@pytest.mark.parametrize(
    ("state", "text"),
    [
        ({"running": {"startedAt": "T"}}, "running since T"),
        ({"running": {}}, "running"),
        (
            {"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown"}},
            "terminated ContainerStatusUnknown exit 137",
        ),
        ({"waiting": {"reason": "ContainerCreating"}}, "waiting ContainerCreating"),
        ({}, "-"),
        (None, "-"),
    ],
)
def test_state_text(state: dict[str, Any] | None, text: str) -> None:
    assert state_text(state) == text


def test_flatten_keys_lists_by_name_and_type() -> None:
    flat = flatten(
        {**pods.running_status(container_name="worker"), "podIPs": [{"ip": "10.0.0.7"}, {"ip": "fd00::7"}]}
    )
    assert flat["containerStatuses[worker].restartCount"] == "0"
    assert flat["conditions[Ready]"] == "True"
    assert flat["podIPs"] == "10.0.0.7,fd00::7"
