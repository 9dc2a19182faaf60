"""The fold: one pure step from (pod record, input event) to (pod record, outputs).

Both drivers call `fold_event`: the Faust agent (streams/app.py) live, and `podledger fold`
offline over a journal. The step never reads a clock or Kafka; time is the event's own.

A pod record (`PodRecord`) is a plain dict, stored as JSON on fold-state.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from typing import Any, TypedDict

from podledger.schemas import DecodeError, decode, encode, from_dict, models, to_dict
from podledger.schemas.codec import build
from podledger.schemas.origin import Proof, proof_headers
from podledger.streams import status as status_gen
from podledger.streams import status_manager
from podledger.types import JSONDict, LifecycleKind, PodOp, RuntimeSnapshot, Topic

# The version of the fold rules (this module, status.py, status_manager.py), named on every status
# version. Bump it whenever the rules give other outputs for the same journal: `podledger verify`
# re-folds a version only with the rules that made it, and tests/unit/test_rules_version.py keeps
# the digest of the offline fold of a fixed workload for each rules version.
RULES_VERSION = 1


class PodRecord(TypedDict, total=False):
    """The fold's state of one pod. A pod not announced yet has only uid, pod=None, held, applied."""

    uid: str
    namespace: str
    name: str
    node: str
    source: str
    # The desired pod from pod-updates (its status is what the API last reported); None while waiting.
    # Typed Any, as `status`, so the status functions take them as the plain JSON they are.
    pod: Any
    runtime: RuntimeSnapshot | None  # the latest runtime snapshot (pleg), or the worker's final one
    runtime_ts: int  # event time of that snapshot; an older one never replaces it
    probes: dict[str, JSONDict]  # {container: {container id: {probe: result}}}
    reasons: dict[str, JSONDict]  # {container: {reason, message}}: the pod worker's reason cache
    terminating: bool  # the pod worker started terminating the pod
    terminated: bool  # the pod worker terminated it (no container can run any more)
    finished: bool  # TerminatePod ran: the sink may delete the pod once its API phase is terminal
    status: Any  # the cached status (None before the first version)
    version: int  # its version (0 before the first)
    applied: dict[str, int]  # {topic: highest offset applied}: redeliveries and replays are skipped
    held: list[list[Any]]  # events waiting for the announcement, each `HeldEvent.to_json()`
    # {topic: highest proven sequence number applied} (schemas/origin.py); only with proof of origin.
    seqs: dict[str, int]


@dataclass(frozen=True, slots=True)
class HeldEvent:
    """An input event waiting for its pod's announcement; on fold-state as [topic, partition,
    offset, ts_ms, value] (plus [node, seq] when its origin was proven), so stored records keep
    their shape."""

    at: Coordinates
    value: JSONDict
    proof: Proof | None = None

    def to_json(self) -> list[Any]:
        item = [self.at.topic, self.at.partition, self.at.offset, self.at.ts_ms, self.value]
        return item if self.proof is None else [*item, [self.proof.node, self.proof.seq]]

    @classmethod
    def from_json(cls, item: list[Any]) -> HeldEvent:
        topic, partition, offset, ts_ms, value = item[:5]
        proof = Proof(*item[5]) if len(item) > 5 else None
        return cls(Coordinates(topic, partition, offset, ts_ms), value, proof)


@dataclass(slots=True)
class Output:
    """A message the fold wants published: logical topic, pod UID key, value (None = tombstone),
    and record headers (the journal carries its input's proof of origin)."""

    topic: str
    key: str
    value: Any
    headers: list[tuple[str, bytes]] | None = None
    encoded: bytes | None = None  # the value's bytes, once BatchFold has checked that it encodes

    def wire_value(self) -> bytes | None:
        """The bytes to publish (None for a tombstone)."""
        if self.value is None:
            return None
        if self.encoded is None:
            self.encoded = encode(self.value)
        return self.encoded


@dataclass(slots=True)
class Coordinates:
    """Where an input event sits in Kafka, and its timestamp."""

    topic: str
    partition: int
    offset: int
    ts_ms: int


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


def new_record(update: models.PodUpdate) -> PodRecord:
    meta = update.pod["metadata"]
    return {
        "uid": update.uid,
        "namespace": meta.get("namespace") or "default",
        "name": meta["name"],
        "node": update.node,
        "source": update.source,
        "pod": update.pod,
        "runtime": None,
        "probes": {},
        "reasons": {},
        "terminating": False,
        "terminated": False,
        "finished": False,
        "status": None,
        "version": 0,
        "applied": {},
    }


@dataclass(frozen=True, slots=True)
class HoldLimits:
    """How long events for a pod that pod-updates has not announced yet are held.

    Such events are normal in a race: the fold reads pleg or probe-results ahead of the
    pod-updates partition that announces the pod (topics are consumed independently, and far
    apart while a worker catches up). They wait in the pod's record and are applied, in arrival
    order, right after the pod's first pod-update. A pod that is never announced would hold them
    forever, so a pod holds at most `max_events`, and an event is given up once pod-updates of
    its partition has been read `max_ms` (event time) past it without announcing the pod. What
    is given up goes to dead-letter as `unknown_pod`.
    """

    max_events: int = 100
    max_ms: int = 60_000


DEFAULT_HOLD = HoldLimits()


