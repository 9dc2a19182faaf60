"""podledger as a child process: its environment, one command run to completion, a long-running
process with its output in a file, `podledger serve` and a kubeconfig for it; and polling until
something holds.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from podledger.config import Settings

REPO_ROOT = Path(__file__).resolve().parents[2]


def podledger_env(settings: Settings, kubeconfig: str | None = None, **extra: str) -> dict[str, str]:
    """The environment that points a podledger process at the test's broker, topics, node (and cluster)."""
    env = {
        "PODLEDGER_BOOTSTRAP": settings.bootstrap,
        "PODLEDGER_NODE": settings.node,
        "PODLEDGER_TOPIC_PREFIX": settings.topic_prefix,
        "PODLEDGER_PARTITIONS": str(settings.partitions),
    }
    if kubeconfig is not None:
        env["KUBECONFIG"] = kubeconfig
    return {**env, **extra}


def run_podledger(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`podledger ARGS` to completion, with none of the caller's PODLEDGER_* or KUBECONFIG."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("PODLEDGER_") and k != "KUBECONFIG"}
    return subprocess.run(
        [sys.executable, "-m", "podledger.cli", *args],
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def path_with(tmp_path: Path, *tools: str) -> str:
    """A PATH holding only `tools` (and the Python running the tests)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in tools:
        found = shutil.which(tool)
        assert found, f"{tool} is needed on this machine for this test"
        (bin_dir / tool).symlink_to(found)
    return str(bin_dir)


class PodledgerProcess:
    """`podledger ARGS` as a real child process, its output kept in a file."""

    def __init__(self, args: list[str], env: dict[str, str], log_path: Path) -> None:
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "podledger.cli", *args],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


def wait_for(
    check: Callable[[], Any],
    timeout: float = 60.0,
    interval: float = 0.25,
    what: str = "",
    alive: PodledgerProcess | None = None,
) -> Any:
    """Poll `check` until it returns something truthy; fail with `what` on timeout, or at once
    when the `alive` process has exited."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if alive is not None and alive.proc.poll() is not None:
            raise AssertionError(f"podledger exited ({alive.proc.returncode}) while waiting for {what}")
        try:
            result = check()
            if result:
                return result
        except Exception as exc:  # the condition may raise until the system catches up
            last_error = exc
        time.sleep(interval)
    raise AssertionError(
        f"timed out after {timeout}s waiting for {what or check}"
        + (f" (last error: {last_error})" if last_error else "")
    )


async def wait_for_async(
    check: Callable[[], Any], timeout: float = 30.0, what: str = "", interval: float = 0.1
) -> Any:
    """`wait_for` inside an event loop, for tests that run components in-process."""
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        result = check()
        if result:
            return result
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out waiting for {what or check}")


def start_serve(
    start: Callable[..., PodledgerProcess], settings: Settings, *args: str, **env: str
) -> tuple[PodledgerProcess, str]:
    """`podledger serve` on a free loopback port (started with the podledger_process fixture's
    `start`); returns the process and its URL once it answers."""
    from podledger.local import free_port

    url = f"http://127.0.0.1:{free_port()}"
    listen = url.removeprefix("http://")
    proc = start(["serve", "--listen", listen, *args], env=podledger_env(settings, **env))
    wait_for(lambda: "answering the Kubernetes API" in proc.output(), 60, what="podledger serve", alive=proc)
    return proc, url


def serve_kubeconfig(url: str, path: Path, token: str = "") -> str:
    """A kubeconfig for `podledger serve` at `url` (a path after the port, like /at/<time>, is kept)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "ledger", "cluster": {"server": url}}],
        "users": [{"name": "reader", "user": {"token": token} if token else {}}],
        "contexts": [{"name": "ledger", "context": {"cluster": "ledger", "user": "reader"}}],
        "current-context": "ledger",
    }
    path.write_text(json.dumps(config))  # JSON is valid YAML
    return str(path)
