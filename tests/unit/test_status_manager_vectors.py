"""The status manager's fold-side rules (status_manager_test.go) and the container status conversion
(kubelet_pods_test.go), named after the upstream tests."""

from __future__ import annotations

import copy
from functools import partial
from typing import Any

import pytest

from podledger.streams import status as gen
from podledger.streams import status_manager as sm
from tests import pods

NOW = "2026-01-01T10:00:00Z"
LATER = "2026-01-01T10:05:00Z"


# A one-container pod with an empty status; DELETING marks it as being deleted.
pod = partial(pods.pod, containers=("c",), name="p", uid="u1", restart_policy="Always", status={})
DELETING = {"deletionTimestamp": NOW}


def ready_condition(value: str) -> dict[str, Any]:
    return {"type": "Ready", "status": value}


def waiting(name: str, last_exit: int | None = None) -> dict[str, Any]:
    cs: dict[str, Any] = {"name": name, "state": {"waiting": {}}, "lastState": {}}
    if last_exit is not None:
        cs["lastState"] = {"terminated": {"exitCode": last_exit}}
    return cs


def running(name: str) -> dict[str, Any]:
    return {"name": name, "state": {"running": {"startedAt": NOW}}, "lastState": {}}


def terminated(name: str, code: int) -> dict[str, Any]:
    return {"name": name, "state": {"terminated": {"exitCode": code}}, "lastState": {}}


UNKNOWN = {"exitCode": 137, "reason": "ContainerStatusUnknown", "message": gen.GONE_WHEN_TERMINATED}


# ----------------------------------------------------------------- versions, startTime, lastTransitionTime


def test_TestNewStatus() -> None:
    update = sm.set_pod_status(pod(), None, 0, {"phase": "Pending", "conditions": []}, NOW)
    assert update.version == 1 and update.status is not None
    assert update.status["startTime"] == NOW


def test_TestNewStatusPreservesPodStartTime() -> None:
    p = pod(status={"startTime": "2025-12-31T00:00:00Z"})
    update = sm.set_pod_status(p, None, 0, {"phase": "Running"}, NOW)
    assert update.status is not None and update.status["startTime"] == "2025-12-31T00:00:00Z"


def test_TestChangedStatusKeepsStartTime() -> None:
    first = sm.set_pod_status(
        pod(), None, 0, {"phase": "Pending", "startTime": "2026-01-01T10:00:00.123456Z"}, NOW
    )
    assert first.status is not None and first.status["startTime"] == NOW  # truncated to seconds
    second = sm.set_pod_status(pod(), first.status, first.version, {"phase": "Running"}, LATER)
    assert second.status is not None and second.status["startTime"] == NOW and second.version == 2


def test_TestChangedStatus() -> None:
    first = sm.set_pod_status(pod(), None, 0, {"phase": "Pending"}, NOW)
    second = sm.set_pod_status(pod(), first.status, first.version, {"phase": "Running"}, NOW)
    assert (first.version, second.version) == (1, 2)


def test_TestUnchangedStatus() -> None:
    first = sm.set_pod_status(pod(), None, 0, {"phase": "Running"}, NOW)
    again = sm.set_pod_status(pod(), first.status, first.version, {"phase": "Running"}, LATER)
    assert again.status is None and again.version == 1


def test_TestUnchangedStatusPreservesLastTransitionTime() -> None:
    first = sm.set_pod_status(pod(), None, 0, {"conditions": [ready_condition("True")]}, NOW)
    again = sm.set_pod_status(
        pod(), first.status, first.version, {"conditions": [ready_condition("True")]}, LATER
    )
    assert again.status is None
    forced = sm.set_pod_status(
        pod(metadata=DELETING),
        first.status,
        first.version,
        {"conditions": [ready_condition("True")]},
        LATER,
        force=True,
    )
    assert forced.status is not None and forced.status["conditions"][0]["lastTransitionTime"] == NOW


def test_status_updates_last_transition_time() -> None:
    first = sm.set_pod_status(pod(), None, 0, {"conditions": [ready_condition("True")]}, NOW)
    second = sm.set_pod_status(
        pod(), first.status, first.version, {"conditions": [ready_condition("False")]}, LATER
    )
    assert second.status is not None and second.version == 2
    assert second.status["conditions"][0]["lastTransitionTime"] == LATER >= NOW


