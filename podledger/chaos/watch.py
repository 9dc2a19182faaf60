"""What a chaos run sees of the pipeline while it works: the versions as the fold publishes them,
the catch-up after the last fault (converge_s) and the drain at the end."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiokafka import TopicPartition

from podledger.agents.kube_client import KubeError
from podledger.chaos import checks
from podledger.chaos.config import ChaosResult, FaultRecord
from podledger.chaos.snapshot import Snapshot, read_snapshot
from podledger.config import Settings
from podledger.kafka import new_consumer
from podledger.schemas import decode
from podledger.streams.topics import admin_client
from podledger.types import INGRESS_TOPICS, JSONDict, Topic

LIVE_SLACK_S = 5.0  # a version younger than this may still be on its way to the apiserver
NEW_POD_S = 15.0  # a pod younger than this may still be on its way to its first version
NO_PROGRESS_S = 45.0  # the drain gives up when nothing moved for this long


class Watch:
    """Reads the topics of `settings` and the run's API pods (`api_pods`); what it finds about
    convergence and the drain goes into `result`."""

    def __init__(
        self,
        settings: Settings,
        api_pods: Callable[[], Awaitable[list[JSONDict]]],
        result: ChaosResult,
        note: Callable[[str], None],
    ) -> None:
        self.settings = settings
        self.api_pods = api_pods
        self.result = result
        self.note = note
        self.seen: dict[str, dict[int, checks.SeenVersion]] = {}  # pod-status-history as it arrives

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

    async def live(
        self, new_pod_s: float, input_ends: dict[tuple[str, int], int] | None = None
    ) -> list[checks.ApiMismatch] | None:
        """Pods that have not caught up with pod-status now; None when the apiserver cannot say."""
        try:
            pods = await self.api_pods()
        except KubeError:
            return None
        return checks.live_mismatches(
            pods, self.seen, time.time(), slack_s=LIVE_SLACK_S, new_pod_s=new_pod_s, input_ends=input_ends
        )

    async def live_ok(self, new_pod_s: float) -> bool:
        return await self.live(new_pod_s) == []

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

    async def watch_convergence(
        self, faults: list[asyncio.Task[None]], done: list[FaultRecord], t0: float, deadline: float
    ) -> None:
        """converge_s: from the end of the last fault until the fold has folded every input written
        until then and the apiserver shows what it made of it (checks.live_mismatches). `done` holds
        the record of every fault once `faults` are over; `t0` is the start of the window."""
        await asyncio.gather(*faults)
        last_end = max((r.ended for r in done), default=time.time() - (time.monotonic() - t0))
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

    async def drain(self, settle_s: float) -> Snapshot:
        """Read everything until the fold has answered for every input, the history stands still and
        the apiserver shows every last version; or until nothing moves any more (or `settle_s`)."""
        deadline = time.monotonic() + settle_s
        progress_at, last_state = time.monotonic(), None
        snapshot = Snapshot()
        while True:
            snapshot = await read_snapshot(self.settings)
            lost = snapshot.lost()
            try:
                pods = await self.api_pods()
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
