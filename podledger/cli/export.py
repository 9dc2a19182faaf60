"""`podledger export journal|history`: the audit index as JSON lines, to keep past retention.

An exported journal is what `podledger fold` reads: folding it again gives the history back.
"""

from __future__ import annotations

import argparse
import sys
import time

from podledger.cli.audit import (
    PROGRESS_EVERY_S,
    add_index_options,
    audit_settings,
    open_index,
    parse_moment,
    parse_pod_arg,
    say,
)
from podledger.errors import UserError
from podledger.types import Topic

TOPICS = {"journal": Topic.JOURNAL, "history": Topic.POD_STATUS_HISTORY}


def cmd_export(args: argparse.Namespace) -> int:
    from podledger.read.audit import queries

    settings = audit_settings(args)
    ref = parse_pod_arg(args.pod) if args.pod else None
    since, until = parse_moment(args.since, "--since"), parse_moment(args.until, "--until")
    index = open_index(settings, "export", refresh=not args.no_refresh)
    try:
        out = sys.stdout.buffer if args.file == "-" else open(args.file, "wb")  # noqa: SIM115 - closed below
    except OSError as exc:
        index.close()
        raise UserError(f"cannot write {args.file}: {exc.strerror}") from None
    count, started, last = 0, time.monotonic(), time.monotonic()
    try:
        for value in queries.export(index, TOPICS[args.what], ref=ref, since_ms=since, until_ms=until):
            out.write(value + b"\n")
            count += 1
            if count % 10_000 == 0 and time.monotonic() - last >= PROGRESS_EVERY_S:
                last = time.monotonic()
                say("export", f"{count} {args.what} records ...")
    except queries.NotFound as exc:
        raise UserError(str(exc)) from None
    finally:
        out.flush()
        if out is not sys.stdout.buffer:
            out.close()
        index.close()
    say("export", f"{count} {args.what} records in {time.monotonic() - started:.1f}s")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "export",
        help="write the indexed journal or history as JSON lines (podledger fold reads the journal)",
        description="Writes one topic value per line, per partition in topic order, from the audit index"
        " (caught up first unless --no-refresh), to keep an audit past the topics' retention. Times"
        " are RFC 3339 or durations before now (2h).",
    )
    p.add_argument("what", choices=sorted(TOPICS))
    p.add_argument("--since", help="only records at or after this time (event time)")
    p.add_argument("--until", help="only records at or before this time")
    p.add_argument("--pod", help="only this pod (namespace/name or UID)")
    p.add_argument("--file", default="-", help="the file to write (default: standard output)")
    add_index_options(p)
    p.set_defaults(func=cmd_export)
