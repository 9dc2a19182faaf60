"""The pure fold step: versions, idempotence on redelivery, tombstones, and the hold of events
for pods that pod-updates has not announced yet."""

from __future__ import annotations

import base64
import copy
from functools import partial

from podledger.schemas import decode, models
from podledger.streams.fold import Coordinates, HoldLimits, fold_event
from podledger.types import JSONDict
from tests import pods

T0 = 1_763_700_000_000  # ms
# The fold's test pods: "web" in namespace default, uid u-1, on node n1.
make_pod = partial(pods.pod, name="web", uid="u-1", node="n1")
POD = make_pod(("c",), image="app:1")


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


def probe(uid: str = "u-1", result: str = "Success", ts: int = T0) -> models.ProbeResult:
    return models.ProbeResult(uid, "n1", "c", "process://1", "readiness", result, ts)


def pleg_started(ts: int = T0) -> models.PlegEvent:
    runtime = {
        "containers": [
            {
                "id": "1",
                "name": "c",
                "state": "running",
                "created_at": "2025-11-21T04:40:00Z",
                "started_at": "2025-11-21T04:40:01Z",
                "restart_count": 0,
            }
        ],
        "ips": ["127.0.0.1"],
        "sandbox": {"id": "s1", "ready": True},
    }
    return models.PlegEvent("u-1", "n1", "ContainerStarted", "1", runtime, ts)


def test_events_for_an_unannounced_pod_are_held_then_applied_after_its_add() -> None:
    record, outputs = fold_event(None, at(3, topic="pleg"), pleg_started())
    assert outputs == [] and record is not None and record["pod"] is None and len(record["held"]) == 1
    record, outputs = fold_event(record, at(4, topic="probe-results"), probe())
    assert outputs == [] and len(record["held"]) == 2
    # A redelivered held event is not held twice.
    assert fold_event(record, at(3, topic="pleg"), pleg_started()) == (record, [])

    record, outputs = fold_event(record, at(10), update("ADD"))
    journal = [o.value for o in outputs if o.topic == "journal"]
    assert [(j.topic, j.offset) for j in journal] == [("pod-updates", 10), ("pleg", 3), ("probe-results", 4)]
    versions = [o.value for o in outputs if o.topic == "pod-status-history"]
    assert [v.version for v in versions] == list(range(1, len(versions) + 1))
    final = versions[-1].status
    assert final["phase"] == "Running" and final["containerStatuses"][0]["ready"] is True
    assert record is not None and record["applied"] == {"pod-updates": 10, "pleg": 3, "probe-results": 4}
    assert "held" not in record or not record["held"]


def test_held_events_beyond_the_count_limit_are_dead_lettered_oldest_first() -> None:
    limits = HoldLimits(max_events=2, max_ms=10**9)
    record = None
    letters = []
    for offset in range(4):
        record, outputs = fold_event(record, at(offset, topic="probe-results"), probe(), limits)
        letters += [o.value for o in outputs]
    assert [(d.reason, d.offset) for d in letters] == [("unknown_pod", 0), ("unknown_pod", 1)]
    assert "held beyond 2 events" in letters[0].detail
    assert [h[2] for h in record["held"]] == [2, 3]
    # The dead letter carries the event itself, decodable as the original topic's value.
    assert decode("probe-results", base64.b64decode(letters[0].value_b64)) == probe()


def test_held_events_expire_only_once_pod_updates_has_passed_them_by() -> None:
    from podledger.streams.batch import BatchFold

    limits = HoldLimits(max_events=100, max_ms=30_000)
    records: dict = {}
    waiting: dict = {}
    clock: dict = {}

    def feed(offset: int, topic: str, event: object) -> list:
        nonlocal clock
        fold = BatchFold(records.get, limits, 1 << 20, clock)
        fold.add_event(at(offset, event.ts_ms, topic), event, journal=True)
        fold.expire_held(waiting)
        clock = fold.batch.newest
        records.update({k: r for k, (_, r) in fold.batch.changed.items()})
        return [out.value for _, out in fold.batch.outputs if out.topic == "dead-letter"]

    # Held events far apart in event time are kept while pod-updates lags (a worker catching up).
    assert feed(0, "probe-results", probe(uid="ghost", ts=T0)) == []
    assert feed(1, "probe-results", probe(uid="ghost", ts=T0 + 120_000)) == []
    # pod-updates of the partition reaches 31 s past the first: that one is given up, not the other.
    other = models.PodUpdate(
        "ADD", "api", "n1", {**POD, "metadata": {**POD["metadata"], "uid": "u-2"}}, T0 + 31_000
    )
    letters = feed(0, "pod-updates", other)
    assert [(d.reason, d.offset) for d in letters] == [("unknown_pod", 0)]
    assert "held longer than 30000 ms" in letters[0].detail
    assert [h[2] for h in records[b"ghost"]["held"]] == [1]
    assert waiting == {b"ghost": (2, T0 + 120_000)}  # since when it waits now


