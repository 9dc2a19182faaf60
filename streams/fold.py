"""The fold: one pure step from (pod record, input event) to (pod record, outputs).

Both drivers call `fold_event`: the Faust agent (streams/app.py) live, and `podledger fold`
offline over a journal. The step never reads a clock or Kafka; time is the event's own.

A pod record is a plain dict:
    uid, namespace, name, node   identity
    pod                          the desired pod from pod-updates
    source                       the config source that announced it
    status, version              the cached versioned status (None / 0 before the first)
    applied                      {topic: highest offset applied}: replays and redeliveries skip
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from podledger.schemas import models
from podledger.streams import status as status_gen
from podledger.streams import status_manager

JSONDict = dict[str, Any]


@dataclass(slots=True)
class Output:
    """A message the fold wants published: logical topic, pod UID key, value (None = tombstone)."""

    topic: str
    key: str
    value: Any


@dataclass(slots=True)
class Coordinates:
    """Where an input event sits in Kafka, and its timestamp."""

    topic: str
    partition: int
    offset: int
    ts_ms: int


def rfc3339(ts_ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts_ms // 1000))


def event_type(topic: str, event: Any) -> str:
    """`<topic>:<what happened>`, the cause recorded on the journal and on each version."""
    detail = {
        "pod-updates": lambda e: e.op,
        "pleg": lambda e: e.type,
        "probe-results": lambda e: f"{e.probe}={e.result}",
        "pod-lifecycle": lambda e: e.kind,
    }[topic](event)
    return f"{topic}:{detail}"


def event_uid(topic: str, event: Any) -> str:
    return event.uid if topic != "pod-updates" else str(event.pod["metadata"]["uid"])


def fold_event(record: JSONDict | None, at: Coordinates, event: Any) -> tuple[JSONDict | None, list[Output]]:
    """Apply one decoded input event to the pod's record."""
    uid = event_uid(at.topic, event)
    if record is not None and record["applied"].get(at.topic, -1) >= at.offset:
        return record, []  # already applied: a redelivery after a crash or a replay
    kind = event_type(at.topic, event)
    journal = Output(
        "journal",
        uid,
        models.JournalEntry(kind, at.topic, at.partition, at.offset, at.ts_ms, _event_dict(event)),
    )
    if at.topic != "pod-updates":
        if record is None:
            return None, [_dead_letter_unknown_pod(uid, at)]
        record = {**record, "applied": {**record["applied"], at.topic: at.offset}}
        return record, [journal]

    if event.op == "REMOVE":
        # The pod left the node's config: compacted topics forget it.
        return None, [journal, Output("pod-status", uid, None)]

    pod = event.pod
    meta = pod["metadata"]
    if record is None:
        record = {
            "uid": uid,
            "namespace": meta.get("namespace") or "default",
            "name": meta["name"],
            "node": event.node,
            "source": event.source,
            "status": None,
            "version": 0,
            "applied": {},
        }
    record = {**record, "pod": pod, "applied": {**record["applied"], at.topic: at.offset}}
    outputs = [journal]
    now = rfc3339(at.ts_ms)
    generated = status_gen.generate_api_status(pod, record["status"], now)
    deleting = bool(meta.get("deletionTimestamp"))
    changed = status_manager.set_pod_status(
        record["status"], record["version"], generated, now, force=deleting
    )
    if changed is not None:
        status, version = changed
        record = {**record, "status": status, "version": version}
        outputs += _publish_version(record, kind, at, deleting)
    return record, outputs


def _publish_version(record: JSONDict, kind: str, at: Coordinates, deleting: bool) -> list[Output]:
    value = models.VersionedPodStatus(
        uid=record["uid"],
        namespace=record["namespace"],
        name=record["name"],
        node=record["node"],
        version=record["version"],
        status=record["status"],
        could_have_running_containers=True,
        finished=False,
        static=record["source"] != "api",
        mirror_uid=None,
        deleting=deleting,
        cause=models.Cause(kind, at.topic, at.partition, at.offset, at.ts_ms),
        ts_ms=at.ts_ms,
    )
    return [Output("pod-status", record["uid"], value), Output("pod-status-history", record["uid"], value)]


def _dead_letter_unknown_pod(uid: str, at: Coordinates) -> Output:
    return Output(
        "dead-letter",
        uid,
        models.DeadLetter(
            "unknown_pod",
            f"{at.topic} event for pod {uid}, which pod-updates never announced",
            at.topic,
            at.partition,
            at.offset,
            None,
            None,
            at.ts_ms,
        ),
    )


def _event_dict(event: Any) -> JSONDict:
    from podledger.schemas import to_dict

    return to_dict(event)
