"""Where podledger keeps files of its own on this machine."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """The cache root: $PODLEDGER_CACHE, else $XDG_CACHE_HOME/podledger, else ~/.cache/podledger."""
    root = os.environ.get("PODLEDGER_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "podledger"
    )
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path
