"""`podledger bench node`: a whole node agent (pod workers, PLEG, prober) on the sim runtime, its
pods' containers crashing and restarting, against a real broker. The PLEG's timings arrive through
its `on_relist` hook."""

from __future__ import annotations

import asyncio
import os
import random
import time
import uuid
from dataclasses import dataclass, field

from podledger.agents.node import NodeAgent
from podledger.agents.pleg import RelistTiming
from podledger.agents.runtime.sim import ANNOTATION_EXIT_CODE, ANNOTATION_RUN_SECONDS, SimRuntime
from podledger.bench.harness import bench_settings, machine, percentile, say
from podledger.bench.recovery import rss_mb
from podledger.config import Settings
from podledger.errors import UserError
from podledger.heap import GcPauses
from podledger.kafka import Publisher
from podledger.schemas import models
from podledger.streams.topics import ensure_topics
from podledger.types import PodOp, Topic

WARMUP_RELISTS = 3  # relists completed after every pod is in the runtime before measuring


@dataclass
class NodeFigures:
    pods: int = 0
    relists: list[float] | None = None
    events: int = 0
    seconds: float = 0.0
    cpu_pct: float = 0.0
    restarts: int = 0
    listings: list[float] | None = None
    startup: list[float] | None = None  # relists up to the steady state, every pod starting
    startup_events: int = 0
    queued: list[float] | None = None  # relists up to their last event queued (before acknowledgement)
    # (generation, seconds, whether the agent scheduled it between relists)
    gc_pauses: list[tuple[int, float, bool]] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)  # the agent's resident set, every RSS_EVERY_S
    containers: tuple[int, int] = (0, 0)  # containers the runtime holds, as the window starts and ends

    def line(self) -> str:
        relists = [r * 1000 for r in self.relists or []]
        return (
            f"node pods={self.pods} relist_p99_ms={percentile(relists, 99):.1f}"
            f" events_per_s={self.events / max(self.seconds, 1e-9):.0f} cpu_pct={self.cpu_pct:.0f}"
        )


RSS_EVERY_S = 5.0


async def sample_rss(samples: list[float], every_s: float = RSS_EVERY_S) -> None:
    """This process's resident set every `every_s` until cancelled: a service's must stay flat."""
    pid = os.getpid()
    while True:
        samples.append(rss_mb(pid))
        await asyncio.sleep(every_s)


def bench_node(base: Settings, *, pods: int, seconds: float, runtime: str) -> NodeFigures:
    """A whole node agent (pod workers, PLEG, prober) running `pods` pods whose containers crash and
    are restarted, against the real broker."""
    if runtime != "sim":
        raise UserError(
            "bench node runs the sim runtime (--runtime sim): the process runtime starts real processes"
        )
    settings = bench_settings(
        base,
        node=f"bench-node-{uuid.uuid4().hex[:6]}",
        runtime="sim",
        api_source=False,
        manifest_dir="",
        manifest_url="",
    )
    asyncio.run(ensure_topics(settings))
    return asyncio.run(_bench_node(settings, pods, seconds))


async def _bench_node(settings: Settings, pods: int, seconds: float) -> NodeFigures:
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
            update = models.PodUpdate(PodOp.ADD, "api", node, pod, int(time.time() * 1000))
            batch.append(publisher.publish(Topic.POD_UPDATES, uid, update, node))
            if len(batch) == 1000:
                await asyncio.gather(*batch)
                batch = []
        await asyncio.gather(*batch)
    finally:
        await publisher.stop()

    sim = SimRuntime(seed=7)
    figures = NodeFigures(pods=pods)
    timings: list[RelistTiming] = []
    agent = NodeAgent(settings, sim, on_relist=timings.append)
    task = asyncio.ensure_future(agent.run())
    try:
        await asyncio.wait_for(agent.ready.wait(), 300)
        started = time.monotonic()
        while len(sim.relist(time.time())) < pods and time.monotonic() - started < 120:
            await asyncio.sleep(0.5)
        # Past the relists that report every pod starting (the one under way may be partial, the next
        # may catch the last starts): the steady state is measured, the startup reported apart.
        warm = len(timings) + WARMUP_RELISTS
        while len(timings) < warm and time.monotonic() - started < 300:
            await asyncio.sleep(0.2)
        figures.startup = [t.total_s for t in timings]
        figures.startup_events = max((t.published for t in timings), default=0)
        say(f"{pods} sim pods running on node {node}; measuring for {seconds:.0f}s")
        timings.clear()
        containers_before = _containers(sim)
        cpu0, wall0 = time.process_time(), time.monotonic()
        sampler = asyncio.ensure_future(sample_rss(figures.rss_mb))
        with GcPauses(lambda: agent.collector.collecting) as collector:
            await asyncio.sleep(seconds)
        sampler.cancel()
        figures.rss_mb.append(rss_mb(os.getpid()))
        figures.gc_pauses = collector.pauses
        if task.done():
            task.result()  # the agent died: say why instead of printing empty figures
        figures.seconds = time.monotonic() - wall0
        figures.cpu_pct = 100 * (time.process_time() - cpu0) / figures.seconds
        figures.relists = [t.total_s for t in timings]
        figures.listings = [t.list_s for t in timings]
        figures.queued = [t.queued_s for t in timings]
        figures.events = sum(t.published for t in timings)
        figures.containers = (containers_before, _containers(sim))
        figures.restarts = sum(
            c["restart_count"] for s in sim.relist(time.time()).values() for c in s["containers"][:1]
        )
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return figures


