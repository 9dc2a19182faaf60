"""Pod sources (the kubelet's pkg/kubelet/config): the apiserver, a manifest directory and a manifest
URL, each publishing its pods to pod-updates through one shared podStorage merge (pod_config)."""

from __future__ import annotations

from typing import Protocol


class PodSource(Protocol):
    """A pod source: `name` is its pod-updates source tag; `run` publishes until cancelled."""

    name: str

    async def run(self) -> None: ...