def test_a_pod_being_deleted_gets_a_version_for_every_set() -> None:
    p = pod(metadata=DELETING)
    first = sm.set_pod_status(p, None, 0, {"phase": "Running"}, NOW, force=True)
    second = sm.set_pod_status(p, first.status, first.version, {"phase": "Running"}, NOW, force=True)
    assert (first.version, second.version) == (1, 2)


# ----------------------------------------------------------------- equality (isPodStatusByKubeletEqual)


def test_TestStatusEquality() -> None:
    base = {
        "containerStatuses": [running("a"), running("b"), running("c")],
        "initContainerStatuses": [terminated("i1", 0), terminated("i2", 0)],
        "ephemeralContainerStatuses": [running("e1"), running("e2")],
    }
    p = pod(containers=("a", "b", "c"), init_containers=("i1", "i2"))
    shuffled = copy.deepcopy(base)
    shuffled["containerStatuses"].reverse()
    shuffled["initContainerStatuses"].reverse()
    shuffled["ephemeralContainerStatuses"].reverse()
    assert sm.is_pod_status_by_kubelet_equal(sm.normalize_status(p, base), sm.normalize_status(p, shuffled))
    custom_old = {"conditions": [{"type": "www.example.com/feature", "status": "True"}]}
    custom_new = {"conditions": [{"type": "www.example.com/feature", "status": "False"}]}
    # A difference only in a condition the kubelet does not own is still equal.
    assert sm.is_pod_status_by_kubelet_equal(custom_old, custom_new)
    only_in_old = {
        "conditions": [ready_condition("True"), {"type": "www.example.com/feature", "status": "True"}]
    }
    assert sm.is_pod_status_by_kubelet_equal(only_in_old, {"conditions": [ready_condition("True")]})


def test_equality_ignores_times_and_null_versus_missing() -> None:
    old = {
        "phase": "Running",
        "conditions": [{**ready_condition("True"), "lastTransitionTime": NOW}],
        "podIPs": [],
    }
    new = {"phase": "Running", "conditions": [{**ready_condition("True"), "lastTransitionTime": LATER}]}
    assert sm.is_pod_status_by_kubelet_equal(old, new)
    assert not sm.is_pod_status_by_kubelet_equal(
        old, {**new, "conditions": [{**ready_condition("True"), "reason": "X"}]}
    )


# ----------------------------------------------------------------- normalization (normalizeStatus)


def _messages(n: int, sizes: tuple[int, ...]) -> dict[str, Any]:
    statuses = []
    for i in range(n):
        size = sizes[i % len(sizes)]
        statuses.append(
            {"name": f"c{i:02d}", "state": {"terminated": {"exitCode": 1, "message": "x" * size}}}
        )
    return {"containerStatuses": statuses}


def test_TestStatusNormalizationEnforcesMaxBytes() -> None:
    status = _messages(48, (192, 200, 208))
    normalized = sm.normalize_status(pod(containers=()), status)  # 0 spec containers: budget 12288
    assert [len(cs["state"]["terminated"]["message"]) for cs in normalized["containerStatuses"]] == [
        len(cs["state"]["terminated"]["message"]) for cs in status["containerStatuses"]
    ]


def test_normalization_cuts_messages_to_the_per_container_budget_in_bytes() -> None:
    status = {
        "containerStatuses": [{"name": "a", "state": {"terminated": {"exitCode": 1, "message": "y" * 5000}}}]
    }
    normalized = sm.normalize_status(pod(containers=("a", "b", "c")), status)
    assert len(normalized["containerStatuses"][0]["state"]["terminated"]["message"].encode()) == 4096
    multibyte = {"containerStatuses": [{"name": "a", "lastState": {"terminated": {"message": "é" * 3000}}}]}
    cut = sm.normalize_status(pod(containers=("a", "b", "c")), multibyte)["containerStatuses"][0]
    assert len(cut["lastState"]["terminated"]["message"].encode()) <= 4096


