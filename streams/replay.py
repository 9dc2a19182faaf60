"""The offline driver of the fold: JSON lines in, versioned statuses out, no Kafka.

Each input line is either a journal entry (the live fold's record of what it applied, with the
event's topic, partition, offset and time) or a bare ingress value (a pod-updates, pleg,
probe-results or pod-lifecycle event, recognized by its fields; its coordinates are its line).
Over a journal this reproduces the live pipeline's pod-status-history exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from podledger.schemas import DecodeError, from_dict
from podledger.streams.batch import BatchFold, Waiting
from podledger.streams.fold import (
    DEFAULT_HOLD,
    Coordinates,
    HoldLimits,
    Output,
    PodRecord,
    dead_letter,
    expire_held,
)
from podledger.types import JSONDict, Topic

# Fields that tell the ingress topics apart, checked in order: each is required by its topic's schema,
# and none appears in a topic checked after it ("runtime" is optional in pod-lifecycle, so "kind" first).
_INGRESS_MARKERS = (
    ("pod", Topic.POD_UPDATES),
    ("kind", Topic.POD_LIFECYCLE),
    ("probe", Topic.PROBE_RESULTS),
    ("runtime", Topic.PLEG),
)


def infer_topic(value: JSONDict) -> str | None:
    if "event" in value and "topic" in value and "offset" in value:
        return Topic.JOURNAL
    return next((topic for marker, topic in _INGRESS_MARKERS if marker in value), None)


@dataclass
class ReplayStats:
    lines: int = 0
    events: int = 0
    versions: int = 0
    rejected: int = 0
    pods: set[str] = field(default_factory=set)


def parse_line(line_no: int, line: bytes | str) -> tuple[Coordinates, Any] | Output:
    """A line's coordinates and decoded event, or the dead letter explaining why it is none."""
    raw = line.encode() if isinstance(line, str) else line
    at = Coordinates("input", 0, line_no, 0)
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return dead_letter("malformed", f"line {line_no}: not JSON: {exc}", at, None, raw)
    if not isinstance(value, dict):
        return dead_letter("schema", f"line {line_no}: not a JSON object", at, None, raw)
    topic = infer_topic(value)
    if topic is None:
        return dead_letter(
            "schema", f"line {line_no}: neither a journal entry nor an ingress event", at, None, raw
        )
    try:
        if topic == Topic.JOURNAL:
            entry = from_dict(Topic.JOURNAL, value)
            return Coordinates(entry.topic, entry.partition, entry.offset, entry.ts_ms), from_dict(
                entry.topic, entry.event
            )
        event = from_dict(topic, value)
    except DecodeError as exc:
        return dead_letter(exc.reason, f"line {line_no}: {exc}", at, None, raw)
    return Coordinates(topic, 0, line_no, int(event.ts_ms)), event


class Replayer:
    """The offline fold, fed one line at a time (`podledger verify` folds as it reads Kafka).

    Each line is a batch of its own, folded by one BatchFold for the whole run."""

    def __init__(self, limits: HoldLimits = DEFAULT_HOLD, stats: ReplayStats | None = None) -> None:
        self.limits = limits
        self.stats = stats if stats is not None else ReplayStats()
        self.records: dict[bytes, PodRecord] = {}
        self.waiting: Waiting = {}
        self.line_no = 0
        # Every event here is decoded from a JSON line, so its journal entry encodes again.
        self.fold = BatchFold(self.records.get, limits, 1 << 62, {}, encode_journal=False)

    @property
    def clock(self) -> dict[int, int]:
        """Each partition's newest pod-updates event time so far."""
        return self.fold.batch.newest

    def feed(self, line: bytes | str) -> list[Output]:
        """Fold one line as a batch of its own; every output the live fold would publish."""
        stats = self.stats
        stats.lines += 1
        self.line_no += 1
        if not line.strip():
            return []
        parsed = parse_line(self.line_no, line)
        if isinstance(parsed, Output):
            stats.rejected += 1
            return [parsed]
        at, event = parsed
        stats.events += 1
        fold = self.fold
        batch = fold.batch
        fold.add_event(at, event, journal=True)
        if self.waiting or batch.changed:
            fold.expire_held(self.waiting)
        for key, (_, record) in batch.changed.items():
            if record is None:
                self.records.pop(key, None)
            else:
                assert not isinstance(record, bytes)  # only the live fold's native core makes bytes
                self.records[key] = record
                stats.pods.add(key.decode())
        outputs = [out for _, out in batch.journal]
        outputs += [out for _, out in batch.outputs]
        batch.journal.clear()
        batch.outputs.clear()
        batch.changed.clear()
        for out in outputs:
            if out.topic == Topic.POD_STATUS_HISTORY:
                stats.versions += 1
            elif out.topic == Topic.DEAD_LETTER:
                stats.rejected += 1
        return outputs

    def finish(self) -> list[Output]:
        """The input is over: events still waiting for their pod will never see it."""
        outputs: list[Output] = []
        for key in self.waiting:
            record = self.records[key]
            now = max(h[3] for h in record["held"]) + self.limits.max_ms + 1
            outputs += expire_held(record, now, self.limits)[1]
        self.stats.rejected += len(outputs)
        return outputs


def replay(
    lines: Iterable[bytes | str], limits: HoldLimits = DEFAULT_HOLD, stats: ReplayStats | None = None
) -> Iterator[Output]:
    """Fold every line in order, one line a batch; yield every output the live fold would publish."""
    replayer = Replayer(limits, stats)
    for line in lines:
        yield from replayer.feed(line)
    yield from replayer.finish()
