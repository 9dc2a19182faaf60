"""podledger's shared vocabulary: the plain types and the closed sets of names every layer uses.

Pure data only (no I/O, no third-party imports), so the pure core, the agents and the shell can all
use it. Each enum is a `StrEnum`: members compare equal to, hash like, and encode as their string,
so values on the wire are unchanged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import Any, NotRequired, Protocol, TypedDict

JSONDict = dict[str, Any]
"""A JSON object as orjson decodes it: pods, statuses and snapshots stay plain data."""


class RuntimeContainer(TypedDict):
    """One container instance in a runtime snapshot; times are RFC 3339, None when not reached yet."""

    id: str
    name: str
    image: str | None
    image_id: NotRequired[str]  # the runtime's image digest; a snapshot may leave it out
    state: str  # created | running | exited | unknown
    exit_code: int | None
    reason: str | None
    message: str | None
    created_at: str | None
    started_at: str | None
    finished_at: str | None
    restart_count: int


class SandboxInfo(TypedDict):
    id: str
    ready: bool


class RuntimeSnapshot(TypedDict, total=False):
    """What a runtime reports of one pod (the pleg value's `runtime`); newest container first."""

    containers: list[RuntimeContainer]
    ips: list[str]
    host_ips: list[str]
    runtime_type: str
    sandbox: SandboxInfo | None


class Topic(StrEnum):
    """The logical topic names; the Kafka topic is `Settings.topic(name)` (prefix + name)."""

    POD_UPDATES = "pod-updates"
    PLEG = "pleg"
    PROBE_RESULTS = "probe-results"
    POD_LIFECYCLE = "pod-lifecycle"
    JOURNAL = "journal"
    POD_STATUS = "pod-status"
    POD_STATUS_HISTORY = "pod-status-history"
    POD_DELETIONS = "pod-deletions"
    DEAD_LETTER = "dead-letter"
    FOLD_STATE = "fold-state"
    SINK_STATE = "sink-state"
    POD_STATUS_WATERMARKS = "pod-status-watermarks"


INGRESS_TOPICS: tuple[Topic, ...] = (
    Topic.POD_UPDATES,
    Topic.PLEG,
    Topic.PROBE_RESULTS,
    Topic.POD_LIFECYCLE,
)
"""The topics node agents write and the fold reads."""


class PlegEventType(StrEnum):
    """Pod lifecycle event types, as the kubelet's PLEG names them (pleg.PodLifeCycleEventType)."""

    CONTAINER_STARTED = "ContainerStarted"
    CONTAINER_DIED = "ContainerDied"
    CONTAINER_REMOVED = "ContainerRemoved"
    CONTAINER_CHANGED = "ContainerChanged"  # produced by the diff, never published by the relist
    POD_SYNC = "PodSync"  # declared upstream, never emitted by the generic relist


class PodOp(StrEnum):
    """pod-updates operations, as the kubelet's PodConfig emits them (kubetypes.PodOperation)."""

    ADD = "ADD"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    REMOVE = "REMOVE"
    RECONCILE = "RECONCILE"


class LifecycleKind(StrEnum):
    """pod-lifecycle facts a pod worker reports to the fold."""

    SYNC_RESULT = "sync_result"
    TERMINATING = "terminating"
    TERMINATED = "terminated"


class ProbeType(StrEnum):
    LIVENESS = "liveness"
    READINESS = "readiness"
    STARTUP = "startup"


class ProbeResult(StrEnum):
    """A probe's result, as the kubelet's results.Result names them."""

    SUCCESS = "Success"
    FAILURE = "Failure"
    UNKNOWN = "Unknown"


class SinkOutcome(StrEnum):
    """What one sink write (the status manager's syncPod) did with a status version."""

    MISSING = "missing"  # no API pod of that name
    NO_MIRROR = "no-mirror"  # a static pod whose mirror pod is not there (yet)
    RECREATED = "recreated"  # the API pod has another UID: the status is dropped
    NOT_BOUND = "not-bound"  # the API pod is not bound to the version's node: nothing is written
    UNCHANGED = "unchanged"  # the API status already holds it: no call made
    PATCHED = "patched"
    DELETED = "deleted"


class PodPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


CONFIG_SOURCE_ANNOTATION = "kubernetes.io/config.source"
"""Which pod source a pod came from (upstream kubetypes.ConfigSourceAnnotationKey); file and http
make a static pod."""

CONFIG_MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
"""On a mirror pod: the config hash of the static pod it mirrors (kubetypes.ConfigMirrorAnnotationKey)."""

TERMINAL_PHASES: frozenset[str] = frozenset({PodPhase.SUCCEEDED, PodPhase.FAILED})
"""Phases a pod never leaves (the kubelet's podutil.IsPodPhaseTerminal)."""


class Publish(Protocol):
    """Send one value to a logical topic, keyed by pod UID and partitioned by node; awaitable."""

    def __call__(self, topic: str, key: str, value: Any, node: str) -> Awaitable[None]: ...


PublishUpdate = Callable[[Any], Awaitable[None]]
"""Send one pod-updates value (a `models.PodUpdate`); what pod sources are given."""
