"""The audit index's interface: what the audit queries need from a store, as plain data.

The index holds every `pod-status-history` and `journal` record it has read, by pod UID, with the
raw value (so new fields and new record headers never break it), plus the next offset to read
per topic partition, stored with the rows they cover. SQLite in a file is the embedded default
(`read/index/sqlite.py`); a server database can implement the same Protocol.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from podledger.types import Topic

INDEXED_TOPICS: tuple[str, ...] = (Topic.POD_STATUS_HISTORY, Topic.JOURNAL)


@dataclass(frozen=True, slots=True)
class RawRecord:
    """One Kafka record of an indexed topic (logical name), as read: the index's only input."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True, slots=True)
class StoredVersion:
    """A pod-status-history value and where it sits on that topic."""

    partition: int
    offset: int
    value: dict[str, Any]

    @property
    def uid(self) -> str:
        return str(self.value["uid"])

    @property
    def version(self) -> int:
        return int(self.value["version"])

    @property
    def ts_ms(self) -> int:
        return int(self.value["ts_ms"])

    @property
    def cause(self) -> dict[str, Any]:
        return dict(self.value.get("cause") or {})


@dataclass(frozen=True, slots=True)
class StoredEntry:
    """A journal value (an input event the fold applied) and its position on the journal."""

    partition: int
    offset: int
    uid: str
    value: dict[str, Any]

    @property
    def position(self) -> tuple[int, int]:
        return (self.partition, self.offset)

    @property
    def input(self) -> tuple[str, int, int]:
        """The input event's own coordinates: (topic, partition, offset)."""
        return (str(self.value["topic"]), int(self.value["partition"]), int(self.value["offset"]))


@dataclass(frozen=True, slots=True)
class PodIdentity:
    """One life of a pod: a UID, its name, node, and the time span its versions cover."""

    uid: str
    namespace: str
    name: str
    node: str
    first_ts_ms: int
    last_ts_ms: int


class AuditIndex(Protocol):
    """The store behind `podledger history`, `why` and `export`. Ranges are inclusive; journal
    positions are (journal partition, journal offset); every list is in topic order."""

    def add(self, records: Iterable[RawRecord]) -> int:
        """Store a batch of records and advance the offsets past them, atomically; records
        already stored are ignored. Returns the versions stored."""
        ...

    def catching_up(self, records: int) -> AbstractContextManager[None]:
        """Around adding about `records` records in a row (a catch-up): the store may prepare
        for a bulk load and must be whole again when the block ends, however it ends."""
        ...

    def offsets(self) -> dict[tuple[str, int], int]:
        """(logical topic, partition) -> the next offset to read."""
        ...

    def identities(self, *, uid: str = "", namespace: str = "", name: str = "") -> list[PodIdentity]:
        """The pods of a UID, or of a namespace/name (each UID that carried it), oldest first."""
        ...

    def namespaces(self) -> dict[str, int]:
        """Every namespace with the number of pods (UIDs) in it."""
        ...

    def pods(self, *, namespace: str = "", contains: str = "", limit: int = 200) -> list[PodIdentity]:
        """The pods of a namespace (every namespace when empty) whose name or UID contains
        `contains` (any case, literally), most recently seen first, at most `limit`."""
        ...

    def versions(
        self, uid: str, *, since_ms: int | None = None, until_ms: int | None = None
    ) -> list[StoredVersion]:
        """A UID's versions, optionally within an event-time range, in history order; without
        copies (a version resent after a lost acknowledgement is kept once)."""
        ...

    def journal(
        self, uid: str, *, until: tuple[int, int] | None = None, limit: int | None = None
    ) -> list[StoredEntry]:
        """A UID's journal entries in journal order, up to position `until`; without copies (an
        entry resent after a lost acknowledgement is kept once, at its first position)."""
        ...

    def scan(
        self, topic: str, *, uid: str = "", since_ms: int | None = None, until_ms: int | None = None
    ) -> Iterator[bytes]:
        """Raw values of an indexed topic, per partition in topic order, for export."""
        ...

    def count(self, topic: str) -> int: ...

    def size_bytes(self) -> int: ...

    def close(self) -> None: ...
