"""The pipeline's processes in a chaos run: what each runs with, and the supervisor that starts
again whatever exits on its own."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from podledger.chaos.config import ChaosConfig
from podledger.chaos.services import Service
from podledger.config import Settings

RESTART_BACKOFF_S = (1.0, 10.0)  # a process that exited on its own is started again after this


def pipeline_services(
    config: ChaosConfig, settings: Settings, run_id: str, node_names: list[str], workdir: Path
) -> dict[str, Service]:
    """Two fold workers, the sink and a sim node agent per node, on `settings`' topics; each with a
    data directory and a log of its own under `workdir` (created here), none started yet."""
    s = settings
    base = {k: v for k, v in os.environ.items() if not k.startswith("PODLEDGER_") and k != "KUBECONFIG"}
    base.update(config.kafka_env if config.bootstrap else {})
    base.update(
        PODLEDGER_BOOTSTRAP=s.bootstrap,
        KUBECONFIG=s.kubeconfig,
        PODLEDGER_TOPIC_PREFIX=s.topic_prefix,
        PODLEDGER_PARTITIONS=str(s.partitions),
        PODLEDGER_LOG_LEVEL="info",
        PODLEDGER_SESSION_TIMEOUT_MS="6000",
        PODLEDGER_SINK_RECONCILE_MS="2000",
        PODLEDGER_NODE=f"chaos-{run_id}",
    )
    logs = workdir / "logs"
    logs.mkdir(parents=True, exist_ok=True)

    def service(name: str, args: list[str], **env: str) -> Service:
        data = workdir / "data" / name
        data.mkdir(parents=True, exist_ok=True)
        return Service(name, args, {**base, "PODLEDGER_DATA_DIR": str(data), **env}, logs / f"{name}.log")

    out = {
        "fold-a": service("fold-a", ["run", "--roles", "fold"]),
        "fold-b": service("fold-b", ["run", "--roles", "fold"]),
        "sink": service("sink", ["run", "--roles", "sink"]),
    }
    for i, node in enumerate(node_names):
        out[f"node-{i}"] = service(
            f"node-{i}",
            ["node"],
            PODLEDGER_NODE=node,
            PODLEDGER_RUNTIME="sim",
            PODLEDGER_SIM_SEED=str((config.seed * 131 + i) % 2**32),
            PODLEDGER_API_SOURCE="true",
        )
    return out


async def supervise(services: Mapping[str, Service], note: Callable[[str], None]) -> None:
    """Start again whatever exited on its own (as a kubelet or systemd would), with back-off."""
    pending: dict[str, float] = {}
    while True:
        await asyncio.sleep(0.5)
        now = time.monotonic()
        for name, svc in services.items():
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
            note(
                f"{name} exited on its own (code {code}); starting it again in {delay:.0f}s"
                f" — {last[-1][:160] if last else ''}"
            )
            pending[name] = now + delay
