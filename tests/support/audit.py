"""An audit index filled without Kafka: ingress folded offline into the records `podledger index`
reads, stored through the index's own insert path; and pods' ingress stories to fill it with.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from podledger.schemas import encode


def audit_records(
    ingress: list[Any], partition: int = 0, rewrite: Callable[[bytes], bytes] | None = None
) -> list[Any]:
    """Fold ingress events (podledger.workload.IngressEvent) offline: the journal and history
    records (podledger.read.index.RawRecord) the fold makes of them, at the offsets a topic would
    give them, as `podledger index` reads them. `rewrite` changes each value on its way, as a
    hostile or broken producer on those topics could."""
    from podledger.read.index import RawRecord
    from podledger.streams.replay import replay
    from podledger.types import Topic

    records, offsets = [], {Topic.JOURNAL: 0, Topic.POD_STATUS_HISTORY: 0}
    for out in replay([encode(e.value) for e in ingress]):
        if out.topic in offsets:
            value = rewrite(out.wire_value()) if rewrite else out.wire_value()
            records.append(RawRecord(out.topic, partition, offsets[out.topic], out.key.encode(), value))
            offsets[out.topic] += 1
    return records


def fill_audit_index(
    index: Any,
    ingress: list[Any],
    partition: int = 0,
    batch: int = 50,
    rewrite: Callable[[bytes], bytes] | None = None,
) -> int:
    """Store audit_records(ingress, ...) through the index's own insert path, `batch` records at
    a time; returns the versions stored."""
    records = audit_records(ingress, partition, rewrite)
    stored = 0
    for start in range(0, len(records), batch):
        stored += index.add(records[start : start + batch])
    return stored


def pod_stories(start_ms: int, stories: list[tuple[str, str, int]], step_ms: int = 1000) -> list[Any]:
    """Ingress events of pods living podledger.workload's story (start, ready, not ready, crash,
    back-off and restart, again): one (namespace, name, events) each, its events `step_ms` apart
    from `start_ms`, the pods' events interleaved in time order."""
    import random

    from podledger.workload import PodLife

    rng = random.Random(7)
    events = []
    for i, (namespace, name, count) in enumerate(stories):
        life = PodLife(i, f"node-{i % 2}", rng, start_ms)
        life.name = name
        life.pod["metadata"].update(name=name, namespace=namespace, labels={"app": "timeline"})
        events += [life.next_event(start_ms + i * 7 + n * step_ms) for n in range(count)]
    return sorted(events, key=lambda e: e.ts_ms)
