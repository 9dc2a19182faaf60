"""Pod metrics from the status stream: kube-state-metrics' pod series and counters of every version.

`PodMetrics` is a pure state machine fed by the edge (read/metrics/server.py):

- `apply(version)` — a version from pod-status-history. Counted once per (uid, version), in
  version order: duplicates and older versions are ignored. It updates the counters and, when it
  is the newest version seen, the pod's current status.
- `observe(version)` — the latest version from pod-status (compacted). It only replaces the
  current status when newer: pod-status skips versions, so it never counts. It is what keeps a
  pod whose history has aged out of retention on the page.
- `remove(uid, now_s)` — the pod's tombstone. Its gauges disappear at once; its counters stay for
  `removed_keep_s`, so a scrape sees what happened just before the removal; `expire(now_s)`
  then forgets them.
- `render()` — everything in the Prometheus text format.

The counters (beyond kube-state-metrics, whose scrapes miss whatever lasts less than a scrape):

- podledger_pod_container_terminations_total{container,reason}: each container termination seen
  in any version (state.terminated or lastState.terminated), once: a termination is the same one
  while its identity (container ID, start, finish, exit code, reason) is unchanged, however many
  later versions repeat it as lastState.
- podledger_pod_ready_transitions_total{to}: changes of the Ready condition between versions.
- podledger_pod_container_waits_total{container,reason}: entries into a waiting reason
  (CrashLoopBackOff, ErrImagePull ...), a new one when the reason changes or the container waits
  again after having left waiting.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field

from podledger.read.metrics import series
from podledger.read.metrics.text import Family, Labels, label_text, render_lines, sample_line
from podledger.schemas import models
from podledger.types import JSONDict

__all__ = ["COUNTER_FAMILIES", "PodMetrics", "termination_key"]

TERMINATIONS = "podledger_pod_container_terminations_total"
READY_TRANSITIONS = "podledger_pod_ready_transitions_total"
WAITS = "podledger_pod_container_waits_total"

COUNTER_FAMILIES = (
    Family(TERMINATIONS, "counter", "Container terminations seen in any status version, by reason."),
    Family(
        READY_TRANSITIONS, "counter", "Changes of the pod's Ready condition, by the status it changed to."
    ),
    Family(WAITS, "counter", "Times a container entered a waiting state, by reason."),
)
FAMILIES = series.FAMILIES + COUNTER_FAMILIES

# Counters printed at 0 from a pod's first version, so that rate() and increase() see their
# first rise (a series born at 1 has no earlier sample to rise from). Other reasons appear at
# their first occurrence.
ZERO_REASONS = ("Completed", "Error", "OOMKilled")
ZERO_READY = ("true", "false")

RECENT_TERMINATIONS = 8  # identities remembered per container, beyond the previous version's
REMOVED_MEMORY = 100_000  # removed UIDs remembered, to ignore their late history versions

TerminationKey = tuple[str, str, str, int, str]


def termination_key(terminated: JSONDict) -> TerminationKey:
    """What identifies one termination of a container across the versions that show it."""
    return (
        str(terminated.get("containerID") or ""),
        str(terminated.get("startedAt") or ""),
        str(terminated.get("finishedAt") or ""),
        int(terminated.get("exitCode") or 0),
        str(terminated.get("reason") or ""),
    )


@dataclass
class _Container:
    """What the counters remember of one container between versions."""

    previous: set[TerminationKey] = field(default_factory=set)  # terminations in the last version
    recent: list[TerminationKey] = field(default_factory=list)  # counted ones that had a container ID
    waiting: str | None = None  # its waiting reason in the last version (None: not waiting)


@dataclass
class _Pod:
    labels: Labels
    current: models.VersionedPodStatus | None = None  # None once removed: no gauges
    counted: int = 0  # the newest history version counted
    ready: str | None = None  # the Ready condition's status in that version
    containers: dict[str, _Container] = field(default_factory=dict)
    terminations: Counter[tuple[str, str]] = field(default_factory=Counter)
    ready_transitions: Counter[str] = field(default_factory=Counter)
    waits: Counter[tuple[str, str]] = field(default_factory=Counter)
    removed_at: float | None = None
    lines: dict[str, list[str]] | None = None  # its formatted samples by family; None: to redo


class PodMetrics:
    def __init__(self, removed_keep_s: float = 300.0) -> None:
        self.removed_keep_s = removed_keep_s
        self.pods: dict[str, _Pod] = {}
        self.removed: OrderedDict[str, None] = OrderedDict()

    def apply(self, vs: models.VersionedPodStatus) -> bool:
        """Count a pod-status-history version; False when it was seen before (or the pod is gone)."""
        pod = self._pod(vs)
        if pod is None or vs.version <= pod.counted:
            return False
        self._count(pod, vs)
        pod.counted, pod.lines = vs.version, None
        self._set_current(pod, vs)
        return True

    def observe(self, vs: models.VersionedPodStatus) -> None:
        """Take a pod-status value as the pod's current status when it is newer; never counted."""
        if vs.uid in self.removed:
            # Alive again after its tombstone: a static pod's UID is its manifest's hash, so the
            # same manifest put back is the same UID, with versions from 1 again.
            del self.removed[vs.uid]
            self.pods.pop(vs.uid, None)
        pod = self._pod(vs)
        if pod is not None:
            self._set_current(pod, vs)

    def remove(self, uid: str, now_s: float) -> None:
        """The pod's tombstone: gauges go now, counters after `removed_keep_s`."""
        self.removed[uid] = None
        self.removed.move_to_end(uid)
        while len(self.removed) > REMOVED_MEMORY:
            self.removed.popitem(last=False)
        pod = self.pods.get(uid)
        if pod is None:
            return
        if self.removed_keep_s <= 0:
            del self.pods[uid]
        elif pod.removed_at is None:
            pod.removed_at, pod.current, pod.lines = now_s, None, None

    def expire(self, now_s: float) -> None:
        """Forget removed pods whose counters have been kept long enough."""
        for uid in [u for u, p in self.pods.items() if p.removed_at is not None]:
            if now_s - (self.pods[uid].removed_at or 0.0) >= self.removed_keep_s:
                del self.pods[uid]

    def render(self) -> str:
        """The page. A pod's samples are formatted again only after it changed."""
        lines: dict[str, list[str]] = {}
        for pod in self.pods.values():
            if pod.lines is None:
                pod.lines = {}
                rows = series.pod_series(pod.current) if pod.current is not None else []
                head = (pod.labels, label_text(pod.labels))
                for name, labels, value in [*rows, *_counter_rows(pod)]:
                    pod.lines.setdefault(name, []).append(sample_line(name, labels, value, head))
            for name, rows_of_pod in pod.lines.items():
                lines.setdefault(name, []).extend(rows_of_pod)
        return render_lines(FAMILIES, lines)

    # ------------------------------------------------------------------ internals

    def _pod(self, vs: models.VersionedPodStatus) -> _Pod | None:
        if vs.uid in self.removed:
            return None
        pod = self.pods.get(vs.uid)
        if pod is None:
            pod = self.pods[vs.uid] = _Pod(series.pod_labels(vs))
        return pod

    @staticmethod
    def _set_current(pod: _Pod, vs: models.VersionedPodStatus) -> None:
        if pod.current is None or vs.version > pod.current.version:
            pod.current, pod.lines = vs, None
            for name in _container_names(vs.status):
                pod.containers.setdefault(name, _Container())

    @staticmethod
    def _count(pod: _Pod, vs: models.VersionedPodStatus) -> None:
        for cs in _container_statuses(vs.status):
            memory = pod.containers.setdefault(cs["name"], _Container())
            state, last = cs.get("state") or {}, cs.get("lastState") or {}
            shown = [t for t in (last.get("terminated"), state.get("terminated")) if isinstance(t, dict)]
            keys = [termination_key(t) for t in shown]
            for key in keys:
                if key in memory.previous or key in memory.recent:
                    continue
                pod.terminations[(cs["name"], key[4])] += 1
                if key[0]:
                    memory.recent = [*memory.recent, key][-RECENT_TERMINATIONS:]
            memory.previous = set(keys)
            waiting = state.get("waiting")
            reason = None if not isinstance(waiting, dict) else str(waiting.get("reason") or "")
            if reason is not None and reason != memory.waiting:
                pod.waits[(cs["name"], reason)] += 1
            memory.waiting = reason
        ready = _ready(vs.status)
        if ready is not None:
            if pod.ready is not None and ready != pod.ready:
                pod.ready_transitions[ready.lower()] += 1
            pod.ready = ready


