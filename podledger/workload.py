"""Synthetic ingress workloads: pods living through realistic event sequences.

Used by the fold benchmark and by tests that need many pods. Deterministic for a seed: the same
arguments give the same events, so a run can be repeated and compared.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from podledger.schemas import models
from podledger.streams.status import rfc3339
from podledger.types import JSONDict, PlegEventType, PodOp, ProbeResult, ProbeType, Topic


@dataclass(frozen=True, slots=True)
class IngressEvent:
    topic: str
    key: str  # pod UID
    node: str
    value: Any  # a model of the topic
    ts_ms: int


def _iso(ms: int) -> str:
    return rfc3339(ms / 1000)


def make_pod(uid: str, name: str, node: str, *, readiness: bool = True) -> JSONDict:
    container: JSONDict = {"name": "app", "image": "example/app:1", "command": ["app"]}
    if readiness:
        container["readinessProbe"] = {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 5}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"uid": uid, "name": name, "namespace": "default", "labels": {"app": name}},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Always",
            "containers": [container, {"name": "sidecar", "image": "example/log:1"}],
        },
        "status": {"phase": "Pending"},
    }


class PodLife:
    """One pod's story: created, started, ready, crashing and restarting, then removed."""

    def __init__(self, index: int, node: str, rng: random.Random, born_ms: int) -> None:
        self.born_ms = born_ms
        self.uid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        self.name = f"pod-{index:06d}"
        self.node = node
        self.pod = make_pod(self.uid, self.name, node)
        self.restarts = 0
        self.step = 0
        self.rng = rng

    def _runtime(self, ts: int, app_state: str, exit_code: int | None = None) -> JSONDict:
        created = _iso(ts - 1000)
        app: JSONDict = {
            "id": f"{self.uid[:8]}-app-{self.restarts}",
            "name": "app",
            "image": "example/app:1",
            "state": app_state,
            "exit_code": exit_code,
            "created_at": created,
            "started_at": created,
            "finished_at": _iso(ts) if app_state == "exited" else None,
            "restart_count": self.restarts,
        }
        sidecar = {
            "id": f"{self.uid[:8]}-sidecar",
            "name": "sidecar",
            "image": "example/log:1",
            "state": "running",
            "created_at": _iso(self.born_ms),
            "started_at": _iso(self.born_ms),
            "restart_count": 0,
        }
        return {
            "containers": [app, sidecar],
            "ips": ["127.0.0.1"],
            "runtime_type": "sim",
            "sandbox": {"id": f"{self.uid[:8]}-sandbox", "ready": True},
        }

    def next_event(self, ts: int) -> IngressEvent:
        """The pod's next event at time `ts` (its story loops: crash, back-off, restart, ready)."""
        step = self.step
        self.step += 1
        if step == 0:
            return self._update(PodOp.ADD, ts)
        phase = (step - 1) % 5
        if phase == 0:
            runtime = self._runtime(ts, "running")
            cid = runtime["containers"][0]["id"]
            return IngressEvent(
                Topic.PLEG,
                self.uid,
                self.node,
                models.PlegEvent(self.uid, self.node, PlegEventType.CONTAINER_STARTED, cid, runtime, ts),
                ts,
            )
        if phase == 1:
            cid = f"sim://{self.uid[:8]}-app-{self.restarts}"
            probe = models.ProbeResult(
                self.uid, self.node, "app", cid, ProbeType.READINESS, ProbeResult.SUCCESS, ts
            )
            return IngressEvent(Topic.PROBE_RESULTS, self.uid, self.node, probe, ts)
        if phase == 2:
            cid = f"sim://{self.uid[:8]}-app-{self.restarts}"
            probe = models.ProbeResult(
                self.uid, self.node, "app", cid, ProbeType.READINESS, ProbeResult.FAILURE, ts
            )
            return IngressEvent(Topic.PROBE_RESULTS, self.uid, self.node, probe, ts)
        if phase == 3:
            runtime = self._runtime(ts, "exited", exit_code=self.rng.choice((1, 2, 137)))
            cid = runtime["containers"][0]["id"]
            return IngressEvent(
                Topic.PLEG,
                self.uid,
                self.node,
                models.PlegEvent(self.uid, self.node, PlegEventType.CONTAINER_DIED, cid, runtime, ts),
                ts,
            )
        self.restarts += 1
        backoff = min(10 * 2 ** (self.restarts - 1), 300)
        result = {
            "container": "app",
            "reason": "CrashLoopBackOff",
            "message": f"back-off {backoff}s restarting failed container=app"
            f" pod={self.name}_default({self.uid})",
        }
        lifecycle = models.PodLifecycle(self.uid, self.node, "sync_result", ts, [result])
        return IngressEvent(Topic.POD_LIFECYCLE, self.uid, self.node, lifecycle, ts)

    def _update(self, op: str, ts: int) -> IngressEvent:
        update = models.PodUpdate(op, "api", self.node, self.pod, ts)
        return IngressEvent(Topic.POD_UPDATES, self.uid, self.node, update, ts)

    def remove(self, ts: int) -> IngressEvent:
        return self._update(PodOp.REMOVE, ts)


def workload(
    pods: int,
    events: int,
    *,
    nodes: int = 10,
    seed: int = 1,
    remove_at_end: bool = False,
    start_ms: int | None = None,
) -> Iterator[IngressEvent]:
    """`events` ingress events spread over `pods` pods on `nodes` nodes, 1 ms apart from
    `start_ms` (default: now, so topic retention never ages them out).

    Every pod is announced (ADD) before any of its other events; events interleave across pods.
    """
    rng = random.Random(seed)
    ts = int(time.time() * 1000) if start_ms is None else start_ms
    lives = [PodLife(i, f"node-{i % nodes:03d}", rng, ts) for i in range(pods)]
    produced = 0
    for life in lives:  # announce every pod first, so no event waits for its pod
        if produced >= events:
            return
        ts += 1
        produced += 1
        yield life.next_event(ts)
    while produced < events - (pods if remove_at_end else 0):
        life = lives[rng.randrange(pods)]
        ts += 1
        produced += 1
        yield life.next_event(ts)
    if remove_at_end:
        for life in lives:
            ts += 1
            yield life.remove(ts)


async def produce(
    settings: Any,
    events: Iterator[IngressEvent] | list[IngressEvent],
    signers: Mapping[str, Any] | None = None,
) -> int:
    """Send ingress events to their topics with the shared partitioner; returns the count. With
    `signers` (node -> keys.Signer) each record carries its node's proof of origin, as a node
    agent's does."""
    from aiokafka import AIOKafkaProducer

    from podledger.partitioner import partition_for_node
    from podledger.schemas import encode

    producer = AIOKafkaProducer(
        bootstrap_servers=settings.bootstrap,
        linger_ms=5,
        max_batch_size=1 << 20,
        acks="all",
        **settings.kafka_client_options(),
    )
    await producer.start()
    count = 0
    try:
        for event in events:
            key, value = event.key.encode(), encode(event.value)
            await producer.send(
                settings.topic(event.topic),
                key=key,
                value=value,
                partition=partition_for_node(event.node, settings.partitions),
                timestamp_ms=event.ts_ms,
                headers=None if signers is None else signers[event.node].headers(event.topic, key, value),
            )
            count += 1
        await producer.flush()
    finally:
        await producer.stop()
    return count
