"""The embedded audit index: one SQLite file (stdlib sqlite3), no server.

A record's row id is its Kafka position (partition << 40 | offset), so a record stored twice
(two writers racing) is ignored, and row order is topic order within a partition; the one
secondary index per table is by pod UID. Values are stored as read, uncompressed (zlib, even at
level 1, halved the indexing rate), and a pod's name is kept once per UID (`pods`). A batch of
records and the offsets past it are written in one transaction, so a restarted builder resumes
exactly where the file ends. The file is in WAL mode: queries read it while `podledger index`
writes.

Copies of one record on the topic (a producer resending after a lost acknowledgement) are both
stored and dropped when read: a version by (version, cause), a journal entry by its input's
coordinates; the first copy wins.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from podledger.read.index.base import (
    INDEXED_TOPICS,
    PodIdentity,
    RawRecord,
    StoredEntry,
    StoredVersion,
    entry_fields,
    version_fields,
)
from podledger.types import Topic

SCHEMA_VERSION = "1"
CACHE_KB = 256 * 1024
CHECKPOINT_PAGES = 10_000
_OFFSET_BITS = 40  # a partition's offsets stay below 2**40; partitions below 2**22
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS offsets(
  topic TEXT NOT NULL, partition INTEGER NOT NULL, next INTEGER NOT NULL, PRIMARY KEY(topic, partition));
CREATE TABLE IF NOT EXISTS pods(
  uid TEXT PRIMARY KEY, namespace TEXT NOT NULL, name TEXT NOT NULL, node TEXT NOT NULL,
  first_ts_ms INTEGER NOT NULL, last_ts_ms INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS pods_name ON pods(namespace, name);
CREATE TABLE IF NOT EXISTS versions(id INTEGER PRIMARY KEY, uid TEXT NOT NULL, ts_ms INTEGER NOT NULL,
  value BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS versions_uid ON versions(uid);
CREATE TABLE IF NOT EXISTS journal(id INTEGER PRIMARY KEY, uid TEXT NOT NULL, ts_ms INTEGER NOT NULL,
  value BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS journal_uid ON journal(uid);
"""
_TABLES = {Topic.POD_STATUS_HISTORY: "versions", Topic.JOURNAL: "journal"}
_EVER = (-(1 << 62), 1 << 62)


def _span(since_ms: int | None, until_ms: int | None) -> tuple[int, int]:
    return (_EVER[0] if since_ms is None else since_ms, _EVER[1] if until_ms is None else until_ms)


def _row_id(partition: int, offset: int) -> int:
    return (partition << _OFFSET_BITS) | offset


def _position(row_id: int) -> tuple[int, int]:
    return row_id >> _OFFSET_BITS, row_id & ((1 << _OFFSET_BITS) - 1)


class IndexMismatch(Exception):
    """The file indexes other topics than the ones asked for."""


