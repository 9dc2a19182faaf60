"""The pipeline's processes under chaos: started, killed and started again."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from podledger.children import die_with_parent
from podledger.local.processes import log_tail


class Service:
    """One podledger process of the pipeline, started again as often as it is killed."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], log_path: Path) -> None:
        self.name, self.args, self.env, self.log_path = name, args, env, log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.wanted = True  # the supervisor restarts it when it exits on its own
        self.held = False  # a kill is in progress: the fault starts it again, not the supervisor
        self.starts = 0
        self.kills = 0
        self.exits: list[tuple[float, int]] = []  # (wall clock, exit code) of exits on its own
        self.crash_streak = 0  # exits on its own in a row, for the back-off
        self.started_at = 0.0  # monotonic

    def start(self) -> None:
        self.starts += 1
        self.started_at = time.monotonic()
        with open(self.log_path, "ab") as log:
            log.write(f"\n=== chaos: start #{self.starts} at {time.strftime('%H:%M:%S')} ===\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "podledger.cli", *self.args],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent,  # no terminal signal reaches it: chaos stops it
            )

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.kills += 1

    def stop(self, timeout: float = 30.0) -> None:
        self.wanted = False
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def tail(self, lines: int = 8) -> str:
        return log_tail(self.log_path, lines)


def stop_all(services: Iterable[Service], timeout: float = 30.0) -> None:
    """SIGTERM every running one at once, then wait for each (SIGKILL after `timeout`)."""
    services = list(services)
    for svc in services:
        svc.wanted = False
        if svc.running:
            assert svc.proc is not None
            svc.proc.send_signal(signal.SIGTERM)
    for svc in services:
        with contextlib.suppress(Exception):
            svc.stop(timeout)
