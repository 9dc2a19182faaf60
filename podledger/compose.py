"""The composition root: the one place that builds podledger's components and wires them together.

The commands in `podledger.cli` parse arguments and call these functions; the components themselves
(agents, the fold, the sink) never construct one another.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import logging
import signal
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from podledger.agents.kube import Kube
from podledger.agents.kube_client import ApiserverUnreachable, KubeError
from podledger.agents.runtime.base import Runtime
from podledger.config import Settings
from podledger.errors import UserError
from podledger.health import HealthServer, Samples, prometheus_text
from podledger.schemas import models
from podledger.types import Topic

log = logging.getLogger(__name__)

ROLES = ("fold", "source", "node", "sink")


def require_bootstrap(settings: Settings) -> None:
    """A one-line UserError when no Kafka broker is configured."""
    if not settings.bootstrap:
        raise UserError(
            "no Kafka broker configured: set PODLEDGER_BOOTSTRAP or --bootstrap"
            " (or run 'podledger local up' for a local one)"
        )


def connect_kube(
    settings: Settings, kubeconfig: str | None = None, *, register_node: bool = True, wait_s: float = 0.0
) -> Kube:
    """An apiserver client: reachable, authorised, and (for a node's processes) the node's Node
    object present.

    Every process that talks to the apiserver starts here, so the check and the node registration
    happen the same way everywhere (as the kubelet registers its Node before it syncs pods). A
    sink alone serves every node and registers none: its role has no access to nodes. A service
    waits up to `wait_s` for an apiserver that does not answer yet; refused credentials end it at
    once.
    """
    kube = Kube.from_kubeconfig(
        settings.kubeconfig if kubeconfig is None else kubeconfig,
        qps=settings.sink_qps,
        burst=settings.sink_burst,
    )
    deadline, delay = time.monotonic() + wait_s, 1.0
    while True:
        try:
            version = kube.check()
            if register_node:
                kube.ensure_node(settings.node)
            break
        except (ApiserverUnreachable, KubeError) as exc:
            if isinstance(exc, KubeError) and exc.status not in (0, 429) and exc.status < 500:
                raise
            pause = min(delay, deadline - time.monotonic())
            if pause <= 0:
                raise
            log.warning("waiting for the apiserver at %s (%s); retrying in %.0fs", kube.server, exc, pause)
            time.sleep(pause)
            delay = min(delay * 2, 10.0)
    log.info("apiserver %s (%s), node %s", kube.server, version, settings.node if register_node else "-")
    return kube


def parse_roles(spec: str) -> set[str]:
    """The roles named in a comma-separated list; a UserError for unknown ones."""
    roles = {role.strip() for role in spec.split(",") if role.strip()}
    unknown = roles - set(ROLES)
    if unknown or not roles:
        raise UserError(
            f"unknown role(s) {', '.join(sorted(unknown)) or '(none given)'}: choose from {', '.join(ROLES)}"
        )
    return roles


def run_pipeline(
    settings: Settings,
    *,
    roles: set[str],
    on_status: Callable[[models.VersionedPodStatus], None] | None = None,
    stop_pods_on_exit: bool = False,
) -> int:
    """Run the Faust worker with the chosen roles until SIGINT/SIGTERM."""
    import faust

    from podledger.agents.node import NodeAgent, build_sources
    from podledger.agents.sink.writer import Sink
    from podledger.agents.sources.pod_config import PodStorage
    from podledger.streams.app import Pipeline

    require_bootstrap(settings)
    if "fold" not in roles and not settings.app_id:
        # Not the fold's consumer group: a sink-only worker joining it would take fold partitions
        # (and, under ACLs, need the right to commit the fold's offsets).
        settings = dataclasses.replace(
            settings, app_id=f"{settings.topic_prefix}{'-'.join(sorted(roles))}-worker"
        )
    pipeline = Pipeline(settings, fold="fold" in roles)
    api_source = bool(roles & {"source", "node"}) and settings.api_source
    kube = (
        connect_kube(settings, register_node=api_source, wait_s=settings.start_wait_s)
        if "sink" in roles or api_source
        else None
    )

    if "node" in roles:
        agent = NodeAgent(
            settings,
            make_runtime(settings),
            kube=kube if api_source else None,
            stop_pods_on_exit=stop_pods_on_exit,
        )

        async def node_agent(_: Pipeline) -> None:
            await agent.run()

        pipeline.add_task(node_agent)
    elif "source" in roles:
        storage = PodStorage()  # one podStorage for every source, as in the kubelet

        def publish_update(update: models.PodUpdate) -> Any:
            return pipeline.publish(Topic.POD_UPDATES, update.uid, update, update.node)

        for source in build_sources(settings, storage, publish_update, kube if api_source else None):

            async def run_source(_: Pipeline, source: Any = source) -> None:
                await source.run()

            run_source.__name__ = f"{type(source).__name__.lower()}"
            pipeline.add_task(run_source)

    if "sink" in roles:
        assert kube is not None
        sink = Sink(
            kube,
            settings,
            publish=pipeline.publish,
            workers=settings.sink_workers,
            reconcile_s=settings.sink_reconcile_ms / 1000,
            read_from_cache=settings.sink_read == "watch",
        )

        async def apiserver_sink(_: Pipeline) -> None:
            await sink.run()

        pipeline.add_task(apiserver_sink)

    if settings.health_port and "node" not in roles:  # a node agent serves its own
        health = HealthServer(
            f"{'/'.join(sorted(roles))} worker",
            {
                "kafka": pipeline.healthy,
                **({"apiserver": sink.apiserver.healthy} if "sink" in roles else {}),
            },
            lambda: worker_metrics(pipeline, sink if "sink" in roles else None),
        )

        async def serve_health(_: Pipeline) -> None:
            await asyncio.gather(health.serve(settings.health_port), health.watch())

        pipeline.add_task(serve_health)

    if on_status is not None:
        show = on_status

        async def show_status(_: Pipeline) -> None:
            # Through the consumer client, as any other service reads statuses: the pods listed
            # from pod-status, then each new version as it arrives.
            from podledger.read.client import ChangeType, watch_pods

            async for change in watch_pods(settings, desired=False):
                if change.type in (ChangeType.LISTED, ChangeType.ADDED, ChangeType.MODIFIED):
                    assert change.status is not None
                    show(change.status)

        pipeline.add_task(show_status)

    worker = faust.Worker(
        pipeline.app,
        loglevel=settings.log_level.upper(),
        quiet=True,
        redirect_stdouts=False,
        override_logging=False,
    )
    worker.spinner = None  # a terminal spinner only garbles logs and the demo's output
    worker.execute_from_commandline()
    return 0


def worker_metrics(pipeline: Any, sink: Any | None) -> str:
    """/metrics of a fold or sink worker: what the fold folded and parked, the collector's pauses
    of the fold loop, what the sink wrote, and how many pods wait to retry a failed write."""
    fold: dict[str, Samples] = {
        f"podledger_fold_{name}_total": {(("reason", label),) if label else (): float(n)}
        for (name, label), n in pipeline.counts.items()
        if name != "dead_letters"
    }
    fold["podledger_fold_dead_letters_total"] = {
        (("reason", label),): float(n)
        for (name, label), n in pipeline.counts.items()
        if name == "dead_letters"
    }
    gauges: dict[str, Samples] = {}
    if pipeline.fold is not None:  # each collector pass stops the fold loop: its pauses, by generation
        pauses = pipeline.fold.gc_pauses
        by_generation = [(("generation", str(g)),) for g in range(3)]
        fold["podledger_gc_passes_total"] = dict(zip(by_generation, map(float, pauses.passes), strict=True))
        fold["podledger_gc_pause_seconds_total"] = dict(zip(by_generation, pauses.seconds, strict=True))
        gauges["podledger_gc_longest_pause_seconds"] = dict(zip(by_generation, pauses.longest, strict=True))
        gauges["podledger_gc_frozen_objects"] = {(): float(gc.get_freeze_count())}
    if sink is not None:
        fold["podledger_sink_syncs_total"] = {(("outcome", k),): float(v) for k, v in sink.stats.items()}
        gauges["podledger_sink_pods_retrying"] = {(): float(sink.retrying())}
    return prometheus_text(fold, gauges)


def run_node(settings: Settings) -> int:
    """Every node agent of one node, without Faust: sources, pod workers, PLEG, prober."""
    from podledger.agents.node import NodeAgent

    require_bootstrap(settings)
    kube = connect_kube(settings, wait_s=settings.start_wait_s) if settings.api_source else None
    agent = NodeAgent(settings, make_runtime(settings), kube=kube)
    return run_until_signalled(agent.run())


def make_runtime(settings: Settings) -> Runtime:
    """The runtime named by PODLEDGER_RUNTIME (Settings.check allows process or sim)."""
    if settings.runtime == "sim":
        from podledger.agents.runtime.sim import SimRuntime

        return SimRuntime(seed=settings.sim_seed)
    from podledger.agents.runtime.process import ProcessRuntime

    return ProcessRuntime(
        Path(settings.runtime_dir()),
        default_uid=settings.runtime_default_uid,
        default_gid=settings.runtime_default_gid,
    )


def run_until_signalled(main: Coroutine[Any, Any, Any]) -> int:
    """Run a coroutine until it ends or SIGINT/SIGTERM arrives; a signal cancels it cleanly (exit 0)."""

    async def runner() -> None:
        task = asyncio.ensure_future(main)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(runner())
    return 0
