"""`podledger bench sink`: pods churn on pod-status while a sink process writes them to a real
apiserver; a watch in this process sees each write arrive."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from dataclasses import dataclass, replace

from aiokafka import AIOKafkaProducer

from podledger.agents.kube import Kube
from podledger.bench.harness import (
    bench_settings,
    local_kubeconfig,
    machine,
    percentile,
    say,
    start_service,
    stop_service,
)
from podledger.config import Settings
from podledger.partitioner import partition_for_node
from podledger.schemas import encode, models
from podledger.streams.topics import ensure_topics
from podledger.types import JSONDict, Topic


@dataclass
class SinkFigures:
    pods: int = 0
    versions: int = 0
    patches: int = 0
    seconds: float = 0.0
    latencies: list[float] | None = None
    converged: int = 0

    def line(self) -> str:
        lat = self.latencies or []
        return (
            f"sink pods={self.pods} patches_per_s={self.patches / max(self.seconds, 1e-9):.1f}"
            f" coalescing={self.versions / max(self.patches, 1):.2f}"
            f" p50_ms={percentile(lat, 50):.0f} p99_ms={percentile(lat, 99):.0f}"
        )


def bench_sink(
    base: Settings, *, pods: int, interval: float, seconds: float, qps: float, burst: int
) -> SinkFigures:
    """Pods churn (a new version each `interval` s) while a sink process writes them; a watch in
    this process sees each write arrive."""
    settings = bench_settings(base)
    kubeconfig = local_kubeconfig(settings)
    settings = replace(settings, kubeconfig=kubeconfig, sink_qps=qps, sink_burst=burst)
    asyncio.run(ensure_topics(settings))
    admin = Kube.from_kubeconfig(kubeconfig, qps=1000, burst=1000)
    node = f"bench-{uuid.uuid4().hex[:6]}"
    admin.ensure_node(node)
    t = time.monotonic()
    created = []
    for i in range(pods):
        created.append(
            admin.create_pod(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": f"{node}-{i:05d}", "namespace": "default"},
                    "spec": {"nodeName": node, "containers": [{"name": "main", "image": "app:1"}]},
                }
            )
        )
    say(f"created {pods} pods in {time.monotonic() - t:.1f}s")

    published: dict[str, dict[int, float]] = {p["metadata"]["uid"]: {} for p in created}
    arrivals: list[float] = []
    patches = 0
    stop = threading.Event()
    lock = threading.Lock()

    def watch() -> None:
        nonlocal patches
        rv = admin.list_pods(field_selector=f"spec.nodeName={node}")["metadata"]["resourceVersion"]
        while not stop.is_set():
            for event in admin.watch_pods(
                field_selector=f"spec.nodeName={node}", resource_version=rv, timeout_seconds=5
            ):
                now = time.time()
                obj = event["object"]
                rv = obj["metadata"].get("resourceVersion", rv)
                if event["type"] != "MODIFIED":
                    continue
                message = (obj.get("status") or {}).get("message", "")
                if not message.startswith("v"):
                    continue
                version = int(message[1:])
                with lock:
                    patches += 1
                    sent = published[obj["metadata"]["uid"]].get(version)
                    if sent is not None:
                        arrivals.append((now - sent) * 1000)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    sink = start_service(
        settings,
        "sink",
        KUBECONFIG=kubeconfig,
        PODLEDGER_SINK_QPS=str(qps),
        PODLEDGER_SINK_BURST=str(burst),
        PODLEDGER_SINK_READ=settings.sink_read,
        PODLEDGER_NODE=node,
    )
    figures = SinkFigures(pods=pods)
    try:
        time.sleep(5)  # the sink joins its group
        with lock:
            patches = 0
        started = time.monotonic()
        versions = 0
        asyncio.run(_churn(settings, created, node, interval, seconds, published, lock))
        versions = sum(len(v) for v in published.values())
        say(f"published {versions} versions over {seconds:.0f}s; waiting for the last ones to land")
        deadline = time.monotonic() + 120
        newest = {uid: max(v) for uid, v in published.items() if v}
        while time.monotonic() < deadline:
            current = {
                p["metadata"]["uid"]: (p.get("status") or {}).get("message", "")
                for p in admin.list_pods(field_selector=f"spec.nodeName={node}")["items"]
            }
            figures.converged = sum(1 for uid, v in newest.items() if current.get(uid) == f"v{v}")
            if figures.converged == len(newest):
                break
            time.sleep(1)
        figures.seconds = time.monotonic() - started
        with lock:
            figures.patches = patches
            figures.latencies = list(arrivals)
        figures.versions = versions
    finally:
        stop.set()
        stop_service(sink)
    return figures


def churned_status(meta: JSONDict, node: str, version: int, status: JSONDict) -> models.VersionedPodStatus:
    """A running pod's status version as the fold would publish it."""
    return models.VersionedPodStatus(
        uid=meta["uid"],
        namespace="default",
        name=meta["name"],
        node=node,
        version=version,
        status=status,
        could_have_running_containers=True,
        finished=False,
        static=False,
        mirror_uid=None,
        deleting=False,
        cause=models.Cause(type="bench", topic=Topic.POD_UPDATES, partition=0, offset=version, ts_ms=0),
        ts_ms=int(time.time() * 1000),
    )


