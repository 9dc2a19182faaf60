"""`podledger index`, and what the audit commands share (history.py, why.py, export.py, ui.py).

`podledger index` is the consumer role that keeps the index (a SQLite file, PODLEDGER_INDEX)
up to date with pod-status-history and journal. The query commands open the index through
`open_index`, which catches it up first (unless --no-refresh), then read it.
"""

from __future__ import annotations

import argparse
import asyncio
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
