"""`podledger serve`: the read-only Kubernetes API over the ledger; `podledger pods`: the pods of
pod-status, listed and followed with the consumer client (docs/consuming.md)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import ipaddress
import sys
from pathlib import Path

from podledger.cli.common import add_connection_options, settings_from
from podledger.compose import require_bootstrap
from podledger.config import Settings
from podledger.errors import UserError


def listen_address(settings: Settings) -> tuple[str, int]:
    """(host, port) of PODLEDGER_SERVE_LISTEN; beyond loopback only with a bearer token, since
    whoever reaches the server reads every pod."""
    host, _, port_text = settings.serve_listen.rpartition(":")
    host = host.strip("[]")
    try:
        port = int(port_text)
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        raise UserError(f"PODLEDGER_SERVE_LISTEN={settings.serve_listen!r} is not HOST:PORT") from None
    if not 0 <= port <= 65_535:
        raise UserError(f"PODLEDGER_SERVE_LISTEN={settings.serve_listen!r}: no such port")
    if not loopback and not settings.serve_token_file:
        raise UserError(
            f"serve would listen on {host}, beyond loopback, without a bearer token: set"
            " PODLEDGER_SERVE_TOKEN_FILE (or --token-file), or listen on 127.0.0.1"
        )
    return host, port


def read_token(path: str) -> str:
    if not path:
        return ""
    token = Path(path).read_text().strip()
    if len(token) < 16:
        raise UserError(f"the bearer token in {path} is shorter than 16 characters")
    return token


def cmd_serve(args: argparse.Namespace) -> int:
    from podledger.read.kubeapi.server import run_server

    overrides = {
        "serve_listen": args.listen,
        "serve_token_file": args.token_file,
        "serve_bookmark_s": args.bookmark_s,
    }
    settings = dataclasses.replace(
        settings_from(args), **{k: v for k, v in overrides.items() if v is not None}
    )
    settings.check()
    require_bootstrap(settings)
    host, port = listen_address(settings)
    token = read_token(settings.serve_token_file)

    def ready(url: str) -> None:
        print(f"podledger serve: answering the Kubernetes API on {url}", flush=True)

    asyncio.run(
        run_server(settings, host, port, token=token, bookmark_s=settings.serve_bookmark_s, ready=ready)
    )
    return 0


def cmd_pods(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    require_bootstrap(settings)
    return asyncio.run(_pods(settings, args))


async def _pods(settings: Settings, args: argparse.Namespace) -> int:
    from podledger.cli.demo import format_status_line
    from podledger.read.client import ChangeType, TokenExpired, watch_pods

    token = args.resume
    try:
        async for change in watch_pods(
            settings,
            namespace=args.namespace,
            node=args.on_node,
            labels=args.selector,
            fields=args.field_selector,
            resume=args.resume,
        ):
            token = change.token
            if change.type == ChangeType.SYNCED:
                if not args.watch:
                    break
                continue
            if change.status is None:
                print(f"{change.type:8}  uid {change.uid}", flush=True)
            else:
                print(f"{change.type:8}  {format_status_line(change.status)}", flush=True)
    except TokenExpired as exc:
        raise UserError(f"cannot resume: {exc}; list again without --resume") from None
    except (KeyboardInterrupt, asyncio.CancelledError):
        pass
    finally:
        if token:
            print(f"resume: {token}", file=sys.stderr, flush=True)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "serve",
        help="answer the Kubernetes API's pod read paths (kubectl get pods, -w) from the ledger",
        description="Loads every pod of pod-status (joined with pod-updates), then answers GET"
        " requests: discovery, list, get and watch of pods, and /at/<RFC 3339 time>/... for the"
        " pods as they were. Read-only; on loopback unless a bearer token is set.",
    )
    p.add_argument("--listen", help="HOST:PORT (PODLEDGER_SERVE_LISTEN; default 127.0.0.1:8001)")
    p.add_argument(
        "--token-file", help="a file holding the bearer token clients must send (PODLEDGER_SERVE_TOKEN_FILE)"
    )
    p.add_argument(
        "--bookmark-s", type=float, help="seconds between BOOKMARKs of a watch (PODLEDGER_SERVE_BOOKMARK_S)"
    )
    add_connection_options(p)
    p.set_defaults(func=cmd_serve)

    q = sub.add_parser(
        "pods",
        help="list the pods of pod-status (and with --watch, follow their changes)",
        description="One line per pod and change; on exit the token to resume from is printed on stderr.",
    )
    q.add_argument("--namespace", "-n", help="only this namespace")
    q.add_argument("--on-node", help="only pods on this node (reads only its partition)")
    q.add_argument("--selector", "-l", help="a label selector (app=web,tier!=db)")
    q.add_argument("--field-selector", help="a field selector (status.phase=Running)")
    q.add_argument("--watch", "-w", action="store_true", help="follow the changes after the list")
    q.add_argument("--resume", help="a token printed before: skip the list, follow the changes after it")
    add_connection_options(q)
    q.set_defaults(func=cmd_pods)
