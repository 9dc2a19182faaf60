"""Commands that run podledger's services: `run` (Faust worker with roles) and `node` (the node agents)."""

from __future__ import annotations

import argparse

from podledger import compose
from podledger.cli.common import add_connection_options, add_node_options, settings_from


def cmd_run(args: argparse.Namespace) -> int:
    return compose.run_pipeline(settings_from(args), roles=compose.parse_roles(args.roles))


def cmd_node(args: argparse.Namespace) -> int:
    return compose.run_node(settings_from(args))


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "run",
        help="run the pipeline (apiserver source, fold, sink) until stopped",
        description="Run podledger's Faust worker. Stops cleanly on SIGINT or SIGTERM.",
    )
    p.add_argument(
        "--roles",
        default="fold,source,sink",
        help="comma-separated roles to run in this process: fold, source (pod sources only), node (every"
        " node agent: sources, pod workers, PLEG, prober), sink (default: fold,source,sink)",
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
