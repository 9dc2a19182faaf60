"""`watch_pods`: list the pods of pod-status, then follow their changes; or resume from a token."""

from __future__ import annotations

from collections.abc import AsyncIterator

from podledger.config import Settings
from podledger.partitioner import partition_for_node
from podledger.read.client.pods import ChangeType, PodChange, Selection
from podledger.read.client.position import (
    ahead_partitions,
    decode_position,
    encode_position,
    expired_reason,
)
from podledger.read.client.reader import MODELS, Cursor, LedgerReader, now_ms
from podledger.read.client.select import PodFilter
from podledger.schemas import models
from podledger.streams.topics import DAY_MS

# pod-status keeps a tombstone this long (streams/topics.py: delete.retention.ms of compacted topics).
TOMBSTONE_RETENTION_MS = DAY_MS


class TokenExpired(Exception):
    """The topics no longer hold what follows the token (or never did): list again, without it.
    The Kubernetes API says 410 Gone here."""


async def watch_pods(
    settings: Settings,
    *,
    namespace: str | None = None,
    node: str | None = None,
    labels: str | None = None,
    fields: str | None = None,
    resume: str | None = None,
    desired: bool = True,
    idle_ms: int = 1000,
) -> AsyncIterator[PodChange]:
    """Every pod of pod-status that matches (LISTED, then one SYNCED), then each change as it
    happens (ADDED, MODIFIED, DELETED). Each change carries the token to resume right after it:
    with `resume`, the list is skipped and the changes after the token follow.

    `labels` and `fields` are Kubernetes selectors (`app=web`, `status.phase=Running`); `node`
    reads only that node's partition. `desired=False` skips pod-updates (a consumer allowed only
    the status topics): the pods then carry no labels or spec, and a label selector matches
    nothing. A broker restart is ridden through; TokenExpired when the token is too old."""
    pod_filter = PodFilter.parse(namespace, node, labels, fields)
    partitions = None if node is None else [partition_for_node(node, settings.partitions)]
    reader = LedgerReader(settings, partitions, decoding=MODELS, desired=desired)
    await reader.start(wait_s=settings.start_wait_s)
    try:
        selection = Selection(pod_filter, resumed=resume is not None)
        if resume is None:
            latest: dict[str, models.VersionedPodStatus] = {}
            async for batch in reader.load():
                for record in batch:
                    if record.status is None:
                        latest.pop(record.uid, None)
                    else:
                        latest[record.uid] = record.status
            token = encode_position(reader.position())
            for uid, vs in latest.items():
                listed = selection.listed(uid, vs, reader.desired.get(uid), token)
                if listed is not None:
                    yield listed
            del latest
            yield PodChange(ChangeType.SYNCED, "", token)
        else:
            position = decode_position(resume)
            if position.partitions != settings.partitions:
                raise TokenExpired(
                    f"the token is for {position.partitions} partitions, not {settings.partitions}"
                )
            reason = expired_reason(position, await reader.log_starts(), now_ms(), TOMBSTONE_RETENTION_MS)
            ahead = ahead_partitions(position, await reader.end_offsets())
            if reason is None and ahead:
                reason = f"the token is past the end of pod-status partitions {ahead}: other topics?"
            if reason is not None:
                raise TokenExpired(reason)
            reader.seek(position)
        async for batch in reader.follow(idle_ms):
            cursor = Cursor(reader)
            for record in batch:
                token = encode_position(cursor.after(record))
                change = selection.changed(record.uid, record.status, reader.desired.get(record.uid), token)
                if change is not None:
                    yield change
    finally:
        await reader.stop()
