"""The audit index: pod-status-history and journal by pod, with the offsets read (base.py), its
embedded SQLite store (sqlite.py) and the consumer role that fills it (builder.py)."""

from podledger.read.index.base import (
    INDEXED_TOPICS,
    AuditIndex,
    PodIdentity,
    RawRecord,
    StoredEntry,
    StoredVersion,
)
from podledger.read.index.sqlite import IndexMismatch, SqliteIndex

__all__ = [
    "INDEXED_TOPICS",
    "AuditIndex",
    "IndexMismatch",
    "PodIdentity",
    "RawRecord",
    "SqliteIndex",
    "StoredEntry",
    "StoredVersion",
]
