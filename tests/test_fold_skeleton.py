"""The pure fold step as the walking skeleton has it: version 1 on ADD, no version without a
change, idempotent on redelivery, a tombstone on REMOVE, dead-letter for unknown pods."""

from __future__ import annotations

import copy

from podledger.schemas import models
from podledger.streams.fold import Coordinates, fold_event

T0 = 1_763_700_000_000  # ms
POD = {
    "metadata": {"uid": "u-1", "name": "web", "namespace": "default"},
    "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "app:1"}]},
}


def update(op: str, pod: dict | None = None) -> models.PodUpdate:
    return models.PodUpdate(op, "api", "n1", copy.deepcopy(pod or POD), T0)


def at(offset: int, ts: int = T0, topic: str = "pod-updates") -> Coordinates:
    return Coordinates(topic, 2, offset, ts)


def test_add_writes_version_one_pending_and_scheduled() -> None:
    record, outputs = fold_event(None, at(10), update("ADD"))
    assert [o.topic for o in outputs] == ["journal", "pod-status", "pod-status-history"]
    journal = outputs[0].value
    assert (journal.type, journal.topic, journal.partition, journal.offset) == (
        "pod-updates:ADD",
        "pod-updates",
        2,
        10,
    )
    vs = outputs[1].value
    assert outputs[1].key == "u-1" and vs.version == 1 and vs.uid == "u-1"
    assert vs.status["phase"] == "Pending"
    t = "2025-11-21T04:40:00Z"
    unready = {"reason": "ContainersNotReady", "message": "containers with unready status: [c]"}
    assert vs.status["conditions"] == [
        {
            "type": "PodReadyToStartContainers",
            "status": "False",
            "lastProbeTime": None,
            "lastTransitionTime": t,
        },
        {"type": "Initialized", "status": "True", "lastProbeTime": None, "lastTransitionTime": t},
        {"type": "Ready", "status": "False", **unready, "lastProbeTime": None, "lastTransitionTime": t},
        {
            "type": "ContainersReady",
            "status": "False",
            **unready,
            "lastProbeTime": None,
            "lastTransitionTime": t,
        },
        {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": t},
    ]
    [cs] = vs.status["containerStatuses"]
    assert cs["state"] == {"waiting": {"reason": "ContainerCreating"}} and cs["ready"] is False
    assert vs.status["startTime"] == "2025-11-21T04:40:00Z"
    assert vs.cause == models.Cause("pod-updates:ADD", "pod-updates", 2, 10, T0)
    assert record is not None and record["version"] == 1 and record["applied"] == {"pod-updates": 10}


def test_no_new_version_when_the_kubelet_view_is_unchanged() -> None:
    record, _ = fold_event(None, at(10), update("ADD"))
    record2, outputs = fold_event(record, at(11, T0 + 5000), update("RECONCILE"))
    assert [o.topic for o in outputs] == ["journal"]
    assert record2 is not None and record2["version"] == 1 and record2["applied"]["pod-updates"] == 11


def test_a_pod_being_deleted_always_gets_a_new_version_with_old_times_kept() -> None:
    record, _ = fold_event(None, at(10), update("ADD"))
    deleting = copy.deepcopy(POD)
    deleting["metadata"]["deletionTimestamp"] = "2025-11-21T05:00:00Z"
    record, outputs = fold_event(record, at(11, T0 + 60_000), update("DELETE", deleting))
    vs = outputs[1].value
    assert vs.version == 2 and vs.deleting
    assert {c["lastTransitionTime"] for c in vs.status["conditions"]} == {"2025-11-21T04:40:00Z"}
    assert vs.status["startTime"] == "2025-11-21T04:40:00Z"


def test_redelivered_event_is_skipped() -> None:
    record, _ = fold_event(None, at(10), update("ADD"))
    again, outputs = fold_event(record, at(10), update("ADD"))
    assert again is record and outputs == []
    older, outputs = fold_event(record, at(9), update("UPDATE"))
    assert older is record and outputs == []


def test_remove_leaves_a_tombstone() -> None:
    record, _ = fold_event(None, at(10), update("ADD"))
    record, outputs = fold_event(record, at(11), update("REMOVE"))
    assert record is None
    assert [(o.topic, o.key, o.value) for o in outputs[1:]] == [("pod-status", "u-1", None)]


def test_event_for_an_unknown_pod_is_dead_lettered() -> None:
    probe = models.ProbeResult("u-404", "n1", "c", "process://1", "readiness", "Success", T0)
    record, outputs = fold_event(None, at(3, topic="probe-results"), probe)
    assert record is None
    [out] = outputs
    assert out.topic == "dead-letter" and out.value.reason == "unknown_pod"
    assert (out.value.topic, out.value.partition, out.value.offset) == ("probe-results", 2, 3)


def test_terminal_api_phase_is_never_left() -> None:
    failed = copy.deepcopy(POD)
    failed["status"] = {"phase": "Failed", "conditions": [{"type": "Custom", "status": "True"}]}
    _, outputs = fold_event(None, at(1), update("ADD", failed))
    status = outputs[1].value.status
    assert status["phase"] == "Failed"
    # A condition the kubelet does not own is carried over from the API status.
    assert [c["type"] for c in status["conditions"]][:1] == ["Custom"]
