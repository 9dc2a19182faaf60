"""The fold: one pure step from (pod record, input event) to (pod record, outputs).

Both drivers call `fold_event`: the Faust agent (streams/app.py) live, and `podledger fold`
offline over a journal. The step never reads a clock or Kafka; time is the event's own.

The pod record and its held events live in streams/record.py, the outputs and dead letters in
streams/outputs.py; their names stay importable from here.
"""

from __future__ import annotations

from typing import Any

from podledger.schemas import encode, models
from podledger.schemas.codec import build
from podledger.schemas.origin import Proof, proof_headers
from podledger.streams import status as status_gen
from podledger.streams import status_manager
from podledger.streams.outputs import (
    DEAD_LETTER_DETAIL_MAX,
    DEAD_LETTER_KEY_MAX,
    DEAD_LETTER_VALUE_MAX,
    Coordinates,
    Output,
    dead_letter,
    dead_letter_unknown_pod,
    decode_input,
    refused,
    unusable,
)
from podledger.streams.record import (
    DEFAULT_HOLD,
    HeldEvent,
    HoldLimits,
    PodRecord,
    expire_held,
    held_since,
    hold,
    new_record,
)
from podledger.types import JSONDict, LifecycleKind, PodOp, Topic

__all__ = [
    "DEAD_LETTER_DETAIL_MAX",
    "DEAD_LETTER_KEY_MAX",
    "DEAD_LETTER_VALUE_MAX",
    "DEFAULT_HOLD",
    "RULES_VERSION",
    "Coordinates",
    "HeldEvent",
    "HoldLimits",
    "Output",
    "PodRecord",
    "dead_letter",
    "decode_input",
    "event_fields",
    "event_type",
    "expire_held",
    "fold_event",
    "foreign",
    "held_since",
    "new_record",
    "replayed",
    "unusable",
]

# The version of the fold rules (this module, status.py, status_manager.py), named on every status
# version. Bump it whenever the rules give other outputs for the same journal: `podledger verify`
# re-folds a version only with the rules that made it, and tests/unit/test_rules_version.py keeps
# the digest of the offline fold of a fixed workload for each rules version.
RULES_VERSION = 1

# Generated statuses are built canonical (status_manager.set_pod_status `built`); False has every
# status made canonical by the generic walk instead. Both give the same bytes: tests compare them.
BUILT_CANONICAL = True


def event_type(topic: str, event: Any) -> str:
    """`<topic>:<what happened>`, the cause recorded on the journal and on each version."""
    if topic == Topic.POD_UPDATES:
        return f"{topic}:{event.op}"
    if topic == Topic.PLEG:
        return f"{topic}:{event.type}"
    if topic == Topic.PROBE_RESULTS:
        return f"{topic}:{event.probe}={event.result}"
    return f"{topic}:{event.kind}"


def event_fields(event: Any) -> JSONDict:
    """An input model as the dict of its fields, in order: it encodes as the model does. The values
    are the event's own, shared (inputs are never changed), so the journal needs no copy."""
    return {name: getattr(event, name) for name in event.__dataclass_fields__}


def fold_event(
    record: PodRecord | None,
    at: Coordinates,
    event: Any,
    limits: HoldLimits = DEFAULT_HOLD,
    proof: Proof | None = None,
) -> tuple[PodRecord | None, list[Output]]:
    """Apply one decoded input event to the pod's record: the record it returns is a new one
    when anything changed, and `record` itself is never changed (the live fold folds a pod again
    from a record its store has still to write; tests/unit/test_fold_leaves_records.py).

    `proof` is the event's proven writer (schemas/origin.py), when the fold checks origins."""
    refused = foreign(record, at, event)
    if refused is not None:  # before the offsets: they are the pod's partition's, not the sender's
        return record, [refused]
    if record is not None and record["applied"].get(at.topic, -1) >= at.offset:
        return record, []  # already applied (or held): a redelivery after a crash, or a replay
    if at.topic != Topic.POD_UPDATES and (record is None or record.get("pod") is None):
        return hold(record, at, event, limits, proof)
    if record is not None and record.get("pod") is None:
        # The announcement of a pod whose events were held: apply it, then them, in order.
        held = record["held"]
        record, outputs = _apply(None, at, event, record["applied"], proof)
        for item in held:
            held_item = HeldEvent.from_json(item)
            held_at = held_item.at
            held_event = build(held_at.topic, held_item.value)  # validated when it was held
            if record is None:  # announced only to be removed: the held events have no pod
                outputs.append(dead_letter_unknown_pod(event.uid, held_at, held_event, "pod removed"))
                continue
            try:
                record, more = _apply(record, held_at, held_event, record["applied"], held_item.proof)
            except Exception as exc:  # one unusable held event does not take the others with it
                more = [unusable(held_at, held_event, exc)]
            outputs += more
        return record, outputs
    return _apply(record, at, event, record["applied"] if record is not None else {}, proof)


def foreign(record: PodRecord | None, at: Coordinates, event: Any) -> Output | None:
    """The `forged` dead letter for an event that speaks for another node's pod, or None.

    A node speaks only for the pods bound to it (as NodeRestriction limits a kubelet): an event
    that names another node than its pod's is refused, and so is a pod update that moves a pod
    to another node (a pod's node never changes). It changes nothing in the record, not even the
    applied offsets, which belong to the pod's own partition."""
    if record is None or record.get("pod") is None or event.node == record["node"]:
        return None
    what = f"{event_type(at.topic, event)} from node {event.node!r}"
    detail = f"{what} for pod {record['uid']}, which is bound to {record['node']!r}"
    return refused("forged", detail, at, event)


