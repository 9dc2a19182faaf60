"""The pods an index knows, by namespace: what the UI's pod list and namespace view start from.

The AuditIndex protocol finds pods by UID or by namespace/name, not by namespace alone; the
SQLite index keeps one row per UID in its `pods` table, which this reads directly. Another index
implementation is listed through the protocol's scan of pod-status-history (slower, same answer).
"""

from __future__ import annotations

import sqlite3
from typing import Any

import orjson

from podledger.read.index.base import AuditIndex, PodIdentity
from podledger.types import Topic

_SELECT = "SELECT uid, namespace, name, node, first_ts_ms, last_ts_ms FROM pods"


def _scanned(index: AuditIndex) -> list[PodIdentity]:
    """Every pod, from a scan of the history (for an index that is not the SQLite one)."""
    pods: dict[str, list[Any]] = {}
    for raw in index.scan(Topic.POD_STATUS_HISTORY):
        value = orjson.loads(raw)
        ts = int(value["ts_ms"])
        pod = pods.setdefault(
            value["uid"],
            [value["uid"], *(str(value.get(k) or "") for k in ("namespace", "name", "node")), ts, ts],
        )
        pod[4], pod[5] = min(pod[4], ts), max(pod[5], ts)
    return [PodIdentity(*pod) for pod in pods.values()]


def namespaces(index: AuditIndex) -> list[dict[str, Any]]:
    """Every namespace with the number of pods (UIDs) the index has in it, by name."""
    counts: dict[str, int] = {}
    db = getattr(index, "db", None)
    if isinstance(db, sqlite3.Connection):
        rows = db.execute("SELECT namespace, count(*) FROM pods GROUP BY namespace").fetchall()
        counts = {str(ns): int(n) for ns, n in rows}
    else:
        for pod in _scanned(index):
            counts[pod.namespace] = counts.get(pod.namespace, 0) + 1
    return [{"namespace": ns, "pods": n} for ns, n in sorted(counts.items())]


def pods(
    index: AuditIndex, *, namespace: str = "", contains: str = "", limit: int = 200
) -> list[PodIdentity]:
    """The pods of a namespace (every namespace when empty) whose name or UID contains `contains`
    (any case), most recently seen first, at most `limit`."""
    db = getattr(index, "db", None)
    needle = contains.strip().lower()
    if isinstance(db, sqlite3.Connection):
        where, params = [], []
        if namespace:
            where.append("namespace = ?")
            params.append(namespace)
        if needle:  # instr, not LIKE: a % or _ in the search text is meant literally
            where.append("(instr(lower(name), ?) > 0 OR instr(lower(uid), ?) > 0)")
            params += [needle, needle]
        sql = (
            _SELECT + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY last_ts_ms DESC LIMIT ?"
        )
        return [PodIdentity(*row) for row in db.execute(sql, (*params, limit)).fetchall()]
    found = [
        p
        for p in _scanned(index)
        if (not namespace or p.namespace == namespace)
        and (not needle or needle in p.name.lower() or needle in p.uid.lower())
    ]
    return sorted(found, key=lambda p: -p.last_ts_ms)[:limit]
