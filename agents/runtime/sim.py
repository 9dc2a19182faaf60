"""A runtime without processes: containers move through timed stages, so 10,000+ pods fit in one process.

Each started container gets a timeline fixed at start (created -> running -> exited) from the pod's
annotations plus seeded jitter; `relist(now)` only reads that timeline, so there are no background tasks,
runs are reproducible for a seed, and tests drive time with a fake clock. This is the job kwok does.

Annotations (pod-level, or per container with a ".<container name>" suffix, which wins):
    sim.podledger.io/start-delay   seconds in "created" before running (default 0.5)
    sim.podledger.io/run-seconds   seconds running before exiting (default: run forever)
    sim.podledger.io/exit-code     exit code when it exits on its own (default 0)
"""

from __future__ import annotations

import heapq
import math
import random
import time
from collections.abc import Callable

from podledger.agents.runtime.base import ContainerRecord, exit_reason
from podledger.types import JSONDict, RuntimeContainer, RuntimeSnapshot

__all__ = [
    "ANNOTATION_EXIT_CODE",
    "ANNOTATION_RUN_SECONDS",
    "ANNOTATION_START_DELAY",
    "DEFAULT_START_DELAY_S",
    "JITTER",
    "SIGKILL_EXIT_CODE",
    "SIGTERM_EXIT_CODE",
    "SimRuntime",
]


ANNOTATION_START_DELAY = "sim.podledger.io/start-delay"
ANNOTATION_RUN_SECONDS = "sim.podledger.io/run-seconds"
ANNOTATION_EXIT_CODE = "sim.podledger.io/exit-code"
DEFAULT_START_DELAY_S = 0.5
JITTER = 0.2  # each duration is scaled by a factor drawn from [1 - JITTER, 1 + JITTER]
SIGTERM_EXIT_CODE = 143  # 128 + SIGTERM: a sim container honours SIGTERM at once
SIGKILL_EXIT_CODE = 137  # 128 + SIGKILL: containers still running when their sandbox is stopped

_INF = math.inf


class _Container:
    """One container's fixed timeline; the stage at any `now` follows from it without further state."""

    __slots__ = ("created_at", "exit_code", "finish_at", "id", "image", "name", "restart_count", "start_at")

    def __init__(
        self,
        cid: str,
        name: str,
        image: str | None,
        restart_count: int,
        created_at: float,
        start_at: float | None,
        finish_at: float | None,
        exit_code: int,
    ) -> None:
        self.id = cid
        self.name = name
        self.image = image
        self.restart_count = restart_count
        self.created_at = created_at
        self.start_at = start_at  # None: stopped before it ever ran
        self.finish_at = finish_at  # None: runs until stopped
        self.exit_code = exit_code

    def exited_by(self, now: float) -> bool:
        return self.finish_at is not None and now >= self.finish_at

    def stage(self, now: float) -> tuple[str, float, float]:
        """(state, from, until): the state at `now` and the interval over which it holds."""
        if self.finish_at is not None and now >= self.finish_at:
            return "exited", self.finish_at, _INF
        if self.start_at is not None and now >= self.start_at:
            return "running", self.start_at, _INF if self.finish_at is None else self.finish_at
        nxt = self.start_at if self.start_at is not None else self.finish_at
        return "created", -_INF, _INF if nxt is None else nxt

    def record(self, state: str) -> ContainerRecord:
        exited = state == "exited"
        return ContainerRecord(
            id=self.id,
            name=self.name,
            image=self.image,
            state=state,
            restart_count=self.restart_count,
            created_at=self.created_at,
            started_at=self.start_at if state != "created" else None,
            finished_at=self.finish_at if exited else None,
            exit_code=self.exit_code if exited else None,
            reason=exit_reason(self.exit_code) if exited else None,
        )


class _Pod:
    """Per-pod state plus the last snapshot and the time interval over which it stays valid."""

    __slots__ = (
        "cache",
        "containers",
        "ip",
        "queued_until",
        "sandbox_id",
        "sandbox_ready",
        "uid",
        "valid_from",
        "valid_until",
    )

    def __init__(self, uid: str, sandbox_id: str, ip: str) -> None:
        self.uid = uid
        self.sandbox_id = sandbox_id
        self.sandbox_ready = True
        self.ip = ip
        self.containers: dict[str, _Container] = {}  # insertion order = creation order
        self.cache: RuntimeSnapshot | None = None
        self.valid_from = _INF
        self.valid_until = -_INF
        self.queued_until = _INF  # the latest end of validity put on the runtime's expiry queue


