"""The apiserver pod source: list and watch the pods bound to this node (spec R1.5).

The watch runs in a daemon thread (the client is blocking) and hands events to the event loop.
The kubelet's podStorage (agents/pod_config.py) turns each new list into incremental ops (ADD,
UPDATE, DELETE, REMOVE, RECONCILE), published one pod per message on pod-updates.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from podledger.agents.kube import Kube
from podledger.agents.pod_config import PodStorage
from podledger.schemas.models import PodUpdate

log = logging.getLogger("podledger.source.api")
JSONDict = dict[str, Any]
Publish = Callable[[PodUpdate], Awaitable[None]]


class ApiserverSource:
    def __init__(self, kube: Kube, node: str, publish: Publish) -> None:
        self.kube = kube
        self.node = node
        self.publish = publish
        self.current: dict[str, JSONDict] = {}  # the apiserver's pods for this node, by UID
        self.storage = PodStorage()
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
        """Every change of the apiserver's list is a SET of the whole list (R1.5), which the
        kubelet's podStorage turns into the incremental ops published on pod-updates."""
        if kind == "RELISTED":  # pods missing from a new list were deleted while nobody watched
            alive = set(pod["uids"])
            self.current = {uid: p for uid, p in self.current.items() if uid in alive}
        elif kind == "DELETED":
            self.current.pop(pod["metadata"]["uid"], None)
        else:
            self.current[pod["metadata"]["uid"]] = pod
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        for update in self.storage.merge("api", "SET", list(self.current.values()), now):
            for changed in update.pods:  # the empty ADD (the source is ready) carries no pod
                await self._send(update.op, changed)

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
