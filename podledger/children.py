"""What every child process podledger starts does before it runs: the kernel ends it with its parent."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal

PR_SET_PDEATHSIG = 1  # prctl option: the signal the kernel sends a child when its parent thread dies


def die_with_parent() -> None:
    """A `preexec_fn` (it runs in the child, before exec): SIGTERM when the process that started it
    dies, even by SIGKILL, so no orphan outlives a killed test or supervisor; and a session of its
    own, so a terminal's Ctrl-C reaches only the parent, which stops its children in order."""
    with contextlib.suppress(Exception):  # not Linux: the parent's own shutdown still stops it
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    os.setsid()
