"""`podledger ui`: the audit timeline in a browser (docs/ui.md).

Serves one page over the audit index (PODLEDGER_INDEX): a pod's versions as phase and Ready bands
with restart marks, a version's status, changes and cause, and a namespace's pods at once. It
catches the index up with the topics first and keeps it up to date while it runs, as `podledger
history --follow` does (--no-refresh: the index as it is, no broker needed). Read-only, with no
login: it listens on loopback unless --allow-remote says otherwise. SIGTERM stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from pathlib import Path
from typing import Any

from podledger.cli.audit import add_index_options, audit_settings, open_writer, progress_printer, say
from podledger.config import Settings
from podledger.errors import UserError


def listen_from(args: argparse.Namespace) -> Any:
    from podledger.read.ui.guard import parse_listen

    try:
        listen = parse_listen(args.listen)
    except ValueError as exc:
        raise UserError(f"--listen: {exc}") from None
    if not listen.loopback and not args.allow_remote:
        raise UserError(
            f"ui would listen on {listen.host}, beyond loopback: whoever reaches it reads every indexed"
            " pod's status, without a login. Listen on 127.0.0.1 (and tunnel to it), or give"
            " --allow-remote to accept that"
        )
    return listen


def cmd_ui(args: argparse.Namespace) -> int:
    listen = listen_from(args)
    settings = audit_settings(args)
    asyncio.run(_ui(settings, listen, refresh=not args.no_refresh))
    return 0


def _open_read_only(settings: Settings) -> Any:
    from podledger.read.index import IndexMismatch, SqliteIndex

    path = settings.index_path()
    if not Path(path).exists():
        raise UserError(f"no audit index at {path}: run 'podledger index --once' first")
    topics = f"{settings.bootstrap} {settings.topic_prefix}" if settings.bootstrap else ""
    try:
        return SqliteIndex(path, read_only=True, topics=topics)
    except IndexMismatch as exc:
        raise UserError(str(exc)) from None


async def _ui(settings: Settings, listen: Any, *, refresh: bool) -> None:
    from podledger.read.index import builder
    from podledger.read.ui.server import run_ui
    from podledger.streams.fold import HoldLimits

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    writer = open_writer(settings) if refresh else None
    try:
        if writer is not None:
            await builder.run(settings, writer, stop=stop, progress=progress_printer("ui"))
        if stop.is_set():
            return
        _open_read_only(settings).close()  # a missing or foreign index fails here, before listening

        def following(index: Any) -> Any:
            async def follow(stopping: asyncio.Event) -> Any:
                return await builder.run(settings, index, follow=True, stop=stopping)

            return follow

        def ready(url: str) -> None:
            say("ui", f"serving the audit timeline on {url} (read-only; index {settings.index_path()})")

        await run_ui(
            lambda: _open_read_only(settings),
            listen,
            stop,
            index_path=settings.index_path(),
            limits=HoldLimits(settings.hold_max_events, settings.hold_max_ms),
            follow=following(writer) if writer is not None else None,
            ready=ready,
        )
        say("ui", "stopped")
    finally:
        if writer is not None:
            writer.close()


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from podledger.read.ui.guard import DEFAULT_LISTEN

    p = sub.add_parser(
        "ui",
        help="the audit timeline in a browser: pods' versions as phase and Ready bands",
        description="Serves a web page over the audit index: pick a pod to see its versions as a"
        " timeline (phase and Ready as coloured bands, container restarts as marks), click a"
        " version for its status, changes and cause; a namespace view shows many pods at once."
        " Read-only and without a login: on loopback unless --allow-remote.",
    )
    p.add_argument(
        "--listen", default=DEFAULT_LISTEN, help=f"HOST:PORT (default {DEFAULT_LISTEN}; port 0: any)"
    )
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="listen beyond loopback: anyone who reaches the port reads every indexed pod's status",
    )
    add_index_options(p)
    p.set_defaults(func=cmd_ui)
