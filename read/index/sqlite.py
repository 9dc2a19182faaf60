"""The embedded audit index: one SQLite file (stdlib sqlite3), no server.

A record's row id is its Kafka position (partition << 40 | offset), so a record stored twice
(two writers racing) is ignored, and rows are appended in topic order per partition, which keeps
inserts cheap. Each row names its pod by a small number (`pod_ids`), and the one secondary index
per table is by that number; `pods` keeps a pod's name and time span once per UID. Values are stored
compressed with a zstd dictionary trained on the table's own values (codec.py): about a tenth of
their size. A batch of records and the offsets past it are written in one transaction, so a
restarted builder resumes exactly where the file ends. The file is in WAL mode: queries read it
while `podledger index` writes.

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

from podledger.read.index import codec
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

SCHEMA_VERSION = "2"
CACHE_KB = 256 * 1024
CHECKPOINT_PAGES = 10_000
# A dictionary serves nine times the rows its table had when it was learnt (within these bounds),
# then a new one is learnt from recent values: early ones saw little, later ones follow the data.
SERVES_ROWS = (20_000, 1_000_000)
POD_IDS_CACHED = 500_000
_OFFSET_BITS = 40  # a partition's offsets stay below 2**40; partitions below 2**22
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS offsets(
  topic TEXT NOT NULL, partition INTEGER NOT NULL, next INTEGER NOT NULL, PRIMARY KEY(topic, partition));
CREATE TABLE IF NOT EXISTS pods(
  uid TEXT PRIMARY KEY, namespace TEXT NOT NULL, name TEXT NOT NULL, node TEXT NOT NULL,
  first_ts_ms INTEGER NOT NULL, last_ts_ms INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS pods_name ON pods(namespace, name);
CREATE TABLE IF NOT EXISTS pod_ids(id INTEGER PRIMARY KEY, uid TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS codecs(id INTEGER PRIMARY KEY, tbl TEXT NOT NULL, rows INTEGER NOT NULL,
  serves INTEGER NOT NULL, dictionary BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS versions(id INTEGER PRIMARY KEY, pod INTEGER NOT NULL, ts_ms INTEGER NOT NULL,
  codec INTEGER NOT NULL, value BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS versions_pod ON versions(pod);
CREATE TABLE IF NOT EXISTS journal(id INTEGER PRIMARY KEY, pod INTEGER NOT NULL, ts_ms INTEGER NOT NULL,
  codec INTEGER NOT NULL, value BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS journal_pod ON journal(pod);
"""
# A pod's name, namespace and node are the first version's; the time span grows with each one.
_NAME_POD = (
    "INSERT INTO pods VALUES (?,?,?,?,?,?) ON CONFLICT(uid) DO UPDATE SET"
    " first_ts_ms = min(first_ts_ms, excluded.first_ts_ms), last_ts_ms = max(last_ts_ms, excluded.last_ts_ms)"
)
_TABLES = {Topic.POD_STATUS_HISTORY: "versions", Topic.JOURNAL: "journal"}
_EVER = (-(1 << 62), 1 << 62)

Row = tuple[int, str, int, bytes]  # (row id, pod uid, ts_ms, value as read)


def _span(since_ms: int | None, until_ms: int | None) -> tuple[int, int]:
    return (_EVER[0] if since_ms is None else since_ms, _EVER[1] if until_ms is None else until_ms)


def _row_id(partition: int, offset: int) -> int:
    return (partition << _OFFSET_BITS) | offset


def _position(row_id: int) -> tuple[int, int]:
    return row_id >> _OFFSET_BITS, row_id & ((1 << _OFFSET_BITS) - 1)


class IndexMismatch(Exception):
    """The file indexes other topics than the ones asked for, or has a layout this one cannot read."""


