"""Benchmarks: figures, never assertions. `podledger bench fold` drives the fold through a real
broker and compares it, over the same messages, with the offline fold and a bare aiokafka
consume-decode-encode-produce loop (the floor any Kafka pipeline in Python stands on)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from podledger.config import Settings
from podledger.errors import UserError
from podledger.partitioner import partition_for_node
from podledger.schemas import decode, encode, models
from podledger.streams.replay import replay
from podledger.streams.topics import INGRESS, ensure_topics, start_admin
from podledger.workload import IngressEvent, produce, workload


def say(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def broker_for_bench(settings: Settings) -> Settings:
    """The broker PODLEDGER_BOOTSTRAP names, else the local one `make demo` uses (started if needed)."""
    if settings.bootstrap:
        return settings
    from podledger import local

    kafka, _ = local.up(kafka=True, kube=False)
    assert kafka is not None
    say(f"using the local broker at {kafka.bootstrap} (stop it with 'podledger local down')")
    return replace(settings, bootstrap=kafka.bootstrap)


async def topic_count(settings: Settings, name: str) -> int:
    """Messages in a topic: the sum of its partitions' end offsets."""
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap, **settings.kafka_client_options())
    await consumer.start()
    try:
        tps = [TopicPartition(settings.topic(name), p) for p in range(settings.partitions)]
        return sum((await consumer.end_offsets(tps)).values())
    finally:
        await consumer.stop()


def peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


@dataclass
class FoldFigures:
    events_per_s: float = 0.0
    p50_ms: float = float("nan")
    p99_ms: float = float("nan")
    offline_events_per_s: float = 0.0
    raw_events_per_s: float = 0.0
    rss_mb: float = float("nan")
    latency_samples: int = 0

    def line(self) -> str:
        return (
            f"fold events_per_s={self.events_per_s:.0f} p50_ms={self.p50_ms:.1f} p99_ms={self.p99_ms:.1f}"
            f" offline_events_per_s={self.offline_events_per_s:.0f}"
            f" raw_events_per_s={self.raw_events_per_s:.0f}"
            f" rss_mb={self.rss_mb:.0f}"
        )


