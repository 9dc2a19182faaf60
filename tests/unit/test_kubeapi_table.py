"""kubectl's pod columns (read/kubeapi/table.py) against the apiserver's pod printer:
TestPrintPod and TestPrintPodWithRestartableInitContainer (printers_test.go) and the age format
(TestHumanDuration, TestHumanDurationBoundaries in duration_test.go)."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest

from podledger.read.kubeapi.table import (
    COLUMNS,
    TABLE_CLOSE,
    Clock,
    human_duration,
    row_basis,
    row_json,
    row_parts,
    table_open,
)

NOW = datetime(2026, 3, 1, tzinfo=UTC).timestamp()
TEN_S_AGO = datetime.fromtimestamp(NOW - 10, UTC).isoformat().replace("+00:00", "Z")


def pod(name: str, containers: int, status: dict, init: int = 0, **meta: object) -> dict:
    spec = {"containers": [{"name": f"c{i}"} for i in range(containers)]}
    if init:
        spec["initContainers"] = [{"name": f"i{i}"} for i in range(init)]
    return {"metadata": {"name": name, **meta}, "spec": spec, "status": status}


def row(pod_: dict) -> dict:
    """The pod's Table row at NOW, parsed from the JSON serve writes."""
    return orjson.loads(row_json(row_parts(row_basis(pod_)), b"null", Clock(NOW)))


RUNNING = {"running": {}}
READY_RUNNING = {"ready": True, "restartCount": 3, "state": RUNNING}

# (id, pod, the cells NAME READY STATUS RESTARTS AGE) from TestPrintPod.
PRINT_POD = [
    ("test1", pod("test1", 2, {"phase": "podPhase", "containerStatuses": [
        READY_RUNNING, {"restartCount": 3}]}),
     ["test1", "1/2", "podPhase", "6", "<unknown>"]),
    ("test2", pod("test2", 2, {"phase": "podPhase", "containerStatuses": [
        READY_RUNNING, {"state": {"waiting": {"reason": "ContainerWaitingReason"}}, "restartCount": 3}]}),
     ["test2", "1/2", "ContainerWaitingReason", "6", "<unknown>"]),
    ("test3", pod("test3", 2, {"phase": "podPhase", "containerStatuses": [
        {"state": {"waiting": {"reason": "ContainerWaitingReason"}}, "restartCount": 3},
        {"state": {"terminated": {"reason": "ContainerTerminatedReason"}}, "restartCount": 3}]}),
     ["test3", "0/2", "ContainerWaitingReason", "6", "<unknown>"]),
    ("test4", pod("test4", 2, {"phase": "podPhase", "containerStatuses": [
        READY_RUNNING, {"ready": True, "restartCount": 3}]}),
     ["test4", "1/2", "podPhase", "6", "<unknown>"]),
    ("test5", pod("test5", 2, {"reason": "podReason", "phase": "podPhase", "containerStatuses": [
        READY_RUNNING, {"ready": True, "restartCount": 3}]}),
     ["test5", "1/2", "podReason", "6", "<unknown>"]),
    ("test6_without_ready_condition", pod("test6", 2, {"phase": "Running", "containerStatuses": [
        {"ready": True, "restartCount": 3, "state": {"terminated": {"reason": "Completed", "exitCode": 0}}},
        READY_RUNNING]}),
     ["test6", "1/2", "NotReady", "6", "<unknown>"]),
    ("test6_with_ready_condition", pod("test6", 2, {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True"}], "containerStatuses": [
        {"ready": True, "restartCount": 3, "state": {"terminated": {"reason": "Completed", "exitCode": 0}}},
        READY_RUNNING]}),
     ["test6", "1/2", "Running", "6", "<unknown>"]),
    ("test7", pod("test7", 1, {"phase": "podPhase",
        "initContainerStatuses": [{"ready": False, "restartCount": 3, "state": RUNNING,
                                   "lastState": {"terminated": {"finishedAt": TEN_S_AGO}}}],
        "containerStatuses": [{"ready": False, "restartCount": 0, "state": {"waiting": {}}}]}, init=1),
     ["test7", "0/1", "Init:0/1", "3 (10s ago)", "<unknown>"]),
]  # fmt: skip

PRINT_POD_EXTRA = [
    ("a_deleting_running_pod_is_terminating",
     pod("gone", 1, {"phase": "Running", "containerStatuses": [READY_RUNNING]},
         deletionTimestamp=TEN_S_AGO, creationTimestamp=TEN_S_AGO),
     ["gone", "1/1", "Terminating", "3", "10s"]),
    ("a_failed_init_container_names_its_reason",
     pod("init", 1, {"phase": "Pending", "initContainerStatuses": [
         {"restartCount": 0, "state": {"terminated": {"exitCode": 2, "reason": "Error"}}}]}, init=1),
     ["init", "0/1", "Init:Error", "0", "<unknown>"]),
    ("a_crash_looping_container_shows_its_back_off",
     pod("loop", 1, {"phase": "Running", "containerStatuses": [
         {"restartCount": 4, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
          "lastState": {"terminated": {"finishedAt": TEN_S_AGO, "exitCode": 1}}}]}),
     ["loop", "0/1", "CrashLoopBackOff", "4 (10s ago)", "<unknown>"]),
]  # fmt: skip


