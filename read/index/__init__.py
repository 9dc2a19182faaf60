"""The audit index: pod-status-history and journal by pod, with the offsets read (base.py), its
embedded SQLite store (sqlite.py: the reads; schema.py: the file's layout; writes.py: the write
path; fields.py: what it reads of a value; codec.py: the values' compression) and the consumer
role that fills it (builder.py)."""

from podledger.read.index.base import (
    INDEXED_TOPICS,
    AuditIndex,
    PodIdentity,
    RawRecord,
    StoredEntry,
    StoredVersion,
)
from podledger.read.index.schema import IndexMismatch
from podledger.read.index.sqlite import SqliteIndex

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