class SqliteIndex:
    """AuditIndex over one SQLite file."""

    def __init__(self, path: str | Path, *, read_only: bool = False, topics: str = "") -> None:
        """Open (or create) the index at `path`. `topics` names what it indexes (broker and
        topic prefix); a file made for other topics is refused rather than mixed. A file of the
        first layout (values raw, by UID) is rewritten in this one when opened for writing."""
        self.path = Path(path)
        if read_only:
            self.db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=30)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(self.path, timeout=30)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute(f"PRAGMA wal_autocheckpoint={CHECKPOINT_PAGES}")  # fewer, larger checkpoints
        self.db.execute(f"PRAGMA cache_size=-{CACHE_KB}")  # the pod indexes' pages stay in memory
        self.codec = codec.Codec()
        # table -> its current codec: (id, rows written with it, rows it serves)
        self._current: dict[str, tuple[int, int, int]] = {}
        self._untried = dict.fromkeys(_TABLES.values(), codec.TRAIN_SAMPLES)  # rows since training was tried
        self._pod_ids: dict[str, int] = {}
        self._check_layout(topics, read_only)
        self._load_codecs()

    def _check_layout(self, topics: str, read_only: bool) -> None:
        tables = {row[0] for row in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        meta = dict(self.db.execute("SELECT key, value FROM meta").fetchall()) if "meta" in tables else {}
        if topics and "topics" in meta and meta["topics"] != topics:
            raise IndexMismatch(f"{self.path} indexes {meta['topics']}, not {topics}")
        schema = meta.get("schema", SCHEMA_VERSION)
        if schema not in ("1", SCHEMA_VERSION):
            raise IndexMismatch(f"{self.path} has layout {schema}, newer than this podledger reads")
        if read_only:
            if schema != SCHEMA_VERSION:
                raise IndexMismatch(
                    f"{self.path} has an older layout: run 'podledger index --once' to upgrade it"
                )
            return
        if schema == "1":
            from podledger.read.index.upgrade import upgrade_v1

            upgrade_v1(self, _SCHEMA)
        with self.db:
            self.db.executescript(_SCHEMA)
            self.db.execute("INSERT OR IGNORE INTO meta VALUES ('topics', ?)", (topics,))
            self.db.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))

    def _load_codecs(self) -> None:
        for codec_id, table, rows, serves, dictionary in self.db.execute(
            "SELECT id, tbl, rows, serves, dictionary FROM codecs ORDER BY id"
        ):
            if not self.codec.known(codec_id):
                self.codec.load(codec_id, bytes(dictionary))
            self._current[table] = (codec_id, rows, serves)

    def _value(self, codec_id: int, stored: bytes) -> bytes:
        if not self.codec.known(codec_id):  # another writer trained it after this one opened
            self._load_codecs()
        return self.codec.decode(codec_id, stored)

    # ------------------------------------------------------------------ writing

    def add(self, records: Iterable[RawRecord]) -> int:
        versions: list[Row] = []
        entries: list[Row] = []
        pods: dict[str, list[Any]] = {}  # uid -> [namespace, name, node, first ts, last ts]
        ends: dict[tuple[str, int], int] = {}
        for r in records:  # the index's hot loop: one pass, no more calls than needed
            at = (r.topic, r.partition)
            if r.offset >= ends.get(at, 0):
                ends[at] = r.offset + 1
            if r.topic == Topic.POD_STATUS_HISTORY:
                v = version_fields(r.value)
                if v is None:
                    continue
                uid, ts = v["uid"], v["ts_ms"]
                versions.append((_row_id(r.partition, r.offset), uid, ts, r.value))  # type: ignore[arg-type]
                pod = pods.get(uid)
                if pod is None:
                    pods[uid] = [
                        str(v.get("namespace") or ""),
                        str(v.get("name") or ""),
                        str(v.get("node") or ""),
                        ts,
                        ts,
                    ]
                elif ts > pod[4]:
                    pod[4] = ts
                elif ts < pod[3]:
                    pod[3] = ts
            elif r.topic == Topic.JOURNAL:
                e = entry_fields(r.value)
                if e is not None:
                    uid = r.key.decode(errors="replace") if r.key else _event_uid(e["event"])
                    entries.append((_row_id(r.partition, r.offset), uid, e["ts_ms"], r.value))  # type: ignore[arg-type]
        with self.db:
            ids = self._ids({row[1] for row in versions} | {row[1] for row in entries})
            self._insert("versions", versions, ids)
            self._insert("journal", entries, ids)
            self.db.executemany(_NAME_POD, [(uid, *pod) for uid, pod in pods.items()])
            # max(): two writers (a running `podledger index` and a refreshing query) never move back.
            self.db.executemany(
                "INSERT INTO offsets VALUES (?,?,?) ON CONFLICT(topic, partition)"
                " DO UPDATE SET next = max(next, excluded.next)",
                [(t, p, n) for (t, p), n in ends.items()],
            )
        return len(versions)

    def _ids(self, uids: set[str]) -> dict[str, int]:
        """The pod numbers of `uids`, numbering the new ones (inside the caller's transaction)."""
        if len(self._pod_ids) > POD_IDS_CACHED:
            self._pod_ids.clear()
        missing = [uid for uid in uids if uid not in self._pod_ids]
        if missing:
            self.db.executemany("INSERT OR IGNORE INTO pod_ids(uid) VALUES (?)", [(uid,) for uid in missing])
            for start in range(0, len(missing), 500):
                chunk = missing[start : start + 500]
                marks = ",".join("?" * len(chunk))
                self._pod_ids.update(
                    self.db.execute(f"SELECT uid, id FROM pod_ids WHERE uid IN ({marks})", chunk)
                )
        return self._pod_ids

    def _insert(self, table: str, rows: list[Row], ids: dict[str, int]) -> None:
        if not rows:
            return
        codec_id = self._codec_for(table, [row[3] for row in rows])
        encode = self.codec.encoder(codec_id)
        self.db.executemany(
            f"INSERT OR IGNORE INTO {table} VALUES (?,?,?,?,?)",
            [(row_id, ids[uid], ts, codec_id, encode(value)) for row_id, uid, ts, value in rows],
        )
        if codec_id != codec.RAW:
            self.db.execute("UPDATE codecs SET rows = rows + ? WHERE id = ?", (len(rows), codec_id))
            _, written, serves = self._current[table]
            self._current[table] = (codec_id, written + len(rows), serves)

    def _codec_for(self, table: str, values: list[bytes]) -> int:
        """The codec for new rows of `table`: its current dictionary, or a new one learnt from
        these values and the table's latest rows once there are enough of them, or once the
        current one has served its rows."""
        codec_id, written, serves = self._current.get(table, (codec.RAW, 0, 0))
        if codec_id != codec.RAW and written < serves:
            return codec_id
        self._untried[table] += len(values)
        if self._untried[table] < codec.TRAIN_SAMPLES:
            return codec_id
        self._untried[table] = 0
        samples = values[-codec.TRAIN_SAMPLES :]
        latest = self.db.execute(
            f"SELECT codec, value FROM {table} ORDER BY id DESC LIMIT ?",
            (codec.TRAIN_SAMPLES - len(samples),),
        )
        samples += [self._value(c, bytes(v)) for c, v in latest]
        dictionary = codec.train(samples)
        if dictionary is None:
            return codec_id
        rows = int(self.db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]) + len(values)
        serves = min(max(9 * rows, SERVES_ROWS[0]), SERVES_ROWS[1])
        new_id = self.db.execute(
            "INSERT INTO codecs(tbl, rows, serves, dictionary) VALUES (?, 0, ?, ?)",
            (table, serves, dictionary),
        ).lastrowid
        assert new_id is not None
        self.codec.load(new_id, dictionary)
        self._current[table] = (new_id, 0, serves)
        return new_id

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

    def _pod(self, uid: str) -> int:
        row = self.db.execute("SELECT id FROM pod_ids WHERE uid = ?", (uid,)).fetchone()
        return -1 if row is None else int(row[0])

    def versions(
        self, uid: str, *, since_ms: int | None = None, until_ms: int | None = None
    ) -> list[StoredVersion]:
        rows = self.db.execute(
            "SELECT id, codec, value FROM versions WHERE pod = ? AND ts_ms BETWEEN ? AND ? ORDER BY id",
            (self._pod(uid), *_span(since_ms, until_ms)),
        ).fetchall()
        out, seen = [], set()
        for row_id, codec_id, blob in rows:
            value = orjson.loads(self._value(codec_id, blob))
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
            "SELECT id, codec, value FROM journal WHERE pod = ? AND id <= ? ORDER BY id LIMIT ?",
            (self._pod(uid), last, -1 if limit is None else limit),
        ).fetchall()
        out, seen = [], set()
        for row_id, codec_id, blob in rows:
            entry = StoredEntry(*_position(row_id), uid, orjson.loads(self._value(codec_id, blob)))
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
            where, params = f"pod = ? AND {where}", [self._pod(uid), *params]
        query = f"SELECT codec, value FROM {table} WHERE {where} ORDER BY id"
        for codec_id, blob in self.db.execute(query, params):
            yield self._value(codec_id, blob)

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
