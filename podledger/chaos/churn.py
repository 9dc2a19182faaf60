"""The churn of a chaos run: API pods deleted and created at a steady pace, at random (seeded)."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from podledger.agents.kube import Kube
from podledger.agents.kube_client import KubeError
from podledger.chaos.plan import chaos_pod, delete_grace_s

CHURN_LIFETIME_S = 120.0  # an API pod lives this long on average: one replaced every 120/pods s

KubeCall = Callable[[Callable[[Kube], Any]], Awaitable[Any]]  # runs a blocking Kube call off the loop


class Churn:
    """The run's API pods: which are alive, how many came and went, and the pace of replacing them."""

    def __init__(
        self,
        seed: int,
        run_id: str,
        node_names: list[str],
        kube_call: KubeCall,
        note: Callable[[str], None],
    ) -> None:
        self.run_id = run_id
        self.node_names = node_names
        self.kube_call = kube_call
        self.note = note
        self.rng = random.Random(f"{seed}:churn")
        self.live_pods: set[str] = set()
        self.pod_seq = 0
        self.counts = Counter[str]()

    async def create_pod(self) -> bool:
        self.pod_seq += 1
        name = f"chaos-{self.run_id}-pod-{self.pod_seq:05d}"
        pod = chaos_pod(self.rng, name, self.rng.choice(self.node_names))
        try:
            await self.kube_call(lambda k: k.create_pod(pod))
        except KubeError as exc:
            self.counts["create failed"] += 1
            if self.counts["create failed"] == 1 or exc.status != 0:
                self.note(f"churn: creating {name} failed ({exc.reason}); the churn goes on")
            return False
        self.live_pods.add(name)
        self.counts["created"] += 1
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
                self.counts["delete failed"] += 1
                return
        self.live_pods.discard(name)
        self.counts["deleted at once" if grace == 0 else "deleted"] += 1

    async def run_until(self, end: float, pods: int) -> None:
        """One pod deleted and one created every CHURN_LIFETIME_S / pods seconds until `end`."""
        interval = CHURN_LIFETIME_S / pods
        next_at = time.monotonic() + interval
        while next_at < end:
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            next_at += interval
            await self.delete_pod()
            await self.create_pod()

    def summary(self) -> str:
        return ", ".join(f"{n} {what}" for what, n in sorted(self.counts.items())) or "nothing"
