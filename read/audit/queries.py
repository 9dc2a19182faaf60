"""The audit queries: a pod's history, why a version is what it is, and exports.

Each function takes an AuditIndex and returns plain JSON-able data (dicts, lists, strings,
numbers), the same for the command line and for a web page. Nothing here reads Kafka or a file
itself; the index does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from podledger.read.audit.diff import diff
from podledger.read.audit.parse import PodRef, format_time
from podledger.read.audit.rules import Step, refold
from podledger.read.audit.seed import record_before
from podledger.read.audit.summary import event_line, version_row
from podledger.read.index.base import AuditIndex, PodIdentity, StoredEntry, StoredVersion
from podledger.streams.fold import DEFAULT_HOLD, HoldLimits
from podledger.types import PodOp, Topic


class NotFound(LookupError):
    """The index knows no such pod, version or moment (the message says which)."""


def resolve(index: AuditIndex, ref: PodRef) -> list[PodIdentity]:
    """The pods a reference names, oldest first: the UID's, else every UID that carried the name."""
    found = index.identities(uid=ref.uid) if ref.uid else []
    if not found and ref.name:
        found = index.identities(namespace=ref.namespace, name=ref.name)
    if not found:
        raise NotFound(f"no pod {ref} in the index")
    return found


def lives(stored: list[StoredVersion]) -> list[list[StoredVersion]]:
    """A UID's versions split into lives: a static pod removed and added again keeps its UID and
    starts over at version 1."""
    out: list[list[StoredVersion]] = []
    for version in stored:
        if not out or version.version <= out[-1][-1].version:
            out.append([])
        out[-1].append(version)
    return out


def _identity(first: StoredVersion) -> dict[str, Any]:
    v = first.value
    return {k: v.get(k, "") for k in ("uid", "namespace", "name", "node")}


def history(
    index: AuditIndex,
    ref: PodRef,
    *,
    since_ms: int | None = None,
    until_ms: int | None = None,
    with_diff: bool = False,
    with_status: bool = False,
    after: tuple[int, int] | None = None,
) -> list[dict[str, Any]]:
    """Every life of the pod, oldest first: {uid, namespace, name, node, versions: [row...]}.
    The lives of one name follow one another in time; a UID can have several (a static pod
    removed and added again).

    A row is summary.version_row plus its position on pod-status-history (`history_at`), the
    changes against the version before (`changes`, with_diff) and the full status (with_status).
    `after` keeps only versions past that history position (for --follow)."""
    out: list[tuple[int, dict[str, Any]]] = []
    for ident in resolve(index, ref):
        for life in lives(index.versions(ident.uid)):
            rows = []
            previous: dict[str, Any] | None = None
            for stored in life:
                status = stored.value.get("status") or {}
                shown = (since_ms is None or stored.ts_ms >= since_ms) and (
                    until_ms is None or stored.ts_ms <= until_ms
                )
                if shown and (after is None or (stored.partition, stored.offset) > after):
                    row = version_row(stored.value)
                    row["history_at"] = [stored.partition, stored.offset]
                    if with_diff:
                        row["changes"] = diff(previous, status)
                    if with_status:
                        row["status"] = status
                    rows.append(row)
                previous = status
            if rows:
                out.append((life[0].ts_ms, {**_identity(life[0]), "versions": rows}))
    return [life for _, life in sorted(out, key=lambda pair: pair[0])]


def _target(
    index: AuditIndex, idents: list[PodIdentity], at_ms: int | None, version: int | None
) -> tuple[list[StoredVersion], int]:
    """The life holding the version asked for, and its index in that life."""
    candidates = [life for ident in idents for life in lives(index.versions(ident.uid))]
    if version is not None:
        newest = max(candidates, key=lambda life: life[-1].ts_ms)
        for i, stored in enumerate(newest):
            if stored.version == version:
                return newest, i
        span = f"{newest[0].version}..{newest[-1].version}"
        raise NotFound(f"pod {newest[0].uid} has no version {version} in the index (it has {span})")
    best: tuple[tuple[int, int, int], list[StoredVersion], int] | None = None
    for life in candidates:
        for i, stored in enumerate(life):
            key = (stored.ts_ms, stored.partition, stored.offset)
            if (at_ms is None or stored.ts_ms <= at_ms) and (best is None or key > best[0]):
                best = (key, life, i)
    if best is None:
        raise NotFound(f"the pod had no status yet at {format_time(at_ms or 0)}")
    return best[1], best[2]


def _input_row(step: Step) -> dict[str, Any]:
    entry = step.entry
    return {
        "time": format_time(int(entry.get("ts_ms") or 0)),
        "ts_ms": entry.get("ts_ms"),
        "journal_at": list(step.position),
        "input": {k: entry.get(k) for k in ("topic", "partition", "offset")},
        "type": entry.get("type", ""),
        "summary": event_line(entry),
        "effect": step.effect,
    }


def _life_start(entries: list[StoredEntry], cause_at: tuple[int, int] | None) -> tuple[int, int] | None:
    """The first journal position of the life whose version was caused at `cause_at`: the entry
    after the last removal of the pod from the config before it, else the pod's first entry."""
    start = None
    for e in entries:
        if cause_at is not None and e.position > cause_at:
            break
        if (
            e.value.get("topic") == Topic.POD_UPDATES
            and (e.value.get("event") or {}).get("op") == PodOp.REMOVE
        ):
            start = None  # the next entry, if any, starts the life
        elif start is None:
            start = e.position
    return start