def _counter_rows(pod: _Pod) -> Iterator[series.Row]:
    for name in sorted(pod.containers):
        by_reason = {reason: 0 for reason in ZERO_REASONS}
        by_reason.update({r: n for (c, r), n in pod.terminations.items() if c == name})
        for reason, n in sorted(by_reason.items()):
            yield TERMINATIONS, (*pod.labels, ("container", name), ("reason", reason)), n
    for to in sorted({*ZERO_READY, *pod.ready_transitions}):
        yield READY_TRANSITIONS, (*pod.labels, ("to", to)), pod.ready_transitions[to]
    for (name, reason), n in sorted(pod.waits.items()):
        yield WAITS, (*pod.labels, ("container", name), ("reason", reason)), n


def _container_statuses(status: JSONDict) -> Iterator[JSONDict]:
    """Every container status of the pod: init, regular and ephemeral (names are unique across them)."""
    for key in ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses"):
        for cs in status.get(key) or []:
            if isinstance(cs, dict) and cs.get("name"):
                yield cs


def _container_names(status: JSONDict) -> list[str]:
    return [str(cs["name"]) for cs in _container_statuses(status)]


def _ready(status: JSONDict) -> str | None:
    for condition in status.get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            return str(condition.get("status") or "Unknown")
    return None
