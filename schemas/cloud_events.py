"""CloudEvents (spec 1.0, Kafka protocol binding, binary content mode) headers for status
versions and deletions, so generic CloudEvents consumers read them without podledger code.

The value stays the record's value (the event's data, `application/json`); the attributes ride
in `ce_*` headers:

- `ce_id`: `<uid>/<version>` for a status version; `<uid>/<version>/deletion` for a deletion,
  since a deletion of version N is another event than version N and an id is unique per source.
  A version republished after a crash keeps its id, so CloudEvents consumers deduplicate it.
- `ce_source`: `podledger/<topic prefix without its trailing separator>/<node>`.
- `ce_type`: `io.podledger.pod.status.v1` or `io.podledger.pod.deletion.v1`.
- `ce_time`: RFC 3339 UTC with milliseconds, from the value's `ts_ms`.
- `ce_subject`: `<namespace>/<name>` of the pod.

Tombstones carry none (a tombstone is no event).
"""

from __future__ import annotations

import time
from functools import lru_cache
from typing import Any

from podledger.schemas import models

SPEC_VERSION = "1.0"
STATUS_TYPE = "io.podledger.pod.status.v1"
DELETION_TYPE = "io.podledger.pod.deletion.v1"
CONTENT_TYPE = "application/json"


@lru_cache(maxsize=4096)
def source(topic_prefix: str, node: str) -> str:
    """Where the event happened: this deployment (its topic prefix) and the pod's node."""
    return "/".join(part for part in ("podledger", topic_prefix.rstrip("._-"), node) if part)


def rfc3339_ms(ts_ms: int) -> str:
    """`2026-01-02T03:04:05.678Z`: milliseconds since the epoch as RFC 3339 UTC."""
    seconds, millis = divmod(ts_ms, 1000)
    return f"{_rfc3339_s(seconds)}.{millis:03d}Z"


@lru_cache(maxsize=1024)
def _rfc3339_s(seconds: int) -> str:
    # A version's time is recent: a few seconds' prefixes serve almost every call.
    t = time.gmtime(seconds)
    return f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}T{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}"


# The attributes every event of a kind shares, encoded once.
_SPEC_VERSION = ("ce_specversion", SPEC_VERSION.encode())
_TYPES = {kind: ("ce_type", kind.encode()) for kind in (STATUS_TYPE, DELETION_TYPE)}
_CONTENT_TYPE = ("content-type", CONTENT_TYPE.encode())


@lru_cache(maxsize=4096)
def _source_bytes(topic_prefix: str, node: str) -> bytes:
    return source(topic_prefix, node).encode()


def headers(value: Any, topic_prefix: str) -> list[tuple[str, bytes]]:
    """The binary-mode headers of a status version or a deletion; [] for any other value."""
    if isinstance(value, models.VersionedPodStatus):
        kind, event_id = STATUS_TYPE, f"{value.uid}/{value.version}"
    elif isinstance(value, models.PodDeletion):
        kind, event_id = DELETION_TYPE, f"{value.uid}/{value.version}/deletion"
    else:
        return []
    return [
        _SPEC_VERSION,
        ("ce_id", event_id.encode()),
        ("ce_source", _source_bytes(topic_prefix, value.node)),
        _TYPES[kind],
        ("ce_time", rfc3339_ms(value.ts_ms).encode()),
        ("ce_subject", f"{value.namespace}/{value.name}".encode()),
        _CONTENT_TYPE,
    ]
