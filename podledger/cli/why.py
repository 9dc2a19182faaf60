"""`podledger why`: why a pod's status is what it is — the inputs and rules behind a version.

The index is caught up with the topics first (unless --no-refresh); the answer comes from
podledger.read.audit.queries.why.
"""

from __future__ import annotations

import argparse

from podledger.cli.audit import (
    add_index_options,
    audit_settings,
    open_index,
    parse_moment,
    parse_pod_arg,
    print_data,
)
from podledger.errors import UserError


def cmd_why(args: argparse.Namespace) -> int:
    from podledger.read.audit import queries, render
    from podledger.streams.fold import HoldLimits

    settings = audit_settings(args)
    ref = parse_pod_arg(args.pod)
    if args.at is not None and args.version is not None:
        raise UserError("give --at or --version, not both")
    at = parse_moment(args.at, "--at")
    index = open_index(settings, "why", refresh=not args.no_refresh)
    try:
        limits = HoldLimits(settings.hold_max_events, settings.hold_max_ms)
        result = queries.why(index, ref, at_ms=at, version=args.version, limits=limits)
    except queries.NotFound as exc:
        raise UserError(str(exc)) from None
    finally:
        index.close()
    if args.output in ("json", "yaml"):
        print_data(result, args.output)
    else:
        print("\n".join(render.why_lines(result)))
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "why",
        help="why a pod's status is what it is: the inputs and rules behind a version",
        description="The status in force at --at (or --version N, or now), the input events applied since"
        " the version before, the rule that decided it, and the inputs after it that changed nothing.",
    )
    p.add_argument("pod")
    p.add_argument("--at", help="the moment: RFC 3339, or a duration before now (2h)")
    p.add_argument("--version", type=int, help="the version number")
    p.add_argument("-o", "--output", choices=["json", "yaml"], help="output format")
    add_index_options(p)
    p.set_defaults(func=cmd_why)
