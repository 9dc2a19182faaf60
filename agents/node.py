"""The node agent: every agent of one node in one process (`podledger node`).

Sources publish pod-updates; the pod workers read pod-updates back from Kafka (the log, not the source,
is what they act on) and drive the runtime; the PLEG relists the runtime and publishes pleg events; the
prober publishes probe results. On start the agent first replays its node's pod-updates and
pod-lifecycle so the workers resume where the previous agent stopped, and seeds the sources' merge
state from the same replay, so pods removed while the agent was down come out as REMOVE ops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

from aiokafka import TopicPartition

from podledger.agents.kube import Kube
from podledger.agents.mirror import MirrorPods
from podledger.agents.pleg import Pleg, RelistTiming
from podledger.agents.prober import CheckOutcome, CheckResult, Prober, run_check
from podledger.agents.restriction import NodeRestriction
from podledger.agents.runtime.base import Runtime
from podledger.agents.runtime.container_gc import ContainerGC
from podledger.agents.sources import PodSource
from podledger.agents.sources.pod_config import PodStorage
from podledger.agents.worker.pod_workers import PodWorkers
from podledger.config import Settings
from podledger.health import Check, HealthServer
from podledger.heap import CollectionSchedule, settle_long_lived_heap
from podledger.kafka import Publisher, new_consumer, read_to_end, started
from podledger.keys import load_node_keys
from podledger.partitioner import partition_for_node
from podledger.schemas import DecodeError, decode, models
from podledger.streams.status import json_copy
from podledger.types import PlegEventType, ProbeType, Topic

__all__ = ["NodeAgent", "build_sources"]

log = logging.getLogger(__name__)


async def _sim_check(probe: Any, container: Any, *, host: str) -> CheckOutcome:
    """Sim containers have no endpoints: every probe succeeds."""
    return CheckOutcome(CheckResult.SUCCESS)


def build_sources(
    settings: Settings,
    storage: PodStorage,
    publish_update: Callable[[models.PodUpdate], Awaitable[None]],
    kube: Kube | None,
    on_mirror: Callable[[str, dict[str, Any]], None] | None = None,
) -> list[PodSource]:
    """The configured pod sources, sharing one podStorage merge as the kubelet's sources do."""
    from podledger.agents.sources.apiserver import ApiserverSource
    from podledger.agents.sources.file_source import FileSource
    from podledger.agents.sources.http_source import HttpSource

    sources: list[PodSource] = []
    if kube is not None and settings.api_source:
        sources.append(ApiserverSource(kube, settings.node, publish_update, storage, on_mirror))
    if settings.manifest_dir:
        sources.append(
            FileSource(
                Path(settings.manifest_dir), settings.node, publish_update, storage, settings.file_check_s
            )
        )
    if settings.manifest_url:
        sources.append(
            HttpSource(settings.manifest_url, settings.node, publish_update, storage, settings.http_check_s)
        )
    return sources


