"""The generic PLEG's pure half (pkg/kubelet/pleg/generic.go): state mapping, relist diffing, relist health.

Two consecutive relists go in as plain snapshots and the pod lifecycle events come out, so the diff
can be replayed and tested without a runtime. The relist loop is agents.pleg.loop.

`relist_events` is the plain diff: it compares every container of every pod. `relist_changes` is
the one the loop runs: it remembers each pod's states as a tuple, skips a pod whose snapshot is the
very object of the last relist (runtimes hand out a pod's snapshot again while it is unchanged), and
builds events only for pods whose states differ; its events equal the plain diff's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from podledger.agents.worker.lifecycle import format_go_duration
from podledger.types import PlegEventType

PLEG_RUNNING = "running"
PLEG_EXITED = "exited"
PLEG_UNKNOWN = "unknown"
PLEG_NON_EXISTENT = "non-existent"

RELIST_PERIOD_S = 1.0
RELIST_THRESHOLD_S = 180.0

# created has no PLEG state of its own: upstream folds it into unknown so it produces no event.
_STATE_MAP = {
    "created": PLEG_UNKNOWN,
    "running": PLEG_RUNNING,
    "exited": PLEG_EXITED,
    "unknown": PLEG_UNKNOWN,
}


@dataclass(frozen=True, slots=True)
class PodLifecycleEvent:
    """One pod lifecycle event: {id: pod UID, type, data: container (or sandbox) ID}."""

    pod_uid: str
    type: PlegEventType
    container_id: str


def pleg_state(runtime_state: str | None) -> str:
    """Map a runtime container state to the PLEG's coarser state; None means the container is gone.

    Unrecognised states are treated as unknown, which, like upstream, never yields an event.
    """
    if runtime_state is None:
        return PLEG_NON_EXISTENT
    return _STATE_MAP.get(runtime_state, PLEG_UNKNOWN)


def generate_events(
    pod_uid: str, container_id: str, old_state: str, new_state: str
) -> list[PodLifecycleEvent]:
    """Events for one container moving between PLEG states (generic.go generateEvents).

    A vanished container that was not already seen exited is reported dead first, so consumers that only
    react to ContainerDied still notice it. ContainerChanged is produced for unknown but the relist drops it.
    """
    if old_state == new_state:
        return []
    if new_state == PLEG_RUNNING:
        return [PodLifecycleEvent(pod_uid, PlegEventType.CONTAINER_STARTED, container_id)]
    if new_state == PLEG_EXITED:
        return [PodLifecycleEvent(pod_uid, PlegEventType.CONTAINER_DIED, container_id)]
    if new_state == PLEG_UNKNOWN:
        return [PodLifecycleEvent(pod_uid, PlegEventType.CONTAINER_CHANGED, container_id)]
    if new_state == PLEG_NON_EXISTENT:
        if old_state == PLEG_EXITED:
            return [PodLifecycleEvent(pod_uid, PlegEventType.CONTAINER_REMOVED, container_id)]
        return [
            PodLifecycleEvent(pod_uid, PlegEventType.CONTAINER_DIED, container_id),
            PodLifecycleEvent(pod_uid, PlegEventType.CONTAINER_REMOVED, container_id),
        ]
    raise ValueError(f"unknown PLEG state {new_state!r}")


def _sandbox_state(sandbox: Mapping[str, Any]) -> str:
    """Runtime state of the snapshot's sandbox; upstream maps SANDBOX_READY to running, else exited."""
    if "state" in sandbox:
        return str(sandbox["state"])
    return "running" if sandbox.get("ready") else "exited"


def _states(snapshot: Mapping[str, Any] | None) -> dict[str, str]:
    """Runtime state per container/sandbox ID in one pod snapshot; the first occurrence of an ID wins.

    Sandboxes are diffed like containers (upstream includes pod.Sandboxes in the relist), whether they
    appear in "containers", in a "sandboxes" list or as the snapshot's single "sandbox".
    """
    states: dict[str, str] = {}
    if not snapshot:
        return states
    entries: list[tuple[str, str]] = []
    for container in snapshot.get("containers") or []:
        entries.append((str(container["id"]), str(container.get("state") or "unknown")))
    sandboxes: list[Mapping[str, Any]] = list(snapshot.get("sandboxes") or [])
    if snapshot.get("sandbox"):
        sandboxes.append(snapshot["sandbox"])
    for sandbox in sandboxes:
        if sandbox.get("id"):
            entries.append((str(sandbox["id"]), _sandbox_state(sandbox)))
    for cid, state in entries:
        states.setdefault(cid, state)
    return states


