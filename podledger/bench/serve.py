"""`podledger bench serve`: `podledger serve` over a synthetic snapshot on a real broker. Loads
--pods pod statuses (with their desired pods), times a list (plain JSON, and the Table kubectl
asks for), then times watch delivery: a paced phase for latency (from the broker's acknowledgement
of a version to its event on an open watch) and a burst for throughput."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import orjson
from aiokafka import AIOKafkaProducer

from podledger.bench.harness import bench_settings, machine, peak_rss_mb, percentile, say, stop_service
from podledger.config import Settings
from podledger.local import free_port
from podledger.partitioner import partition_for_node
from podledger.schemas import encode, models
from podledger.streams.topics import ensure_topics
from podledger.types import JSONDict, Topic

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
NODES = 200
STATUS_VERSION = "podledger.io/status-version"
CREATED = "2026-01-01T00:00:00Z"


@dataclass
class ServeFigures:
    pods: int = 0
    load_s: float = 0.0
    list_ms: float = 0.0  # the Table list (what kubectl get pods -A asks for)
    json_list_ms: float = 0.0
    list_bytes: int = 0
    watch_events: int = 0
    watch_events_per_s: float = 0.0
    latencies: list[float] = field(default_factory=list)
    rss_mb: float = 0.0

    def line(self) -> str:
        return (
            f"serve pods={self.pods} list_ms={self.list_ms:.0f}"
            f" watch_events_per_s={self.watch_events_per_s:.0f}"
            f" watch_p99_ms={percentile(self.latencies, 99):.0f} rss_mb={self.rss_mb:.0f}"
        )


def _pod(i: int) -> tuple[str, str, JSONDict]:
    uid, node = f"bench-{i:07d}", f"bench-node-{i % NODES:03d}"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"app-{i:07d}",
            "namespace": f"ns-{i % 50:02d}",
            "uid": uid,
            "labels": {"app": f"app-{i % 100}", "tier": "web"},
            "creationTimestamp": CREATED,
        },
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "app:1"}]},
    }
    return uid, node, pod


def _status(uid: str, node: str, pod: JSONDict, version: int) -> models.VersionedPodStatus:
    cond = [
        {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": "2026-01-01T00:00:00Z"}
        for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
    ]
    status = {
        "phase": "Running",
        "conditions": cond,
        "containerStatuses": [
            {
                "name": "main",
                "ready": True,
                "restartCount": version - 1,
                "image": "app:1",
                "imageID": "",
                "started": True,
                "state": {"running": {"startedAt": CREATED}},
                "lastState": {},
            }
        ],
        "startTime": CREATED,
        "qosClass": "BestEffort",
    }
    meta = pod["metadata"]
    cause = models.Cause(type="bench", topic=Topic.POD_UPDATES, partition=0, offset=version, ts_ms=0)
    return models.VersionedPodStatus(
        uid,
        meta["namespace"],
        meta["name"],
        node,
        version,
        status,
        True,
        False,
        False,
        None,
        False,
        cause,
        int(time.time() * 1000),
    )


async def _fill(settings: Settings, pods: int) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.bootstrap,
        linger_ms=20,
        max_batch_size=1 << 20,
        **settings.kafka_client_options(),
    )
    await producer.start()
    try:
        for i in range(pods):
            uid, node, pod = _pod(i)
            partition = partition_for_node(node, settings.partitions)
            update = models.PodUpdate("ADD", "api", node, pod, 0)
            await producer.send(
                settings.topic(Topic.POD_UPDATES), encode(update), uid.encode(), partition=partition
            )
            vs = _status(uid, node, pod, 1)
            await producer.send(
                settings.topic(Topic.POD_STATUS), encode(vs), uid.encode(), partition=partition
            )
        await producer.flush()
    finally:
        await producer.stop()


async def _timed_get(session: aiohttp.ClientSession, url: str, accept: str) -> tuple[float, int, JSONDict]:
    started = time.monotonic()
    async with session.get(url, headers={"Accept": accept}) as response:
        body = await response.read()
    elapsed = (time.monotonic() - started) * 1000
    return elapsed, len(body), orjson.loads(body)


async def _watch_phase(settings: Settings, url: str, figures: ServeFigures, paced: int, burst: int) -> None:
    """Versions of existing pods while one watch is open: `paced` at 200/s (latency), then `burst`
    as fast as the producer goes (throughput)."""
    acked: dict[tuple[str, int], float] = {}
    arrived: dict[tuple[str, int], float] = {}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None)) as session:
        # The newest resourceVersion, from a list that selects nothing (serve ignores `limit`).
        empty = f"{url}/api/v1/pods?fieldSelector=metadata.name%3D-none-"
        _, _, listed = await _timed_get(session, empty, "application/json")
        rv = listed["metadata"]["resourceVersion"]
        async with session.get(f"{url}/api/v1/pods?watch=true&resourceVersion={rv}") as response:

            async def read() -> None:
                async for line in response.content:
                    event = orjson.loads(line)
                    meta = event["object"]["metadata"]
                    arrived[(meta["uid"], int(meta["annotations"][STATUS_VERSION]))] = time.time()

            reader = asyncio.create_task(read())
            producer = AIOKafkaProducer(
                bootstrap_servers=settings.bootstrap, linger_ms=2, **settings.kafka_client_options()
            )
            await producer.start()
            try:

                def record(i: int, version: int) -> tuple[str, int, bytes, int]:
                    """(uid, version, value, partition) of a new version of pod i."""
                    uid, node, pod = _pod(i)
                    return (
                        uid,
                        version,
                        encode(_status(uid, node, pod, version)),
                        partition_for_node(node, settings.partitions),
                    )

                async def send(
                    uid: str, version: int, value: bytes, partition: int
                ) -> asyncio.Future[object]:
                    """Queue one version; its acknowledgement time is noted when the broker answers."""
                    topic = settings.topic(Topic.POD_STATUS)
                    future = await producer.send(topic, value, uid.encode(), partition=partition)
                    future.add_done_callback(
                        lambda _, key=(uid, version): acked.__setitem__(key, time.time())
                    )
                    return future

                for n in range(paced):
                    await (await send(*record(n * 7919 % figures.pods, 2 + n // figures.pods)))
                    await asyncio.sleep(0.005)
                await asyncio.sleep(2)
                figures.latencies = [(arrived[k] - acked[k]) * 1000 for k in acked if k in arrived]
                # Made before the clock starts: the burst measures serve, not this process's encoding.
                records = [record(n % figures.pods, 100 + n // figures.pods) for n in range(burst)]
                burst_keys = [(uid, version) for uid, version, _, _ in records]
                started = time.time()
                futures = [await send(*r) for r in records]
                await asyncio.gather(*futures)
                deadline = time.time() + 120
                while time.time() < deadline and not all(k in arrived for k in burst_keys):
                    await asyncio.sleep(0.05)
                last = max(arrived.get(k, time.time()) for k in burst_keys)
                figures.watch_events = sum(1 for k in burst_keys if k in arrived)
                figures.watch_events_per_s = figures.watch_events / max(last - started, 1e-9)
            finally:
                await producer.stop()
                reader.cancel()


def bench_serve(base: Settings, *, pods: int, paced: int = 2000, burst: int = 20_000) -> ServeFigures:
    settings = bench_settings(base)
    asyncio.run(ensure_topics(settings))
    figures = ServeFigures(pods=pods)
    started = time.monotonic()
    asyncio.run(_fill(settings, pods))
    say(f"published {pods} desired pods and statuses in {time.monotonic() - started:.1f}s")
    port = free_port()
    log_path = Path(tempfile.mkdtemp(prefix="podledger-bench-serve-")) / "serve.log"
    env = {
        **os.environ,
        "PODLEDGER_BOOTSTRAP": settings.bootstrap,
        "PODLEDGER_TOPIC_PREFIX": settings.topic_prefix,
        "PODLEDGER_PARTITIONS": str(settings.partitions),
        "PODLEDGER_SERVE_LISTEN": f"127.0.0.1:{port}",
    }
    started = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "podledger.cli", "serve"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        while "answering the Kubernetes API" not in log_path.read_text(errors="replace"):
            if proc.poll() is not None:
                raise RuntimeError(f"podledger serve exited: {log_path.read_text()[-2000:]}")
            time.sleep(0.2)
        figures.load_s = time.monotonic() - started
        say(f"serve loaded {pods} pods in {figures.load_s:.1f}s")
        asyncio.run(_lists(url, figures))
        asyncio.run(_watch_phase(settings, url, figures, paced, burst))
        figures.rss_mb = peak_rss_mb(proc.pid)
    finally:
        stop_service(proc)
    return figures


async def _lists(url: str, figures: ServeFigures) -> None:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None)) as session:
        times = []
        for _ in range(3):
            elapsed, size, body = await _timed_get(session, f"{url}/api/v1/pods", TABLE)
            times.append(elapsed)
            assert len(body["rows"]) == figures.pods, f"listed {len(body['rows'])} of {figures.pods} pods"
        say(f"Table lists: {', '.join(f'{t:.0f}' for t in times)} ms ({size >> 20} MB)")
        figures.list_ms, figures.list_bytes = max(times), size
        figures.json_list_ms, _, body = await _timed_get(session, f"{url}/api/v1/pods", "application/json")
        assert len(body["items"]) == figures.pods


def print_serve(figures: ServeFigures) -> None:
    lat = figures.latencies
    print(f"{machine()}; pods={figures.pods}")
    print(f"load (serve start to answering):  {figures.load_s:.1f} s")
    size_mb = figures.list_bytes >> 20
    print(f"list, Table (kubectl get -A):     {figures.list_ms:.0f} ms, slowest of 3 ({size_mb} MB)")
    print(f"list, JSON PodList:               {figures.json_list_ms:.0f} ms")
    p50, p99 = percentile(lat, 50), percentile(lat, 99)
    print(
        f"watch latency ack->event:         p50 {p50:.0f} ms  p99 {p99:.0f} ms ({len(lat)} versions at 200/s)"
    )
    print(
        f"watch burst:                      {figures.watch_events} events, {figures.watch_events_per_s:.0f}/s"
    )
    print(f"serve peak RSS:                   {figures.rss_mb:.0f} MB")
    load1, load5, _ = os.getloadavg()
    print(f"machine load average at the end:  {load1:.1f} (1 min), {load5:.1f} (5 min)")
    print(figures.line())
