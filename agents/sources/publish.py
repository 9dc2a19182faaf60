"""What every pod source shares: a snapshot of a source's pods goes through the kubelet's
podStorage merge, and each resulting op is published on pod-updates, one pod per message."""

from __future__ import annotations

import logging
import time

from podledger.agents.sources.pod_config import PodStorage
from podledger.logs import pod_logger
from podledger.schemas.models import PodUpdate
from podledger.streams.status import rfc3339
from podledger.types import JSONDict, PublishUpdate

log = logging.getLogger(__name__)


async def publish_merge(
    storage: PodStorage, source: str, pods: list[JSONDict], node: str, publish: PublishUpdate
) -> None:
    """Merge one SET of a source and publish the resulting ops, one pod per message."""
    for update in storage.merge(source, "SET", pods, rfc3339(time.time())):
        for pod in update.pods:  # the empty ADD (the source is ready) carries no pod
            await publish(
                PodUpdate(op=update.op, source=source, node=node, pod=pod, ts_ms=int(time.time() * 1000))
            )
    for rejected in storage.rejected:
        meta = rejected.get("metadata") or {}
        pod_logger(log, meta.get("namespace"), meta.get("name"), meta.get("uid")).warning(
            "%s source: dropped, its name repeats another pod's", source
        )
