"""The orchestration of `podledger chaos`: real processes, real faults, then the checks.

1. A Kafka broker and etcd + kube-apiserver of its own (in a work directory), the topics under a
   fresh prefix, one Node per sim node and `pods` API pods bound to them.
2. The pipeline as separate processes: `podledger node` per node (sim runtime, pods from the
   apiserver), two `podledger run --roles fold` (one consumer group) and `podledger run --roles
   sink`. A supervisor starts again whatever exits on its own, and reports it.
3. The chaos window (`seconds`): the churn deletes an API pod and creates one every
   CHURN_LIFETIME_S / pods seconds, while the faults of `plan.plan_faults` happen on time.
4. `converge_s`: from the end of the last fault until the apiserver has caught up with pod-status
   (checks.live_mismatches, polled every second, also after the window while it settles).
5. The end: the churn stops, every pod gets its version, the node agents are stopped (the input
   ends), the fold and the sink drain, and every topic is read once more for the checks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import shutil
import signal
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from aiokafka import TopicPartition

from podledger.agents.kube import Kube, KubeError
from podledger.chaos import checks
from podledger.chaos.config import CONVERGE_GOAL_S, ChaosConfig, ChaosResult, FaultRecord, clock, say
from podledger.chaos.plan import MANAGED_BY, MANAGED_LABEL, Fault, chaos_pod, delete_grace_s, plan_faults
from podledger.chaos.services import Service, stop_all
from podledger.chaos.snapshot import Snapshot, read_snapshot
from podledger.config import Settings
from podledger.errors import UserError
from podledger.kafka import new_consumer
from podledger.local.apiserver import KubeHandle, start_kube
from podledger.local.broker import KafkaHandle, restart_kafka, start_kafka
from podledger.schemas import decode
from podledger.streams.topics import admin_client, ensure_topics
from podledger.types import INGRESS_TOPICS, JSONDict, Topic

CHURN_LIFETIME_S = 120.0  # an API pod lives this long on average: one replaced every 120/pods s
LIVE_SLACK_S = 5.0  # a version younger than this may still be on its way to the apiserver
NEW_POD_S = 15.0  # a pod younger than this may still be on its way to its first version
WARM_TIMEOUT_S = 300.0  # every first pod has a version this soon after the pipeline starts
NO_PROGRESS_S = 45.0  # the drain gives up when nothing moved for this long
RESTART_BACKOFF_S = (1.0, 10.0)  # a process that exited on its own is started again after this
APISERVER_STOP_GRACE_S = 5.0  # the outage begins with SIGTERM; SIGKILL if it drains longer


# --------------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------------


class Chaos:
    def __init__(self, config: ChaosConfig, workdir: Path) -> None:
        self.config = config
        self.workdir = workdir
        self.run_id = uuid.uuid4().hex[:6]
        self.kafka: KafkaHandle | None = None
        self.kube_handle: KubeHandle | None = None
        self.settings = Settings()
        self.kube: Kube | None = None
        self.services: dict[str, Service] = {}
        self.node_names: list[str] = []
        self.faults = plan_faults(
            config.seed,
            seconds=config.seconds,
            kills=config.kills,
            targets=["fold-a", "fold-b", "sink", *(f"node-{i}" for i in range(config.nodes))],
            broker_restarts=config.broker_restarts,
            apiserver_outage_s=config.apiserver_outage_s,
        )
        self.done: list[FaultRecord] = []
        self.rng = random.Random(f"{config.seed}:churn")
        self.live_pods: set[str] = set()
        self.pod_seq = 0
        self.churn = Counter[str]()
        self.seen: dict[str, dict[int, checks.SeenVersion]] = {}  # pod-status-history as it arrives
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
        self.node_names = [f"chaos-{self.run_id}-node-{i}" for i in range(self.config.nodes)]

    def stop_instances(self) -> None:
        if self.kube is not None:
            self.kube.close()
        for handle in (self.kube_handle, self.kafka):
            if handle is not None:
                with contextlib.suppress(Exception):
                    handle.stop()

    def _services(self) -> dict[str, Service]:
        s = self.settings
        base = {k: v for k, v in os.environ.items() if not k.startswith("PODLEDGER_") and k != "KUBECONFIG"}
        base.update(self.config.kafka_env if self.config.bootstrap else {})
        base.update(
            PODLEDGER_BOOTSTRAP=s.bootstrap,
            KUBECONFIG=s.kubeconfig,
            PODLEDGER_TOPIC_PREFIX=s.topic_prefix,
            PODLEDGER_PARTITIONS=str(s.partitions),
            PODLEDGER_LOG_LEVEL="info",
            PODLEDGER_SESSION_TIMEOUT_MS="6000",
            PODLEDGER_SINK_RECONCILE_MS="2000",
            PODLEDGER_NODE=f"chaos-{self.run_id}",
        )
        logs = self.workdir / "logs"
        logs.mkdir(parents=True, exist_ok=True)

        def service(name: str, args: list[str], **env: str) -> Service:
            data = self.workdir / "data" / name
            data.mkdir(parents=True, exist_ok=True)
            return Service(name, args, {**base, "PODLEDGER_DATA_DIR": str(data), **env}, logs / f"{name}.log")

        out = {
            "fold-a": service("fold-a", ["run", "--roles", "fold"]),
            "fold-b": service("fold-b", ["run", "--roles", "fold"]),
            "sink": service("sink", ["run", "--roles", "sink"]),
        }
        for i, node in enumerate(self.node_names):
            out[f"node-{i}"] = service(
                f"node-{i}",
                ["node"],
                PODLEDGER_NODE=node,
                PODLEDGER_RUNTIME="sim",
                PODLEDGER_SIM_SEED=str((self.config.seed * 131 + i) % 2**32),
                PODLEDGER_API_SOURCE="true",
            )
        return out

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

    async def create_pod(self) -> bool:
        self.pod_seq += 1
        name = f"chaos-{self.run_id}-pod-{self.pod_seq:05d}"
        pod = chaos_pod(self.rng, name, self.rng.choice(self.node_names))
        try:
            await self.kube_call(lambda k: k.create_pod(pod))
        except KubeError as exc:
            self.churn["create failed"] += 1
            if self.churn["create failed"] == 1 or exc.status != 0:
                self.note(f"churn: creating {name} failed ({exc.reason}); the churn goes on")
            return False
        self.live_pods.add(name)
        self.churn["created"] += 1
        return True

    async def delete_pod(self) -> None:
        if not self.live_pods:
            return
        name = self.rng.choice(sorted(self.live_pods))
        grace = delete_grace_s(self.rng)
        try:
            await self.kube_call(lambda k: k.delete_pod("default", name, grace_seconds=grace))
        except KubeError as exc:
            if not exc.not_found:
                self.churn["delete failed"] += 1
                return
        self.live_pods.discard(name)
        self.churn["deleted at once" if grace == 0 else "deleted"] += 1

    async def until(self, check: Callable[[], Awaitable[bool]], timeout: float, period: float = 1.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if await check():
                return True
            await asyncio.sleep(period)
        return False

    # ------------------------------------------------------------------ background tasks

    async def supervise(self) -> None:
        """Start again whatever exited on its own (as a kubelet or systemd would), with back-off."""
        pending: dict[str, float] = {}
        while True:
            await asyncio.sleep(0.5)
            now = time.monotonic()
            for name, svc in self.services.items():
                if not svc.wanted or svc.held or svc.proc is None:
                    continue
                if name in pending:
                    if now >= pending[name]:
                        del pending[name]
                        svc.start()
                    continue
                code = svc.proc.poll()
                if code is None:
                    if svc.crash_streak and now - svc.started_at > 30:  # up for a while: forgiven
                        svc.crash_streak = 0
                    continue
                svc.exits.append((time.time(), code))
                svc.crash_streak += 1
                delay = min(RESTART_BACKOFF_S[0] * 2 ** (svc.crash_streak - 1), RESTART_BACKOFF_S[1])
                last = svc.tail(3).strip().splitlines()
                self.note(
                    f"{name} exited on its own (code {code}); starting it again in {delay:.0f}s"
                    f" — {last[-1][:160] if last else ''}"
                )
                pending[name] = now + delay

    async def tail_history(self) -> None:
        """Follow pod-status-history: every version, and when the fold published it."""
        consumer = new_consumer(self.settings)
        await consumer.start()
        try:
            topic = self.settings.topic(Topic.POD_STATUS_HISTORY)
            tps = [TopicPartition(topic, p) for p in range(self.settings.partitions)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            while True:
                batch = await consumer.getmany(timeout_ms=500, max_records=5000)
                for records in batch.values():
                    for m in records:
                        vs = decode(Topic.POD_STATUS_HISTORY, m.value)
                        self.seen.setdefault(vs.uid, {}).setdefault(
                            vs.version, checks.SeenVersion.of(vs, m.timestamp / 1000)
                        )
        finally:
            await consumer.stop()

    async def churn_until(self, end: float) -> None:
        interval = CHURN_LIFETIME_S / self.config.pods
        next_at = time.monotonic() + interval
        while next_at < end:
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            next_at += interval
            await self.delete_pod()
            await self.create_pod()

    async def run_fault(self, fault: Fault) -> None:
        await asyncio.sleep(max(0.0, self.t0 + fault.at_s - time.monotonic()))
        started = time.time()
        if fault.kind == "kill":
            svc = self.services[fault.target]
            if not svc.running or svc.held:
                self.note(f"skip: {fault.target} is down already")
                self.done.append(FaultRecord(fault, started, started, done=False))
                return
            svc.held = True
            svc.kill()
            self.result.kills += 1
            self.note(
                f"SIGKILL {fault.target} (kill {self.result.kills}); restart in {fault.duration_s:.1f}s"
            )
            await asyncio.sleep(fault.duration_s)
            svc.start()
            svc.held = False
        elif fault.kind == "broker-restart":
            assert self.kafka is not None
            kafka = self.kafka
            self.note("restarting the Kafka broker (same data directory and port) ...")
            await asyncio.to_thread(restart_kafka, kafka)
            self.result.broker_restarts += 1
            self.note(f"the Kafka broker is back after {time.time() - started:.1f}s")
        else:
            assert self.kube_handle is not None
            handle = self.kube_handle
            self.note(f"stopping kube-apiserver for {fault.duration_s:.0f}s (etcd keeps running)")
            await asyncio.to_thread(handle.stop_apiserver, APISERVER_STOP_GRACE_S)
            await asyncio.sleep(max(0.0, started + fault.duration_s - time.time()))
            self.note("starting kube-apiserver again")
            await asyncio.to_thread(handle.start_apiserver)
            self.result.apiserver_outage_s += time.time() - started
            self.note(f"kube-apiserver is back after {time.time() - started:.1f}s")
        self.done.append(FaultRecord(fault, started, time.time()))

    async def live(
        self, new_pod_s: float, input_ends: dict[tuple[str, int], int] | None = None
    ) -> list[checks.ApiMismatch] | None:
        """Pods that have not caught up with pod-status now; None when the apiserver cannot say."""
        try:
            pods = await self.kube_call(self.chaos_pods)
        except KubeError:
            return None
        return checks.live_mismatches(
            pods, self.seen, time.time(), slack_s=LIVE_SLACK_S, new_pod_s=new_pod_s, input_ends=input_ends
        )

    async def input_ends(self) -> dict[tuple[str, int], int]:
        """(ingress topic, partition) -> end offset, now."""
        names = {self.settings.topic(t): str(t) for t in INGRESS_TOPICS}
        consumer = new_consumer(self.settings)
        await consumer.start()
        try:
            tps = [TopicPartition(n, p) for n in names for p in range(self.settings.partitions)]
            ends = await consumer.end_offsets(tps)
        finally:
            await consumer.stop()
        return {(names[tp.topic], tp.partition): offset for tp, offset in ends.items()}

    async def fold_lag(self, admin: Any, ends: dict[tuple[str, int], int]) -> int:
        """Ingress records below `ends` that the fold's consumer group has not committed yet."""
        names = {self.settings.topic(t): str(t) for t in INGRESS_TOPICS}
        offsets = await admin.list_consumer_group_offsets(self.settings.fold_app_id)
        committed = {
            (names[tp.topic], tp.partition): meta.offset for tp, meta in offsets.items() if tp.topic in names
        }
        return sum(max(0, end - max(committed.get(key, 0), 0)) for key, end in ends.items())

    async def watch_convergence(self, faults: list[asyncio.Task[None]], deadline: float) -> None:
        """converge_s: from the end of the last fault until the fold has folded every input written
        until then and the apiserver shows what it made of it (checks.live_mismatches)."""
        await asyncio.gather(*faults)
        last_end = max((r.ended for r in self.done), default=time.time() - (time.monotonic() - self.t0))
        ends = await self.input_ends()
        self.note(
            f"the last fault is over; {sum(ends.values())} ingress records so far; watching the catch-up"
        )
        behind: list[checks.ApiMismatch] | None = None
        lag = -1
        admin = admin_client(self.settings)
        await admin.start()
        try:
            while time.monotonic() < deadline:
                with contextlib.suppress(Exception):  # the group may be rebalancing: ask again
                    lag = await self.fold_lag(admin, ends)
                if lag == 0:
                    behind = await self.live(NEW_POD_S, ends)
                    if behind == []:
                        self.result.converge_s = time.time() - last_end
                        self.note(
                            f"caught up {self.result.converge_s:.1f}s after the last fault: the fold has"
                            " folded every input written until then, the apiserver shows the versions"
                        )
                        return
                await asyncio.sleep(1.0)
        finally:
            await admin.close()
        why = (
            f"the fold has {lag} input records written before it left to fold"
            if lag
            else ("still behind: " + ("; ".join(map(str, (behind or [])[:10])) or "(apiserver unreachable)"))
        )
        self.result.problems.append(f"convergence: no catch-up after the last fault; {why}")

    # ------------------------------------------------------------------ main

    async def main(self) -> None:
        cfg, s = self.config, self.settings
        await ensure_topics(s)
        await self.kube_call(lambda k: [k.ensure_node(n) for n in self.node_names])
        for _ in range(cfg.pods):
            if not await self.create_pod():
                raise UserError("cannot create the first pods in the apiserver")
        self.services = self._services()
        for svc in self.services.values():
            svc.start()
        say(
            f"{cfg.nodes} sim node agents, 2 fold workers and the sink started on topics {s.topic_prefix}*"
            f" ({s.partitions} partitions); logs in {self.workdir / 'logs'}"
        )
        background = [
            asyncio.ensure_future(self.supervise()),
            asyncio.ensure_future(self.tail_history()),
        ]
        try:
            await self.run_window(background)
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)

    async def run_window(self, background: list[asyncio.Task[None]]) -> None:
        cfg = self.config

        async def warm() -> bool:
            for task in background:
                if task.done():
                    task.result()
            return len(self.seen) >= cfg.pods

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
        churn = asyncio.ensure_future(self.churn_until(end))
        converge = asyncio.ensure_future(self.watch_convergence(faults, end + cfg.settle_s))
        try:
            await churn
            self.note(f"window over: churn stopped ({self.churn_summary()})")
            await converge
            # Every pod, the newest included, shows its last versions before the input ends.
            if not await self.until(lambda: self._live_ok(0.0), cfg.settle_s):
                self.note("not every pod has caught up; stopping the node agents anyway")
            stop_all(svc for name, svc in self.services.items() if name.startswith("node-"))
            self.note("node agents stopped: the input is over; waiting for the fold and the sink to drain")
            snapshot = await self.drain()
            self.evaluate(snapshot)
        finally:
            for task in [*faults, churn, converge]:
                task.cancel()
            await asyncio.gather(*faults, churn, converge, return_exceptions=True)
            stop_all(self.services.values())

    async def _live_ok(self, new_pod_s: float) -> bool:
        return await self.live(new_pod_s) == []

    def churn_summary(self) -> str:
        return ", ".join(f"{n} {what}" for what, n in sorted(self.churn.items())) or "nothing"

    async def drain(self) -> Snapshot:
        """Read everything until the fold has answered for every input, the history stands still and
        the apiserver shows every last version; or until nothing moves any more."""
        deadline = time.monotonic() + self.config.settle_s
        progress_at, last_state = time.monotonic(), None
        snapshot = Snapshot()
        while True:
            snapshot = await read_snapshot(self.settings)
            lost = snapshot.lost()
            try:
                pods = await self.kube_call(self.chaos_pods)
                api = checks.apiserver_mismatches(
                    pods, checks.latest_versions(snapshot.versions()), time.time()
                )
            except KubeError as exc:
                api = [checks.ApiMismatch("", "", "", f"apiserver: {exc}")]
            state = (tuple(sorted(snapshot.ends.items())), len(lost), len(api))
            if state != last_state:
                progress_at, last_state = time.monotonic(), state
                self.note(
                    f"drain: {len(snapshot.ingress)} inputs, {len(lost)} not answered for;"
                    f" {len(snapshot.history)} versions; {len(api)} API pods not showing their last"
                )
            elif not lost and not api:
                self.result.drained = True
                self.note("drained: every input answered for, history still, apiserver up to date")
                return snapshot
            if time.monotonic() - progress_at > NO_PROGRESS_S or time.monotonic() > deadline:
                self.note(f"no longer draining: {len(lost)} inputs unanswered, {len(api)} API pods behind")
                return snapshot
            await asyncio.sleep(3.0)

    # ------------------------------------------------------------------ the checks

    def evaluate(self, snap: Snapshot) -> None:
        r = self.result
        versions = snap.versions()
        r.lost = snap.lost()
        r.gaps = checks.version_gaps((vs.uid, vs.version) for vs in versions)
        r.conflicts = checks.version_conflicts(versions)
        r.history = checks.history_mismatches(versions, checks.offline_history(snap.journal_values))
        last = checks.latest_versions(versions)
        try:
            r.api = checks.apiserver_mismatches(self.chaos_pods(self._kube()), last, time.time())
        except KubeError as exc:
            r.api = [checks.ApiMismatch("", "", "", f"apiserver: {exc}")]
        self.figures(snap)
        self.explain(snap)

    def _kube(self) -> Kube:
        assert self.kube is not None
        return self.kube

    def figures(self, snap: Snapshot) -> None:
        r, cfg = self.result, self.config
        by_topic = Counter(c[0] for c, _, _ in snap.ingress)
        journal_coords = Counter((e.topic, e.partition, e.offset) for e in snap.journal)
        duplicates = sum(n - 1 for n in journal_coords.values())
        reasons = Counter(d.reason for d in snap.dead_letters)
        held = checks.held_coordinates(snap.fold_state)
        pods = {vs.uid for vs, _ in snap.history}
        exits = {n: len(svc.exits) for n, svc in self.services.items() if svc.exits}
        kills = Counter(rec.fault.target for rec in self.done if rec.fault.kind == "kill" and rec.done)
        r.figures += [
            f"chaos seed={cfg.seed} seconds={cfg.seconds:.0f} nodes={cfg.nodes} pods={cfg.pods}"
            f" partitions={cfg.partitions}",
            f"churn: {self.churn_summary()}",
            "kills: " + ", ".join(f"{t} {n}" for t, n in sorted(kills.items())) + f" ({r.kills} in all)",
            f"broker restarts: {r.broker_restarts}; apiserver down {r.apiserver_outage_s:.1f}s in all",
            "exits on their own (started again): "
            + (", ".join(f"{n} {c}" for n, c in sorted(exits.items())) or "none"),
            f"ingress records: {len(snap.ingress)} ("
            + ", ".join(f"{t} {n}" for t, n in sorted(by_topic.items()))
            + f"); journal entries: {len(snap.journal)} ({duplicates} repeated coordinates);"
            f" dead letters: {len(snap.dead_letters)}"
            + (" (" + ", ".join(f"{k} {n}" for k, n in sorted(reasons.items())) + ")" if reasons else "")
            + f"; still held for unannounced pods: {len(held)}"
            + (
                " (" + ", ".join(f"{t} {n}" for t, n in sorted(Counter(c[0] for c in held).items())) + ")"
                if held
                else ""
            ),
            f"versions: {len(snap.history)} records, {len({(v.uid, v.version) for v, _ in snap.history})}"
            f" distinct, {len(pods)} pods; offline fold mismatches: {len(r.history)}",
            f"apiserver: {len(r.api)} pods not showing their last version;"
            f" drained: {'yes' if r.drained else 'no'}",
            "converge_s: "
            + ("never" if r.converge_s is None else f"{r.converge_s:.1f}")
            + f" (goal {CONVERGE_GOAL_S:.0f}s; caught up: every version older than"
            f" {LIVE_SLACK_S:.0f}s shown)",
        ]

    def fault_before(self, wall: float) -> str:
        """The last fault that started before `wall`, and how long before."""
        earlier = [rec for rec in self.done if rec.started <= wall]
        if not earlier:
            return "no fault before it"
        rec = max(earlier, key=lambda x: x.started)
        return f"{wall - rec.started:.1f}s after: {rec.fault.describe()}"

    def explain(self, snap: Snapshot) -> None:
        r = self.result
        by_coord = {c: (uid, ts) for c, uid, ts in snap.ingress}
        for coord in r.lost[:20]:
            uid, ts = by_coord.get(coord, ("?", 0))
            r.problems.append(
                f"lost input {coord[0]}@{coord[1]}/{coord[2]} (pod {uid}, written {clock(ts)}):"
                f" {self.fault_before(ts / 1000)}"
            )
        published = {(vs.uid, vs.version): ts for vs, ts in snap.history}
        for uid, missing in list(r.gaps.items())[:20]:
            after = published.get((uid, missing[0] - 1)) or published.get((uid, missing[-1] + 1)) or 0
            r.problems.append(f"gap: pod {uid} lacks versions {missing}: {self.fault_before(after / 1000)}")
        for (uid, version), statuses in list(r.conflicts.items())[:20]:
            made: dict[bytes, str] = {}  # each distinct status: what made it first, and when
            for vs, ts in snap.history:
                if (vs.uid, vs.version) == (uid, version):
                    c = vs.cause
                    made.setdefault(
                        checks.canonical(vs.status),
                        f"{vs.status.get('phase')} <- {c.type} at {c.topic}@{c.partition}/{c.offset},"
                        f" published {clock(ts)} ({self.fault_before(ts / 1000)})",
                    )
            r.problems.append(
                f"conflict: pod {uid} v{version} has {len(statuses)} statuses: " + "; ".join(made.values())
            )
        for (uid, version), (live, offline) in list(r.history.items())[:20]:
            r.problems.append(
                f"history: pod {uid} v{version}: {len(live)} live value(s),"
                f" {len(offline)} from the offline fold"
            )
        for mismatch in r.api[:20]:
            r.problems.append(f"apiserver: {mismatch}")
        for name, svc in self.services.items():
            for wall, code in svc.exits:
                r.figures.append(
                    f"  {name} exited with code {code} at {time.strftime('%H:%M:%S', time.localtime(wall))}"
                )


