"""The fold's record of a pod before a journal position, rebuilt without folding again. Pure.

`why` explains the inputs between two versions; folding the pod's whole journal to get the
record they start from costs a status generation per input. That record is mostly the inputs
themselves (the latest pod, the newest runtime snapshot, the probe results of each container's
two newest instances, the pod worker's last reasons and its termination facts) plus the status
and number of the last version published, which the history holds. This gathers them from the
journal entries the way the fold's step does (streams/fold.py `_apply`); `why` checks the
versions folded from the rebuilt record against the history, and folds from the pod's first
entry when they differ, so a change to the fold that this misses costs time, never a wrong answer.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from podledger.schemas import DecodeError, from_dict
from podledger.streams import status as status_gen
from podledger.streams.fold import PodRecord, new_record
from podledger.types import LifecycleKind, PodOp, Topic


def record_before(entries: Iterable[dict[str, Any]], last_version: dict[str, Any] | None) -> PodRecord | None:
    """The record the fold had after applying `entries` (a pod's journal values, in journal
    order, from its first), given the last history value they produced (None if none)."""
    record: PodRecord | None = None
    for entry in entries:
        topic, event = entry.get("topic"), entry.get("event") or {}
        if topic == Topic.POD_UPDATES and event.get("op") == PodOp.REMOVE:
            record = None  # the pod left the config: a new life starts from nothing
            continue
        if record is None:
            if topic != Topic.POD_UPDATES:
                continue  # applied only once announced; never seen in a journal before that
            try:
                record = new_record(from_dict(Topic.POD_UPDATES, event))
            except (DecodeError, KeyError, TypeError, ValueError):
                continue
        _apply(record, str(topic), int(entry.get("offset", -1)), event)
    if record is not None and last_version is not None:
        record["status"], record["version"] = last_version.get("status"), int(last_version["version"])
    return record


def _apply(record: PodRecord, topic: str, offset: int, event: dict[str, Any]) -> None:
    """One applied input's effect on the record, but the status (as the fold's `_apply`)."""
    record["applied"] = {**record["applied"], topic: max(record["applied"].get(topic, -1), offset)}
    ts = int(event.get("ts_ms") or 0)
    if topic == Topic.POD_UPDATES:
        record["pod"] = event.get("pod")
    elif topic == Topic.PLEG:
        if ts >= record.get("runtime_ts", 0):
            record["runtime"], record["runtime_ts"] = event.get("runtime"), ts
    elif topic == Topic.PROBE_RESULTS:
        name, cid = str(event.get("container_name")), str(event.get("container_id"))
        by_id = dict(record["probes"].get(name) or {})
        results = dict(by_id.pop(cid, None) or {})
        results[str(event.get("probe"))] = event.get("result")
        by_id[cid] = results
        record["probes"] = {**record["probes"], name: dict(list(by_id.items())[-2:])}
    elif event.get("kind") == LifecycleKind.SYNC_RESULT:
        record["reasons"] = {
            r["container"]: {"reason": r["reason"], "message": r.get("message", "")}
            for r in event.get("sync_results") or []
        }
    elif event.get("kind") == LifecycleKind.TERMINATING:
        record["terminating"] = True
    else:  # terminated
        record["terminating"] = record["terminated"] = True
        if event.get("runtime") is not None and ts >= record.get("runtime_ts", 0):
            record["runtime"], record["runtime_ts"] = event["runtime"], ts
        if not status_gen.is_static(record["pod"]):
            record["finished"] = True
