"""`podledger metrics`: kube-state-metrics' pod series and podledger's counters for Prometheus."""

from __future__ import annotations

import argparse
import dataclasses

from podledger.cli.common import add_connection_options, settings_from


def cmd_metrics(args: argparse.Namespace) -> int:
    from podledger import compose
    from podledger.read.metrics.server import serve

    settings = settings_from(args)
    flags = {"metrics_host": args.host, "metrics_port": args.port}
    settings = dataclasses.replace(settings, **{k: v for k, v in flags.items() if v is not None})
    settings.check()
    compose.require_bootstrap(settings)
    return compose.run_until_signalled(serve(settings))


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "metrics",
        help="serve pod metrics for Prometheus, computed from the status stream",
        description="Serves GET /metrics: kube-state-metrics' pod series (same names and labels) from"
        " pod-status, and counters computed from every version on pod-status-history (container"
        " terminations by reason, Ready transitions, waiting reasons), so nothing between two scrapes"
        " is lost. GET /healthz answers 200 once both topics are read. Stops cleanly on SIGINT or"
        " SIGTERM. See docs/metrics.md.",
    )
    p.add_argument("--host", help="address to listen on (PODLEDGER_METRICS_HOST; default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port to listen on (PODLEDGER_METRICS_PORT; default 9477)")
    add_connection_options(p)
    p.set_defaults(func=cmd_metrics)
