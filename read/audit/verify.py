"""`podledger verify`, pure: check the hash chains of journal and pod-status-history, re-fold the
journal, and compare every version on history with what the rules give. No Kafka here: the reader
(podledger/cli/verify.py) feeds each partition's records in offset order.

Per partition the reader feeds pod-status-history first, then the journal read afterwards: the
fold publishes a journal entry before its versions, so every version on the history read has its
entry in the journal read. A version the rules give that history lacks is `missing` only when the
fold had stored its batch (its journal offset is at or below the partition's marker on fold-state,
read before history): the fold writes the marker after the versions were acknowledged. Later ones
may still be on their way, and are `pending`.

What counts:
- `versions`: distinct (uid, version) on history, at or after `since_ms` (their event time);
- `mismatches`: a version whose value (status, cause, flags, rules) differs from the re-fold's,
  one the rules never give, one that cannot be read, or a missing one;
- `broken_links`: records that do not extend their partition's chain (schemas/chain.py);
- `duplicates`: exact re-sends on either chain, and versions republished after a crash (the same
  value under the same (uid, version)); both are benign.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from podledger.schemas.chain import ChainWalk, Verdict
from podledger.streams.fold import DEFAULT_HOLD, HoldLimits
from podledger.streams.replay import Replayer
from podledger.types import JSONDict, Topic

BROKEN = (Verdict.ALTERED, Verdict.BROKEN, Verdict.MALFORMED)
KEPT = 20  # divergences and link problems kept per partition for the report (all are counted)

Headers = Iterable[tuple[str, bytes]]


def digest(value: Any) -> bytes:
    """Equal JSON values give equal digests, whatever their key order."""
    return hashlib.blake2b(orjson.dumps(value, option=orjson.OPT_SORT_KEYS), digest_size=16).digest()


@dataclass(frozen=True, slots=True)
class LinkProblem:
    topic: str
    partition: int
    offset: int
    verdict: Verdict
    detail: str

    def __str__(self) -> str:
        where = f"{self.topic} partition {self.partition} offset {self.offset}"
        return f"{self.verdict} link: {where}: {self.detail}"


@dataclass(slots=True)
class Divergence:
    """A version where history and the rules disagree. `kind`: differs (both have it, with other
    values), unexplained (the rules never give it), unreadable, or missing (history lacks it)."""

    kind: str
    partition: int
    uid: str
    version: int
    offset: int | None = None  # on pod-status-history
    journal_offset: int | None = None  # of the entry whose re-fold gave `rules_value`
    rules_value: JSONDict | None = None
    history_value: JSONDict | None = None  # filled in by the reader for the divergence it prints

    def order(self) -> tuple[int, float, float]:
        inf = float("inf")
        first = self.journal_offset if self.journal_offset is not None else inf
        return (self.partition, first, self.offset if self.offset is not None else inf)


@dataclass(slots=True)
class Counts:
    versions: int = 0
    mismatches: int = 0
    broken_links: int = 0
    duplicates: int = 0
    unchained: int = 0
    pending: int = 0
    unverifiable: int = 0
    journal_entries: int = 0
    history_records: int = 0

    def add(self, other: Counts) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass(slots=True)
class _OnHistory:
    offset: int
    digest: bytes


@dataclass
class PartitionAudit:
    """One partition's audit. `marker`: the fold's journal marker (None: no stored batch);
    `*_from_start`: whether the topic's partition still begins at offset 0 (else older records
    expired: the chain is anchored at the first one read)."""

    partition: int
    since_ms: int = 0
    marker: int | None = None
    journal_from_start: bool = True
    history_from_start: bool = True
    limits: HoldLimits = DEFAULT_HOLD  # the fold's (PODLEDGER_HOLD_MAX_*), as `podledger fold` uses
    counts: Counts = field(default_factory=Counts)
    problems: list[LinkProblem] = field(default_factory=list)
    divergences: list[Divergence] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._history_chain = ChainWalk(self.history_from_start)
        self._journal_chain = ChainWalk(self.journal_from_start)
        self._index: dict[tuple[str, int], list[_OnHistory]] = {}
        self._refold = Replayer(self.limits)
        self._folded_uids: set[str] = set()
        self._floor_ms: int | None = None if not self.history_from_start else 0

    # ------------------------------------------------------------------ history first
    def history(self, offset: int, key: bytes, value: bytes | None, headers: Headers) -> None:
        self.counts.history_records += 1
        self._link(Topic.POD_STATUS_HISTORY, self._history_chain, offset, key, value, headers)
        try:
            obj = orjson.loads(value or b"")
            uid, version, ts_ms = str(obj["uid"]), int(obj["version"]), int(obj["ts_ms"])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            self._diverge(Divergence("unreadable", self.partition, key.decode(errors="replace"), 0, offset))
            return
        if self._floor_ms is None:  # the oldest version still on history: older ones expired
            self._floor_ms = ts_ms
        if ts_ms < self.since_ms:
            return
        seen = self._index.setdefault((uid, version), [])
        mark = digest(obj)
        if any(entry.digest == mark for entry in seen):
            self.counts.duplicates += 1  # re-sent, or republished after a crash: the same value
            return
        if not seen:
            self.counts.versions += 1
        seen.append(_OnHistory(offset, mark))

    # ------------------------------------------------------------------ then the journal
    def journal(self, offset: int, key: bytes, value: bytes | None, headers: Headers) -> None:
        self.counts.journal_entries += 1
        if self._link(Topic.JOURNAL, self._journal_chain, offset, key, value, headers) == Verdict.DUPLICATE:
            return  # the fold would skip it by its input offset: nothing to re-fold
        for out in self._refold.feed(value or b""):
            if out.topic == Topic.POD_STATUS_HISTORY:
                self._compare(offset, orjson.loads(out.wire_value() or b"null"))

    def _compare(self, journal_offset: int, ruled: JSONDict) -> None:
        uid, version = ruled["uid"], ruled["version"]
        self._folded_uids.add(uid)
        if ruled["ts_ms"] < self.since_ms:
            return
        on_history = self._index.pop((uid, version), None)
        if on_history is None:
            expected = self.marker is not None and journal_offset <= self.marker
            if expected and ruled["ts_ms"] >= (self._floor_ms or 0):
                self._diverge(
                    Divergence("missing", self.partition, uid, version, None, journal_offset, ruled)
                )
            else:
                self.counts.pending += 1
            return
        mark = digest(ruled)
        for entry in on_history:
            if entry.digest != mark:
                self._diverge(
                    Divergence("differs", self.partition, uid, version, entry.offset, journal_offset, ruled)
                )

    def finish(self) -> None:
        """After the journal: versions on history the rules never gave."""
        for (uid, version), entries in self._index.items():
            for entry in entries:
                if not self.journal_from_start and uid not in self._folded_uids:
                    self.counts.unverifiable += 1  # the pod's first journal entries expired
                else:
                    self._diverge(Divergence("unexplained", self.partition, uid, version, entry.offset))
        self._index.clear()
        self.divergences.sort(key=Divergence.order)

    # ------------------------------------------------------------------ bookkeeping
    def _link(
        self, topic: str, walk: ChainWalk, offset: int, key: bytes, value: bytes | None, headers: Headers
    ) -> Verdict:
        verdict, detail = walk.check(key, value, headers)
        if verdict in BROKEN:
            self.counts.broken_links += 1
            if len(self.problems) < KEPT:
                self.problems.append(LinkProblem(topic, self.partition, offset, verdict, detail))
        elif verdict == Verdict.UNCHAINED:
            self.counts.unchained += 1
        elif verdict == Verdict.DUPLICATE and topic == Topic.JOURNAL:
            self.counts.duplicates += 1  # history's are counted by value, in history()
        return verdict

    def _diverge(self, divergence: Divergence) -> None:
        self.counts.mismatches += 1
        if len(self.divergences) < KEPT:
            self.divergences.append(divergence)


# ---------------------------------------------------------------------- the report


def differences(left: Any, right: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """(path, left, right) for every leaf where two JSON values differ; lists by index."""
    if isinstance(left, dict) and isinstance(right, dict):
        out: list[tuple[str, Any, Any]] = []
        for name in [*left, *(k for k in right if k not in left)]:
            sub = f"{path}.{name}" if path else str(name)
            out += differences(left.get(name), right.get(name), sub)
        return out
    if isinstance(left, list) and isinstance(right, list) and len(left) == len(right):
        return [
            d
            for i, (a, b) in enumerate(zip(left, right, strict=True))
            for d in differences(a, b, f"{path}[{i}]")
        ]
    return [] if left == right else [(path or "(value)", left, right)]


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def _pod(value: JSONDict | None, uid: str) -> str:
    if not value:
        return uid
    return f"{value.get('namespace', '?')}/{value.get('name', '?')} ({uid})"


def divergence_lines(d: Divergence) -> list[str]:
    """The first divergence, readable: where, which fields differ, both statuses in full."""
    where = f"pod-status-history partition {d.partition}" + (
        f" offset {d.offset}" if d.offset is not None else ""
    )
    head = f"{where}: pod {_pod(d.history_value or d.rules_value, d.uid)} version {d.version}"
    if d.kind == "missing":
        return [
            f"first divergence: {head}: the rules give it (journal offset {d.journal_offset}),"
            " but history does not have it",
            f"  by the rules: status {_json((d.rules_value or {}).get('status'))}",
        ]
    if d.kind == "unreadable":
        return [f"first divergence: {where}: a record that is no status version"]
    if d.kind == "unexplained" or d.rules_value is None:
        status = (d.history_value or {}).get("status")
        return [
            f"first divergence: {head}: on history, but the rules never give this version",
            f"  on history: status {_json(status)}",
        ]
    history, rules = d.history_value or {}, d.rules_value
    lines = [f"first divergence: {head} (re-folded from journal offset {d.journal_offset})"]
    if history.get("rules") != rules.get("rules"):
        lines.append(
            f"  written by rules {history.get('rules')}; this podledger folds with rules {rules.get('rules')}"
        )
    lines.append("  fields that differ (history | rules):")
    lines += [f"    {path}: {_json(a)} | {_json(b)}" for path, a, b in differences(history, rules)]
    lines.append(f"  on history:   status {_json(history.get('status'))}")
    lines.append(f"  by the rules: status {_json(rules.get('status'))}")
    return lines


def short_line(d: Divergence) -> str:
    where = f"partition {d.partition}" + (f" offset {d.offset}" if d.offset is not None else "")
    return f"{d.kind}: pod-status-history {where}: pod {d.uid} version {d.version}"


def summary_line(c: Counts, events_per_s: float) -> str:
    """The machine-readable last line."""
    return (
        f"verify versions={c.versions} mismatches={c.mismatches} broken_links={c.broken_links}"
        f" events_per_s={events_per_s:.0f}"
    )


def detail_line(c: Counts) -> str:
    return (
        f"verify: journal_entries={c.journal_entries} history_records={c.history_records}"
        f" duplicates={c.duplicates} unchained={c.unchained} pending={c.pending}"
        f" unverifiable={c.unverifiable}"
    )
