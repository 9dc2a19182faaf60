"""Python models of the topic values, version 1.

Each model mirrors `<topic>.v1.json` field for field; `tests/test_schemas.py` keeps the two in
agreement. Pods and statuses stay plain JSON-shaped dicts (see "Plain data" in
docs/architecture.md): the models wrap the envelope, never the Kubernetes objects inside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from podledger.types import JSONDict

# The closed sets a value's fields draw from are the enums of podledger.types (PodOp,
# PlegEventType, ProbeType, ProbeResult, LifecycleKind); the JSON schemas list the same values.
POD_SOURCES = ("file", "http", "api")
DEAD_LETTER_REASONS = (
    "malformed",
    "schema",
    "unknown_op",
    "oversize",
    "unknown_pod",
    "forged",
    "replayed",
    "unusable",
)

# Identifiers that end up in file paths (the process runtime's state directory) and API paths (the
# sink): the ingress schemas (pod-updates, pleg, probe-results, pod-lifecycle) restrict a pod's UID,
# name and namespace to these patterns and lengths, so no `/`, NUL, `..` or path of its own gets in.
# A UID is one plain token (the apiserver's UUIDs, a static pod's hex hash); a name is a DNS-1123
# subdomain and a namespace a DNS-1123 label (or empty, defaulted later), as the apiserver validates.
UID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]*$"
UID_MAX_LENGTH = 128
NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
NAME_MAX_LENGTH = 253
NAMESPACE_PATTERN = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$"
NAMESPACE_MAX_LENGTH = 63


@dataclass(slots=True)
class PodUpdate:
    """pod-updates: one pod from one config source (the kubelet's PodUpdate, split per pod)."""

    op: str
    source: str
    node: str
    pod: JSONDict
    ts_ms: int

    @property
    def uid(self) -> str:
        return str(self.pod["metadata"]["uid"])


@dataclass(slots=True)
class PlegEvent:
    """pleg: a relist event carrying the runtime's snapshot of the pod."""

    uid: str
    node: str
    type: str
    container_id: str | None
    runtime: JSONDict  # a RuntimeSnapshot as the agent sent it; the wire does not promise its keys
    ts_ms: int


@dataclass(slots=True)
class ProbeResult:
    """probe-results: a liveness, readiness or startup result that changed."""

    uid: str
    node: str
    container_name: str
    container_id: str
    probe: str
    result: str
    ts_ms: int


@dataclass(slots=True)
class PodLifecycle:
    """pod-lifecycle: sync results (the reason cache), terminating and terminated facts."""

    uid: str
    node: str
    kind: str
    ts_ms: int
    sync_results: list[JSONDict] = field(default_factory=list)
    grace_s: int | None = None
    backoff: dict[str, JSONDict] | None = None
    runtime: JSONDict | None = None


@dataclass(slots=True)
class JournalEntry:
    """journal: an accepted input event, in the order the fold applied it."""

    type: str
    topic: str
    partition: int
    offset: int
    ts_ms: int
    event: JSONDict


@dataclass(slots=True)
class Cause:
    """Which input event produced a status version, and where it sits in Kafka."""

    type: str
    topic: str
    partition: int
    offset: int
    ts_ms: int


@dataclass(slots=True)
class VersionedPodStatus:
    """pod-status and pod-status-history: the kubelet's versionedPodStatus, made public."""

    uid: str
    namespace: str
    name: str
    node: str
    version: int
    status: JSONDict
    could_have_running_containers: bool
    finished: bool
    static: bool
    mirror_uid: str | None
    deleting: bool
    cause: Cause
    ts_ms: int
    rules: int | None = None  # the version of the fold rules that made it (streams.batch.RULES_VERSION)


@dataclass(slots=True)
class PodDeletion:
    """pod-deletions: the final DELETE of a finished pod."""

    uid: str
    namespace: str
    name: str
    node: str
    version: int
    ts_ms: int


@dataclass(slots=True)
class DeadLetter:
    """dead-letter: input the pipeline rejected, with why and where it came from."""

    reason: str
    detail: str
    topic: str
    partition: int
    offset: int
    key_b64: str | None
    value_b64: str | None  # the original bytes, or their first DEAD_LETTER_VALUE_MAX when longer
    ts_ms: int
    value_size: int | None = None  # set when value_b64 holds only a prefix: the original's length
    value_sha256: str | None = None  # ... and its SHA-256 (hex)


@dataclass(slots=True)
class Watermark:
    """pod-status-watermarks: how far the fold has applied the inputs of one partition (key: the
    partition number). Times are the broker's: ingress topics are stamped at append time."""

    partition: int
    # Every ingress record of the partition stamped at or before t_ms has been applied, and the
    # versions it caused are on pod-status-history. None: nothing promised yet.
    t_ms: int | None
    offsets: dict[str, int]  # per ingress topic, the next offset to apply: all records before it are
    held_ms: int | None = None  # the oldest input waiting for its pod's announcement; it bounds t_ms
