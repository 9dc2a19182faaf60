"""The apiserver pod source: list and watch the pods bound to this node (config/apiserver.go).

The watch runs in a daemon thread (the client is blocking) and hands events to the event loop.
The kubelet's podStorage (agents/sources/pod_config.py) turns each new list into incremental ops
(ADD, UPDATE, DELETE, REMOVE, RECONCILE), published one pod per message on pod-updates.

Nothing ends the source but cancellation: the watch restarts after any failure (agents/pod_watch.py),
an event it cannot handle is logged and skipped, and `health` tells the node agent's /healthz whether the
watch is up.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

from podledger.agents.kube import Kube
from podledger.agents.pod_watch import list_and_watch_pods
from podledger.agents.sink.decisions import is_mirror_pod
from podledger.agents.sources.pod_config import PodStorage
from podledger.agents.sources.publish import publish_merge
from podledger.agents.watch_policy import WATCH_TIMEOUT_S, WatchHealth
from podledger.types import JSONDict, PublishUpdate

log = logging.getLogger(__name__)


class ApiserverSource:
    name = "api"  # the pod-updates source tag

    def __init__(
        self,
        kube: Kube,
        node: str,
        publish: PublishUpdate,
        storage: PodStorage | None = None,
        on_mirror: Callable[[str, JSONDict], None] | None = None,
        *,
        watch_timeout_s: int = WATCH_TIMEOUT_S,
    ) -> None:
        self.kube = kube
        # Each watch asks the server for watch_timeout_s to twice that; the client read timeout follows.
        self.watch_timeout_s = watch_timeout_s
        self.health = WatchHealth()
        # Mirror pods are the apiserver's view of this node's static pods: never run, only reported.
        self.on_mirror = on_mirror
        self.mirrors: dict[str, JSONDict] = {}
        self.node = node
        self.publish = publish
        self.current: dict[str, JSONDict] = {}  # the apiserver's pods for this node, by UID
        self.storage = storage or PodStorage()
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
                try:
                    await self._handle(kind, pod)
                except Exception:  # one bad event must not end the source
                    log.exception("apiserver source: skipping a %s event it could not handle", kind)
        finally:
            stop.set()

    def healthy(self, now: float, down_after_s: float) -> tuple[bool, str]:
        """Unhealthy once the watch has been down (or not yet listed) for more than `down_after_s`."""
        return self.health.healthy(now, down_after_s)

    async def _handle(self, kind: str, pod: JSONDict) -> None:
        """Every change of the apiserver's list is a SET of the whole list (config/apiserver.go),
        which the kubelet's podStorage turns into the incremental ops published on pod-updates."""
        if kind == "RELISTED":  # pods missing from a new list were deleted while nobody watched
            alive = set(pod["uids"])
            self.current = {uid: p for uid, p in self.current.items() if uid in alive}
            for uid in [uid for uid in self.mirrors if uid not in alive]:
                self._mirror("DELETED", self.mirrors[uid])
        elif is_mirror_pod(pod):
            self._mirror(kind, pod)
            return
        elif kind == "LISTED":
            # Part of a (re)list: merged once the listing is complete (RELISTED), so a half-read list
            # never looks like pods were removed.
            self.current[pod["metadata"]["uid"]] = pod
            return
        elif kind == "DELETED":
            self.current.pop(pod["metadata"]["uid"], None)
        else:
            self.current[pod["metadata"]["uid"]] = pod
        await publish_merge(self.storage, self.name, list(self.current.values()), self.node, self.publish)

    def _mirror(self, kind: str, pod: JSONDict) -> None:
        if kind == "DELETED":
            self.mirrors.pop(pod["metadata"]["uid"], None)
        else:
            self.mirrors[pod["metadata"]["uid"]] = pod
        if self.on_mirror is not None:
            self.on_mirror(kind, pod)

    def _watch_forever(
        self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[Any], stop: threading.Event
    ) -> None:
        def put(kind: str, pod: JSONDict) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, (kind, pod))

        list_and_watch_pods(
            self.kube,
            put,
            stop,
            field_selector=self.selector,
            watch_timeout_s=self.watch_timeout_s,
            health=self.health,
        )
