"""The `podledger` command: a thin argparse front, one module per command family.

Each family module registers its subcommands and turns arguments into Settings; the wiring of
components lives in `podledger.compose`.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from podledger.cli import (
    acls,
    audit,
    bench,
    chaos,
    demo,
    export,
    fold,
    history,
    keys,
    local,
    metrics,
    pipeline,
    serve,
    topics,
    ui,
    verify,
    why,
)
from podledger.config import CHOICES
from podledger.errors import UserError
from podledger.logs import setup_logging

FAMILIES = (
    *(pipeline, topics, acls, keys, fold, export, bench, chaos, local, demo),
    *(audit, history, why, verify, serve, metrics, ui),
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="podledger",
        description="The kubelet's pod-status path as an event-sourced pipeline on Kafka.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for family in FAMILIES:
        family.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    level = getattr(args, "log_level", None) or os.environ.get("PODLEDGER_LOG_LEVEL", "warning")
    if level.lower() not in CHOICES["log_level"]:
        allowed = ", ".join(CHOICES["log_level"])
        print(f"podledger: error: PODLEDGER_LOG_LEVEL={level!r} is not one of {allowed}", file=sys.stderr)
        return 2
    setup_logging(level)
    # Writing to a closed pipe (podledger fold | head) ends quietly, as other Unix tools do.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"podledger: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
