"""`podledger fold`: the live fold's pure functions over a JSON-lines file, with no Kafka."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import BinaryIO

from podledger.cli.common import add_connection_options, settings_from
from podledger.config import Settings
from podledger.errors import UserError
from podledger.types import Topic


def _open_input(path: str) -> BinaryIO:
    if path == "-":
        return sys.stdin.buffer
    try:
        return open(path, "rb")
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from None


def cmd_fold(args: argparse.Namespace) -> int:
    """Fold a JSON-lines file of journal or ingress events offline; print versioned statuses."""
    from podledger.streams.native_replay import find_core

    settings = settings_from(args)
    wanted = set(args.outputs.split(","))
    # The native core prints history only, and covers inputs without dead letters or held events.
    core = find_core(settings.fold_core) if wanted == {Topic.POD_STATUS_HISTORY} else None
    if core is None:
        return _fold_in_python(args, settings, _open_input(args.file), wanted)
    with tempfile.TemporaryDirectory(prefix="podledger-fold-") as spool:
        path = Path(args.file)
        if args.file == "-":  # kept for the Python fold, should the core not cover it
            path = Path(spool) / "input.jsonl"
            with open(path, "wb") as copy:
                shutil.copyfileobj(sys.stdin.buffer, copy, 1 << 20)
        elif not os.access(path, os.R_OK):
            _open_input(args.file)  # says why it cannot be read
        folded = _fold_with_core(core, path, args.progress, args.window_mb)
        if folded is not None:
            return folded
        return _fold_in_python(args, settings, _open_input(str(path)), wanted)


def _fold_with_core(core: str, path: Path, progress: bool, window_mb: int) -> int | None:
    """Fold with the native core and print what it printed; None if it does not cover the input."""
    from podledger.streams.native_replay import GaveUp, fold_file

    with tempfile.TemporaryFile() as history:
        result = fold_file(core, path, history, progress=progress, window_bytes=window_mb << 20)
        if isinstance(result, GaveUp):
            print(
                f"podledger fold: the native core does not cover line {result.line} ({result.reason});"
                " folding in Python",
                file=sys.stderr,
            )
            return None
        history.seek(0)
        shutil.copyfileobj(history, sys.stdout.buffer, 1 << 20)
        sys.stdout.buffer.flush()
    print(
        f"podledger fold: {result.events} events of {result.pods} pods -> {result.versions} versions,"
        f" 0 rejected, in {result.seconds:.2f}s (native core)",
        file=sys.stderr,
    )
    return 0


def _fold_in_python(args: argparse.Namespace, settings: Settings, source: BinaryIO, wanted: set[str]) -> int:
    from podledger.heap import long_lived_heap
    from podledger.schemas import encode
    from podledger.streams.fold import HoldLimits
    from podledger.streams.replay import ReplayStats, replay

    stats = ReplayStats()
    started = time.monotonic()
    out = sys.stdout.buffer
    with long_lived_heap():  # the records it builds live as long as the fold does
        try:
            for output in replay(source, HoldLimits(settings.hold_max_events, settings.hold_max_ms), stats):
                if output.topic == Topic.DEAD_LETTER:
                    print(f"podledger fold: rejected: {output.value.detail}", file=sys.stderr)
                if output.topic in wanted and output.value is not None:
                    out.write(encode(output.value) + b"\n")
                if args.progress and stats.lines % 100_000 == 0:
                    print(f"podledger fold: {stats.lines} lines ...", file=sys.stderr, flush=True)
        finally:
            if source is not sys.stdin.buffer:
                source.close()
            out.flush()
    elapsed = time.monotonic() - started
    print(
        f"podledger fold: {stats.events} events of {len(stats.pods)} pods -> {stats.versions} versions,"
        f" {stats.rejected} rejected, in {elapsed:.2f}s",
        file=sys.stderr,
    )
    return 1 if stats.rejected and args.strict else 0


WINDOW_MB_RANGE = range(1, 1025)  # the core takes 1 MiB to 1 GiB


def _window_mb(text: str) -> int:
    try:
        window = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of MB: {text!r}") from None
    if window not in WINDOW_MB_RANGE:
        raise argparse.ArgumentTypeError(f"{window} is outside 1..1024 MB")
    return window


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "fold",
        help="fold journal or ingress events from a file offline, print versioned statuses",
        description="Runs the same fold as the live pipeline over JSON lines (journal entries, or"
        " pod-updates/pleg/probe-results/pod-lifecycle values) with no Kafka, and prints each status"
        " version as a pod-status-history value, one JSON object per line. Rejected lines are"
        " reported on stderr and skipped.",
    )
    p.add_argument("file", nargs="?", default="-", help="JSON-lines file, or - for standard input (default)")
    p.add_argument(
        "--outputs",
        default=Topic.POD_STATUS_HISTORY,
        help="comma-separated outputs to print: pod-status-history (default), journal, dead-letter",
    )
    p.add_argument("--strict", action="store_true", help="exit 1 if any line was rejected")
    p.add_argument("--progress", action="store_true", help="report progress on stderr every 100,000 lines")
    p.add_argument(
        "--window-mb",
        type=_window_mb,
        default=64,
        help="the native core folds this much input at a time, pod by pod, and holds its history (about"
        " four times as much) until it is written: 1..1024 (default 64)",
    )
    add_connection_options(p)
    p.set_defaults(func=cmd_fold)
