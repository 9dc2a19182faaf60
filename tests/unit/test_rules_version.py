"""The rules version guard: the offline fold of a fixed input has one recorded digest per version of
the fold rules (streams.fold.RULES_VERSION). A change to fold.py, status.py or status_manager.py
that changes any output without bumping RULES_VERSION fails here, because `podledger verify`
would then call every version written by the old rules a mismatch, and the new ones forgeries."""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterator
from typing import Any

from podledger.schemas import encode, models
from podledger.streams.fold import RULES_VERSION
from podledger.streams.replay import replay
from podledger.types import LifecycleKind, PlegEventType, PodOp, Topic
from podledger.workload import IngressEvent, workload

T0 = 1_700_000_000_000

# RULES_VERSION -> SHA-256 of the outputs below. Record a new line, never edit an old one.
RULES_DIGESTS = {
    1: "624253cbfcbb13b17f10c4cc712886572f08a6334c038a02530e89635aab3745",
}


def _ending(events: list[IngressEvent]) -> Iterator[Any]:
    """Lives the workload does not tell: deletion with grace, terminating, terminated with the
    final runtime, a static pod, events held before their pod's announcement."""
    adds = {e.key: e.value for e in events if e.topic == Topic.POD_UPDATES and e.value.op == PodOp.ADD}
    last_runtime = {e.key: e.value.runtime for e in events if e.topic == Topic.PLEG}
    ts = events[-1].ts_ms
    for n, (uid, add) in enumerate(sorted(adds.items())):
        ts += 10
        pod = copy.deepcopy(add.pod)
        if n % 3 == 0:  # deleted: DELETE with a deletionTimestamp, then the pod worker's facts
            pod["metadata"]["deletionTimestamp"] = "2023-11-14T23:00:00Z"
            pod["metadata"]["deletionGracePeriodSeconds"] = 30
            yield models.PodUpdate(PodOp.DELETE, add.source, add.node, pod, ts)
            yield models.PodLifecycle(uid, add.node, LifecycleKind.TERMINATING, ts + 1, grace_s=30)
            final = copy.deepcopy(last_runtime.get(uid) or {"containers": []})
            for c in final.get("containers", []):
                c.update(
                    state="exited",
                    exit_code=143 if c["name"] == "app" else 0,
                    finished_at="2023-11-14T23:00:05Z",
                )
            yield models.PodLifecycle(uid, add.node, LifecycleKind.TERMINATED, ts + 2, runtime=final)
            yield models.PodUpdate(PodOp.REMOVE, add.source, add.node, pod, ts + 3)
        elif n % 3 == 1:  # updated: a new label, then reconciled
            pod["metadata"].setdefault("labels", {})["tier"] = "gold"
            yield models.PodUpdate(PodOp.UPDATE, add.source, add.node, pod, ts)
            yield models.PodUpdate(PodOp.RECONCILE, add.source, add.node, pod, ts + 1)
    static = copy.deepcopy(next(iter(adds.values())).pod)
    static["metadata"].update(uid="static-0001", name="etcd-node-000", namespace="kube-system")
    static["metadata"]["annotations"] = {"kubernetes.io/config.source": "file"}
    runtime = copy.deepcopy(next(iter(last_runtime.values())))
    # Held: the runtime and a probe result arrive before the static pod is announced.
    yield models.PlegEvent(
        "static-0001", "node-000", PlegEventType.CONTAINER_STARTED, "c-1", runtime, ts + 20
    )
    yield models.PodUpdate(PodOp.ADD, "file", "node-000", static, ts + 30)
    yield models.PodLifecycle(
        "static-0001",
        "node-000",
        LifecycleKind.SYNC_RESULT,
        ts + 40,
        [{"container": "app", "reason": "ErrImagePull"}],
    )


def fixed_input() -> list[bytes]:
    events = list(workload(60, 3000, nodes=3, seed=13, start_ms=T0))
    return [encode(e.value) for e in events] + [encode(v) for v in _ending(events)]


def outputs_digest() -> tuple[str, int]:
    digest, versions = hashlib.sha256(), 0
    for out in replay(fixed_input()):
        if out.topic in (Topic.POD_STATUS_HISTORY, Topic.POD_STATUS, Topic.DEAD_LETTER):
            versions += out.topic == Topic.POD_STATUS_HISTORY
            digest.update(f"{out.topic}\0{out.key}\0".encode() + (out.wire_value() or b"<tombstone>") + b"\n")
    return digest.hexdigest(), versions


def test_the_fixed_input_exercises_the_rules() -> None:
    kinds = {
        (out.topic, out.value.cause.type if out.topic == Topic.POD_STATUS_HISTORY else "")
        for out in replay(fixed_input())
    }
    causes = {cause for topic, cause in kinds if topic == Topic.POD_STATUS_HISTORY}
    assert {
        "pod-updates:ADD",
        "pod-updates:DELETE",
        "pleg:ContainerStarted",
        "pleg:ContainerDied",
        "probe-results:readiness=Success",
        "pod-lifecycle:terminated",
    } <= causes
    assert (Topic.POD_STATUS, "") in kinds  # tombstones of removed pods


def test_the_offline_fold_of_the_fixed_input_has_the_digest_recorded_for_this_rules_version() -> None:
    digest, versions = outputs_digest()
    assert versions > 500
    assert RULES_VERSION in RULES_DIGESTS, f"record RULES_DIGESTS[{RULES_VERSION}] = {digest!r}"
    assert digest == RULES_DIGESTS[RULES_VERSION], (
        f"the fold's outputs changed under rules version {RULES_VERSION} (digest now {digest}). If the"
        " rules changed on purpose, bump streams.fold.RULES_VERSION and record the new digest;"
        " otherwise the change altered what the rules give."
    )
