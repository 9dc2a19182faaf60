"""The index file's layout: its tables, how a row is keyed, opening a file and checking it.

A record's row id is its Kafka position (partition << 40 | offset), so a record stored twice
(two writers racing) is ignored, and rows are appended in topic order per partition, which keeps
inserts cheap. Each row names its pod by a small number (`pod_ids`); the one secondary index per
table is by that number (`POD_INDEXES`), and a writer far behind the topics drops those two while
it catches up and builds them again at the end (writes.py). `pods` keeps a pod's name and time
span once per UID. The file is in WAL mode: queries read it while `podledger index` writes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from podledger.types import Topic

SCHEMA_VERSION = "2"
CACHE_KB = 256 * 1024  # the pod indexes' pages stay in memory
CHECKPOINT_PAGES = 10_000  # fewer, larger checkpoints
OFFSET_BITS = 40  # a partition's offsets stay below 2**40; partitions below 2**22
TABLES = {Topic.POD_STATUS_HISTORY: "versions", Topic.JOURNAL: "journal"}
EVER = (-(1 << 62), 1 << 62)

TABLES_DDL = """
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
CREATE TABLE IF NOT EXISTS journal(id INTEGER PRIMARY KEY, pod INTEGER NOT NULL, ts_ms INTEGER NOT NULL,
  codec INTEGER NOT NULL, value BLOB NOT NULL);
"""
POD_INDEXES = {"versions_pod": "versions(pod)", "journal_pod": "journal(pod)"}
CREATE_POD_INDEXES = "".join(f"CREATE INDEX IF NOT EXISTS {n} ON {on};\n" for n, on in POD_INDEXES.items())
SCHEMA = TABLES_DDL + CREATE_POD_INDEXES


class IndexMismatch(Exception):
    """The file indexes other topics than the ones asked for, or has a layout this one cannot read."""


def row_id(partition: int, offset: int) -> int:
    return (partition << OFFSET_BITS) | offset


def position(row: int) -> tuple[int, int]:
    """(partition, offset) of a row id."""
    return row >> OFFSET_BITS, row & ((1 << OFFSET_BITS) - 1)


def span(since_ms: int | None, until_ms: int | None) -> tuple[int, int]:
    """An inclusive time range, open ends made explicit."""
    return (EVER[0] if since_ms is None else since_ms, EVER[1] if until_ms is None else until_ms)


def connect(path: Path, *, read_only: bool) -> sqlite3.Connection:
    """The file opened for reading, or for writing (created if missing, in WAL mode)."""
    if read_only:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path, timeout=30)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")  # in WAL mode: durable at checkpoints, never torn
        db.execute(f"PRAGMA wal_autocheckpoint={CHECKPOINT_PAGES}")
        db.execute("PRAGMA temp_store=MEMORY")  # building a pod index sorts in memory
    db.execute(f"PRAGMA cache_size=-{CACHE_KB}")
    return db


def check_layout(
    db: sqlite3.Connection, path: Path, topics: str, *, read_only: bool, upgrade: Callable[[str], None]
) -> None:
    """Refuse a file made for other topics or by a newer podledger; for writing, make the tables
    (and the pod indexes, which a writer that stopped while catching up may have left dropped),
    calling `upgrade(SCHEMA)` first on a file of the first layout."""
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    meta = dict(db.execute("SELECT key, value FROM meta").fetchall()) if "meta" in tables else {}
    if topics and "topics" in meta and meta["topics"] != topics:
        raise IndexMismatch(f"{path} indexes {meta['topics']}, not {topics}")
    schema = meta.get("schema", SCHEMA_VERSION)
    if schema not in ("1", SCHEMA_VERSION):
        raise IndexMismatch(f"{path} has layout {schema}, newer than this podledger reads")
    if read_only:
        if schema != SCHEMA_VERSION:
            raise IndexMismatch(f"{path} has an older layout: run 'podledger index --once' to upgrade it")
        return
    if schema == "1":
        upgrade(SCHEMA)
    with db:
        db.executescript(SCHEMA)
        db.execute("INSERT OR IGNORE INTO meta VALUES ('topics', ?)", (topics,))
        db.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
