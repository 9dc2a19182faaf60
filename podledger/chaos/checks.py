"""The checks of a chaos run, as pure functions over decoded records.

- `lost_inputs`: every ingress record (topic, partition, offset) is a journal entry's coordinates,
  a dead letter's, or an event still held for an unannounced pod in fold-state. Coordinates are
  counted, not contents: a redelivered record is skipped by design (its coordinates are already in
  the journal), and a node agent may write the same value twice (two records, two coordinates).
- `version_gaps` and `version_conflicts`: each pod's versions run 1..N, and no (uid, version)
  carries two statuses.
- `history_mismatches`: the live pod-status-history equals the offline fold of the journal,
  version for version (`offline_history`).
- `apiserver_mismatches` (after the run) and `live_mismatches` (while it runs): an API pod shows
  the status of its last version, as the sink would leave it (`shows`: the sink's merge would send
  no patch).

Nothing here reads a clock: `now` comes in as an argument.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from podledger.agents.sink.decisions import merge_pod_status, status_patch
from podledger.schemas import models, to_dict
from podledger.streams.replay import replay
from podledger.streams.status import rfc3339
from podledger.types import JSONDict, Topic

Coord = tuple[str, int, int]  # (logical topic, partition, offset) of an ingress record
VersionKey = tuple[str, int]  # (pod uid, version)


def canonical(value: Any) -> bytes:
    """JSON with sorted keys: equal values give equal bytes."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


# --------------------------------------------------------------------------------------------------
# No lost input
# --------------------------------------------------------------------------------------------------


def held_coordinates(fold_state: Iterable[tuple[bytes, bytes | None]]) -> set[Coord]:
    """Coordinates of the events held in fold-state records (key, value in topic order; None is a
    tombstone): events for pods not announced yet, neither journaled nor dead-lettered so far."""
    latest: dict[bytes, bytes | None] = {}
    for key, value in fold_state:
        latest[key] = value
    held: set[Coord] = set()
    for key, value in latest.items():
        if value is None or key.startswith(b"\x00"):  # a tombstone, or a journal marker
            continue
        record = orjson.loads(value)
        for item in record.get("held") or []:  # [topic, partition, offset, ts_ms, event, ...]
            held.add((str(item[0]), int(item[1]), int(item[2])))
    return held


def accounted_coordinates(
    journal: Iterable[models.JournalEntry], dead_letters: Iterable[models.DeadLetter], held: Iterable[Coord]
) -> set[Coord]:
    """Every input coordinate the fold has answered for: journaled, dead-lettered or held."""
    out = {(e.topic, e.partition, e.offset) for e in journal}
    out |= {(d.topic, d.partition, d.offset) for d in dead_letters}
    out |= set(held)
    return out


def lost_inputs(ingress: Iterable[Coord], accounted: set[Coord]) -> list[Coord]:
    """Ingress coordinates the fold never answered for, in order."""
    return sorted(set(ingress) - accounted)


# --------------------------------------------------------------------------------------------------
# Versions: no gap, never two statuses, equal to the offline fold
# --------------------------------------------------------------------------------------------------


def version_gaps(keys: Iterable[VersionKey]) -> dict[str, list[int]]:
    """{uid: versions missing from 1..its newest} for every pod with a gap."""
    seen: dict[str, set[int]] = {}
    for uid, version in keys:
        seen.setdefault(uid, set()).add(version)
    gaps = {uid: sorted(set(range(1, max(vs) + 1)) - vs) for uid, vs in seen.items()}
    return {uid: missing for uid, missing in gaps.items() if missing}


def version_conflicts(history: Iterable[models.VersionedPodStatus]) -> dict[VersionKey, list[JSONDict]]:
    """{(uid, version): its distinct statuses} where one (uid, version) carries more than one."""
    statuses: dict[VersionKey, dict[bytes, JSONDict]] = {}
    for vs in history:
        statuses.setdefault((vs.uid, vs.version), {}).setdefault(canonical(vs.status), vs.status)
    return {key: list(found.values()) for key, found in statuses.items() if len(found) > 1}


def offline_history(journal_values: Iterable[bytes]) -> list[models.VersionedPodStatus]:
    """The versions the offline fold (`podledger fold`) makes of journal values, in order."""
    return [out.value for out in replay(journal_values) if out.topic == Topic.POD_STATUS_HISTORY]


def history_mismatches(
    live: Iterable[models.VersionedPodStatus], offline: Iterable[models.VersionedPodStatus]
) -> dict[VersionKey, tuple[list[JSONDict], list[JSONDict]]]:
    """{(uid, version): (live values, offline values)} wherever the two histories differ: a version
    only one of them has, or different values (status, cause, flags) under one (uid, version).
    Duplicates of one value (republished after a crash) count once."""

    def by_key(values: Iterable[models.VersionedPodStatus]) -> dict[VersionKey, dict[bytes, JSONDict]]:
        out: dict[VersionKey, dict[bytes, JSONDict]] = {}
        for vs in values:
            as_dict = to_dict(vs)
            out.setdefault((vs.uid, vs.version), {})[canonical(as_dict)] = as_dict
        return out

    left, right = by_key(live), by_key(offline)
    return {
        key: (list(left.get(key, {}).values()), list(right.get(key, {}).values()))
        for key in sorted(left.keys() | right.keys())
        if set(left.get(key, {})) != set(right.get(key, {}))
    }


