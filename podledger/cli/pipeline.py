"""Commands that run podledger's services: `run` (Faust worker with roles) and `node` (the node agents)."""

from __future__ import annotations

import argparse
import dataclasses

from podledger import compose, workers
from podledger.cli.common import add_connection_options, add_node_options, settings_from


def cmd_run(args: argparse.Namespace) -> int:
    settings, roles = settings_from(args), compose.parse_roles(args.roles)
    if args.workers is not None:
        settings = dataclasses.replace(settings, fold_workers=args.workers)
        settings.check()
    workers.check_workers(roles, settings.fold_workers)
    if settings.fold_workers > 1:
        compose.require_bootstrap(settings)
        return workers.run_fold_workers(settings, roles)
    return compose.run_pipeline(settings, roles=roles)


def cmd_node(args: argparse.Namespace) -> int:
    return compose.run_node(settings_from(args))


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "run",
        help="run the pipeline (apiserver source, fold, sink) until stopped",
        description="Run podledger's Faust worker. Stops cleanly on SIGINT or SIGTERM. With --roles fold,"
        " --workers N runs N fold workers (processes in the fold's consumer group) under one supervisor"
        " that restarts a worker that dies and passes signals on.",
    )
    p.add_argument(
        "--roles",
        default="fold,source,sink",
        help="comma-separated roles to run in this process: fold, source (pod sources only), node (every"
        " node agent: sources, pod workers, PLEG, prober), sink (default: fold,source,sink)",
    )
    p.add_argument(
        "--workers",
        type=int,
        help="fold worker processes, 1 to 64 (PODLEDGER_FOLD_WORKERS; default 1); only with --roles fold",
    )
    add_connection_options(p)
    add_node_options(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser(
        "node",
        help="run every node agent of one node: pod sources, pod workers, PLEG, prober",
        description="Publishes the node's pod-updates, runs its pods on the chosen runtime (pod workers read"
        " pod-updates back from Kafka), relists the runtime into pleg and probes containers into"
        " probe-results. Resumes from the log after a restart and adopts running containers. Stops"
        " cleanly on SIGINT or SIGTERM, leaving containers running for the next agent to adopt.",
    )
    add_connection_options(p)
    add_node_options(p)
    p.set_defaults(func=cmd_node)