def _containers(sim: SimRuntime) -> int:
    return sum(len(s["containers"]) for s in sim.relist(time.time()).values())


def print_node(figures: NodeFigures) -> None:
    relists = [r * 1000 for r in figures.relists or []]
    print(f"{machine()}; pods={figures.pods} (sim runtime), {len(relists)} relists")
    listings = [r * 1000 for r in figures.listings or []]
    print(
        f"relist time:        p50 {percentile(relists, 50):.1f} ms  p99 {percentile(relists, 99):.1f} ms"
        " (list, diff, publish until acknowledged)"
    )
    print(f"  list + diff only: p50 {percentile(listings, 50):.1f} ms  p99 {percentile(listings, 99):.1f} ms")
    queued = [r * 1000 for r in figures.queued or []]
    print(
        f"  events queued:    p50 {percentile(queued, 50):.1f} ms  p99 {percentile(queued, 99):.1f} ms"
        " (list, diff, queue; the loop shared with the other agents)"
    )
    startup = [r * 1000 for r in figures.startup or []]
    print(
        f"startup relists:    {len(startup)} before measuring, longest {max(startup, default=0.0):.1f} ms"
        f" (at most {figures.startup_events} events: every pod starting)"
    )
    for scheduled in (False, True):
        pauses = [(g, p * 1000) for g, p, s in figures.gc_pauses if s == scheduled]
        by_generation = ", ".join(
            f"gen {g}: {sum(1 for h, _ in pauses if h == g)}"
            f" longest {max((p for h, p in pauses if h == g), default=0.0):.0f} ms"
            for g in sorted({g for g, _ in pauses})
        )
        print(
            f"{'  between relists' if scheduled else 'GC pauses, automatic'}: {len(pauses)},"
            f" {sum(p for _, p in pauses) / 1000:.2f} s in all ({by_generation or 'none'})"
        )
    full = [f"{p * 1000:.0f}" for g, p, s in figures.gc_pauses if g == 2]
    full_text = f"{', '.join(full)} ms (in order; one may settle the startup heap)" if full else "none"
    print(f"  old generation:   {full_text}")
    rss = figures.rss_mb or [float("nan")]
    print(
        f"agent RSS:          {rss[0]:.0f} MB at the start, {max(rss):.0f} MB at most,"
        f" {rss[-1]:.0f} MB at the end ({len(rss)} samples)"
    )
    per_minute = rss[:: max(1, round(60 / RSS_EVERY_S))]
    print(f"  each minute:      {', '.join(f'{r:.0f}' for r in per_minute)} MB")
    rate = figures.events / max(figures.seconds, 1e-9)
    print(f"events published:   {figures.events} ({rate:.0f}/s, each with its snapshot)")
    print(
        f"node agent CPU:     {figures.cpu_pct:.0f}% of one core (pod workers, PLEG, prober, Kafka clients)"
    )
    print(f"container restarts: {figures.restarts} in total by the end (CrashLoopBackOff included)")
    print(
        f"runtime containers: {figures.containers[0]} as the window starts,"
        f" {figures.containers[1]} as it ends (dead ones beyond each container's newest are collected)"
    )
    print(figures.line())