def bench_fold(
    base: Settings, *, pods: int, events: int, rate: int, latency_seconds: float, partitions: int
) -> FoldFigures:
    settings = broker_for_bench(
        replace(
            base, topic_prefix=f"bench-{uuid.uuid4().hex[:8]}.", partitions=partitions, log_level="warning"
        )
    )
    figures = FoldFigures()
    asyncio.run(ensure_topics(settings))
    say(f"topics {settings.topic_prefix}* ({partitions} partitions) on {settings.bootstrap}")

    t = time.monotonic()
    # Events are 1 ms apart in event time; the backlog ends now, so later events are newer.
    start_ms = int(time.time() * 1000) - events
    backlog = list(workload(pods, events, nodes=max(1, pods // 100), seed=1, start_ms=start_ms))
    say(f"generated {len(backlog)} events for {pods} pods in {time.monotonic() - t:.1f}s")
    t = time.monotonic()
    asyncio.run(produce(settings, backlog))
    say(f"produced them in {time.monotonic() - t:.1f}s ({len(backlog) / (time.monotonic() - t):.0f}/s)")

    worker = start_worker(settings)
    try:
        figures.events_per_s = drain_backlog(settings, worker, len(backlog))
        say(f"pipeline: {figures.events_per_s:.0f} events/s")
        if rate > 0 and latency_seconds > 0:
            latencies = measure_latency(settings, worker, pods, rate, latency_seconds)
            figures.latency_samples = len(latencies)
            figures.p50_ms, figures.p99_ms = percentile(latencies, 50), percentile(latencies, 99)
            say(f"latency at {rate}/s: p50 {figures.p50_ms:.1f} ms, p99 {figures.p99_ms:.1f} ms")
        figures.rss_mb = peak_rss_mb(worker.pid)
    finally:
        worker.terminate()
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()

    lines = [encode(e.value) for e in backlog]
    t = time.monotonic()
    count = sum(1 for _ in replay(lines))
    figures.offline_events_per_s = len(lines) / (time.monotonic() - t)
    say(f"offline fold: {figures.offline_events_per_s:.0f} events/s ({count} outputs)")

    figures.raw_events_per_s = asyncio.run(raw_floor(settings, len(backlog)))
    say(f"raw aiokafka floor: {figures.raw_events_per_s:.0f} events/s")
    return figures


def start_worker(settings: Settings) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env.update(
        PODLEDGER_BOOTSTRAP=settings.bootstrap,
        PODLEDGER_TOPIC_PREFIX=settings.topic_prefix,
        PODLEDGER_PARTITIONS=str(settings.partitions),
        PODLEDGER_LOG_LEVEL="warning",
    )
    return subprocess.Popen(
        [sys.executable, "-m", "podledger.cli", "run", "--roles", "fold"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )


def drain_backlog(settings: Settings, worker: subprocess.Popen[bytes], total: int) -> float:
    """Events/s from the worker's first journal entry to its last (start-up excluded)."""
    first: tuple[float, int] | None = None
    last_report = time.monotonic()
    while True:
        if worker.poll() is not None:
            raise UserError(f"the fold worker exited with {worker.returncode}")
        done = asyncio.run(topic_count(settings, "journal"))
        now = time.monotonic()
        if first is None and done > 0:
            first = (now, done)
        if done >= total:
            assert first is not None
            return (done - first[1]) / max(now - first[0], 1e-9)
        if now - last_report > 5:
            say(f"folded {done}/{total} ...")
            last_report = now
        time.sleep(0.05)


def measure_latency(
    settings: Settings, worker: subprocess.Popen[bytes], pods: int, rate: int, seconds: float
) -> list[float]:
    """Produce at `rate` events/s for `seconds`; latency = pod-status append - ingress append."""
    count = int(rate * seconds)
    events = list(workload(max(pods // 10, 1), count, nodes=max(1, pods // 1000), seed=2))
    before = asyncio.run(topic_count(settings, "journal"))
    asyncio.run(_paced_produce(settings, events, rate))
    deadline = time.monotonic() + 120
    while asyncio.run(topic_count(settings, "journal")) < before + count and time.monotonic() < deadline:
        if worker.poll() is not None:
            raise UserError(f"the fold worker exited with {worker.returncode}")
        time.sleep(0.2)
    return asyncio.run(_latencies(settings, {e.ts_ms for e in events}))


async def _paced_produce(settings: Settings, events: list[IngressEvent], rate: int) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.bootstrap, linger_ms=1, **settings.kafka_client_options()
    )
    await producer.start()
    try:
        start = time.monotonic()
        for i, event in enumerate(events):
            due = start + i / rate
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            now_ms = int(time.time() * 1000)
            value = replace(event.value, ts_ms=now_ms)
            await producer.send(
                settings.topic(event.topic),
                key=event.key.encode(),
                value=encode(value),
                partition=partition_for_node(event.node, settings.partitions),
                timestamp_ms=now_ms,
            )
        await producer.flush()
    finally:
        await producer.stop()


async def _latencies(settings: Settings, since: set[int]) -> list[float]:
    floor = min(since)
    consumer = AIOKafkaConsumer(
        settings.topic("pod-status"),
        bootstrap_servers=settings.bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        group_id=None,
        **settings.kafka_client_options(),
    )
    await consumer.start()
    out: list[float] = []
    try:
        while True:
            batch = await consumer.getmany(timeout_ms=1000, max_records=10_000)
            if not batch:
                return out
            for records in batch.values():
                for record in records:
                    if record.value is None:
                        continue
                    vs = decode("pod-status", record.value)
                    if vs.cause.ts_ms >= floor:
                        out.append(record.timestamp - vs.cause.ts_ms)
    finally:
        await consumer.stop()


async def raw_floor(settings: Settings, total: int) -> float:
    """Consume the ingress topics, decode and re-encode each value, produce it: events/s."""
    consumer = AIOKafkaConsumer(
        *(settings.topic(t) for t in INGRESS),
        bootstrap_servers=settings.bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        group_id=f"{settings.topic_prefix}raw-floor",
        **settings.kafka_client_options(),
    )
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap, linger_ms=5, max_batch_size=1 << 20)
    sink = settings.topic("raw-floor")
    admin = await start_admin(settings)
    try:
        from aiokafka.admin import NewTopic

        await admin.create_topics([NewTopic(sink, settings.partitions, settings.replication_factor)])
    finally:
        await admin.close()
    await consumer.start()
    await producer.start()
    try:
        done = 0
        started: float | None = None
        while done < total:
            batch = await consumer.getmany(timeout_ms=1000, max_records=5000)
            if started is None and batch:
                started = time.monotonic()
            for tp, records in batch.items():
                for record in records:
                    value: Any = orjson.loads(record.value)
                    await producer.send(
                        sink, key=record.key, value=orjson.dumps(value), partition=tp.partition
                    )
                    done += 1
        await producer.flush()
        return done / (time.monotonic() - (started or time.monotonic()))
    finally:
        await consumer.stop()
        await producer.stop()


def machine() -> str:
    """The size of this machine, printed with every figure."""
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"machine: {os.cpu_count()} cores, {mem_gb:.0f} GB"


def print_fold(figures: FoldFigures, *, pods: int, events: int, partitions: int) -> None:
    print(f"{machine()}; pods={pods} events={events} partitions={partitions}")
    print(f"pipeline (Faust fold, real broker): {figures.events_per_s:,.0f} events/s")
    print(
        f"latency ingress->pod-status:       p50 {figures.p50_ms:.1f} ms  p99 {figures.p99_ms:.1f} ms"
        f"  ({figures.latency_samples} versions)"
    )
    print(f"offline fold (same messages):       {figures.offline_events_per_s:,.0f} events/s")
    print(f"raw aiokafka loop (floor):          {figures.raw_events_per_s:,.0f} events/s")
    ratio = figures.raw_events_per_s / figures.events_per_s if figures.events_per_s else float("inf")
    print(f"pipeline vs floor:                  {ratio:.1f}x slower")
    print(f"fold worker peak RSS:               {figures.rss_mb:.0f} MB")
    print(figures.line())


# --------------------------------------------------------------------------- bench sink


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
    import threading

    from podledger import local
    from podledger.agents.kube import Kube

    settings = broker_for_bench(
        replace(
            base,
            topic_prefix=f"bench-{uuid.uuid4().hex[:8]}.",
            partitions=base.partitions,
            log_level="warning",
        )
    )
    kubeconfig = settings.kubeconfig
    if not kubeconfig:
        _, kube_handle = local.up(kafka=False, kube=True)
        assert kube_handle is not None
        kubeconfig = kube_handle.kubeconfig
        say(f"using the local apiserver at {kube_handle.server}")
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
    env = dict(os.environ)
    env.update(
        PODLEDGER_BOOTSTRAP=settings.bootstrap,
        KUBECONFIG=kubeconfig,
        PODLEDGER_TOPIC_PREFIX=settings.topic_prefix,
        PODLEDGER_PARTITIONS=str(settings.partitions),
        PODLEDGER_SINK_QPS=str(qps),
        PODLEDGER_SINK_BURST=str(burst),
        PODLEDGER_SINK_READ=settings.sink_read,
        PODLEDGER_NODE=node,
        PODLEDGER_LOG_LEVEL="warning",
    )
    sink = subprocess.Popen(
        [sys.executable, "-m", "podledger.cli", "run", "--roles", "sink"], env=env, stdin=subprocess.DEVNULL
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
        sink.terminate()
        try:
            sink.wait(30)
        except subprocess.TimeoutExpired:
            sink.kill()
    return figures


async def _churn(
    settings: Settings,
    pods: list[dict[str, Any]],
    node: str,
    interval: float,
    seconds: float,
    published: dict[str, dict[int, float]],
    lock: Any,
) -> None:
    """Each pod gets a new version every `interval` s, the pods evenly spread over the interval
    (pods change on their own schedules, not all at once)."""
    from podledger.schemas import models

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
                vs = models.VersionedPodStatus(
                    meta["uid"],
                    "default",
                    meta["name"],
                    node,
                    versions[i],
                    status,
                    True,
                    False,
                    False,
                    None,
                    False,
                    models.Cause("bench", "pod-updates", 0, versions[i], 0),
                    int(time.time() * 1000),
                )
                with lock:
                    published[meta["uid"]][versions[i]] = time.time()
                await producer.send(
                    settings.topic("pod-status"),
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


# --------------------------------------------------------------------------- bench node


@dataclass
class NodeFigures:
    pods: int = 0
    relists: list[float] | None = None
    events: int = 0
    seconds: float = 0.0
    cpu_pct: float = 0.0
    restarts: int = 0
    listings: list[float] | None = None

    def line(self) -> str:
        relists = [r * 1000 for r in self.relists or []]
        return (
            f"node pods={self.pods} relist_p99_ms={percentile(relists, 99):.1f}"
            f" events_per_s={self.events / max(self.seconds, 1e-9):.0f} cpu_pct={self.cpu_pct:.0f}"
        )


def bench_node(base: Settings, *, pods: int, seconds: float, runtime: str) -> NodeFigures:
    """A whole node agent (pod workers, PLEG, prober) running `pods` pods whose containers crash and
    are restarted, against the real broker."""
    if runtime != "sim":
        raise UserError(
            "bench node runs the sim runtime (--runtime sim): the process runtime starts real processes"
        )
    settings = broker_for_bench(
        replace(
            base,
            topic_prefix=f"bench-{uuid.uuid4().hex[:8]}.",
            partitions=base.partitions,
            log_level="warning",
            node=f"bench-node-{uuid.uuid4().hex[:6]}",
            runtime="sim",
            api_source=False,
            manifest_dir="",
            manifest_url="",
        )
    )
    asyncio.run(ensure_topics(settings))
    return asyncio.run(_bench_node(settings, pods, seconds))


async def _bench_node(settings: Settings, pods: int, seconds: float) -> NodeFigures:
    import random

    from podledger.agents.node import NodeAgent
    from podledger.agents.runtime.sim import ANNOTATION_EXIT_CODE, ANNOTATION_RUN_SECONDS, SimRuntime
    from podledger.kafka import Publisher

    rng = random.Random(7)
    node = settings.node
    publisher = Publisher(settings)
    await publisher.start()
    say(f"publishing {pods} pods for node {node} to pod-updates ...")
    try:
        batch = []
        for i in range(pods):
            uid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            pod = {
                "metadata": {
                    "uid": uid,
                    "name": f"pod-{i:05d}",
                    "namespace": "default",
                    # Each container runs 5 to 60 s, then fails and is restarted: steady churn.
                    "annotations": {
                        ANNOTATION_RUN_SECONDS: str(rng.uniform(5, 60)),
                        ANNOTATION_EXIT_CODE: "1",
                    },
                },
                "spec": {"nodeName": node, "containers": [{"name": "app", "image": "example/app:1"}]},
            }
            update = models.PodUpdate("ADD", "api", node, pod, int(time.time() * 1000))
            batch.append(publisher.publish("pod-updates", uid, update, node))
            if len(batch) == 1000:
                await asyncio.gather(*batch)
                batch = []
        await asyncio.gather(*batch)
    finally:
        await publisher.stop()

    sim = SimRuntime(seed=7)
    agent = NodeAgent(settings, sim)
    figures = NodeFigures(pods=pods)
    publish_pleg = agent.pleg.publish

    async def counting(event: Any) -> Any:
        figures.events += 1
        return await publish_pleg(event)

    agent.pleg.publish = counting
    task = asyncio.ensure_future(agent.run())
    try:
        await asyncio.wait_for(agent.ready.wait(), 300)
        started = time.monotonic()
        while len(sim.relist(time.time())) < pods and time.monotonic() - started < 120:
            await asyncio.sleep(0.5)
        say(f"{pods} sim pods running on node {node}; measuring for {seconds:.0f}s")
        await asyncio.sleep(2)  # past the first relists, which report every pod starting
        agent.pleg.relist_seconds.clear()
        agent.pleg.list_seconds.clear()
        figures.events = 0
        cpu0, wall0 = time.process_time(), time.monotonic()
        await asyncio.sleep(seconds)
        if task.done():
            task.result()  # the agent died: say why instead of printing empty figures
        figures.seconds = time.monotonic() - wall0
        figures.cpu_pct = 100 * (time.process_time() - cpu0) / figures.seconds
        figures.relists = list(agent.pleg.relist_seconds)
        figures.listings = list(agent.pleg.list_seconds)
        figures.restarts = sum(
            c["restart_count"] for s in sim.relist(time.time()).values() for c in s["containers"][:1]
        )
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return figures


def print_node(figures: NodeFigures) -> None:
    relists = [r * 1000 for r in figures.relists or []]
    print(f"{machine()}; pods={figures.pods} (sim runtime), {len(relists)} relists")
    listings = [r * 1000 for r in figures.listings or []]
    print(
        f"relist time:        p50 {percentile(relists, 50):.1f} ms  p99 {percentile(relists, 99):.1f} ms"
        " (list, diff, publish until acknowledged)"
    )
    print(f"  list + diff only: p50 {percentile(listings, 50):.1f} ms  p99 {percentile(listings, 99):.1f} ms")
    rate = figures.events / max(figures.seconds, 1e-9)
    print(f"events published:   {figures.events} ({rate:.0f}/s, each with its snapshot)")
    print(
        f"node agent CPU:     {figures.cpu_pct:.0f}% of one core (pod workers, PLEG, prober, Kafka clients)"
    )
    print(f"container restarts: {figures.restarts} in total by the end (CrashLoopBackOff included)")
    print(figures.line())