def _explain(
    entries: list[StoredEntry], start: tuple[int, int], life: list[StoredVersion], i: int, limits: HoldLimits
) -> list[Step]:
    """The entries from `start` re-folded and explained, from the record rebuilt before them
    (seed.py) when that gives the version explained and every other version as the history has
    them, else from the pod's first entry.

    The last of the life's versions before the i-th caused before `start` gives the rebuilt
    record its status."""
    causes = {
        (e.value.get("topic"), e.value.get("partition"), e.value.get("offset")): e.position for e in entries
    }
    last = next(
        (
            v
            for v in reversed(life[:i])
            if causes.get((v.cause.get("topic"), v.cause.get("partition"), v.cause.get("offset")), start)
            < start
        ),
        None,
    )
    before = [e.value for e in entries if e.position < start]
    window = [(e.position, e.value) for e in entries if e.position >= start]
    steps = refold(window, start, limits, record_before(before, last.value if last else None))
    stored = {v.version: v.value.get("status") for v in life}
    produced = [v for s in steps for v in s.versions if v["version"] in stored]
    if any(v["version"] == life[i].version for v in produced) and all(
        v["status"] == stored[v["version"]] for v in produced
    ):
        return steps
    return refold([(e.position, e.value) for e in entries], start, limits)


def why(
    index: AuditIndex,
    ref: PodRef,
    *,
    at_ms: int | None = None,
    version: int | None = None,
    limits: HoldLimits = DEFAULT_HOLD,
) -> dict[str, Any]:
    """The status in force (at `at_ms`, or `version`, or now) and the chain that produced it.

    `chain`: the inputs applied since the previous version, in journal order, each with its
    one-line summary and effect; `rules`: the rules that decided this version; `unchanged_after`:
    the inputs after it that changed nothing, up to the next version; `replayed`: whether folding
    the journal again reproduced this very version (False when the pod's journal is incomplete,
    e.g. older entries expired)."""
    life, i = _target(index, resolve(index, ref), at_ms, version)
    target = life[i]
    previous = life[i - 1] if i > 0 else None
    following = life[i + 1] if i + 1 < len(life) else None
    uid = target.uid

    entries = index.journal(uid)
    by_input: dict[tuple[Any, Any, Any], tuple[int, int]] = {}
    for e in entries:
        by_input.setdefault(e.input, e.position)

    def position(stored: StoredVersion | None) -> tuple[int, int] | None:
        if stored is None:
            return None
        cause = stored.cause
        return by_input.get((cause.get("topic"), cause.get("partition"), cause.get("offset")))

    cause_at, previous_at, next_at = position(target), position(previous), position(following)
    if next_at is not None:
        entries = [e for e in entries if e.position <= next_at]
    if previous_at is not None and previous_at == cause_at:  # one input made both (TerminatePod)
        start: tuple[int, int] | None = cause_at
    elif previous_at is not None:
        start = next((e.position for e in entries if e.position > previous_at), None)
    else:  # the life's first version: from the life's first entry
        start = _life_start(entries, cause_at)
    steps = _explain(entries, start, life, i, limits) if start else []
    chain = [s for s in steps if cause_at is not None and s.position <= cause_at]
    unchanged = [s for s in steps if cause_at is not None and s.position > cause_at and s.position != next_at]
    cause_step = next((s for s in chain if s.position == cause_at), None)
    replayed = cause_step is not None and any(
        v["version"] == target.version and v["status"] == target.value.get("status")
        for v in cause_step.versions
    )
    row = version_row(target.value)
    row["status"] = target.value.get("status") or {}
    notes = []
    if cause_at is None:
        notes.append("the journal entry of this version's cause is not in the index (yet)")
    elif not replayed:
        notes.append(
            "folding this pod's journal again does not reproduce this version (its older journal"
            " entries may have expired): effects below are the re-fold's"
        )
    return {
        **_identity(target),
        "version": row,
        "previous_version": previous.version if previous else None,
        "next_version": following.version if following else None,
        "changes": diff(previous.value.get("status") if previous else None, row["status"]),
        "chain": [_input_row(s) for s in chain],
        "rules": cause_step.rules.get(target.version, []) if cause_step else [],
        "unchanged_after": [_input_row(s) for s in unchanged],
        "replayed": replayed,
        "notes": notes,
    }


def export(
    index: AuditIndex,
    topic: str,
    *,
    ref: PodRef | None = None,
    since_ms: int | None = None,
    until_ms: int | None = None,
) -> Iterator[bytes]:
    """The raw values of `journal` or `pod-status-history` (JSON, one per item) in topic order,
    for a pod or all; `podledger fold` folds an exported journal again."""
    if ref is None:
        yield from index.scan(topic, since_ms=since_ms, until_ms=until_ms)
        return
    for ident in resolve(index, ref):
        yield from index.scan(topic, uid=ident.uid, since_ms=since_ms, until_ms=until_ms)
