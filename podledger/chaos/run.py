"""`run_chaos`, the entry point of `podledger chaos`: one run of `orchestration.Chaos` that stops
every process it started, also on SIGINT/SIGTERM, and removes a temporary work directory after it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from podledger.chaos.config import ChaosConfig, ChaosResult, say
from podledger.chaos.orchestration import Chaos
from podledger.chaos.services import stop_all


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt as SIGINT does, so every `finally` cleans up."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_chaos(config: ChaosConfig) -> ChaosResult:
    """The whole chaos run; stops every process it started, also on SIGINT/SIGTERM."""
    config.check()
    keep = bool(config.workdir)
    workdir = Path(config.workdir or tempfile.mkdtemp(prefix="podledger-chaos-"))
    workdir.mkdir(parents=True, exist_ok=True)
    chaos = Chaos(config, workdir)
    tidy = False  # remove a temporary work directory: after a passing or an interrupted run
    # Our own clients retry through the faults; their error lines would bury the progress.
    client_log = logging.getLogger("aiokafka")
    level = client_log.level
    client_log.setLevel(logging.CRITICAL)
    with _interruptible():
        try:
            chaos.start_instances()
            asyncio.run(_main_until_signalled(chaos))
            tidy = chaos.result.ok()
        except KeyboardInterrupt:
            tidy = True
            raise
        finally:
            stop_all(chaos.services.values(), timeout=10)
            chaos.stop_instances()
            client_log.setLevel(level)
            if tidy and not keep:
                shutil.rmtree(workdir, ignore_errors=True)
                chaos.result.workdir = ""
    return chaos.result


async def _main_until_signalled(chaos: Chaos) -> None:
    task = asyncio.ensure_future(chaos.main())
    loop = asyncio.get_running_loop()
    interrupted = False

    def interrupt() -> None:
        nonlocal interrupted
        interrupted = True
        task.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, interrupt)
    try:
        await task
    except asyncio.CancelledError:
        if interrupted:
            say("interrupted: stopping every process")
            raise KeyboardInterrupt from None
        raise