def replayed(record: PodRecord | None, at: Coordinates, event: Any, proof: Proof | None) -> Output | None:
    """The `replayed` dead letter for a proven event whose sequence number is not above the last
    one applied for its pod and topic: a copy of a record its node wrote earlier, sent again by
    someone else. None otherwise."""
    if record is None or proof is None:
        return None
    last = (record.get("seqs") or {}).get(str(at.topic))
    if last is None or proof.seq > last:
        return None
    detail = f"{at.topic} record of node {proof.node!r} with sequence {proof.seq}, not above {last}"
    return refused("replayed", detail, at, event)


def _apply(
    record: PodRecord | None, at: Coordinates, event: Any, applied: dict[str, int], proof: Proof | None
) -> tuple[PodRecord | None, list[Output]]:
    refused = foreign(record, at, event) or replayed(record, at, event, proof)
    if refused is not None:  # held events meet their pod's node here, at its announcement
        return record, [refused]
    uid = event.uid
    kind = event_type(at.topic, event)
    journal = Output(
        Topic.JOURNAL,
        uid,
        models.JournalEntry(kind, at.topic, at.partition, at.offset, at.ts_ms, event_fields(event)),
        None if proof is None else proof_headers(proof),
    )
    if at.topic == Topic.POD_UPDATES and event.op == PodOp.REMOVE:
        # The pod left the node's config: compacted topics forget it.
        return None, [journal, Output(Topic.POD_STATUS, uid, None)]

    record = PodRecord(**(new_record(event) if record is None else record))
    merged = {**applied, **record["applied"]}
    record["applied"] = {**merged, str(at.topic): max(merged.get(at.topic, -1), at.offset)}
    if proof is not None:
        record["seqs"] = {**(record.get("seqs") or {}), str(at.topic): proof.seq}
    terminate = False
    if at.topic == Topic.POD_UPDATES:
        record["pod"] = event.pod
    elif at.topic == Topic.PLEG:
        # Snapshots only move forward: a relist folded after the worker's terminated fact (topics are
        # read independently) must not bring back containers the terminated snapshot shows stopped.
        if event.ts_ms >= record.get("runtime_ts", 0):
            record["runtime"], record["runtime_ts"] = event.runtime, event.ts_ms
    elif at.topic == Topic.PROBE_RESULTS:
        # Results belong to a container *instance* (its id), as in the kubelet's results managers;
        # only the two newest instances of a container are kept (the current and the one before).
        by_id = dict(record["probes"].get(event.container_name) or {})
        results = dict(by_id.pop(event.container_id, None) or {})
        results[event.probe] = event.result
        by_id[event.container_id] = results
        record["probes"] = {**record["probes"], event.container_name: dict(list(by_id.items())[-2:])}
    elif event.kind == LifecycleKind.SYNC_RESULT:
        record["reasons"] = {
            r["container"]: {"reason": r["reason"], "message": r.get("message", "")}
            for r in event.sync_results
        }
    elif event.kind == LifecycleKind.TERMINATING:
        record["terminating"] = True
    else:  # terminated
        record["terminating"] = record["terminated"] = True
        if event.runtime is not None and event.ts_ms >= record.get("runtime_ts", 0):
            record["runtime"], record["runtime_ts"] = event.runtime, event.ts_ms
        terminate = True

    outputs = [journal]
    now = status_gen.rfc3339(at.ts_ms / 1000)
    record = _set_status(record, kind, at, now, outputs, pod_is_terminal=record["terminated"])
    if terminate:
        terminated = status_manager.terminate_pod_status(record["pod"], record["status"])
        if not status_gen.is_static(record["pod"]):
            record["finished"] = True  # sticky; static pods are never finished this way
        record = _store(record, terminated, kind, at, now, outputs, force=True)
    return record, outputs


def _set_status(
    record: PodRecord, kind: str, at: Coordinates, now: str, outputs: list[Output], *, pod_is_terminal: bool
) -> PodRecord:
    generated = status_gen.generate_api_status(
        record["pod"],
        record["status"],
        record["runtime"],
        probes=record["probes"],
        reasons=record["reasons"],
        pod_is_terminal=pod_is_terminal,
    )
    deleting = bool(record["pod"]["metadata"].get("deletionTimestamp"))
    return _store(record, generated, kind, at, now, outputs, force=deleting, built=BUILT_CANONICAL)


def _store(
    record: PodRecord,
    new: JSONDict,
    kind: str,
    at: Coordinates,
    now: str,
    outputs: list[Output],
    *,
    force: bool,
    built: bool = False,
) -> PodRecord:
    update = status_manager.set_pod_status(
        record["pod"], record["status"], record["version"], new, now, force=force, built=built
    )
    if update.status is None:
        return record
    record = {**record, "status": update.status, "version": update.version}
    outputs += _publish_version(record, kind, at)
    return record


def _publish_version(record: PodRecord, kind: str, at: Coordinates) -> list[Output]:
    value = models.VersionedPodStatus(
        uid=record["uid"],
        namespace=record["namespace"],
        name=record["name"],
        node=record["node"],
        version=record["version"],
        status=record["status"],
        could_have_running_containers=not record["terminated"],
        finished=record["finished"],
        static=status_gen.is_static(record["pod"]) or record["source"] != "api",
        mirror_uid=None,
        deleting=bool(record["pod"]["metadata"].get("deletionTimestamp")),
        cause=models.Cause(kind, at.topic, at.partition, at.offset, at.ts_ms),
        ts_ms=at.ts_ms,
        rules=RULES_VERSION,
    )
    encoded = encode(value)  # one value on two topics: encoded once
    return [
        Output(Topic.POD_STATUS, record["uid"], value, encoded=encoded),
        Output(Topic.POD_STATUS_HISTORY, record["uid"], value, encoded=encoded),
    ]