class SqliteIndex:
    """AuditIndex over one SQLite file."""

    def __init__(self, path: str | Path, *, read_only: bool = False, topics: str = "") -> None:
        """Open (or create) the index at `path`. `topics` names what it indexes (broker and
        topic prefix); a file made for other topics is refused rather than mixed."""
        self.path = Path(path)
        if read_only:
            self.db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=30)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(self.path, timeout=30)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute(f"PRAGMA wal_autocheckpoint={CHECKPOINT_PAGES}")  # fewer, larger checkpoints
            self.db.executescript(_SCHEMA)
        self.db.execute(f"PRAGMA cache_size=-{CACHE_KB}")  # the UID indexes' pages stay in memory
        self._check_topics(topics, read_only)

    def _check_topics(self, topics: str, read_only: bool) -> None:
        stored = self.db.execute("SELECT value FROM meta WHERE key = 'topics'").fetchone()
        if stored is None and not read_only:
            with self.db:
                self.db.execute(
                    "INSERT INTO meta VALUES ('topics', ?), ('schema', ?)", (topics, SCHEMA_VERSION)
                )
        elif topics and stored is not None and stored[0] != topics:
            raise IndexMismatch(f"{self.path} indexes {stored[0]}, not {topics}")

    # ------------------------------------------------------------------ writing

    def add(self, records: Iterable[RawRecord]) -> int:
        versions: list[tuple[Any, ...]] = []
        entries: list[tuple[Any, ...]] = []
        pods: dict[str, list[Any]] = {}
        ends: dict[tuple[str, int], int] = {}
        for r in records:
            ends[(r.topic, r.partition)] = max(ends.get((r.topic, r.partition), 0), r.offset + 1)
            if r.value is None:
                continue
            if r.topic == Topic.POD_STATUS_HISTORY:
                v = version_fields(r.value)
                if v is None:
                    continue
                uid, ts = v["uid"], v["ts_ms"]
                versions.append((_row_id(r.partition, r.offset), uid, ts, r.value))
                pod = pods.get(uid)
                if pod is None:
                    pods[uid] = [uid, *(str(v.get(k) or "") for k in ("namespace", "name", "node")), ts, ts]
                else:
                    pod[4], pod[5] = min(pod[4], ts), max(pod[5], ts)
            elif r.topic == Topic.JOURNAL:
                e = entry_fields(r.value)
                if e is not None:
                    uid = r.key.decode(errors="replace") if r.key else _event_uid(e["event"])
                    entries.append((_row_id(r.partition, r.offset), uid, e["ts_ms"], r.value))
        with self.db:
            self.db.executemany("INSERT OR IGNORE INTO versions VALUES (?,?,?,?)", versions)
            self.db.executemany("INSERT OR IGNORE INTO journal VALUES (?,?,?,?)", entries)
            self.db.executemany(
                "INSERT INTO pods VALUES (?,?,?,?,?,?) ON CONFLICT(uid) DO UPDATE SET"
                " first_ts_ms = min(first_ts_ms, excluded.first_ts_ms),"
                " last_ts_ms = max(last_ts_ms, excluded.last_ts_ms)",
                list(pods.values()),
            )
            # max(): two writers (a running `podledger index` and a refreshing query) never move back.
            self.db.executemany(
                "INSERT INTO offsets VALUES (?,?,?) ON CONFLICT(topic, partition)"
                " DO UPDATE SET next = max(next, excluded.next)",
                [(t, p, n) for (t, p), n in ends.items()],
            )
        return len(versions)

    # ------------------------------------------------------------------ reading

    def offsets(self) -> dict[tuple[str, int], int]:
        rows = self.db.execute("SELECT topic, partition, next FROM offsets").fetchall()
        return {(t, p): n for t, p, n in rows if t in INDEXED_TOPICS}

    def identities(self, *, uid: str = "", namespace: str = "", name: str = "") -> list[PodIdentity]:
        select = "SELECT uid, namespace, name, node, first_ts_ms, last_ts_ms FROM pods"
        if uid:
            rows = self.db.execute(f"{select} WHERE uid = ?", (uid,)).fetchall()
        else:
            rows = self.db.execute(f"{select} WHERE namespace = ? AND name = ?", (namespace, name)).fetchall()
        return sorted((PodIdentity(*row) for row in rows), key=lambda p: (p.first_ts_ms, p.uid))

    def versions(
        self, uid: str, *, since_ms: int | None = None, until_ms: int | None = None
    ) -> list[StoredVersion]:
        rows = self.db.execute(
            "SELECT id, value FROM versions WHERE uid = ? AND ts_ms BETWEEN ? AND ? ORDER BY id",
            (uid, *_span(since_ms, until_ms)),
        ).fetchall()
        out, seen = [], set()
        for row_id, blob in rows:
            value = orjson.loads(blob)
            cause = value.get("cause") or {}
            key = (value["version"], cause.get("topic"), cause.get("partition"), cause.get("offset"))
            if key not in seen:
                seen.add(key)
                out.append(StoredVersion(*_position(row_id), value))
        return out

    def journal(
        self, uid: str, *, until: tuple[int, int] | None = None, limit: int | None = None
    ) -> list[StoredEntry]:
        last = _row_id(*until) if until is not None else _EVER[1]
        rows = self.db.execute(
            "SELECT id, value FROM journal WHERE uid = ? AND id <= ? ORDER BY id LIMIT ?",
            (uid, last, -1 if limit is None else limit),
        ).fetchall()
        out, seen = [], set()
        for row_id, blob in rows:
            entry = StoredEntry(*_position(row_id), uid, orjson.loads(blob))
            if entry.input not in seen:
                seen.add(entry.input)
                out.append(entry)
        return out

    def scan(
        self, topic: str, *, uid: str = "", since_ms: int | None = None, until_ms: int | None = None
    ) -> Iterator[bytes]:
        table = _TABLES[Topic(topic)]
        where, params = "ts_ms BETWEEN ? AND ?", list[Any](_span(since_ms, until_ms))
        if uid:
            where, params = f"uid = ? AND {where}", [uid, *params]
        for (blob,) in self.db.execute(f"SELECT value FROM {table} WHERE {where} ORDER BY id", params):
            yield bytes(blob)

    def count(self, topic: str) -> int:
        return int(self.db.execute(f"SELECT count(*) FROM {_TABLES[Topic(topic)]}").fetchone()[0])

    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.path.parent.glob(self.path.name + "*") if p.is_file())

    def close(self) -> None:
        self.db.close()


def _event_uid(event: dict[str, Any]) -> str:
    """A journal entry's pod UID from its event, for entries that reach the index without a key."""
    if isinstance(event.get("uid"), str):
        return str(event["uid"])
    return str(((event.get("pod") or {}).get("metadata") or {}).get("uid") or "")
