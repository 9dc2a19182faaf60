"""A node agent's pods, seen from outside: start `podledger run` on the process runtime, read the
runtime's state file, and the pods and container statuses on the apiserver.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from podledger.agents.kube import Kube
from podledger.config import Settings
from podledger.streams.topics import ensure_topics
from podledger.types import JSONDict
from tests import pods
from tests.support.processes import PodledgerProcess, podledger_env


class RuntimeState:
    """Reads the process runtime's state file, as an operator would to find a container's pid."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / "state.json"

    def containers(self, uid: str) -> list[JSONDict]:
        if not self.path.exists():
            return []
        return list((json.loads(self.path.read_text()).get(uid) or {}).get("containers") or [])

    def running(self, uid: str, name: str) -> JSONDict | None:
        return next(
            (c for c in self.containers(uid) if c["name"] == name and c["state"] == "running" and c["pid"]),
            None,
        )


def pod_status(kube: Kube, name: str) -> JSONDict:
    return kube.get_pod("default", name).get("status") or {}


def container_status(status: JSONDict, name: str) -> JSONDict:
    return next((c for c in status.get("containerStatuses") or [] if c["name"] == name), {})


def start_node(
    settings: Settings,
    kubeconfig: str,
    podledger_process: Callable[..., PodledgerProcess],
    state_dir: Path,
    **env: str,
) -> tuple[Kube, PodledgerProcess, RuntimeState]:
    """`podledger run --roles fold,node,sink` on the process runtime for the test's node; returns the
    apiserver client, the process and a reader of its runtime state."""
    asyncio.run(ensure_topics(settings))
    kube = Kube.from_kubeconfig(kubeconfig)
    kube.ensure_node(settings.node)
    proc = podledger_process(
        ["run", "--roles", "fold,node,sink"],
        env=podledger_env(
            settings,
            kubeconfig,
            PODLEDGER_RUNTIME="process",
            PODLEDGER_RUNTIME_STATE_DIR=str(state_dir),
            PODLEDGER_SINK_RECONCILE_MS="2000",
            PODLEDGER_LOG_LEVEL="info",
            **env,
        ),
    )
    return kube, proc, RuntimeState(state_dir)


def create_api_pod(kube: Kube, node: str, name: str | None = None, **fields: Any) -> JSONDict:
    """A one-container pod bound to `node`, created on the apiserver (which assigns its uid)."""
    kube.ensure_node(node)
    built = pods.pod(
        ("main",), name=name or f"pod-{uuid.uuid4().hex[:8]}", uid=None, node=node, image="app:1", **fields
    )
    return kube.create_pod(built)