# --------------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt as SIGINT does, so every `finally` cleans up."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_chaos(config: ChaosConfig) -> ChaosResult:
    """The whole chaos run; stops every process it started, also on SIGINT/SIGTERM."""
    config.check()
    keep = bool(config.workdir)
    workdir = Path(config.workdir or tempfile.mkdtemp(prefix="podledger-chaos-"))
    workdir.mkdir(parents=True, exist_ok=True)
    chaos = Chaos(config, workdir)
    tidy = False  # remove a temporary work directory: after a passing or an interrupted run
    # Our own clients retry through the faults; their error lines would bury the progress.
    client_log = logging.getLogger("aiokafka")
    level = client_log.level
    client_log.setLevel(logging.CRITICAL)
    with _interruptible():
        try:
            chaos.start_instances()
            asyncio.run(_main_until_signalled(chaos))
            tidy = chaos.result.ok()
        except KeyboardInterrupt:
            tidy = True
            raise
        finally:
            stop_all(chaos.services.values(), timeout=10)
            chaos.stop_instances()
            client_log.setLevel(level)
            if tidy and not keep:
                shutil.rmtree(workdir, ignore_errors=True)
                chaos.result.workdir = ""
    return chaos.result


async def _main_until_signalled(chaos: Chaos) -> None:
    task = asyncio.ensure_future(chaos.main())
    loop = asyncio.get_running_loop()
    interrupted = False

    def interrupt() -> None:
        nonlocal interrupted
        interrupted = True
        task.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, interrupt)
    try:
        await task
    except asyncio.CancelledError:
        if interrupted:
            say("interrupted: stopping every process")
            raise KeyboardInterrupt from None
        raise