def fold_event(
    record: PodRecord | None,
    at: Coordinates,
    event: Any,
    limits: HoldLimits = DEFAULT_HOLD,
    proof: Proof | None = None,
) -> tuple[PodRecord | None, list[Output]]:
    """Apply one decoded input event to the pod's record.

    `proof` is the event's proven writer (schemas/origin.py), when the fold checks origins."""
    refused = foreign(record, at, event)
    if refused is not None:  # before the offsets: they are the pod's partition's, not the sender's
        return record, [refused]
    if record is not None and record["applied"].get(at.topic, -1) >= at.offset:
        return record, []  # already applied (or held): a redelivery after a crash, or a replay
    if at.topic != Topic.POD_UPDATES and (record is None or record.get("pod") is None):
        return _hold(record, at, event, limits, proof)
    if record is not None and record.get("pod") is None:
        # The announcement of a pod whose events were held: apply it, then them, in order.
        held = record["held"]
        record, outputs = _apply(None, at, event, record["applied"], proof)
        for item in held:
            held_item = HeldEvent.from_json(item)
            held_at = held_item.at
            held_event = build(held_at.topic, held_item.value)  # validated when it was held
            if record is None:  # announced only to be removed: the held events have no pod
                outputs.append(_dead_letter_unknown_pod(event.uid, held_at, held_event, "pod removed"))
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
    return _refused("forged", detail, at, event)


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
    return _refused("replayed", detail, at, event)


def _refused(reason: str, detail: str, at: Coordinates, event: Any) -> Output:
    return dead_letter(reason, detail, at, event.uid.encode(), encode(event))


def _hold(
    record: PodRecord | None, at: Coordinates, event: Any, limits: HoldLimits, proof: Proof | None
) -> tuple[PodRecord | None, list[Output]]:
    uid = event.uid
    before: PodRecord = record or {}
    held = [*before.get("held", []), HeldEvent(at, to_dict(event), proof).to_json()]
    # str(): a Topic member as a key would not encode (orjson takes only exact str keys).
    applied = {**before.get("applied", {}), str(at.topic): at.offset}
    overflow = max(len(held) - limits.max_events, 0)
    why = f"held beyond {limits.max_events} events"
    outputs = [_held_dead_letter(uid, HeldEvent.from_json(item), why) for item in held[:overflow]]
    return {"uid": uid, "pod": None, "held": held[overflow:], "applied": applied}, outputs


def _held_dead_letter(uid: str, held: HeldEvent, why: str) -> Output:
    return _dead_letter_unknown_pod(uid, held.at, from_dict(held.at.topic, held.value), why)


def expire_held(
    record: PodRecord, now_ms: int, limits: HoldLimits = DEFAULT_HOLD
) -> tuple[PodRecord, list[Output]]:
    """Dead-letter a waiting pod's held events older than the limit at event time `now_ms`."""
    keep: list[list[Any]] = []
    outputs: list[Output] = []
    for item in record.get("held") or []:
        held = HeldEvent.from_json(item)
        if now_ms - held.at.ts_ms > limits.max_ms:
            outputs.append(_held_dead_letter(record["uid"], held, f"held longer than {limits.max_ms} ms"))
        else:
            keep.append(item)
    return ({**record, "held": keep} if outputs else record), outputs


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
    return _store(record, generated, kind, at, now, outputs, force=deleting)


def _store(
    record: PodRecord,
    new: JSONDict,
    kind: str,
    at: Coordinates,
    now: str,
    outputs: list[Output],
    *,
    force: bool,
) -> PodRecord:
    update = status_manager.set_pod_status(
        record["pod"], record["status"], record["version"], new, now, force=force
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


# A dead letter must fit under the broker's default message limit (1 MiB) after base64 (4/3):
# longer values keep a prefix, their length and their digest.
DEAD_LETTER_VALUE_MAX = 600_000
DEAD_LETTER_KEY_MAX = 4_096
DEAD_LETTER_DETAIL_MAX = 2_000


def dead_letter(reason: str, detail: str, at: Coordinates, key: bytes | None, value: bytes | None) -> Output:
    """A dead-letter output carrying the original bytes (or a bounded prefix plus the original's
    length and SHA-256) and where they came from."""
    clipped = value is not None and len(value) > DEAD_LETTER_VALUE_MAX
    letter = models.DeadLetter(
        reason=reason,
        detail=detail[:DEAD_LETTER_DETAIL_MAX],
        topic=at.topic,
        partition=at.partition,
        offset=at.offset,
        key_b64=None if key is None else base64.b64encode(key[:DEAD_LETTER_KEY_MAX]).decode(),
        value_b64=None if value is None else base64.b64encode(value[:DEAD_LETTER_VALUE_MAX]).decode(),
        ts_ms=at.ts_ms,
    )
    if clipped:
        assert value is not None
        letter.value_size, letter.value_sha256 = len(value), hashlib.sha256(value).hexdigest()
    return Output(
        Topic.DEAD_LETTER, key[:DEAD_LETTER_KEY_MAX].decode(errors="replace") if key else "", letter
    )


def unusable(at: Coordinates, event: Any, error: Exception) -> Output:
    """The dead letter for a schema-valid event the rules failed on: the fold goes on without it."""
    detail = f"{at.topic} event the fold could not apply: {error.__class__.__name__}: {error}"
    return dead_letter("unusable", detail, at, str(getattr(event, "uid", "")).encode(), encode(event))


def decode_input(topic: str, at: Coordinates, key: bytes | None, value: bytes | None, max_bytes: int) -> Any:
    """The decoded input model, or the dead-letter Output that replaces it."""
    try:
        return decode(topic, value, max_bytes=max_bytes)
    except DecodeError as exc:
        return dead_letter(exc.reason, str(exc), at, key, value)


def _dead_letter_unknown_pod(uid: str, at: Coordinates, event: Any, why: str) -> Output:
    detail = f"{at.topic} event for pod {uid}, which pod-updates never announced ({why})"
    return dead_letter("unknown_pod", detail, at, uid.encode(), encode(event))
