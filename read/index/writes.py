"""The index's write path: records in, rows and the offsets past them out, one transaction a batch.

Each value is read once, for the few fields it is filed under (fields.py), compressed with its
table's current dictionary (codec.py) and appended with `executemany`; the batch's pods, their
numbers and the offsets past it go in the same transaction, so a restarted writer resumes exactly
where the file ends. Copies of one record on the topic (a producer resending after a lost
acknowledgement) are all stored; the reads drop them.

A catch-up far behind the topics (`catching_up`) runs without the two pod indexes and builds
them at the end: one sort instead of a page write per pod per batch, whose cost grows with the
file. A writer stopped in between leaves the indexes to the next one that opens the file.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from podledger.read.index import codec, fields, schema
from podledger.read.index.base import RawRecord
from podledger.types import Topic

log = logging.getLogger(__name__)

# A dictionary serves nine times the rows its table had when it was learnt (within these bounds),
# then a new one is learnt from recent values: early ones saw little, later ones follow the data.
SERVES_ROWS = (20_000, 1_000_000)
POD_IDS_CACHED = 500_000
COMPRESS_CHUNK = 2_000  # values compressed at a time, beside the insert of the chunk before
BULK_RECORDS = 200_000  # a catch-up at least this long, and longer than the file, defers the pod indexes
# A pod's name, namespace and node are the first version's; the time span grows with each one.
_NAME_POD = (
    "INSERT INTO pods VALUES (?,?,?,?,?,?) ON CONFLICT(uid) DO UPDATE SET"
    " first_ts_ms = min(first_ts_ms, excluded.first_ts_ms), last_ts_ms = max(last_ts_ms, excluded.last_ts_ms)"
)
# max(): two writers (a running `podledger index` and a refreshing query) never move back.
_ADVANCE = (
    "INSERT INTO offsets VALUES (?,?,?)"
    " ON CONFLICT(topic, partition) DO UPDATE SET next = max(next, excluded.next)"
)

Row = tuple[int, str, int, bytes]  # (row id, pod uid, ts_ms, value as read)

# One compressing thread per process, started on first use, shared by its writers: each waits
# for its own chunks, and only this thread uses the compressors.
_COMPRESSING = ThreadPoolExecutor(1, thread_name_prefix="index-compress")


class Writer:
    """Adds records to an index file (one writing connection)."""

    def __init__(self, db: sqlite3.Connection, values: codec.Codec, load_codecs: Callable[[], None]) -> None:
        self.db = db
        self.codec = values
        self._load_codecs = load_codecs  # re-reads the file's dictionaries into `values`
        # table -> its current codec: (id, rows written with it, rows it serves)
        self.current: dict[str, tuple[int, int, int]] = {}
        self._untried = dict.fromkeys(schema.TABLES.values(), codec.TRAIN_SAMPLES)  # rows since tried
        self._pod_ids: dict[str, int] = {}

    def add(self, records: Iterable[RawRecord]) -> int:
        versions: list[Row] = []
        entries: list[Row] = []
        pods: dict[str, list[Any]] = {}  # uid -> [namespace, name, node, first ts, last ts]
        ends: dict[tuple[str, int], int] = {}
        version_head, entry_head, row_id = fields.version_head, fields.entry_head, schema.row_id
        history, journal = Topic.POD_STATUS_HISTORY, Topic.JOURNAL
        for r in records:  # the index's hot loop: one pass, no more calls than needed
            at = (r.topic, r.partition)
            if r.offset >= ends.get(at, 0):
                ends[at] = r.offset + 1
            if r.topic == history:
                v = version_head(r.value)
                if v is None:
                    continue
                uid, ts = v.uid, v.ts_ms
                versions.append((row_id(r.partition, r.offset), uid, ts, r.value))  # type: ignore[arg-type]
                pod = pods.get(uid)
                if pod is None:
                    pods[uid] = [fields.text(v.namespace), fields.text(v.name), fields.text(v.node), ts, ts]
                elif ts > pod[4]:
                    pod[4] = ts
                elif ts < pod[3]:
                    pod[3] = ts
            elif r.topic == journal:
                e = entry_head(r.value)
                if e is not None:
                    uid = r.key.decode(errors="replace") if r.key else fields.event_uid(e.event)
                    entries.append((row_id(r.partition, r.offset), uid, e.ts_ms, r.value))  # type: ignore[arg-type]
        with self.db:
            ids = self._ids({row[1] for row in versions} | {row[1] for row in entries})
            self._insert({"versions": versions, "journal": entries}, ids)
            self.db.executemany(_NAME_POD, [(uid, *pod) for uid, pod in pods.items()])
            self.db.executemany(_ADVANCE, [(t, p, n) for (t, p), n in ends.items()])
        return len(versions)

    @contextmanager
    def catching_up(self, records: int) -> Iterator[None]:
        """Around adding about `records` records: without the pod indexes when that is far more
        than the file holds, built again at the end (also after an error)."""
        stored = int(self.db.execute("SELECT coalesce(sum(next), 0) FROM offsets").fetchone()[0])
        if records < max(BULK_RECORDS, stored):
            yield
            return
        log.info("catching up %d records: building the pod indexes at the end", records)
        with self.db:
            for name in schema.POD_INDEXES:
                self.db.execute(f"DROP INDEX IF EXISTS {name}")
        try:
            yield
        finally:
            with self.db:
                self.db.executescript(schema.CREATE_POD_INDEXES)

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

    def _insert(self, tables: dict[str, list[Row]], ids: dict[str, int]) -> None:
        """The rows of each table, compressed in chunks on the compressing thread while this
        one inserts the chunk before (zstd and SQLite both run without the GIL)."""
        chunks = []
        for table, rows in tables.items():
            if not rows:
                continue
            codec_id = self._codec_for(table, [row[3] for row in rows])
            encode = self.codec.encoder(codec_id)
            for start in range(0, len(rows), COMPRESS_CHUNK):
                chunk = rows[start : start + COMPRESS_CHUNK]
                packed = _COMPRESSING.submit(_encode_all, encode, [row[3] for row in chunk])
                chunks.append((table, codec_id, chunk, packed))
        for table, codec_id, chunk, packed in chunks:
            self.db.executemany(
                f"INSERT OR IGNORE INTO {table} VALUES (?,?,?,?,?)",
                [
                    (row, ids[uid], ts, codec_id, value)
                    for (row, uid, ts, _), value in zip(chunk, packed.result(), strict=True)
                ],
            )
        for table, rows in tables.items():
            codec_id, written, serves = self.current.get(table, (codec.RAW, 0, 0))
            if rows and codec_id != codec.RAW:
                self.db.execute("UPDATE codecs SET rows = rows + ? WHERE id = ?", (len(rows), codec_id))
                self.current[table] = (codec_id, written + len(rows), serves)

    def _codec_for(self, table: str, values: list[bytes]) -> int:
        """The codec for new rows of `table`: its current dictionary, or a new one learnt from
        these values and the table's latest rows once there are enough of them, or once the
        current one has served its rows."""
        codec_id, written, serves = self.current.get(table, (codec.RAW, 0, 0))
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
        for codec_used, stored in latest:
            if not self.codec.known(codec_used):  # another writer learnt it after this one opened
                self._load_codecs()
            samples.append(self.codec.decode(codec_used, bytes(stored)))
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
        self.current[table] = (new_id, 0, serves)
        return new_id


def _encode_all(encode: Callable[[bytes], bytes], values: list[bytes]) -> list[bytes]:
    return [encode(value) for value in values]