def test_normalization_truncates_times_to_seconds() -> None:
    status = {
        "startTime": "2026-01-01T10:00:00.999Z",
        "conditions": [
            {"type": "Ready", "lastTransitionTime": "2026-01-01T10:00:01.5Z", "lastProbeTime": None}
        ],
        "containerStatuses": [
            {
                "name": "c",
                "state": {"running": {"startedAt": "2026-01-01T10:00:02.123456789Z"}},
                "lastState": {
                    "terminated": {
                        "startedAt": "2026-01-01T09:00:00.1+00:00",
                        "finishedAt": "2026-01-01T09:59:59.9Z",
                    }
                },
            }
        ],
    }
    n = sm.normalize_status(pod(), status)
    assert n["startTime"] == "2026-01-01T10:00:00Z"
    assert n["conditions"][0]["lastTransitionTime"] == "2026-01-01T10:00:01Z"
    assert n["containerStatuses"][0]["state"]["running"]["startedAt"] == "2026-01-01T10:00:02Z"
    assert n["containerStatuses"][0]["lastState"]["terminated"] == {
        "startedAt": "2026-01-01T09:00:00+00:00",
        "finishedAt": "2026-01-01T09:59:59Z",
    }
    assert status["startTime"].endswith(".999Z")  # the input is not modified


# ----------------------------------------------------------------- TerminatePod


def _term(p: dict[str, Any]) -> dict[str, Any]:
    return sm.terminate_pod_status(p, None)


def state(cs: dict[str, Any]) -> Any:
    s = cs["state"]
    if "terminated" in s and s["terminated"].get("reason") == "ContainerStatusUnknown":
        return "u"
    if "terminated" in s:
        return s["terminated"]["exitCode"]
    return "W" if "waiting" in s else "R"


@pytest.mark.parametrize(
    ("init", "regular", "expect_init", "expect_regular"),
    [
        ([], [running("c")], [], ["u"]),
        ([], [waiting("c", last_exit=2)], [], ["u"]),
        ([waiting("i0")], [waiting("c")], ["u"], ["W"]),
        ([waiting("i0"), waiting("i1")], [waiting("c")], ["u", "W"], ["W"]),
        (
            [waiting("i0"), waiting("i1"), terminated("i2", 1), waiting("i3")],
            [waiting("c")],
            ["u", "u", 1, "W"],
            ["W"],
        ),
        ([waiting("i0"), waiting("i1"), terminated("i2", 0)], [waiting("c")], ["u", "u", 0], ["u"]),
        ([waiting("i0"), waiting("i1"), waiting("i2", last_exit=0)], [waiting("c")], ["u", "u", "u"], ["u"]),
        ([waiting("i0")], [running("c")], ["u"], ["u"]),
        ([waiting("i0")], [terminated("c", 0)], ["u"], [0]),
    ],
    ids=[
        "running",
        "waiting-last-exit-2",
        "init-W",
        "init-WW",
        "init-WW1W",
        "init-WW0",
        "init-WW-last0",
        "init-W-running",
        "init-W-succeeded",
    ],
)
def test_TestTerminatePod_DefaultUnknownStatus(
    init: list[dict[str, Any]],
    regular: list[dict[str, Any]],
    expect_init: list[Any],
    expect_regular: list[Any],
) -> None:
    p = pod(
        containers=tuple(c["name"] for c in regular),
        init_containers=tuple(c["name"] for c in init),
        restart_policy="Never",
        status={"phase": "Running", "initContainerStatuses": init, "containerStatuses": regular},
    )
    out = _term(p)
    assert [state(cs) for cs in out.get("initContainerStatuses") or []] == expect_init
    assert [state(cs) for cs in out["containerStatuses"]] == expect_regular
    assert out["phase"] == "Failed"
    for before, after in zip(regular, out["containerStatuses"], strict=True):
        assert after["lastState"] == before["lastState"]  # lastState is kept
    if expect_regular == ["u"]:
        assert out["containerStatuses"][0]["state"]["terminated"] == UNKNOWN


@pytest.mark.parametrize(
    ("phase", "expected"),
    [
        ("Pending", "Failed"),
        ("Running", "Failed"),
        ("Unknown", "Failed"),
        ("SomeUnknownPhase", "Failed"),
        ("Succeeded", "Succeeded"),
        ("Failed", "Failed"),
    ],
)
def test_TestTerminatePod_EnsurePodPhaseIsTerminal(phase: str, expected: str) -> None:
    assert _term(pod(status={"phase": phase}))["phase"] == expected


def test_terminate_pod_leaves_static_pods_phase_alone() -> None:
    assert _term(pod(status={"phase": "Running"}, source="file"))["phase"] == "Running"


# ----------------------------------------------------------------- checkContainerStateTransition


