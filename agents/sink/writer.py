"""The apiserver sink: the only writer of pod status to the kube-apiserver (the status manager's
syncBatch and syncPod; docs/kubelet-rules.md#sink-and-api-sync).

It does what the kubelet's status manager does in syncBatch/syncPod, with the log as its memory:

- It reads pod-status from the start of its partitions (a compacted topic: one latest version
  per pod) and keeps, per pod, only the newest version (coalescing: a pod that changed ten
  times while the apiserver was slow is written once).
- It writes a version only when it is newer than the last one written (the kubelet's
  apiStatusVersions), which it keeps in the compacted `sink-state` topic, so a restarted sink
  neither rewrites everything nor forgets anything.
- syncPod: GET the pod; drop the status if the API pod has another UID (it was recreated);
  merge per mergePodStatus; PATCH pods/status with the UID as a precondition, or make no call
  when the patch is only the UID. NotFound is ignored; other errors are retried with backoff
  for that pod alone. Every call takes a token from the client's QPS/burst limiter.
- Every reconcile period, pods whose API status no longer shows what we wrote (someone else
  changed a kubelet-owned part) are written again.
- A finished pod whose API copy has a deletionTimestamp and a terminal phase is DELETEd with
  grace 0 and a UID precondition, announced on pod-deletions, and forgotten. Mirror pods never.

The decisions are pure functions in agents/sink/decisions.py; this module only moves data.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition

from podledger.agents.kube import Kube
from podledger.agents.kube_client import KubeError
from podledger.agents.sink import decisions as api_sync
from podledger.agents.sink.cache import PodCache
from podledger.config import Settings
from podledger.delivery import DeliveryHealth
from podledger.kafka import new_consumer, read_to_end
from podledger.logs import pod_logger
from podledger.schemas import DecodeError, decode, models
from podledger.streams.status import rfc3339
from podledger.types import CONFIG_MIRROR_ANNOTATION, JSONDict, SinkOutcome, Topic

log = logging.getLogger(__name__)

RETRY_FIRST_S = 0.5
RETRY_MAX_S = 30.0


@dataclass
class PodEntry:
    """What the sink knows of one pod, keyed by its pod-status UID (the static UID for a static pod)."""

    desired: models.VersionedPodStatus
    written: int = 0  # last version written to the apiserver (apiStatusVersions)
    api_uid: str | None = None  # the API pod it was written to: the mirror's UID for a static pod
    failures: int = 0
    queued: bool = False


def mirror_matches(api_pod: JSONDict, vs: models.VersionedPodStatus) -> bool:
    """The API pod is the current mirror of this static pod (its mirror annotation is the static UID,
    which is the static pod's config hash)."""
    annotations = (api_pod.get("metadata") or {}).get("annotations") or {}
    return bool(api_sync.is_mirror_pod(api_pod) and annotations[CONFIG_MIRROR_ANNOTATION] == vs.uid)


class Sink:
    def __init__(
        self,
        kube: Kube,
        settings: Settings,
        *,
        publish: Callable[[str, str, Any, str], Awaitable[None]],
        workers: int = 8,
        reconcile_s: float = 10.0,
        read_from_cache: bool = False,
    ) -> None:
        self.kube = kube
        self.settings = settings
        self.publish = publish  # (topic, key, value, node) -> None
        self.workers = workers
        self.reconcile_s = reconcile_s
        self.pods: dict[str, PodEntry] = {}
        # (version, API UID written to) per pod-status UID, restored from sink-state before pods are known
        self.written: dict[str, tuple[int, str | None]] = {}
        self._due: list[tuple[float, str]] = []  # (when, uid) heap of pods to sync
        self._wake = asyncio.Event()
        self.cache = PodCache(kube) if read_from_cache else None
        self.stats = {
            "gets": 0,
            "patches": 0,
            "unchanged": 0,
            "deletes": 0,
            "errors": 0,
            "dropped": 0,
            "not_bound": 0,
            "unusable": 0,  # a status the sink could not use (the pod retries with back-off)
        }
        self.apiserver = DeliveryHealth()  # unhealthy while apiserver writes have failed for a while

    def retrying(self) -> int:
        """How many pods are waiting to retry a failed sync."""
        return sum(1 for entry in self.pods.values() if entry.failures)

    # ------------------------------------------------------------------ input

    def offer(self, vs: models.VersionedPodStatus) -> None:
        """A version from pod-status: keep only the newest per pod, schedule it if unwritten."""
        uid = vs.uid
        entry = self.pods.get(uid)
        if entry is None:
            written, api_uid = self.written.get(uid, (0, None))
            entry = self.pods[uid] = PodEntry(vs, written=written, api_uid=api_uid)
        elif vs.version <= entry.desired.version and vs.uid == entry.desired.uid:
            return
        entry.desired = vs
        if vs.version > entry.written:
            self._schedule(uid, 0.0)

    def forget(self, uid: str) -> None:
        """The pod left pod-status (tombstone): drop its state (RemoveOrphanedStatuses)."""
        for key, entry in list(self.pods.items()):
            if entry.desired.uid == uid:
                self.pods.pop(key, None)

    def _schedule(self, uid: str, delay: float) -> None:
        entry = self.pods.get(uid)
        if entry is None or entry.queued:
            return
        entry.queued = True
        heapq.heappush(self._due, (time.monotonic() + delay, uid))
        self._wake.set()

    # ------------------------------------------------------------------ the loops

    async def run(self) -> None:
        if self.cache is not None:
            self.cache.start()
            await asyncio.to_thread(self.cache.synced.wait)
        await self._restore_written()
        await asyncio.gather(
            self._consume(),
            self._reconcile_loop(),
            *(self._worker() for _ in range(self.workers)),
        )

    async def _next_due(self) -> str:
        while True:
            if self._due and self._due[0][0] <= time.monotonic():
                _, uid = heapq.heappop(self._due)
                return uid
            self._wake.clear()
            timeout = self._due[0][0] - time.monotonic() if self._due else None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)

    async def _worker(self) -> None:
        while True:
            await self.sync_one(await self._next_due())

    async def sync_one(self, uid: str) -> None:
        """One syncPod for a due pod. Nothing it meets escapes: an apiserver error or a status the
        sink cannot use stays with that pod, which is retried with back-off (logged and counted)."""
        entry = self.pods.get(uid)
        if entry is None:
            return
        entry.queued = False
        vs = entry.desired
        if vs.version <= entry.written:
            return
        try:
            outcome, api_uid = await asyncio.to_thread(self._sync_pod, uid, vs)
        except Exception as exc:  # an apiserver error, or a status the sink cannot use: this pod only
            entry.failures += 1
            self.stats["errors" if isinstance(exc, KubeError) else "unusable"] += 1
            if isinstance(exc, KubeError):
                self.apiserver.failed(exc)
            delay = min(RETRY_FIRST_S * 2 ** (entry.failures - 1), RETRY_MAX_S)
            what = str(exc) if isinstance(exc, KubeError) else f"{exc.__class__.__name__}: {exc}"
            pod_logger(log, vs.namespace, vs.name, vs.uid).warning(
                "sync v%d failed (%s); retry in %.1fs", vs.version, what, delay
            )
            self._schedule(uid, delay)
            return
        if outcome == SinkOutcome.NO_MIRROR:
            # A static pod is written only through its mirror (syncBatch); the node agent creates it.
            entry.failures += 1
            self._schedule(uid, min(RETRY_FIRST_S * 2 ** (entry.failures - 1), RETRY_MAX_S))
            return
        entry.failures = 0
        self.apiserver.delivered()
        await self._after_sync(uid, entry, vs, outcome, api_uid)

    async def _after_sync(
        self,
        uid: str,
        entry: PodEntry,
        vs: models.VersionedPodStatus,
        outcome: SinkOutcome,
        api_uid: str | None,
    ) -> None:
        if outcome in (SinkOutcome.PATCHED, SinkOutcome.UNCHANGED, SinkOutcome.DELETED):
            if api_uid != entry.api_uid:
                entry.written, entry.api_uid = 0, api_uid  # a new mirror pod: nothing written to it yet
            entry.written = max(entry.written, vs.version)
            state = {"version": entry.written, "api_uid": api_uid}
            await self.publish(Topic.SINK_STATE, uid, state, vs.node)
        if outcome == SinkOutcome.DELETED:
            deletion = models.PodDeletion(
                vs.uid, vs.namespace, vs.name, vs.node, vs.version, int(time.time() * 1000)
            )
            await self.publish(Topic.POD_DELETIONS, vs.uid, deletion, vs.node)
            await self.publish(Topic.SINK_STATE, uid, None, vs.node)
            self.pods.pop(uid, None)
        elif outcome == SinkOutcome.RECREATED:
            self.pods.pop(uid, None)  # the status belongs to a pod that no longer exists
        if uid in self.pods and entry.desired.version > entry.written:
            self._schedule(uid, 0.0)  # a newer version arrived while we wrote

    # ------------------------------------------------------------------ syncPod (in a thread)

    def _sync_pod(self, uid: str, vs: models.VersionedPodStatus) -> tuple[SinkOutcome, str | None]:
        """One syncPod: what it did, and the UID of the API pod written to."""
        if self.cache is not None:
            cached = self.cache.get(vs.namespace, vs.name)
            if cached is None:
                return (SinkOutcome.NO_MIRROR if vs.static else SinkOutcome.MISSING), None
            api_pod = cached
        else:
            self.stats["gets"] += 1
            try:
                api_pod = self.kube.get_pod(vs.namespace, vs.name)
            except KubeError as exc:
                if exc.not_found:
                    return (SinkOutcome.NO_MIRROR if vs.static else SinkOutcome.MISSING), None
                raise
        if vs.static:
            if not mirror_matches(api_pod, vs):
                return SinkOutcome.NO_MIRROR, None
            uid = api_pod["metadata"]["uid"]  # the status UID: the mirror's (syncBatch)
        now = rfc3339(time.time())
        fields = {
            "status": vs.status,
            "version": vs.version,
            "could_have_running_containers": vs.could_have_running_containers,
        }
        decision = api_sync.sync_decision(uid, api_pod, fields, None, now=now)
        if decision.action == "drop-recreated":
            self.stats["dropped"] += 1
            pod_logger(log, vs.namespace, vs.name, uid).info("was recreated; its status is dropped")
            return SinkOutcome.RECREATED, uid
        refused = api_sync.binding_refusal(api_pod, vs.node, vs.static)
        if refused is not None:  # NodeRestriction: no PATCH, no DELETE
            self.stats["not_bound"] += 1
            pod_logger(log, vs.namespace, vs.name, uid).warning("v%d not written: %s", vs.version, refused)
            return SinkOutcome.NOT_BOUND, None
        if decision.action == "unchanged":
            self.stats["unchanged"] += 1
            outcome = SinkOutcome.UNCHANGED
        else:
            assert decision.patch is not None
            api_pod = self.kube.patch_pod_status(vs.namespace, vs.name, decision.patch)
            self.stats["patches"] += 1
            outcome = SinkOutcome.PATCHED
        is_mirror = vs.static or api_sync.is_mirror_pod(api_pod)
        if api_sync.can_be_deleted(api_pod, vs.finished, is_mirror):
            try:
                self.kube.delete_pod(vs.namespace, vs.name, grace_seconds=0, uid=uid)
            except KubeError as exc:
                if not exc.not_found:
                    pod_logger(log, vs.namespace, vs.name, uid).warning("delete failed: %s", exc)
                    return outcome, uid
            self.stats["deletes"] += 1
            return SinkOutcome.DELETED, uid
        return outcome, uid

    # ------------------------------------------------------------------ reconcile

    async def _reconcile_loop(self) -> None:
        while True:
            await asyncio.sleep(self.reconcile_s)
            try:
                await self.reconcile()
            except KubeError as exc:
                log.warning("reconcile skipped: %s", exc)

    async def reconcile(self) -> int:
        """Rewrite pods whose API status lost what we wrote; returns how many were queued."""
        written = {uid: e for uid, e in self.pods.items() if e.written >= e.desired.version and not e.queued}
        if not written:
            return 0
        if self.cache is not None:
            pods = list(self.cache.pods.values())
        else:
            pods = (await asyncio.to_thread(self.kube.list_pods)).get("items") or []
        by_uid = {p["metadata"]["uid"]: p for p in pods}
        by_name = {(p["metadata"].get("namespace"), p["metadata"]["name"]): p for p in pods}
        queued = 0
        for uid, entry in written.items():
            vs = entry.desired
            if vs.static:
                # needsReconcile compares through the mirror; a recreated mirror has had nothing
                # written yet.
                api_pod = by_name.get((vs.namespace, vs.name))
                if api_pod is None or not mirror_matches(api_pod, vs):
                    continue
                if api_pod["metadata"]["uid"] != entry.api_uid:
                    entry.written = 0
                    self._schedule(uid, 0.0)
                    queued += 1
                    continue
            else:
                api_pod = by_uid.get(uid)
            if api_pod is None:
                continue
            if api_sync.needs_reconcile(api_pod.get("status") or {}, entry.desired.status, api_pod):
                entry.written = 0  # as the kubelet deletes apiStatusVersions[uid]
                self._schedule(uid, 0.0)
                queued += 1
        if queued:
            log.info("reconcile: %d pods drifted from their written status", queued)
        return queued

    # ------------------------------------------------------------------ Kafka

    async def _restore_written(self) -> None:
        """Last written versions (and the API pod they went to) from the compacted sink-state topic."""
        consumer = new_consumer(self.settings)
        await consumer.start()
        try:
            topic = self.settings.topic(Topic.SINK_STATE)
            tps = [TopicPartition(topic, p) for p in range(self.settings.partitions)]
            consumer.assign(tps)
            for tp in tps:
                async for message in read_to_end(consumer, tp):
                    key = message.key.decode()
                    if message.value is None:
                        self.written.pop(key, None)
                    else:
                        state = orjson.loads(message.value)
                        self.written[key] = (int(state["version"]), state.get("api_uid", key))
        finally:
            await consumer.stop()
        log.info("sink: restored %d written versions", len(self.written))

    async def _consume(self) -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.settings.bootstrap,
            group_id=f"{self.settings.topic_prefix}sink",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            **self.settings.kafka_client_options(),
        )
        consumer.subscribe([self.settings.topic(Topic.POD_STATUS)], listener=_FromTheStart(consumer))
        await consumer.start()
        try:
            async for message in consumer:
                if message.value is None:
                    self.forget(message.key.decode())
                    continue
                try:
                    self.offer(decode(Topic.POD_STATUS, message.value))
                except DecodeError as exc:
                    log.warning("skipping an undecodable pod-status value at %s: %s", message.offset, exc)
        finally:
            await consumer.stop()


class _FromTheStart(ConsumerRebalanceListener):
    """pod-status is compacted: its whole content is the state to sync, so every assignment
    reads it from the start (what was written is known from sink-state)."""

    def __init__(self, consumer: AIOKafkaConsumer) -> None:
        self.consumer = consumer

    async def on_partitions_revoked(self, revoked: Any) -> None:
        pass

    async def on_partitions_assigned(self, assigned: Any) -> None:
        if assigned:
            await self.consumer.seek_to_beginning(*assigned)
