"""`podledger local fetch|up|down|status`: the project's own Kafka broker and kube-apiserver."""

from __future__ import annotations

import argparse
import os
import sys


def cmd_local(args: argparse.Namespace) -> int:
    from podledger import local
    from podledger.local.artifacts import fetch_kubectl

    if args.action == "fetch":
        # Resolve and build what the local instances need, with progress, before any test runs.
        if not os.environ.get("PODLEDGER_BOOTSTRAP"):
            print(f"kafka jars: {local.fetch_kafka()}")
        if not args.no_kube and not os.environ.get("KUBECONFIG"):
            print(f"etcd: {local.fetch_etcd()}")
            print(f"kube-apiserver: {local.fetch_apiserver()}")
        if not args.no_kube:
            # The client `podledger serve` is tested with, needed even beside a shared apiserver.
            print(f"kubectl: {fetch_kubectl()}")
    elif args.action == "up":
        kafka, kube = local.up(kafka=True, kube=not args.no_kube)
        if kafka:
            print(f"export PODLEDGER_BOOTSTRAP={kafka.bootstrap}")
        if kube:
            print(f"export KUBECONFIG={kube.kubeconfig}")
        print("# stop them with: podledger local down", file=sys.stderr)
    elif args.action == "down":
        stopped = local.down()
        print("stopped: " + (", ".join(stopped) or "nothing was running"))
    else:
        running_kafka, running_kube = local.running_kafka(), local.running_kube()
        print(f"kafka: {running_kafka.bootstrap if running_kafka else 'not running'}")
        print(
            "kube-apiserver: "
            + (
                f"{running_kube.server} (kubeconfig {running_kube.kubeconfig})"
                if running_kube
                else "not running"
            )
        )
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "local",
        help="start, stop or show the local Kafka broker and kube-apiserver",
        description="'up' starts (or reuses) a local broker and apiserver that keep running"
        " and prints the environment to use them; 'down' stops them.",
    )
    p.add_argument("action", choices=["fetch", "up", "down", "status"])
    p.add_argument(
        "--no-kube", action="store_true", help="only the Kafka broker, no etcd, apiserver or kubectl"
    )
    p.set_defaults(func=cmd_local)
