"""The consumer client: list the pods of pod-status, then follow their changes, resumable from a
token (docs/consuming.md).

    async for change in watch_pods(settings, namespace="default", labels="app=web"):
        print(change.type, change.namespace, change.name, change.status and change.status.version)

Pure parts: `position` (tokens), `select` (selectors), `pods` (Pod objects, the view of a
selector). Edges: `reader` (Kafka), `watch` (the iterator).
"""

from podledger.read.client.pods import ChangeType, PodChange, pod_object
from podledger.read.client.position import InvalidToken, Position, decode_position, encode_position
from podledger.read.client.select import PodFilter, SelectorError
from podledger.read.client.watch import TokenExpired, watch_pods

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
    "pod_object",
    "watch_pods",
]