@pytest.mark.parametrize(
    ("policy", "old", "new", "ok"),
    [
        ("Always", terminated("c", 0), running("c"), True),
        ("Never", terminated("c", 1), running("c"), False),
        ("OnFailure", terminated("c", 1), running("c"), True),
        ("OnFailure", terminated("c", 0), waiting("c"), False),
        ("Never", terminated("c", 0), terminated("c", 0), True),
    ],
)
def test_check_container_state_transition(policy: str, old: dict, new: dict, ok: bool) -> None:
    p = pod(restart_policy=policy)
    error = sm.check_container_state_transition({"containerStatuses": [old]}, {"containerStatuses": [new]}, p)
    assert (error is None) == ok
    if not ok:
        assert error == "terminated container c attempted illegal transition to non-terminated state"


def test_sidecar_may_leave_terminated_and_mismatch_is_an_error() -> None:
    p = pod(restart_policy="Never", init_containers=("side",))
    p["spec"]["initContainers"][0]["restartPolicy"] = "Always"
    old = {"initContainerStatuses": [terminated("side", 0)]}
    assert sm.check_container_state_transition(old, {"initContainerStatuses": [running("side")]}, p) is None
    extra = {"initContainerStatuses": [terminated("side", 0), terminated("ghost", 0)]}
    error = sm.check_container_state_transition(extra, {"initContainerStatuses": []}, p)
    assert error == "found mismatch between pod spec and status, container: ghost"


def test_illegal_transition_drops_the_update_without_a_version() -> None:
    p = pod(restart_policy="Never")
    first = sm.set_pod_status(p, None, 0, {"phase": "Failed", "containerStatuses": [terminated("c", 1)]}, NOW)
    dropped = sm.set_pod_status(
        p, first.status, first.version, {"phase": "Running", "containerStatuses": [running("c")]}, LATER
    )
    assert dropped.status is None and dropped.version == 1 and "illegal transition" in (dropped.dropped or "")


# ----------------------------------------------------------------- conversion and generation


def test_TestConvertToAPIContainerStatuses() -> None:
    old = [running("A"), running("B")]
    for deleted, restarts in ((False, 1), (True, 0)):
        p = pod(containers=("A", "B"), metadata=DELETING if deleted else None)
        out = gen.convert_container_statuses(
            p, p["spec"]["containers"], old, {"containers": []}, None, is_init=False
        )
        for cs in out:
            assert cs["state"] == {"waiting": {"reason": "ContainerCreating"}}
            assert cs["lastState"] == {
                "terminated": {
                    "exitCode": 137,
                    "reason": "ContainerStatusUnknown",
                    "message": gen.GONE_WHEN_DELETED,
                }
            }
            assert cs["restartCount"] == restarts


def test_runtime_containers_newest_is_state_second_is_last_state() -> None:
    p = pod(containers=("c",))
    runtime = {
        "runtime_type": "process",
        "containers": [
            {
                "id": "old",
                "name": "c",
                "state": "exited",
                "exit_code": 2,
                "created_at": "2026-01-01T09:00:00Z",
            },
            {
                "id": "new",
                "name": "c",
                "state": "running",
                "created_at": "2026-01-01T10:00:00Z",
                "started_at": "2026-01-01T10:00:01Z",
                "restart_count": 1,
            },
            {
                "id": "oldest",
                "name": "c",
                "state": "exited",
                "exit_code": 9,
                "created_at": "2026-01-01T08:00:00Z",
            },
        ],
    }
    [cs] = gen.convert_container_statuses(p, p["spec"]["containers"], None, runtime, None, is_init=False)
    assert cs["containerID"] == "process://new" and cs["restartCount"] == 1
    assert cs["state"] == {"running": {"startedAt": "2026-01-01T10:00:01Z"}}
    assert cs["lastState"]["terminated"]["exitCode"] == 2
    assert cs["lastState"]["terminated"]["containerID"] == "process://old"