@pytest.mark.parametrize(("pod_", "cells"), [c[1:] for c in PRINT_POD], ids=[c[0] for c in PRINT_POD])
def test_TestPrintPod(pod_: dict, cells: list[str]) -> None:
    assert row(pod_)["cells"][:5] == cells


@pytest.mark.parametrize(
    ("pod_", "cells"), [c[1:] for c in PRINT_POD_EXTRA], ids=[c[0] for c in PRINT_POD_EXTRA]
)
def test_print_pod_extra(pod_: dict, cells: list[str]) -> None:
    assert row(pod_)["cells"][:5] == cells


def test_TestPrintPodWithRestartableInitContainer_counts_a_started_sidecar() -> None:
    sidecar = {"name": "i0", "ready": True, "started": True, "restartCount": 3, "state": RUNNING}
    main = {"name": "c0", "ready": True, "restartCount": 0, "state": RUNNING}
    initialized = [{"type": "Initialized", "status": "True"}]
    status = {"phase": "Running", "conditions": initialized, "initContainerStatuses": [sidecar],
              "containerStatuses": [main]}  # fmt: skip
    sidecar_pod = pod("sc", 1, status, init=1)
    sidecar_pod["spec"]["initContainers"][0]["restartPolicy"] = "Always"
    assert row(sidecar_pod)["cells"][:4] == ["sc", "2/2", "Running", "3"]


def test_TestPrintPodwide_cells_and_completed_condition() -> None:
    done = pod("done", 1, {"phase": "Succeeded", "podIPs": [{"ip": "10.0.0.5"}], "nominatedNodeName": "n2"})
    done["spec"]["nodeName"] = "n1"
    done["spec"]["readinessGates"] = [{"conditionType": "x"}]
    done_row = row(done)
    assert done_row["cells"][5:] == ["10.0.0.5", "n1", "n2", "0/1"]
    assert done_row["conditions"][0]["reason"] == "Succeeded"
    assert len(done_row["cells"]) == len(COLUMNS)
    assert done_row["object"] is None


S, M, H, D, Y = 1, 60, 3600, 86400, 365 * 86400
HUMAN_DURATION = [
    (1, "1s"), (70, "70s"), (190, "3m10s"), (70 * M, "70m"), (47 * H, "47h"), (49 * H, "2d1h"),
    ((8 * 24 + 2) * H, "8d"), (367 * D, "367d"), (2 * Y + 25 * H, "2y1d"), (8 * Y + 2 * H, "8y"),
]  # fmt: skip
HUMAN_DURATION_BOUNDARIES = [
    (-2, "<invalid>"), (-2 + 1e-9, "0s"), (0, "0s"), (0.999, "0s"), (2 * M - 0.001, "119s"), (2 * M, "2m"),
    (2 * M + 1, "2m1s"), (10 * M - 0.001, "9m59s"), (10 * M, "10m"), (3 * H - 0.001, "179m"), (3 * H, "3h"),
    (3 * H + M, "3h1m"), (8 * H - 0.001, "7h59m"), (8 * H + 59 * M, "8h"), (2 * D - 0.001, "47h"),
    (2 * D, "2d"), (8 * D - 0.001, "7d23h"), (8 * D + 23 * H, "8d"), (2 * Y - 0.001, "729d"), (2 * Y, "2y"),
    (2 * Y + D, "2y1d"), (5 * Y, "5y"),
]  # fmt: skip


@pytest.mark.parametrize(("seconds", "text"), HUMAN_DURATION)
def test_TestHumanDuration(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


@pytest.mark.parametrize(("seconds", "text"), HUMAN_DURATION_BOUNDARIES)
def test_TestHumanDurationBoundaries(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


def test_a_watch_table_carries_the_columns_only_when_asked() -> None:
    full = orjson.loads(table_open("rv", "meta.k8s.io/v1") + TABLE_CLOSE)
    assert (full["kind"], full["apiVersion"], full["metadata"]) == (
        "Table",
        "meta.k8s.io/v1",
        {"resourceVersion": "rv"},
    )
    assert full["columnDefinitions"] == COLUMNS and full["rows"] == []
    bare = orjson.loads(table_open("rv", "meta.k8s.io/v1", headers=False) + TABLE_CLOSE)
    assert bare["columnDefinitions"] == []


def test_the_rows_of_one_answer_share_its_moment() -> None:
    clock = Clock(NOW)
    created = {"creationTimestamp": TEN_S_AGO}
    rows = [
        orjson.loads(row_json(row_parts(row_basis(pod(f"p{i}", 1, {}, **created))), b"{}", clock))
        for i in range(3)
    ]
    assert [r["cells"][4] for r in rows] == ["10s"] * 3
    assert clock.since(NOW - 10) == "10s" and clock.since(None) == "<unknown>"