class NodeAgent:
    """Sources, pod workers, PLEG (and prober) of one node, wired through Kafka."""

    def __init__(
        self,
        settings: Settings,
        runtime: Runtime,
        *,
        kube: Kube | None = None,
        stop_pods_on_exit: bool = False,
        on_relist: Callable[[RelistTiming], None] | None = None,
    ) -> None:
        self.settings = settings
        # A node agent normally leaves containers running for its successor to adopt; the demo does not.
        self.stop_pods_on_exit = stop_pods_on_exit
        self.node = settings.node
        self.runtime = runtime
        self.kube = kube
        self.publisher = Publisher(settings)
        self.restriction = NodeRestriction(
            self.node, load_node_keys(settings), kube, self.publisher.signer, self._apply_confirmed
        )
        self.storage = PodStorage()
        self.mirrors = MirrorPods(kube, self.node) if kube is not None else None
        self.prober = Prober(
            self.node,
            publish=self._publish_probe_result,
            on_change=self._on_probe_change,
            check=run_check if runtime.runtime_type != "sim" else _sim_check,
            default_run_as=(settings.runtime_default_uid, settings.runtime_default_gid),
        )
        self.workers = PodWorkers(
            runtime,
            self.node,
            self.publisher.publish,
            prober=self.prober,
            mirrors=self.mirrors,
            sources_ready=self._sources_ready,
            resync_s=settings.pod_resync_s,
        )
        # The collector's passes run between relists, when the event loop has a moment to spare.
        self.collector = CollectionSchedule()
        # Dead containers beyond each name's newest, of pods still running.
        self.container_gc = ContainerGC(runtime, wanted=self._collects_dead_containers)
        self.pleg = Pleg(
            runtime,
            self.node,
            self._publish_pleg,
            period_s=settings.relist_period_s,
            wanted=self.workers.publishes_for,
            on_relist=on_relist,  # observers, e.g. `podledger bench node`
            between_relists=self._between_relists,
        )
        self._pleg_pods: dict[str, None] = {}  # pods named by the current relist's events, in order
        self.sources = build_sources(
            settings,
            self.storage,
            self._publish_update,
            kube,
            on_mirror=self._on_mirror if self.mirrors is not None else None,
        )
        self.partition = partition_for_node(self.node, settings.partitions)
        self.health_server = HealthServer(f"node {self.node}", self._checks())
        self.ready = asyncio.Event()  # set once the log is replayed and every agent runs

    def _apply_confirmed(self, update: models.PodUpdate) -> None:
        self.workers.apply_update(update)

    def _sources_ready(self) -> bool:
        return self.storage.sources_ready({source.name for source in self.sources})

    async def _publish_update(self, update: models.PodUpdate) -> None:
        await self.publisher.publish(Topic.POD_UPDATES, update.uid, update, update.node)

    async def _publish_pleg(self, event: models.PlegEvent) -> asyncio.Future[Any]:
        delivery = await self.publisher.send(Topic.PLEG, event.uid, event, self.node)
        if event.type != PlegEventType.CONTAINER_REMOVED:
            self._pleg_pods[event.uid] = None
        return delivery

    def _collects_dead_containers(self, uid: str) -> bool:
        """Not for pods terminating or terminated: a terminated pod's status stands as its worker's
        last snapshot left it (the fold would fold the removals into it), and its containers go
        with its sandbox."""
        w = self.workers.workers.get(uid)
        return w is not None and not (w.removed or w.terminating or w.terminated)

    def _between_relists(self) -> None:
        """After each relist, once its events are delivered (or have failed): the pods they name are
        looked at now. Their workers' passes then run after the relist, not between its records
        and their acknowledgements; then the collector's pass, while the loop has time to spare."""
        woken, self._pleg_pods = self._pleg_pods, {}
        for uid in woken:
            self.workers.wake(uid)
        self.collector()

    def _on_mirror(self, kind: str, pod: dict[str, Any]) -> None:
        """A mirror pod changed in the apiserver: its static pod's worker checks it (as the kubelet's
        handleMirrorPod: a mirror pod event only resyncs its static pod)."""
        assert self.mirrors is not None
        self.mirrors.observe(kind, pod)
        for uid, w in self.workers.workers.items():
            if w.source != "api" and w.pod["metadata"]["name"] == pod["metadata"]["name"]:
                self.workers.wake(uid)

    async def _publish_probe_result(self, result: models.ProbeResult) -> None:
        await self.publisher.publish(Topic.PROBE_RESULTS, result.uid, result, self.node)

    def _on_probe_change(self, result: models.ProbeResult) -> None:
        # Liveness and startup failures make the worker kill the container (as syncLoopIteration does);
        # startup success may let the next init container start.
        if result.probe != ProbeType.READINESS:
            self.workers.wake(result.uid)

    def health(self, check: str = "") -> tuple[bool, str]:
        """The node agent's health: the PLEG's relist health (generic.go Healthy), as the kubelet's
        healthz reports it, the apiserver source's watch, unhealthy once it has been down for more
        than PODLEDGER_API_WATCH_DOWN_S, and Kafka delivery, unhealthy while its records cannot be
        delivered. `check` names one of them ("pleg", "apiserver" or "kafka"); the reasons of every
        failing one are joined."""
        return self.health_server.health(check)

    def _checks(self) -> dict[str, Check]:
        checks: dict[str, Check] = {
            "pleg": lambda: self.pleg.health.healthy(time.time()),
            "kafka": self.publisher.health.healthy,
        }
        for source in self.sources:
            watch = getattr(source, "healthy", None)  # the apiserver source
            if watch is not None:
                checks["apiserver"] = partial(self._watch_health, watch)
        return checks

    def _watch_health(self, watch: Callable[[float, float], tuple[bool, str]]) -> tuple[bool, str]:
        return watch(time.time(), self.settings.api_watch_down_s)

    async def run(self) -> None:
        """Run until cancelled; containers keep running afterwards (the next agent adopts them)."""
        tasks: list[asyncio.Task[Any]] = []
        consumer = None
        try:
            await self.publisher.start(self.settings.start_wait_s)
            consumer = await started(
                lambda: new_consumer(self.settings),
                f"node {self.node}",
                self.settings.start_wait_s,
                self.settings.bootstrap,
            )
            updates_tp = TopicPartition(self.settings.topic(Topic.POD_UPDATES), self.partition)
            lifecycle_tp = TopicPartition(self.settings.topic(Topic.POD_LIFECYCLE), self.partition)
            consumer.assign([updates_tp, lifecycle_tp])
            end = (await consumer.end_offsets([updates_tp]))[updates_tp]
            replayed = await self._replay(consumer, updates_tp, end, lifecycle_tp)
            status_tp = TopicPartition(self.settings.topic(Topic.POD_STATUS), self.partition)
            consumer.assign([updates_tp, status_tp])
            consumer.seek(updates_tp, end)  # live from exactly where the replay stopped
            await consumer.seek_to_beginning(status_tp)  # compacted: the latest status of every pod
            self.workers.start()
            settle_long_lived_heap()  # the replayed pods' workers live as long as the agent
            log.info(
                "node %s: replayed %d pod-updates, %d pods to run; runtime %s",
                self.node,
                replayed,
                len(self.workers.workers),
                self.runtime.runtime_type,
            )
            tasks = [
                asyncio.ensure_future(self._follow(consumer, updates_tp, status_tp)),
                asyncio.ensure_future(self.pleg.run()),
                asyncio.ensure_future(self.container_gc.run()),
                asyncio.ensure_future(self.workers.housekeeping()),
                asyncio.ensure_future(self.health_server.watch()),
                asyncio.ensure_future(self.restriction.recheck()),
                *(
                    [asyncio.ensure_future(self.health_server.serve(self.settings.health_port))]
                    if self.settings.health_port
                    else []
                ),
                *(asyncio.ensure_future(source.run()) for source in self.sources),
            ]
            self.ready.set()
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                task.result()  # an agent died: surface why
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.workers.stop()
            await self.prober.close()
            try:
                if self.stop_pods_on_exit:
                    await self.workers.stop_all_pods()
            finally:
                if consumer is not None:
                    with contextlib.suppress(Exception):
                        await consumer.stop()
                await self.publisher.stop()

    async def _replay(
        self, consumer: Any, updates_tp: TopicPartition, end: int, lifecycle_tp: TopicPartition
    ) -> int:
        """Rebuild the workers (and the sources' merge state) from this node's share of the log."""
        count = 0
        async for message in read_to_end(consumer, updates_tp, end=end):
            if await self._act_on_update(message):
                count += 1
        async for message in read_to_end(consumer, lifecycle_tp):
            event = self._decode(Topic.POD_LIFECYCLE, message.value)
            if (
                event is not None
                and event.node == self.node
                and self.restriction.written_here(Topic.POD_LIFECYCLE, message)
            ):
                self.workers.apply_lifecycle(event)
        for uid, w in self.workers.workers.items():
            if not w.removed:  # a copy: podStorage updates its pods in place
                self.storage.pods.setdefault(w.source, {})[uid] = json_copy(w.pod)
        return count

    async def _follow(self, consumer: Any, updates_tp: TopicPartition, status_tp: TopicPartition) -> None:
        """Act on pod-updates; keep the prober's status cache from pod-status (the status manager's cache
        that the kubelet's probe workers read)."""
        while True:
            batch = await consumer.getmany(timeout_ms=1000)
            for message in batch.get(updates_tp, []):
                await self._act_on_update(message)
            for message in batch.get(status_tp, []):
                if message.value is None:  # the pod left pod-status: the prober forgets its status
                    self.prober.update_status(message.key.decode(), None)
                    continue
                status = self._decode(Topic.POD_STATUS, message.value)
                if status is not None and status.node == self.node:
                    self.prober.update_status(status.uid, status.status)

    async def _act_on_update(self, message: Any) -> bool:
        """Hand one pod-updates message to the workers if it names this node and the restriction
        admits it; returns whether it was applied now."""
        update = self._decode(Topic.POD_UPDATES, message.value)
        if update is None or update.node != self.node:
            return False
        if not await self.restriction.admit_update(update, message):
            return False
        self.workers.apply_update(update)
        return True

    @staticmethod
    def _decode(topic: str, value: bytes | None) -> Any:
        try:
            return decode(topic, value)
        except DecodeError as exc:  # the fold dead-letters it; a worker just cannot act on it
            log.warning("skipping a bad %s message: %s", topic, exc)
            return None