def _annotation(pod: JSONDict, key: str, name: str) -> str | None:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(f"{key}.{name}")
    return annotations.get(key) if value is None else value


def _seconds(pod: JSONDict, key: str, name: str, default: float | None) -> float | None:
    """A non-negative duration annotation; a malformed one fails the start, like a bad container config."""
    raw = _annotation(pod, key, name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{key}: {raw!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{key}: {raw!r} must be a finite number of seconds >= 0")
    return value


class SimRuntime:
    """The `Runtime` interface over timelines instead of processes (runtime_type "sim").

    Snapshots returned by `relist` are shared with later relists while nothing changes (that is what makes
    relisting 10,000 pods a second cheap), so callers must treat them as read-only.
    """

    runtime_type = "sim"

    def __init__(self, seed: int = 0, clock: Callable[[], float] = time.time) -> None:
        self._rng = random.Random(seed)
        self._clock = clock
        self._pods: dict[str, _Pod] = {}
        self._next_id = 0
        # What relist hands out without looking at every pod: each pod's snapshot as last built, the
        # pods changed since (their cache dropped), and a queue of (end of validity, pod) by time.
        self._listed: dict[str, RuntimeSnapshot] = {}
        self._changed: set[str] = set()
        self._expiry: list[tuple[float, str]] = []
        self._built_for = -_INF  # the latest time a snapshot was built for

    def _new_id(self) -> str:
        """Counter-based ids: unique within this runtime and reproducible, without consuming the rng."""
        self._next_id += 1
        return f"{self._next_id:016x}"

    async def create_sandbox(self, pod: JSONDict) -> str:
        """A new ready sandbox with a fresh IP, replacing the pod's previous one as a re-create does."""
        uid = str(pod["metadata"]["uid"])
        sandbox_id = self._new_id()
        n = self._next_id
        ip = f"10.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}"
        state = self._pods.get(uid)
        if state is None:
            state = self._pods[uid] = _Pod(uid, sandbox_id, ip)
            self._snapshot(state, self._clock())  # listed from now on, in creation order
        else:
            state.sandbox_id, state.sandbox_ready, state.ip = sandbox_id, True, ip
            self._changed_pod(state)
        return sandbox_id

    async def stop_sandbox(self, pod_uid: str) -> None:
        """Not ready from now on; live containers are killed (137), as the CRI's StopPodSandbox does."""
        state = self._pods.get(pod_uid)
        if state is None:
            return
        now = self._clock()
        for c in state.containers.values():
            if not c.exited_by(now):
                self._terminate(c, now, SIGKILL_EXIT_CODE)
        state.sandbox_ready = False
        self._changed_pod(state)

    async def remove_sandbox(self, pod_uid: str) -> None:
        """Forget the pod entirely: it disappears from relists (RemovePodSandbox)."""
        self._pods.pop(pod_uid, None)
        self._listed.pop(pod_uid, None)
        self._changed.discard(pod_uid)

    async def start_container(self, pod: JSONDict, container: JSONDict, *, attempt: int) -> str:
        """Fix the container's timeline from annotations and jitter; needs a ready sandbox, like the CRI."""
        uid = str(pod["metadata"]["uid"])
        state = self._pods.get(uid)
        if state is None or not state.sandbox_ready:
            raise RuntimeError(f"pod {uid}: no ready sandbox to start container {container.get('name')!r} in")
        name = str(container["name"])
        delay = _seconds(pod, ANNOTATION_START_DELAY, name, DEFAULT_START_DELAY_S)
        run = _seconds(pod, ANNOTATION_RUN_SECONDS, name, None)
        raw_code = _annotation(pod, ANNOTATION_EXIT_CODE, name)
        try:
            code = 0 if raw_code is None else int(raw_code)
        except ValueError:
            raise ValueError(f"{ANNOTATION_EXIT_CODE}: {raw_code!r} is not an integer") from None
        if not 0 <= code <= 255:
            raise ValueError(f"{ANNOTATION_EXIT_CODE}: {code} is outside 0..255")
        # Always two draws, so one container's settings never shift the jitter of the ones after it.
        delay_factor = self._rng.uniform(1.0 - JITTER, 1.0 + JITTER)
        run_factor = self._rng.uniform(1.0 - JITTER, 1.0 + JITTER)
        now = self._clock()
        start_at = now + (delay or 0.0) * delay_factor
        finish_at = None if run is None else start_at + run * run_factor
        cid = self._new_id()
        state.containers[cid] = _Container(
            cid, name, container.get("image"), attempt, now, start_at, finish_at, code
        )
        self._changed_pod(state)
        return cid

    def _terminate(self, c: _Container, now: float, code: int) -> None:
        if c.start_at is not None and c.start_at > now:
            c.start_at = None  # stopped before it ever ran
        c.finish_at = now
        c.exit_code = code

    async def stop_container(self, pod_uid: str, container_id: str, grace_s: float) -> None:
        """SIGTERM, which a sim container honours at once (143); a no-op if gone or already exited."""
        state = self._pods.get(pod_uid)
        c = state.containers.get(container_id) if state is not None else None
        if state is None or c is None:
            return
        now = self._clock()
        if c.exited_by(now):
            return
        self._terminate(c, now, SIGTERM_EXIT_CODE)
        self._changed_pod(state)

    async def remove_container(self, pod_uid: str, container_id: str) -> None:
        """Drop the container from relists; idempotent, as the CRI's RemoveContainer is."""
        state = self._pods.get(pod_uid)
        if state is not None and state.containers.pop(container_id, None) is not None:
            self._changed_pod(state)

    def relist(self, now: float) -> dict[str, RuntimeSnapshot]:
        """{pod uid: snapshot} at `now`; a pod's snapshot is rebuilt only after a stage boundary.

        Only the pods changed since the last relist and those whose snapshot expired by `now` are
        looked at, so a relist costs what changed plus one dict copy; every pod is looked at when
        `now` is earlier than a snapshot was built for (a clock that went back)."""
        if now < self._built_for:
            due: list[str] | set[str] = list(self._pods)
        else:
            due = self._changed
            while self._expiry and self._expiry[0][0] <= now:
                until, uid = heapq.heappop(self._expiry)
                state = self._pods.get(uid)
                if state is not None and state.queued_until == until:
                    state.queued_until = _INF  # off the queue: a rebuild for the same end goes back on
                due.add(uid)
        for uid in due:
            state = self._pods.get(uid)
            if state is not None:
                self._cached_snapshot(state, now)
        self._changed = set()
        return dict(self._listed)

    def pod_snapshot(self, pod_uid: str, now: float) -> RuntimeSnapshot | None:
        """One pod's snapshot at `now`, or None if the runtime does not know the pod."""
        state = self._pods.get(pod_uid)
        return None if state is None else self._cached_snapshot(state, now)

    def _changed_pod(self, state: _Pod) -> None:
        """The pod's snapshot no longer holds: rebuilt when next asked for, or by the next relist."""
        state.cache = None
        self._changed.add(state.uid)

    def _cached_snapshot(self, state: _Pod, now: float) -> RuntimeSnapshot:
        if state.cache is None or not state.valid_from <= now < state.valid_until:
            return self._snapshot(state, now)
        return state.cache

    def _snapshot(self, state: _Pod, now: float) -> RuntimeSnapshot:
        """Build one pod's snapshot, newest container first.

        Newest first because the fold takes the first of equal created_at seconds as the current instance,
        so a restart within the same second still shows the new container as state and the old as lastState.
        """
        lo, hi = -_INF, _INF
        containers: list[RuntimeContainer] = []
        for c in reversed(state.containers.values()):
            stage, since, until = c.stage(now)
            lo = max(lo, since)
            hi = min(hi, until)
            containers.append(c.record(stage).snapshot())
        snapshot: RuntimeSnapshot = {
            "containers": containers,
            "ips": [state.ip] if state.sandbox_ready else [],
            "runtime_type": self.runtime_type,
            "sandbox": {"id": state.sandbox_id, "ready": state.sandbox_ready},
        }
        state.cache, state.valid_from, state.valid_until = snapshot, lo, hi
        self._listed[state.uid] = snapshot
        self._built_for = max(self._built_for, now)
        if hi != _INF and hi != state.queued_until:
            heapq.heappush(self._expiry, (hi, state.uid))
            state.queued_until = hi
        return snapshot