def test_a_waiting_record_is_read_again_only_once_its_oldest_event_may_have_expired() -> None:
    from podledger.streams.batch import BatchFold

    limits = HoldLimits(max_events=100, max_ms=30_000)
    records: dict = {}
    reads: list[bytes] = []
    waiting: dict = {}
    clock: dict = {}

    def lookup(key: bytes) -> object:
        reads.append(key)
        return records.get(key)

    def feed(event: object, topic: str = "pod-updates") -> None:
        nonlocal clock
        fold = BatchFold(lookup, limits, 1 << 20, clock)
        fold.add_event(at(0, event.ts_ms, topic), event, journal=True)
        fold.expire_held(waiting)
        clock = fold.batch.newest
        records.update({k: r for k, (_, r) in fold.batch.changed.items()})

    def announce(uid: str, ts: int) -> models.PodUpdate:
        return models.PodUpdate("ADD", "api", "n1", {**POD, "metadata": {**POD["metadata"], "uid": uid}}, ts)

    feed(probe(uid="ghost", ts=T0), "probe-results")
    assert waiting == {b"ghost": (2, T0)}
    for n in range(1, 4):  # pod-updates moves on, not yet 30 s past the held event
        reads.clear()
        feed(announce(f"u-{n}", T0 + n * 10_000))
        assert b"ghost" not in reads
    reads.clear()
    feed(announce("u-4", T0 + 30_001))  # now it may have expired: read, given up, no longer waiting
    assert b"ghost" in reads and waiting == {} and records[b"ghost"]["held"] == []


def test_held_events_of_a_pod_removed_at_once_are_dead_lettered() -> None:
    record, _ = fold_event(None, at(0, topic="probe-results"), probe())
    record, outputs = fold_event(record, at(5), update("REMOVE"))
    assert record is None
    assert [o.topic for o in outputs] == ["journal", "pod-status", "dead-letter"]
    assert "pod removed" in outputs[2].value.detail


def test_terminal_api_phase_is_never_left() -> None:
    failed = copy.deepcopy(POD)
    failed["status"] = {"phase": "Failed", "conditions": [{"type": "Custom", "status": "True"}]}
    _, outputs = fold_event(None, at(1), update("ADD", failed))
    status = outputs[1].value.status
    assert status["phase"] == "Failed"
    # A condition the kubelet does not own is carried over from the API status.
    assert [c["type"] for c in status["conditions"]][:1] == ["Custom"]


def test_held_event_older_than_the_partition_clock_expires_in_its_own_batch() -> None:
    from podledger.streams.batch import BatchFold

    fold = BatchFold({}.get, HoldLimits(max_events=100, max_ms=2000), 1 << 20, clock={2: T0 + 10_000})
    fold.add_event(at(0, T0, "probe-results"), probe(uid="stranger", ts=T0), journal=True)
    fold.expire_held({})
    [(partition, letter)] = fold.batch.outputs
    assert partition == 2 and letter.value.reason == "unknown_pod"
    assert fold.batch.changed[b"stranger"][1]["held"] == []


def _two_container_pod() -> JSONDict:
    probe = {"exec": {"command": ["true"]}}
    containers = [
        pods.container("c1", "a", readinessProbe=probe),
        pods.container("c2", "b", readinessProbe=probe),
    ]
    return make_pod(containers)


def _running_runtime(*names: str) -> dict:
    return {
        "containers": [
            {
                "id": n,
                "name": n,
                "state": "running",
                "created_at": "2025-11-21T04:40:00Z",
                "started_at": "2025-11-21T04:40:01Z",
                "restart_count": 0,
            }
            for n in names
        ],
        "ips": ["127.0.0.1"],
        "sandbox": {"id": "s", "ready": True},
    }


def test_TestSetContainerReadiness_through_the_fold() -> None:
    """Readiness results regenerate Ready."""
    pod = _two_container_pod()
    record, _ = fold_event(None, at(1), update("ADD", pod))
    ready_of = lambda r: {c["type"]: c["status"] for c in r["status"]["conditions"]}["Ready"]  # noqa: E731

    def result(offset: int, container: str, value: str, cid: str | None = None) -> tuple:
        event = models.ProbeResult(
            "u-1", "n1", container, cid or f"process://{container}", "readiness", value, T0
        )
        return fold_event(record, at(offset, topic="probe-results"), event)

    # Before the containers run (no runtime status yet): a result changes nothing.
    record, outputs = result(1, "c1", "Success")
    assert [o.topic for o in outputs] == ["journal"]
    started = models.PlegEvent("u-1", "n1", "ContainerStarted", "c2", _running_runtime("c1", "c2"), T0)
    record, _ = fold_event(record, at(1, topic="pleg"), started)
    version = record["version"]
    # The same value again: no new version.
    record, outputs = result(2, "c1", "Success")
    assert record["version"] == version and ready_of(record) == "False"
    # c2 becomes ready: one new version, and the pod is Ready.
    record, outputs = result(3, "c2", "Success")
    assert record["version"] == version + 1 and ready_of(record) == "True"
    # A result for a container id the pod does not run now: nothing changes.
    record, outputs = result(4, "c2", "Failure", cid="process://gone")
    assert record["version"] == version + 1 and ready_of(record) == "True"
    # c1 fails readiness: Ready goes False again in one new version.
    record, outputs = result(5, "c1", "Failure")
    assert record["version"] == version + 2 and ready_of(record) == "False"


def test_TestSetContainerStartup_through_the_fold() -> None:
    """Startup results set `started`."""
    pod = copy.deepcopy(POD)
    pod["spec"]["containers"][0]["startupProbe"] = {"exec": {"command": ["true"]}}
    record, _ = fold_event(None, at(1), update("ADD", pod))
    started = models.PlegEvent("u-1", "n1", "ContainerStarted", "c", _running_runtime("c"), T0)
    record, _ = fold_event(record, at(1, topic="pleg"), started)
    assert record["status"]["containerStatuses"][0]["started"] is False
    version = record["version"]
    event = models.ProbeResult("u-1", "n1", "c", "process://c", "startup", "Success", T0)
    record, _ = fold_event(record, at(1, topic="probe-results"), event)
    assert record["status"]["containerStatuses"][0]["started"] is True and record["version"] == version + 1
