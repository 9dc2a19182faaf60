"""The orchestration of `podledger chaos`: real processes, real faults, then the checks.

1. A Kafka broker and etcd + kube-apiserver of its own (in a work directory), the topics under a
   fresh prefix, one Node per sim node and `pods` API pods bound to them.
2. The pipeline as separate processes (`pipeline`): `podledger node` per node (sim runtime, pods
   from the apiserver), two `podledger run --roles fold` (one consumer group) and `podledger run
   --roles sink`. A supervisor starts again whatever exits on its own, and reports it.
3. The chaos window (`seconds`): the churn (`churn`) deletes an API pod and creates one every
   CHURN_LIFETIME_S / pods seconds, while the faults of `plan.plan_faults` happen on time (`faults`).
4. `converge_s` (`watch`): from the end of the last fault until the apiserver has caught up with
   pod-status (checks.live_mismatches, polled every second, also after the window while it settles).
5. The end: the churn stops, every pod gets its version, the node agents are stopped (the input
   ends), the fold and the sink drain, and every topic is read once more for the checks (`verdict`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from podledger.agents.kube import Kube
from podledger.agents.kube_client import KubeError
from podledger.chaos import checks, verdict
from podledger.chaos.churn import Churn
from podledger.chaos.config import ChaosConfig, ChaosResult, FaultRecord, say
from podledger.chaos.faults import inject
from podledger.chaos.pipeline import pipeline_services, supervise
from podledger.chaos.plan import MANAGED_BY, MANAGED_LABEL, Fault, plan_faults
from podledger.chaos.services import Service, stop_all
from podledger.chaos.snapshot import Snapshot
from podledger.chaos.watch import Watch
from podledger.config import Settings
from podledger.errors import UserError
from podledger.local.apiserver import KubeHandle, start_kube
from podledger.local.broker import KafkaHandle, start_kafka
from podledger.streams.topics import ensure_topics
from podledger.types import JSONDict

WARM_TIMEOUT_S = 300.0  # every first pod has a version this soon after the pipeline starts


class Chaos:
    """One chaos run, from its broker and apiserver to the verdict in `result`."""

    def __init__(self, config: ChaosConfig, workdir: Path) -> None:
        self.config = config
        self.workdir = workdir
        self.run_id = uuid.uuid4().hex[:6]
        self.kafka: KafkaHandle | None = None
        self.kube_handle: KubeHandle | None = None
        self.settings = Settings()
        self.kube: Kube | None = None
        self.services: dict[str, Service] = {}
        self.node_names = [f"chaos-{self.run_id}-node-{i}" for i in range(config.nodes)]
        self.faults = plan_faults(
            config.seed,
            seconds=config.seconds,
            kills=config.kills,
            targets=["fold-a", "fold-b", "sink", *(f"node-{i}" for i in range(config.nodes))],
            broker_restarts=config.broker_restarts,
            apiserver_outage_s=config.apiserver_outage_s,
        )
        self.done: list[FaultRecord] = []
        self.churn = Churn(config.seed, self.run_id, self.node_names, self.kube_call, self.note)
        self.t0 = 0.0  # monotonic start of the chaos window
        self.result = ChaosResult(seed=config.seed, workdir=str(workdir))

    # ------------------------------------------------------------------ set-up

    def start_instances(self) -> None:
        """Our own broker and apiserver (unless the user's are named), on free loopback ports."""
        bootstrap, kubeconfig = self.config.bootstrap, self.config.kubeconfig
        if not bootstrap:
            say(f"starting a Kafka broker in {self.workdir / 'kafka'} ...")
            self.kafka = start_kafka(self.workdir / "kafka")
            bootstrap = self.kafka.bootstrap
        if not kubeconfig:
            say(f"starting etcd and kube-apiserver in {self.workdir / 'kube'} ...")
            self.kube_handle = start_kube(self.workdir / "kube")
            kubeconfig = self.kube_handle.kubeconfig
        prefix = f"chaos-{self.run_id}."
        env = self.config.kafka_env if self.config.bootstrap else {}
        self.settings = Settings.from_env(
            env=env,
            bootstrap=bootstrap,
            kubeconfig=kubeconfig,
            topic_prefix=prefix,
            partitions=self.config.partitions,
            node=f"chaos-{self.run_id}",
        )
        self.kube = Kube.from_kubeconfig(kubeconfig, qps=200, burst=200)

    def stop_instances(self) -> None:
        if self.kube is not None:
            self.kube.close()
        for handle in (self.kube_handle, self.kafka):
            if handle is not None:
                with contextlib.suppress(Exception):
                    handle.stop()

    # ------------------------------------------------------------------ helpers

    def elapsed(self) -> str:
        return f"[{time.monotonic() - self.t0:6.1f}s]" if self.t0 else "[  setup]"

    def note(self, message: str) -> None:
        say(f"{self.elapsed()} {message}")

    async def kube_call(self, call: Callable[[Kube], Any]) -> Any:
        assert self.kube is not None
        kube = self.kube
        return await asyncio.to_thread(call, kube)

    def chaos_pods(self, kube: Kube) -> list[JSONDict]:
        prefix = f"chaos-{self.run_id}-pod-"
        return [
            p
            for p in kube.list_pods().get("items") or []
            if p["metadata"]["name"].startswith(prefix)
            and (p["metadata"].get("labels") or {}).get(MANAGED_LABEL) == MANAGED_BY
        ]

    async def api_pods(self) -> list[JSONDict]:
        """The run's API pods as the apiserver shows them now."""
        pods: list[JSONDict] = await self.kube_call(self.chaos_pods)
        return pods

    async def until(self, check: Callable[[], Awaitable[bool]], timeout: float, period: float = 1.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if await check():
                return True
            await asyncio.sleep(period)
        return False

    # ------------------------------------------------------------------ main

    async def main(self) -> None:
        cfg, s = self.config, self.settings
        await ensure_topics(s)
        await self.kube_call(lambda k: [k.ensure_node(n) for n in self.node_names])
        for _ in range(cfg.pods):
            if not await self.churn.create_pod():
                raise UserError("cannot create the first pods in the apiserver")
        self.services = pipeline_services(cfg, s, self.run_id, self.node_names, self.workdir)
        for svc in self.services.values():
            svc.start()
        say(
            f"{cfg.nodes} sim node agents, 2 fold workers and the sink started on topics {s.topic_prefix}*"
            f" ({s.partitions} partitions); logs in {self.workdir / 'logs'}"
        )
        watch = Watch(s, self.api_pods, self.result, self.note)
        background = [
            asyncio.ensure_future(supervise(self.services, self.note)),
            asyncio.ensure_future(watch.tail_history()),
        ]
        try:
            await self.run_window(watch, background)
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)

    async def run_window(self, watch: Watch, background: list[asyncio.Task[None]]) -> None:
        cfg = self.config

        async def warm() -> bool:
            for task in background:
                if task.done():
                    task.result()
            return len(watch.seen) >= cfg.pods

        say(f"waiting for the first version of each of the {cfg.pods} pods ...")
        if not await self.until(warm, WARM_TIMEOUT_S):
            tails = "\n".join(f"--- {n} ---\n{svc.tail(15)}" for n, svc in self.services.items())
            raise UserError(f"the pipeline did not start within {WARM_TIMEOUT_S:.0f}s:\n{tails}")
        kinds = Counter(f.kind for f in self.faults)
        others = [f"{f.kind} at {f.at_s:.0f}s" for f in self.faults if f.kind != "kill"]
        say(f"plan (seed {cfg.seed}): {kinds['kill']} kills" + "".join(f", {o}" for o in others))
        self.t0 = time.monotonic()
        self.note(f"chaos window of {cfg.seconds:.0f}s: churn and {len(self.faults)} faults")
        end = self.t0 + cfg.seconds
        faults = [asyncio.ensure_future(self.run_fault(f)) for f in self.faults]
        churn = asyncio.ensure_future(self.churn.run_until(end, cfg.pods))
        converge = asyncio.ensure_future(
            watch.watch_convergence(faults, self.done, self.t0, end + cfg.settle_s)
        )
        try:
            await churn
            self.note(f"window over: churn stopped ({self.churn.summary()})")
            await converge
            # Every pod, the newest included, shows its last versions before the input ends.
            if not await self.until(lambda: watch.live_ok(0.0), cfg.settle_s):
                self.note("not every pod has caught up; stopping the node agents anyway")
            stop_all(svc for name, svc in self.services.items() if name.startswith("node-"))
            self.note("node agents stopped: the input is over; waiting for the fold and the sink to drain")
            snapshot = await watch.drain(cfg.settle_s)
            self.evaluate(snapshot)
        finally:
            for task in [*faults, churn, converge]:
                task.cancel()
            await asyncio.gather(*faults, churn, converge, return_exceptions=True)
            stop_all(self.services.values())

    async def run_fault(self, fault: Fault) -> None:
        record = await inject(
            fault,
            t0=self.t0,
            services=self.services,
            kafka=self.kafka,
            kube_handle=self.kube_handle,
            result=self.result,
            note=self.note,
        )
        self.done.append(record)

    # ------------------------------------------------------------------ the checks

    def evaluate(self, snap: Snapshot) -> None:
        """The verdict into `result`; the apiserver is asked here, the rest is `verdict`'s."""
        r = self.result
        verdict.check_records(r, snap)
        try:
            pods = self.chaos_pods(self._kube())
            r.api = checks.apiserver_mismatches(pods, checks.latest_versions(snap.versions()), time.time())
        except KubeError as exc:
            r.api = [checks.ApiMismatch("", "", "", f"apiserver: {exc}")]
        exits = {name: svc.exits for name, svc in self.services.items()}
        r.figures += verdict.figures(self.config, r, snap, self.churn.summary(), exits, self.done)
        r.problems += verdict.problems(r, snap, self.done)
        r.figures += verdict.exit_lines(exits)

    def _kube(self) -> Kube:
        assert self.kube is not None
        return self.kube