def latest_versions(history: Iterable[models.VersionedPodStatus]) -> dict[str, models.VersionedPodStatus]:
    """Each pod's newest version."""
    out: dict[str, models.VersionedPodStatus] = {}
    for vs in history:
        if vs.uid not in out or vs.version > out[vs.uid].version:
            out[vs.uid] = vs
    return out


# --------------------------------------------------------------------------------------------------
# The apiserver shows the last versions
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SeenVersion:
    """A version as a reader of pod-status-history saw it: what the sink needs to compare, and
    when the fold published it (the record's timestamp, seconds)."""

    status: JSONDict
    could_have_running_containers: bool
    published_s: float
    cause: Coord = ("", 0, -1)  # the input that made it: (topic, partition, offset)

    @classmethod
    def of(cls, vs: models.VersionedPodStatus, published_s: float) -> SeenVersion:
        cause = (vs.cause.topic, vs.cause.partition, vs.cause.offset)
        return cls(vs.status, vs.could_have_running_containers, published_s, cause)

    def caused_before(self, ends: Mapping[tuple[str, int], int]) -> bool:
        """Whether the input that made it lies below `ends` ((topic, partition) -> end offset)."""
        topic, partition, offset = self.cause
        return offset < ends.get((topic, partition), 0)


@dataclass(frozen=True, slots=True)
class ApiMismatch:
    namespace: str
    name: str
    uid: str
    reason: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} ({self.uid}): {self.reason}"


def shows(api_pod: JSONDict, status: JSONDict, could_have_running_containers: bool, now_s: float) -> bool:
    """Whether the API pod shows `status`: the sink, merging it into the API's status as it does,
    would send no patch (agents/sink/decisions.py merge_pod_status and status_patch)."""
    uid = api_pod["metadata"]["uid"]
    api_status = api_pod.get("status") or {}
    merged = merge_pod_status(api_status, status, could_have_running_containers, now=rfc3339(now_s))
    return status_patch(uid, api_status, merged) is None


def _mismatch(api_pod: JSONDict, reason: str) -> ApiMismatch:
    meta = api_pod["metadata"]
    return ApiMismatch(meta.get("namespace") or "default", meta["name"], meta["uid"], reason)


def apiserver_mismatches(
    api_pods: Sequence[JSONDict], last: Mapping[str, models.VersionedPodStatus], now_s: float
) -> list[ApiMismatch]:
    """API pods that do not show their last version (or have none). Pods that have left the
    apiserver are not looked at: a deleted pod is fine gone."""
    out = []
    for pod in api_pods:
        vs = last.get(pod["metadata"]["uid"])
        if vs is None:
            out.append(_mismatch(pod, "no version on pod-status-history"))
        elif not shows(pod, vs.status, vs.could_have_running_containers, now_s):
            phase = (pod.get("status") or {}).get("phase")
            out.append(
                _mismatch(pod, f"shows API phase {phase}, not v{vs.version} ({vs.status.get('phase')})")
            )
    return out


def created_s(api_pod: JSONDict) -> float | None:
    """The API pod's creationTimestamp as epoch seconds (None if absent)."""
    raw = (api_pod.get("metadata") or {}).get("creationTimestamp")
    return datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp() if raw else None


def live_mismatches(
    api_pods: Sequence[JSONDict],
    versions: Mapping[str, Mapping[int, SeenVersion]],
    now_s: float,
    *,
    slack_s: float = 5.0,
    new_pod_s: float = 15.0,
    input_ends: Mapping[tuple[str, int], int] | None = None,
) -> list[ApiMismatch]:
    """API pods that have not caught up with pod-status while the pipeline runs.

    A version is due once it was published `slack_s` ago (the sink's ordinary latency, and this
    reader's), or, with `input_ends` ((topic, partition) -> end offset, taken when the last fault
    ended), at once when the input that made it lies below those ends. A pod has caught up when
    it shows its newest due version or a later one. A pod without any version yet is pending,
    not behind, while younger than `new_pod_s` (0: every pod needs a version)."""
    out = []
    for pod in api_pods:
        seen = versions.get(pod["metadata"]["uid"]) or {}
        if not seen:
            born = created_s(pod)
            if born is None or now_s - born >= new_pod_s:
                out.append(_mismatch(pod, "no version yet"))
            continue
        ordered = sorted(seen, reverse=True)
        # The newest due version: the pod must show it or a later one.
        due = next(
            (
                v
                for v in ordered
                if now_s - seen[v].published_s >= slack_s
                or (input_ends is not None and seen[v].caused_before(input_ends))
            ),
            None,
        )
        if due is None:
            continue  # no version is due yet
        if any(_shows(pod, seen[v], now_s) for v in ordered if v >= due):
            continue
        older = (v for v in ordered[:LIVE_SEARCH] if v < due)
        shown = next((v for v in older if _shows(pod, seen[v], now_s)), None)
        age = now_s - seen[due].published_s
        what = f"v{shown}" if shown is not None else f"none of the {min(len(ordered), LIVE_SEARCH)} newest"
        out.append(_mismatch(pod, f"shows {what}; v{due} was published {age:.1f}s ago"))
    return out


LIVE_SEARCH = 50  # versions searched for the one an API pod that is behind shows (for the message)


def _shows(api_pod: JSONDict, seen: SeenVersion, now_s: float) -> bool:
    return shows(api_pod, seen.status, seen.could_have_running_containers, now_s)
