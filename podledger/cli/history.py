"""`podledger history`: every status version of a pod, with its cause, from the audit index.

The index is caught up with the topics first (unless --no-refresh); `--follow` keeps printing
new versions, catching the index up meanwhile. The answers come from podledger.read.audit.queries.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
from typing import Any

from podledger.cli.audit import (
    add_index_options,
    audit_settings,
    open_index,
    open_writer,
    parse_moment,
    parse_pod_arg,
    print_data,
)
from podledger.config import Settings
from podledger.errors import UserError


def cmd_history(args: argparse.Namespace) -> int:
    from podledger.read.audit import queries, render

    settings = audit_settings(args)
    ref = parse_pod_arg(args.pod)
    since, until = parse_moment(args.since, "--since"), parse_moment(args.until, "--until")
    index = open_index(settings, "history", refresh=not args.no_refresh)
    output = args.output or ""
    query = dict(since_ms=since, until_ms=until, with_diff=args.diff, with_status=output in ("json", "yaml"))
    try:
        try:
            lives = queries.history(index, ref, **query)
        except queries.NotFound as exc:
            raise UserError(str(exc)) from None
        if output in ("json", "yaml"):
            print_data({"kind": "PodHistory", "pod": str(ref), "lives": lives}, output)
        else:
            lines = render.history_lines(lives, wide=output == "wide", with_diff=args.diff)
            print("\n".join(lines) or f"no versions of {ref} in that time range", flush=True)
        if args.follow:
            seen = {(life["uid"], tuple(v["history_at"])) for life in lives for v in life["versions"]}
            asyncio.run(_follow(settings, index, ref, query, seen, output, refresh=not args.no_refresh))
    finally:
        index.close()
    return 0


async def _follow(
    settings: Settings,
    index: Any,
    ref: Any,
    query: dict[str, Any],
    seen: set[Any],
    output: str,
    *,
    refresh: bool,
) -> None:
    """Print versions as they reach the index, until SIGINT or SIGTERM; with `refresh`, this
    process keeps the index up to date meanwhile."""
    from podledger.read.audit import queries, render
    from podledger.read.index import builder

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    writer = open_writer(settings) if refresh else None
    task = asyncio.create_task(builder.run(settings, writer, follow=True, stop=stop)) if writer else None
    try:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
            with contextlib.suppress(queries.NotFound):
                for life in queries.history(index, ref, **query):
                    fresh = [v for v in life["versions"] if (life["uid"], tuple(v["history_at"])) not in seen]
                    seen.update((life["uid"], tuple(v["history_at"])) for v in fresh)
                    if not fresh:
                        continue
                    if output in ("json", "yaml"):
                        for row in fresh:
                            print(json.dumps({**{k: life[k] for k in ("uid", "namespace", "name")}, **row}))
                    else:
                        lines = render.history_lines(
                            [{**life, "versions": fresh}],
                            wide=output == "wide",
                            with_diff=bool(query["with_diff"]),
                        )
                        print("\n".join(lines[2:]))  # the rows, without the title and the header
                    sys.stdout.flush()
    finally:
        stop.set()
        if task is not None:
            await task
        if writer is not None:
            writer.close()


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "history",
        help="every status version of a pod, with its cause",
        description="POD is namespace/name or a pod UID; a name several pods carried lists each of them."
        " Times are RFC 3339 or durations before now (2h, 30m).",
    )
    p.add_argument("pod")
    p.add_argument("--since", help="only versions at or after this time")
    p.add_argument("--until", help="only versions at or before this time")
    p.add_argument("--diff", action="store_true", help="show what changed against the previous version")
    p.add_argument("-o", "--output", choices=["wide", "json", "yaml"], help="output format")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new versions")
    add_index_options(p)
    p.set_defaults(func=cmd_history)
