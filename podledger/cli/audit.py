"""`podledger index`, `history` and `why`: the audit read model and the questions it answers.

`podledger index` is the consumer role that keeps the index (a SQLite file, PODLEDGER_INDEX)
up to date with pod-status-history and journal. The query commands catch the index up first
(unless --no-refresh), then read it; the answers come from podledger.read.audit.queries.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from podledger.cli.common import add_connection_options, settings_from
from podledger.config import Settings
from podledger.errors import UserError

PROGRESS_EVERY_S = 2.0


def say(what: str, message: str) -> None:
    print(f"podledger {what}: {message}", file=sys.stderr, flush=True)


def audit_settings(args: argparse.Namespace) -> Settings:
    """Settings with the index path from --index, and the local broker when none is named."""
    settings = settings_from(args)
    if getattr(args, "index", None):
        settings = dataclasses.replace(settings, index=args.index)
        settings.check()
    if not settings.bootstrap and not getattr(args, "no_refresh", False):
        from podledger import local

        kafka = local.running_kafka()
        if kafka is None:
            from podledger.compose import require_bootstrap

            require_bootstrap(settings)
        else:
            settings = dataclasses.replace(settings, bootstrap=kafka.bootstrap)
    return settings


def progress_printer(what: str) -> Callable[[int, int], None]:
    """Reports records read on stderr, at most every PROGRESS_EVERY_S, once a catch-up takes that long."""
    last = [time.monotonic()]

    def report(done: int, todo: int) -> None:
        if time.monotonic() - last[0] >= PROGRESS_EVERY_S:
            last[0] = time.monotonic()
            say(what, f"indexed {done} of {todo} records")

    return report


def _topics(settings: Settings) -> str:
    return f"{settings.bootstrap} {settings.topic_prefix}"


def open_writer(settings: Settings) -> Any:
    from podledger.read.index import IndexMismatch, SqliteIndex

    try:
        return SqliteIndex(settings.index_path(), topics=_topics(settings))
    except IndexMismatch as exc:
        raise UserError(f"{exc}: set PODLEDGER_INDEX (or --index) to a file of its own") from None


def open_index(settings: Settings, what: str, *, refresh: bool) -> Any:
    """The index, caught up with the topics first when `refresh`, opened read-only."""
    from podledger.read.index import IndexMismatch, SqliteIndex, builder

    path = settings.index_path()
    if refresh:
        writer = open_writer(settings)
        try:
            asyncio.run(builder.run(settings, writer, progress=progress_printer(what)))
        finally:
            writer.close()
    if not Path(path).exists():
        raise UserError(f"no audit index at {path}: run 'podledger index --once' first")
    try:
        return SqliteIndex(path, read_only=True, topics=_topics(settings) if settings.bootstrap else "")
    except IndexMismatch as exc:
        raise UserError(str(exc)) from None


def print_data(data: Any, output: str) -> None:
    if output == "yaml":
        import yaml

        sys.stdout.write(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    else:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")


def parse_moment(text: str | None, flag: str) -> int | None:
    from podledger.read.audit.parse import parse_time_ms

    if text is None:
        return None
    try:
        return parse_time_ms(text, int(time.time() * 1000))
    except ValueError as exc:
        raise UserError(f"{flag}: {exc}") from None


def parse_pod_arg(text: str) -> Any:
    from podledger.read.audit.parse import parse_pod

    try:
        return parse_pod(text)
    except ValueError as exc:
        raise UserError(str(exc)) from None


# ---------------------------------------------------------------------------------------- index


def cmd_index(args: argparse.Namespace) -> int:
    from podledger.read.index import builder

    settings = audit_settings(args)
    writer = open_writer(settings)
    try:
        if args.status:
            lag = asyncio.run(builder.lag(settings, writer))
            versions, entries = writer.count("pod-status-history"), writer.count("journal")
            print(
                f"index {settings.index_path()}: {versions} versions, {entries} journal entries,"
                f" {writer.size_bytes() / 2**20:.1f} MB; {lag.describe()}"
            )
            return 0
        lag = asyncio.run(_index(settings, writer, follow=not args.once))
        say("index", f"{lag.indexed} records indexed; {lag.describe()}")
    finally:
        writer.close()
    return 0


async def _index(settings: Settings, writer: Any, *, follow: bool) -> Any:
    from podledger.read.index import builder

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return await builder.run(
        settings,
        writer,
        follow=follow,
        stop=stop,
        progress=progress_printer("index"),
        on_lag=lambda lag: say("index", lag.describe()),
    )


# ---------------------------------------------------------------------------------------- history


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


# ---------------------------------------------------------------------------------------- why


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


def add_index_options(p: argparse.ArgumentParser, *, refresh: bool = True) -> None:
    p.add_argument("--index", help="the index file (PODLEDGER_INDEX; default under the podledger cache)")
    if refresh:
        p.add_argument(
            "--no-refresh", action="store_true", help="read the index as it is (without catching it up first)"
        )
    add_connection_options(p)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "index",
        help="keep the audit index of pod-status-history and journal up to date",
        description="Reads pod-status-history and journal into the audit index (a SQLite file) and"
        " follows them until SIGTERM; resumes from the offsets it stored after a restart.",
    )
    p.add_argument("--once", action="store_true", help="catch up with the topics, then exit")
    p.add_argument("--status", action="store_true", help="print the index's size and its lag, then exit")
    add_index_options(p, refresh=False)
    p.set_defaults(func=cmd_index)

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
