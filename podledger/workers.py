"""`podledger run --roles fold --workers N`: N fold workers on one machine, one supervisor.

Each worker is a whole `podledger run --roles fold` process in the fold's consumer group, so the
group spreads the partitions over them exactly as it does over workers on different machines;
nothing is shared between them but the broker. Processes rather than threads, because the fold
is CPU-bound Python: N processes use N cores. The supervisor only starts, watches and stops them:

- each child gets the supervisor's settings, its own Faust data directory (`worker-<i>` under
  PODLEDGER_DATA_DIR or the default one) and, when PODLEDGER_HEALTH_PORT is set, its own port
  (the port + i);
- every line a child prints is passed on prefixed with `worker=<i>`;
- a child that exits on its own (a crash, a kill, even exit 0) is started again after a back-off
  (1 s doubling to 30 s, back to 1 s once a child has run 60 s); its partitions move to the
  others meanwhile and come back, restored, when it rejoins. Exit code 2 is the exception: it is
  podledger's configuration error, which a restart would only repeat, so the supervisor stops the
  others and exits 2;
- SIGTERM or SIGINT is passed on to every child; the supervisor exits when all have stopped
  (SIGKILL after 60 s, or at once on a second signal). Children live in sessions of their own, so
  a terminal's Ctrl-C reaches them once, through the supervisor, and they get SIGTERM if the
  supervisor itself dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from podledger.children import die_with_parent
from podledger.config import ENV_PREFIX, Settings
from podledger.errors import UserError

log = logging.getLogger(__name__)

FOLD_WORKER = (sys.executable, "-m", "podledger.cli", "run", "--roles", "fold")  # what each child runs
CONFIG_ERROR = 2  # podledger's exit code for a usage or configuration error (podledger.cli.main)
STOP_GRACE_S = 60.0  # how long a stopping child may take before SIGKILL


@dataclass(frozen=True, slots=True)
class Backoff:
    """The restart delay of a child that exited on its own."""

    first_s: float = 1.0
    max_s: float = 30.0
    healthy_after_s: float = 60.0  # a child that ran this long starts again from first_s


def restart_delay(previous_s: float, ran_s: float, backoff: Backoff = Backoff()) -> float:
    """The wait before starting a child again: doubling from `first_s` up to `max_s` while it
    keeps failing (`previous_s`: the last wait, 0 for none), `first_s` after a healthy run."""
    if ran_s >= backoff.healthy_after_s or previous_s <= 0:
        return backoff.first_s
    return min(previous_s * 2, backoff.max_s)


def check_workers(roles: set[str], workers: int) -> None:
    """Only the fold runs as several processes: the other roles keep per-process state (pod
    storage, runtime, sink queue) that copies would fight over."""
    if workers > 1 and roles != {"fold"}:
        raise UserError(
            f"--workers (PODLEDGER_FOLD_WORKERS) {workers} runs {workers} fold workers: use it with"
            f" --roles fold alone, not {','.join(sorted(roles))}; sources, node agents and the sink"
            " run in one process"
        )


def settings_env(settings: Settings) -> dict[str, str]:
    """PODLEDGER_* variables that give a child process exactly these settings."""
    env = {}
    for f in dataclasses.fields(settings):
        value = getattr(settings, f.name)
        env[ENV_PREFIX + f.name.upper()] = str(value).lower() if isinstance(value, bool) else str(value)
    return env


def worker_env(settings: Settings, index: int) -> dict[str, str]:
    """The PODLEDGER_* environment of fold worker `index`: the supervisor's settings, one worker,
    a data directory of its own and, when health is served, a port of its own."""
    data_dir = Path(settings.faust_data_dir()) / f"worker-{index}"
    return {
        **settings_env(settings),
        ENV_PREFIX + "FOLD_WORKERS": "1",
        ENV_PREFIX + "DATA_DIR": str(data_dir),
        ENV_PREFIX + "HEALTH_PORT": str(settings.health_port + index if settings.health_port else 0),
    }


async def _pass_on(stream: asyncio.StreamReader | None, out: IO[bytes], prefix: bytes) -> None:
    """Copy a child's output line by line, each line prefixed (lines of any length)."""
    if stream is None:
        return
    pending = b""
    while chunk := await stream.read(1 << 16):
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        if lines:
            out.write(b"".join(prefix + line + b"\n" for line in lines))
            out.flush()
    if pending:
        out.write(prefix + pending + b"\n")
        out.flush()