def relist_events(
    old: Mapping[str, Mapping[str, Any] | None], new: Mapping[str, Mapping[str, Any] | None]
) -> list[PodLifecycleEvent]:
    """Events between two relists, each {pod UID: runtime snapshot}, as the generic relist would send.

    Every container ID in either relist is compared (a pod missing from `new` means all its containers are
    gone). ContainerChanged is never sent. Output is sorted by pod UID, then container ID, keeping the
    Died-before-Removed order for one container, which is the order upstream's generic_test compares in.
    """
    events: list[PodLifecycleEvent] = []
    for pod_uid in sorted(set(old) | set(new)):
        before = _states(old.get(pod_uid))
        after = _states(new.get(pod_uid))
        for cid in sorted(set(before) | set(after)):
            events.extend(
                event
                for event in generate_events(
                    pod_uid, cid, pleg_state(before.get(cid)), pleg_state(after.get(cid))
                )
                if event.type != PlegEventType.CONTAINER_CHANGED
            )
    return events


PodStates = tuple[tuple[str, str], ...]
"""One pod's containers and sandboxes as (ID, PLEG state) pairs sorted by ID: all the relist compares."""

_NOT_LISTED = object()  # a pod absent from a relist (None is a valid snapshot: no containers)


def pod_states(snapshot: Mapping[str, Any] | None) -> PodStates:
    """The PLEG states of one pod snapshot; two snapshots with equal states yield no events between them."""
    return tuple(sorted((cid, pleg_state(state)) for cid, state in _states(snapshot).items()))


def pod_events(pod_uid: str, before: PodStates, after: PodStates) -> list[PodLifecycleEvent]:
    """The events of one pod between two relists' states, in container ID order (as relist_events)."""
    old, new = dict(before), dict(after)
    events: list[PodLifecycleEvent] = []
    for cid in sorted(old.keys() | new.keys()):
        for event in generate_events(
            pod_uid, cid, old.get(cid, PLEG_NON_EXISTENT), new.get(cid, PLEG_NON_EXISTENT)
        ):
            if event.type != PlegEventType.CONTAINER_CHANGED:
                events.append(event)
    return events


@dataclass(frozen=True, slots=True)
class Relisted:
    """What the PLEG keeps of its last relist: each pod's snapshot (as listed) and its states."""

    snapshots: Mapping[str, Mapping[str, Any] | None] = field(default_factory=dict)
    states: Mapping[str, PodStates] = field(default_factory=dict)


def relist_changes(
    previous: Relisted, current: Mapping[str, Mapping[str, Any] | None]
) -> tuple[list[PodLifecycleEvent], Relisted]:
    """The events between the last relist and `current`, equal to relist_events(previous.snapshots,
    current), and what to keep for the next relist.

    A pod listed with the same snapshot object as last time is unchanged (snapshots are read-only once
    listed), so it costs a lookup; any other pod costs its states tuple and one tuple comparison, and
    only pods whose states differ are diffed container by container.
    """
    old_snapshots, old_states = previous.snapshots, previous.states
    listed_before = old_snapshots.get
    relisted = [uid for uid, snapshot in current.items() if listed_before(uid, _NOT_LISTED) is not snapshot]
    states = dict(old_states)  # a copy at C speed; most pods keep their states
    changed: list[str] = []
    for pod_uid in relisted:
        after = states[pod_uid] = pod_states(current[pod_uid])
        if after != old_states.get(pod_uid, ()):
            changed.append(pod_uid)
    if len(states) != len(current):  # pods gone from the runtime
        gone = [pod_uid for pod_uid in old_states if pod_uid not in current]
        for pod_uid in gone:
            del states[pod_uid]
        changed.extend(gone)
    events: list[PodLifecycleEvent] = []
    for pod_uid in sorted(changed):
        events.extend(pod_events(pod_uid, old_states.get(pod_uid, ()), states.get(pod_uid, ())))
    return events, Relisted(current, states)


def events_by_pod(events: Iterable[PodLifecycleEvent]) -> dict[str, list[PodLifecycleEvent]]:
    """Group events by pod UID, keeping order; the relist caches and sends per pod."""
    grouped: dict[str, list[PodLifecycleEvent]] = {}
    for event in events:
        grouped.setdefault(event.pod_uid, []).append(event)
    return grouped


class RelistHealth:
    """The PLEG health check (generic.go Healthy): healthy only if a relist succeeded within the threshold.

    Unhealthy before the first successful relist however much time passes, so a runtime that never
    answers keeps the node NotReady. Callers record the relist's start time, as upstream does.
    """

    def __init__(self, threshold_s: float = RELIST_THRESHOLD_S) -> None:
        self.threshold_s = threshold_s
        self.relist_time: float | None = None

    def record_relist(self, now: float) -> None:
        """Note a successful relist that started at `now`; a failed GetPods must not call this."""
        self.relist_time = now

    def healthy(self, now: float) -> tuple[bool, str]:
        """(ok, reason); the reason text matches upstream's Healthy() errors, empty when healthy."""
        if self.relist_time is None:
            return False, "pleg has yet to be successful"
        elapsed = now - self.relist_time
        if elapsed > self.threshold_s:
            return False, (
                f"pleg was last seen active {format_go_duration(elapsed)} ago; "
                f"threshold is {format_go_duration(self.threshold_s)}"
            )
        return True, ""
