"""The offline fold in the native fold core (streams/foldcore/, Go): `podledger fold`'s fast path.

The core folds a JSON-lines file as streams/replay.py does and prints the same pod-status-history
values byte for byte (tests/integration/test_fold_core.py compares them). It covers what a journal
of the live fold holds; on anything else (a line the fold would dead-letter, events held for a pod
not announced yet, a number that is not an integer) it stops with exit status 3 and names the
line, and the caller folds the whole input with the Python fold instead. Its output then counts
for nothing, so callers hand it a file they discard.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import orjson

from podledger.errors import UserError

CORE_NAME = "podledger-foldcore"  # installed beside the virtualenv's python by `make install`
EXIT_GAVE_UP = 3
_GAVE_UP = re.compile(r"not covered: line (\d+): (.*)")


@dataclass(frozen=True, slots=True)
class CoreStats:
    """What the core folded: its summary line."""

    lines: int
    events: int
    versions: int
    pods: int
    seconds: float


@dataclass(frozen=True, slots=True)
class GaveUp:
    """The input holds what the core does not cover, first at `line`."""

    line: int
    reason: str


def find_core(setting: str) -> str | None:
    """The core to run for the `fold_core` setting ("auto", "off" or a path), or None."""
    if setting == "off":
        return None
    if setting != "auto":
        if not os.access(setting, os.X_OK):
            raise UserError(f"PODLEDGER_FOLD_CORE={setting}: not an executable file")
        return setting
    beside = Path(sys.executable).with_name(CORE_NAME)
    return str(beside) if os.access(beside, os.X_OK) else shutil.which(CORE_NAME)


def fold_file(
    core: str, source: Path, history: BinaryIO, *, progress: bool = False, window_bytes: int | None = None
) -> CoreStats | GaveUp:
    """Fold the JSON lines in `source` with the core, writing history values to `history`.
    With `progress`, the core's progress lines go on to standard error as it prints them;
    `window_bytes` is how much input it folds at a time (None: its default, 64 MB)."""
    command = [
        core,
        *(["--progress"] if progress else []),
        *(["--window-bytes", str(window_bytes)] if window_bytes is not None else []),
        str(source),
    ]
    with subprocess.Popen(command, stdout=history, stderr=subprocess.PIPE) as proc:
        assert proc.stderr is not None
        lines: list[str] = []
        for raw in proc.stderr:
            line = raw.decode(errors="replace").rstrip("\n")
            if line.startswith("podfold: ") and line.endswith(" lines ..."):
                print(f"podledger fold: {line.removeprefix('podfold: ')}", file=sys.stderr, flush=True)
            else:
                lines.append(line)
    errors = "\n".join(lines).strip()
    if proc.returncode == EXIT_GAVE_UP:
        match = _GAVE_UP.search(errors)
        return GaveUp(int(match.group(1)), match.group(2)) if match else GaveUp(0, errors)
    if proc.returncode != 0:
        raise UserError(f"the native fold core failed (exit {proc.returncode}): {errors}")
    summary = orjson.loads(lines[-1])
    return CoreStats(
        summary["lines"], summary["events"], summary["versions"], summary["pods"], summary["seconds"]
    )
