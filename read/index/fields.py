"""What the index reads of a value: the few fields it files a record under, nothing else.

A history value is a 1.7 KB status of which the index needs its pod (UID, name, namespace,
node), version, time and cause; a journal entry needs its input's coordinates and time. msgspec
decodes exactly those into small structs and skips the rest while checking that it is JSON,
about four times cheaper than building the whole value as a dict. The types are exact (a bool
is no number here, nor is 1.0); a value without them is no record the index can file, and is
skipped. The stored value is always the bytes as read.
"""

from __future__ import annotations

from typing import Any

import msgspec
import orjson


class _Cause(msgspec.Struct):
    topic: str
    offset: int


class VersionHead(msgspec.Struct):
    """The fields of a pod-status-history value the index files it under."""

    uid: str
    version: int
    ts_ms: int
    cause: _Cause
    namespace: Any = ""
    name: Any = ""
    node: Any = ""


class EntryHead(msgspec.Struct):
    """The fields of a journal value the index files it under; `event` is left undecoded."""

    topic: str
    partition: int
    offset: int
    ts_ms: int
    event: msgspec.Raw


_VERSION = msgspec.json.Decoder(VersionHead)
_ENTRY = msgspec.json.Decoder(EntryHead)


def version_head(value: bytes | None) -> VersionHead | None:
    """A history value's filing fields, or None when it is not one (a tombstone, or bytes that
    are no JSON object with those fields). Unknown fields are no concern of the index."""
    if not value:
        return None
    try:
        return _VERSION.decode(value)
    except msgspec.DecodeError:
        return None


def entry_head(value: bytes | None) -> EntryHead | None:
    """A journal value's filing fields, or None when it is not one (its event must be an object)."""
    if not value:
        return None
    try:
        head = _ENTRY.decode(value)
    except msgspec.DecodeError:
        return None
    return head if memoryview(head.event)[:1] == b"{" else None


def text(field: Any) -> str:
    """A name, namespace or node as the index keeps it: missing, null or empty is ''."""
    return str(field or "")


def event_uid(event: msgspec.Raw) -> str:
    """A journal entry's pod UID from its event, for entries that reach the index without a key."""
    try:
        parsed = orjson.loads(bytes(event))
    except orjson.JSONDecodeError:
        return ""
    uid = parsed.get("uid")
    if type(uid) is not str:  # a pod-updates event names its pod in the pod's metadata
        pod = parsed.get("pod")
        metadata = pod.get("metadata") if type(pod) is dict else None
        uid = metadata.get("uid") if type(metadata) is dict else None
    return uid if type(uid) is str else ""
