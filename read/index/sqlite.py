"""The embedded audit index: one SQLite file (stdlib sqlite3), no server.

The file's layout is in schema.py, the write path in writes.py; this is the AuditIndex over
them, and its reads. Values are stored compressed with a zstd dictionary trained on the table's
own values (codec.py): about a tenth of their size, given back as the exact bytes read.

Copies of one record on the topic (a producer resending after a lost acknowledgement) are all
stored and dropped when read: a version by (version, cause), a journal entry by its input's
coordinates; the first copy wins. A stored value that is no JSON to the reader (bytes a hostile
producer shaped to pass the index's filing check) is dropped when read too.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import orjson

from podledger.read.index import codec
from podledger.read.index.base import INDEXED_TOPICS, PodIdentity, RawRecord, StoredEntry, StoredVersion
from podledger.read.index.schema import (
    EVER,
    TABLES,
    IndexMismatch,
    check_layout,
    connect,
    position,
    row_id,
    span,
)
from podledger.read.index.writes import Writer
from podledger.types import Topic

__all__ = ["IndexMismatch", "SqliteIndex"]

log = logging.getLogger(__name__)

_IDENTITY = "SELECT uid, namespace, name, node, first_ts_ms, last_ts_ms FROM pods"


class SqliteIndex:
    """AuditIndex over one SQLite file."""

    def __init__(self, path: str | Path, *, read_only: bool = False, topics: str = "") -> None:
        """Open (or create) the index at `path`. `topics` names what it indexes (broker and
        topic prefix); a file made for other topics is refused rather than mixed. A file of the
        first layout (values raw, by UID) is rewritten in this one when opened for writing."""
        self.path = Path(path)
        self.db = connect(self.path, read_only=read_only)
        self.codec = codec.Codec()
        self._writer = Writer(self.db, self.codec, self._load_codecs)
        check_layout(self.db, self.path, topics, read_only=read_only, upgrade=self._upgrade_v1)
        self._load_codecs()

    def _upgrade_v1(self, schema: str) -> None:
        from podledger.read.index.upgrade import upgrade_v1

        upgrade_v1(self, schema)

    def _load_codecs(self) -> None:
        for codec_id, table, rows, serves, dictionary in self.db.execute(
            "SELECT id, tbl, rows, serves, dictionary FROM codecs ORDER BY id"
        ):
            if not self.codec.known(codec_id):
                self.codec.load(codec_id, bytes(dictionary))
            self._writer.current[table] = (codec_id, rows, serves)

    def _loads(self, codec_id: int, stored: bytes) -> Any:
        """A stored value decoded, or None when the reader cannot (see the module's doc)."""
        try:
            return orjson.loads(self._value(codec_id, stored))
        except orjson.JSONDecodeError:
            log.debug("a stored value is no JSON to the reader; dropped")
            return None

    def _value(self, codec_id: int, stored: bytes) -> bytes:
        if not self.codec.known(codec_id):  # another writer trained it after this one opened
            self._load_codecs()
        return self.codec.decode(codec_id, stored)

    # ------------------------------------------------------------------ writing

    def add(self, records: Iterable[RawRecord]) -> int:
        return self._writer.add(records)

    def catching_up(self, records: int) -> AbstractContextManager[None]:
        return self._writer.catching_up(records)

    # ------------------------------------------------------------------ reading

    def offsets(self) -> dict[tuple[str, int], int]:
        rows = self.db.execute("SELECT topic, partition, next FROM offsets").fetchall()
        return {(t, p): n for t, p, n in rows if t in INDEXED_TOPICS}

    def identities(self, *, uid: str = "", namespace: str = "", name: str = "") -> list[PodIdentity]:
        if uid:
            rows = self.db.execute(f"{_IDENTITY} WHERE uid = ?", (uid,)).fetchall()
        else:
            rows = self.db.execute(
                f"{_IDENTITY} WHERE namespace = ? AND name = ?", (namespace, name)
            ).fetchall()
        return sorted((PodIdentity(*row) for row in rows), key=lambda p: (p.first_ts_ms, p.uid))

    def namespaces(self) -> dict[str, int]:
        rows = self.db.execute("SELECT namespace, count(*) FROM pods GROUP BY namespace").fetchall()
        return {str(ns): int(n) for ns, n in rows}

    def pods(self, *, namespace: str = "", contains: str = "", limit: int = 200) -> list[PodIdentity]:
        where, params = [], []
        if namespace:
            where.append("namespace = ?")
            params.append(namespace)
        if needle := contains.strip().lower():  # instr, not LIKE: a % or _ in the text is meant literally
            where.append("(instr(lower(name), ?) > 0 OR instr(lower(uid), ?) > 0)")
            params += [needle, needle]
        condition = f" WHERE {' AND '.join(where)}" if where else ""
        sql = f"{_IDENTITY}{condition} ORDER BY last_ts_ms DESC LIMIT ?"
        return [PodIdentity(*row) for row in self.db.execute(sql, (*params, limit)).fetchall()]

    def _pod(self, uid: str) -> int:
        row = self.db.execute("SELECT id FROM pod_ids WHERE uid = ?", (uid,)).fetchone()
        return -1 if row is None else int(row[0])

    def versions(
        self, uid: str, *, since_ms: int | None = None, until_ms: int | None = None
    ) -> list[StoredVersion]:
        rows = self.db.execute(
            "SELECT id, codec, value FROM versions WHERE pod = ? AND ts_ms BETWEEN ? AND ? ORDER BY id",
            (self._pod(uid), *span(since_ms, until_ms)),
        ).fetchall()
        out, seen = [], set()
        for row, codec_id, blob in rows:
            value = self._loads(codec_id, blob)
            if type(value) is not dict:
                continue
            cause = value.get("cause") or {}
            key = (value["version"], cause.get("topic"), cause.get("partition"), cause.get("offset"))
            if key not in seen:
                seen.add(key)
                out.append(StoredVersion(*position(row), value))
        return out

    def journal(
        self, uid: str, *, until: tuple[int, int] | None = None, limit: int | None = None
    ) -> list[StoredEntry]:
        last = row_id(*until) if until is not None else EVER[1]
        rows = self.db.execute(
            "SELECT id, codec, value FROM journal WHERE pod = ? AND id <= ? ORDER BY id LIMIT ?",
            (self._pod(uid), last, -1 if limit is None else limit),
        ).fetchall()
        out, seen = [], set()
        for row, codec_id, blob in rows:
            value = self._loads(codec_id, blob)
            if type(value) is not dict:
                continue
            entry = StoredEntry(*position(row), uid, value)
            if entry.input not in seen:
                seen.add(entry.input)
                out.append(entry)
        return out

    def scan(
        self, topic: str, *, uid: str = "", since_ms: int | None = None, until_ms: int | None = None
    ) -> Iterator[bytes]:
        table = TABLES[Topic(topic)]
        where, params = "ts_ms BETWEEN ? AND ?", list[Any](span(since_ms, until_ms))
        if uid:
            where, params = f"pod = ? AND {where}", [self._pod(uid), *params]
        query = f"SELECT codec, value FROM {table} WHERE {where} ORDER BY id"
        for codec_id, blob in self.db.execute(query, params):
            yield self._value(codec_id, blob)

    def count(self, topic: str) -> int:
        return int(self.db.execute(f"SELECT count(*) FROM {TABLES[Topic(topic)]}").fetchone()[0])

    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.path.parent.glob(self.path.name + "*") if p.is_file())

    def close(self) -> None:
        self.db.close()