async def _churn(
    settings: Settings,
    pods: list[JSONDict],
    node: str,
    interval: float,
    seconds: float,
    published: dict[str, dict[int, float]],
    lock: threading.Lock,
) -> None:
    """Each pod gets a new version every `interval` s, the pods evenly spread over the interval
    (pods change on their own schedules, not all at once)."""
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.bootstrap, linger_ms=5, **settings.kafka_client_options()
    )
    await producer.start()
    try:
        start = time.monotonic()
        due = [(start + i * interval / len(pods), i) for i in range(len(pods))]
        versions = [0] * len(pods)
        partition = partition_for_node(node, settings.partitions)
        while True:
            now = time.monotonic()
            if now - start >= seconds:
                break
            for slot, (when, i) in enumerate(due):
                if when > now:
                    continue
                versions[i] += 1
                meta = pods[i]["metadata"]
                status = {  # what the fold would publish; qosClass as the apiserver defaults it
                    "phase": "Running",
                    "qosClass": "BestEffort",
                    "message": f"v{versions[i]}",
                    "conditions": [
                        {
                            "type": "PodScheduled",
                            "status": "True",
                            "lastProbeTime": None,
                            "lastTransitionTime": "2026-01-01T00:00:00Z",
                        }
                    ],
                }
                vs = churned_status(meta, node, versions[i], status)
                with lock:
                    published[meta["uid"]][versions[i]] = time.time()
                await producer.send(
                    settings.topic(Topic.POD_STATUS),
                    key=meta["uid"].encode(),
                    value=encode(vs),
                    partition=partition,
                )
                due[slot] = (when + interval, i)
            await producer.flush()
            await asyncio.sleep(0.02)
    finally:
        await producer.stop()


def print_sink(figures: SinkFigures, *, qps: float, burst: int, interval: float) -> None:
    lat = figures.latencies or []
    rate = figures.patches / max(figures.seconds, 1e-9)
    p50, p99 = percentile(lat, 50), percentile(lat, 99)
    print(f"{machine()}; pods={figures.pods}, a version each {interval}s")
    print(f"client limit:         QPS {qps}, burst {burst}")
    print(f"versions published:   {figures.versions}")
    print(f"patches seen:         {figures.patches} ({rate:.1f}/s; each also costs a GET)")
    print(f"coalescing:           {figures.versions / max(figures.patches, 1):.2f} versions per patch")
    print(f"latency publish->API: p50 {p50:.0f} ms  p99 {p99:.0f} ms ({len(lat)} writes)")
    print(f"converged:            {figures.converged}/{figures.pods} pods at their newest version")
    print(figures.line())
