"""The consumer client: list the pods of pod-status, then follow their changes, resumable from a
token (docs/consuming.md).

    async for change in watch_pods(settings, namespace="default", labels="app=web"):
        print(change.type, change.namespace, change.name, change.status and change.status.version)

    t_ms = await watermark(settings)  # every input stamped at or before t_ms has been applied

Pure parts: `position` (tokens), `select` (selectors), `pods` (Pod objects, the view of a
selector). Edges: `reader` (Kafka), `watch` (the iterator), `watermark` (the fold's progress).
"""

from podledger.read.client.pods import ChangeType, PodChange, pod_object
from podledger.read.client.position import InvalidToken, Position, decode_position, encode_position
from podledger.read.client.select import PodFilter, SelectorError
from podledger.read.client.watch import TokenExpired, watch_pods
from podledger.read.client.watermark import partition_watermarks, watermark

__all__ = [
    "ChangeType",
    "InvalidToken",
    "PodChange",
    "PodFilter",
    "Position",
    "SelectorError",
    "TokenExpired",
    "decode_position",
    "encode_position",
    "partition_watermarks",
    "pod_object",
    "watch_pods",
    "watermark",
]
