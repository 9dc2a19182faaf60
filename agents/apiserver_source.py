"""The apiserver pod source: list and watch the pods bound to this node.

The watch runs in a daemon thread (the client is blocking) and hands events to the event loop;
each change becomes one PodUpdate on pod-updates. Walking-skeleton subset of spec R1.5-R1.8:
the full podStorage merge, sources-ready and 410 relists arrive with the node-agents issue.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from podledger.agents.kube import Kube
from podledger.schemas.models import PodUpdate

log = logging.getLogger("podledger.source.api")
JSONDict = dict[str, Any]
Publish = Callable[[PodUpdate], Awaitable[None]]

# Annotations the kubelet treats as local, ignored when comparing pods (spec R1.2).
LOCAL_ANNOTATIONS = frozenset(
    {"kubernetes.io/config.source", "kubernetes.io/config.mirror", "kubernetes.io/config.seen"}
)


def _comparable(pod: JSONDict) -> tuple[Any, ...]:
    meta = pod.get("metadata") or {}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in LOCAL_ANNOTATIONS}
    return (
        pod.get("spec"),
        meta.get("labels") or {},
        annotations,
        meta.get("deletionTimestamp"),
        meta.get("deletionGracePeriodSeconds"),
    )


def classify_change(old: JSONDict | None, new: JSONDict) -> str | None:
    """The op for a pod seen again (spec R1.7): ADD, DELETE, UPDATE, RECONCILE or nothing."""
    if old is None:
        return "ADD"
    if _comparable(old) != _comparable(new):
        return "DELETE" if (new.get("metadata") or {}).get("deletionTimestamp") else "UPDATE"
    if old.get("status") != new.get("status"):
        return "RECONCILE"
    return None


class ApiserverSource:
    def __init__(self, kube: Kube, node: str, publish: Publish) -> None:
        self.kube = kube
        self.node = node
        self.publish = publish
        self.known: dict[str, JSONDict] = {}
        self.selector = f"spec.nodeName={node}"

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, JSONDict]] = asyncio.Queue()
        stop = threading.Event()
        thread = threading.Thread(
            target=self._watch_forever, args=(loop, queue, stop), name="apiserver-source", daemon=True
        )
        thread.start()
        try:
            while True:
                kind, pod = await queue.get()
                await self._handle(kind, pod)
        finally:
            stop.set()

    async def _handle(self, kind: str, pod: JSONDict) -> None:
        if kind == "RELISTED":  # pods we knew that the new list lacks were deleted meanwhile
            for uid in set(self.known) - set(pod["uids"]):
                await self._send("REMOVE", self.known.pop(uid))
            return
        uid = pod["metadata"]["uid"]
        if kind == "DELETED":
            if self.known.pop(uid, None) is not None:
                await self._send("REMOVE", pod)
            return
        op = classify_change(self.known.get(uid), pod)
        self.known[uid] = pod
        if op is not None:
            await self._send(op, pod)

    async def _send(self, op: str, pod: JSONDict) -> None:
        pod.setdefault("metadata", {}).setdefault("namespace", "default")
        await self.publish(
            PodUpdate(op=op, source="api", node=self.node, pod=pod, ts_ms=int(time.time() * 1000))
        )

    def _watch_forever(
        self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[Any], stop: threading.Event
    ) -> None:
        def put(kind: str, pod: JSONDict) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, (kind, pod))

        self.kube.list_and_watch_pods(put, stop, field_selector=self.selector)
