"""`podledger demo`: the whole pipeline on local services with the example static pods."""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from podledger import compose
from podledger.cli.common import add_connection_options, settings_from
from podledger.config import Settings
from podledger.schemas import models

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "deploy" / "examples"


def format_status_line(vs: models.VersionedPodStatus) -> str:
    """One status version for a terminal: phase, conditions, each container's state and restarts."""
    conditions = " ".join(f"{c['type']}={c['status']}" for c in vs.status.get("conditions") or [])
    containers = []
    for cs in (vs.status.get("initContainerStatuses") or []) + (vs.status.get("containerStatuses") or []):
        [(state, detail)] = list((cs.get("state") or {"unknown": {}}).items())[:1] or [("unknown", {})]
        reason = detail.get("reason")
        if state == "terminated":
            reason = f"{reason or 'exit'}({detail.get('exitCode')})"
        ready = "ready" if cs.get("ready") else "not-ready"
        state = f"{state}:{reason}" if reason else state
        containers.append(f"{cs['name']}={state},{ready},restarts={cs.get('restartCount', 0)}")
    return (
        f"{time.strftime('%H:%M:%S')}  {vs.namespace}/{vs.name}  v{vs.version}  "
        f"{vs.status.get('phase', '?'):9}  {conditions}  [{' '.join(containers)}]  <- {vs.cause.type}"
    )


def example_pods(node: str) -> list[str]:
    """The static pods the demo runs, named as the kubelet names static pods (<name>-<node>)."""
    import yaml

    names = []
    for path in sorted(EXAMPLES_DIR.glob("*.yaml")):
        meta = (yaml.safe_load(path.read_text()) or {}).get("metadata") or {}
        names.append(f"{meta.get('namespace') or 'default'}/{meta.get('name')}-{node}")
    return names


def cmd_demo(args: argparse.Namespace) -> int:
    from podledger import local
    from podledger.streams.topics import ensure_topics

    settings = settings_from(args)
    started: list[Any] = []
    bootstrap, kubeconfig = settings.bootstrap, settings.kubeconfig
    if not bootstrap:
        kafka = local.running_kafka()
        if kafka is None:
            print("podledger demo: starting a local Kafka broker ...", file=sys.stderr)
            kafka = local.start_kafka(Path(tempfile.mkdtemp(prefix="podledger-demo-kafka-")))
            started.append(kafka)
        bootstrap = kafka.bootstrap
    if not kubeconfig:
        kube_handle = local.running_kube()
        if kube_handle is None:
            print("podledger demo: starting a local etcd and kube-apiserver ...", file=sys.stderr)
            kube_handle = local.start_kube(Path(tempfile.mkdtemp(prefix="podledger-demo-kube-")))
            started.append(kube_handle)
        kubeconfig = kube_handle.kubeconfig
    runtime_dir = tempfile.mkdtemp(prefix="podledger-demo-runtime-")
    settings = Settings.from_env(
        bootstrap=bootstrap,
        kubeconfig=kubeconfig,
        node=settings.node,
        topic_prefix=settings.topic_prefix,
        partitions=settings.partitions,
        log_level=settings.log_level,
        manifest_dir=str(EXAMPLES_DIR),
        runtime="process",
        runtime_state_dir=runtime_dir,
    )
    try:
        asyncio.run(ensure_topics(settings))
        kube = compose.connect_kube(settings)
        print(
            "\npodledger demo\n"
            f"  Kafka:       {bootstrap}   topics: {settings.topic_prefix}*"
            f" ({settings.partitions} partitions)\n"
            f"  apiserver:   {kube.server}   KUBECONFIG={kubeconfig}\n"
            f"  node:        {settings.node}   running: pod sources, pod workers, PLEG, fold, sink\n"
            f"  pods:        {', '.join(example_pods(settings.node))} (static pods from deploy/examples)\n"
            f"  containers:  local processes (process runtime), logs under {runtime_dir}\n"
            "  mirror pods: the static pods appear in the apiserver too (kubectl get pods -o wide)\n"
            "  try:         curl http://127.0.0.1:18081/toggle   flips the flip pod's readiness\n"
            "  stop:        Ctrl-C (or SIGTERM); the demo's containers stop with it\n\n"
            "Each line is a pod's status version, read from pod-status through podledger.read.client:",
            flush=True,
        )
        compose.run_pipeline(
            settings,
            roles={"fold", "node", "sink"},
            on_status=lambda vs: print(format_status_line(vs), flush=True),
            stop_pods_on_exit=True,
        )
    finally:
        for handle in reversed(started):
            handle.stop()
        print("podledger demo: stopped", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "demo",
        help="run podledger on local Kafka and apiserver with example pods",
        description="Starts (or reuses) a local broker and apiserver, creates the topics and"
        " the example pods, and shows each status version until Ctrl-C.",
    )
    add_connection_options(p)
    p.set_defaults(func=cmd_demo)
