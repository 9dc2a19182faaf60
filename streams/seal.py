"""Step 1's end of a fold batch (streams/batch.py has the protocol): its outputs' wire headers,
given once, before the first send, so that resends repeat them."""

from __future__ import annotations

from podledger.schemas import chain, cloud_events
from podledger.streams.batch import Batch
from podledger.types import Topic

_VERSIONS = (Topic.POD_STATUS, Topic.POD_STATUS_HISTORY)
CHAINED = (Topic.JOURNAL, Topic.POD_STATUS_HISTORY)  # the audit trail: hash-chained per partition


def seal(batch: Batch, heads: dict[tuple[str, int], bytes], topic_prefix: str) -> None:
    """Give a batch's outputs their wire headers, in the order they will be published: CloudEvents
    attributes on status versions (schemas/cloud_events.py), and on journal entries and history
    versions the link of their partition's hash chain (schemas/chain.py). `heads` maps (topic,
    partition) to the hash of the partition's last record; it must hold every partition of the
    batch (the worker reads it on restore) and advances here, first past the records the native
    core sealed already (`batch.built`, `batch.heads`)."""
    heads.update(batch.heads)
    events: dict[int, list[tuple[str, bytes]]] = {}  # a version goes to two topics: build once
    for partition, out in [*batch.journal, *batch.outputs]:
        topic, value, headers = out.topic, out.value, out.headers
        if value is not None and topic in _VERSIONS:
            attributes = events.get(id(value))
            if attributes is None:
                attributes = events[id(value)] = cloud_events.headers(value, topic_prefix)
            headers = [*headers, *attributes] if headers else [*attributes]  # a copy: shared
        if topic in CHAINED:
            where = (topic, partition)
            prev = heads.get(where)
            if prev is None:
                raise KeyError(f"no chain head for {topic} partition {partition}: restore it first")
            heads[where], links = chain.link(prev, out.key.encode(), out.wire_value())
            headers = [*headers, *links] if headers else links
        if headers:
            out.headers = headers