def test_reason_cache_turns_a_restarting_container_waiting() -> None:
    p = pod(containers=("c",))
    runtime = {"containers": [{"id": "x", "name": "c", "state": "exited", "exit_code": 1, "created_at": NOW}]}
    reasons = {
        "c": {
            "reason": "CrashLoopBackOff",
            "message": "back-off 10s restarting failed container=c pod=p_default(u1)",
        }
    }
    [cs] = gen.convert_container_statuses(p, p["spec"]["containers"], None, runtime, reasons, is_init=False)
    assert cs["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert cs["lastState"]["terminated"]["exitCode"] == 1
    assert gen.get_phase(p, [], [cs], False) == "Running"  # waiting with a lastState counts as stopped
    never = pod(containers=("c",), restart_policy="Never")
    [cs] = gen.convert_container_statuses(
        never, never["spec"]["containers"], None, runtime, reasons, is_init=False
    )
    assert cs["state"]["terminated"]["exitCode"] == 1  # Never: no restart, the reason is not shown


def test_generate_api_pod_status_terminal_pod_with_disruption_target() -> None:
    disruption = {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet"}
    p = pod(containers=("c",), metadata=DELETING, status={"phase": "Running"})
    runtime = {"containers": [], "host_ips": ["127.0.0.1", "::1"], "ips": []}
    old = {"phase": "Running", "conditions": [disruption], "containerStatuses": [terminated("c", 0)]}
    s = gen.generate_api_status(p, old, runtime, pod_is_terminal=True)
    assert s["phase"] == "Succeeded"
    s_failed = gen.generate_api_status(
        p, {**old, "containerStatuses": [terminated("c", 1)]}, runtime, pod_is_terminal=True
    )
    assert s_failed["phase"] == "Failed"
    conds = {c["type"]: c for c in s_failed["conditions"]}
    assert conds["Initialized"]["status"] == "True"
    assert (conds["Ready"]["status"], conds["Ready"]["reason"]) == ("False", "PodFailed")
    assert (conds["ContainersReady"]["status"], conds["ContainersReady"]["reason"]) == ("False", "PodFailed")
    assert conds["PodScheduled"]["status"] == "True"
    assert conds["DisruptionTarget"] == disruption
    assert s_failed["qosClass"] == "BestEffort"
    assert s_failed["hostIPs"] == [{"ip": "127.0.0.1"}, {"ip": "::1"}]


def test_generate_api_pod_status_api_phase_succeeded_with_empty_runtime() -> None:
    p = pod(containers=("c",), status={"phase": "Succeeded"})
    s = gen.generate_api_status(p, None, {"containers": []})
    assert s["phase"] == "Succeeded"
    conds = {c["type"]: c for c in s["conditions"]}
    assert (conds["Initialized"]["status"], conds["Initialized"]["reason"]) == ("True", "PodCompleted")
    assert (conds["Ready"]["status"], conds["Ready"]["reason"]) == ("False", "PodCompleted")
    assert (conds["ContainersReady"]["status"], conds["ContainersReady"]["reason"]) == (
        "False",
        "PodCompleted",
    )
    assert conds["PodReadyToStartContainers"]["status"] == "False"


def test_generate_api_pod_status_keeps_cached_terminal_reason() -> None:
    p = pod(containers=("c",), restart_policy="Always")
    old = {"phase": "Succeeded", "reason": "Test", "message": "test"}
    s = gen.generate_api_status(p, old, {"containers": []})
    assert (s["phase"], s["reason"], s["message"]) == ("Succeeded", "Test", "test")


def test_probe_results_set_ready_and_started() -> None:
    p = pod(containers=("c",))
    p["spec"]["containers"][0]["readinessProbe"] = {"exec": {"command": ["true"]}}
    runtime = {
        "containers": [{"id": "x", "name": "c", "state": "running", "created_at": NOW, "started_at": NOW}],
        "sandbox": {"id": "s", "ready": True},
    }
    no_result = gen.generate_api_status(p, None, runtime)
    assert no_result["containerStatuses"][0]["started"] is True
    assert no_result["containerStatuses"][0]["ready"] is False
    probes = {"c": {"process://x": {"readiness": "Success"}}}
    ready = gen.generate_api_status(p, None, runtime, probes=probes)
    assert ready["containerStatuses"][0]["ready"] is True
    assert {c["type"]: c["status"] for c in ready["conditions"]} == {
        "PodReadyToStartContainers": "True",
        "Initialized": "True",
        "Ready": "True",
        "ContainersReady": "True",
        "PodScheduled": "True",
    }
    stale = {"c": {"process://previous": {"readiness": "Success"}}}
    assert gen.generate_api_status(p, None, runtime, probes=stale)["containerStatuses"][0]["ready"] is False