class Supervisor:
    """Runs N fold workers until signalled; see the module docstring for the rules."""

    def __init__(
        self,
        settings: Settings,
        workers: int,
        backoff: Backoff = Backoff(),
        command: Sequence[str] = FOLD_WORKER,
    ) -> None:
        if settings.health_port and settings.health_port + workers - 1 > 65_535:
            raise UserError(
                f"PODLEDGER_HEALTH_PORT={settings.health_port} leaves no port for each of {workers} workers"
            )
        self.settings, self.workers, self.backoff, self.command = settings, workers, backoff, command
        self.children: dict[int, asyncio.subprocess.Process] = {}
        self.stopping = asyncio.Event()
        self.exit_code = 0
        self._signals = 0

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._signalled, sig)
        log.info("supervising %d fold workers", self.workers)
        await asyncio.gather(*(self._keep_running(i) for i in range(self.workers)))
        return self.exit_code

    def _signalled(self, sig: int) -> None:
        self._signals += 1
        self.stopping.set()
        log.info("%s: stopping %d fold workers", signal.Signals(sig).name, len(self.children))
        for child in self.children.values():
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(sig if self._signals == 1 else signal.SIGKILL)

    async def _keep_running(self, index: int) -> None:
        """Worker `index`: started, and started again after it exits on its own, until stopped."""
        delay = 0.0
        while not self.stopping.is_set():
            started = time.monotonic()
            child = await asyncio.create_subprocess_exec(
                *self.command,
                env={**os.environ, **worker_env(self.settings, index)},
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                preexec_fn=die_with_parent,
                limit=1 << 16,
            )
            self.children[index] = child
            if self.stopping.is_set():  # signalled while it was being started
                child.send_signal(signal.SIGTERM)
            log.info("fold worker %d started: pid %d", index, child.pid)
            prefix = f"worker={index} ".encode()
            await asyncio.gather(
                _pass_on(child.stdout, sys.stdout.buffer, prefix),
                _pass_on(child.stderr, sys.stderr.buffer, prefix),
                self._wait(child),
            )
            del self.children[index]
            code = child.returncode
            if self.stopping.is_set():
                log.info("fold worker %d (pid %d) stopped with %s", index, child.pid, code)
                return
            if code == CONFIG_ERROR:
                log.error("fold worker %d exited with a configuration error: stopping all", index)
                self.exit_code = CONFIG_ERROR
                self._signalled(signal.SIGTERM)
                return
            delay = restart_delay(delay, time.monotonic() - started, self.backoff)
            log.warning(
                "fold worker %d (pid %d) exited with %s; starting it again in %.0fs",
                index,
                child.pid,
                code,
                delay,
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), delay)

    async def _wait(self, child: asyncio.subprocess.Process) -> None:
        """Until the child exits; once stopping, SIGKILL after STOP_GRACE_S."""
        exited = asyncio.ensure_future(child.wait())
        stopping = asyncio.ensure_future(self.stopping.wait())
        await asyncio.wait([exited, stopping], return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not exited.done():
            try:
                await asyncio.wait_for(asyncio.shield(exited), STOP_GRACE_S)
            except TimeoutError:
                log.warning("fold worker pid %d did not stop in %.0fs: killing it", child.pid, STOP_GRACE_S)
                with contextlib.suppress(ProcessLookupError):
                    child.kill()
        await exited


def run_fold_workers(settings: Settings, roles: set[str]) -> int:
    """`podledger run` with settings.fold_workers > 1: supervise that many fold workers."""
    check_workers(roles, settings.fold_workers)
    return asyncio.run(Supervisor(settings, settings.fold_workers).run())
