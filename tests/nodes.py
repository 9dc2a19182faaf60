"""Helpers for tests that run pods on a node agent: pids, runtime state, API statuses."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from pathlib import Path
from typing import Any

from podledger.agents.kube import Kube
from podledger.config import Settings
from podledger.streams.topics import ensure_topics
from tests.conftest import podledger_env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purposes
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


class RuntimeState:
    """Reads the process runtime's state file, as an operator would to find a container's pid."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / "state.json"

    def containers(self, uid: str) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return list((json.loads(self.path.read_text()).get(uid) or {}).get("containers") or [])

    def running(self, uid: str, name: str) -> dict[str, Any] | None:
        return next(
            (c for c in self.containers(uid) if c["name"] == name and c["state"] == "running" and c["pid"]),
            None,
        )


def pod_status(kube: Kube, name: str) -> dict[str, Any]:
    return kube.get_pod("default", name).get("status") or {}


def container_status(status: dict[str, Any], name: str) -> dict[str, Any]:
    return next((c for c in status.get("containerStatuses") or [] if c["name"] == name), {})


def start_node(
    settings: Settings, kubeconfig: str, podledger_process: Any, state_dir: Path, **env: str
) -> tuple[Kube, Any, RuntimeState]:
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
