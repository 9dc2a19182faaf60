"""Child processes of the launcher: spawn, wait for readiness, stop, and read their logs."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from podledger.children import die_with_parent
from podledger.errors import UserError


def free_port() -> int:
    """A loopback port nobody listens on now (the OS picks it, so parallel runs never collide)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def need_tool(tool: str, how: str) -> str:
    path = shutil.which(tool)
    if not path:
        raise UserError(f"{tool} is not installed or not on PATH: {how}")
    return path


def spawn(cmd: list[str], log_path: Path, *, detached: bool, env: dict[str, str] | None = None) -> int:
    logf = open(log_path, "ab")  # noqa: SIM115 - handed to the child
    try:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=os.setsid if detached else die_with_parent,
        )
    finally:
        logf.close()
    return proc.pid


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child is dead for our purposes.
    with contextlib.suppress(OSError), open(f"/proc/{pid}/stat") as f:
        if f.read().split(")")[-1].split()[0] == "Z":
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            return False
    return True


def stop_process(pid: int, timeout: float = 20.0) -> None:
    """SIGTERM the process group, wait, then SIGKILL what is left."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            if not alive(pid):
                return
            time.sleep(0.1)


def log_tail(path: Path, lines: int = 60) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def wait_until(ready: Callable[[], bool], pid: int, timeout: float, what: str, log_path: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            raise UserError(f"{what} exited during start-up; log {log_path}:\n{log_tail(log_path)}")
        if ready():
            return
        time.sleep(0.25)
    stop_process(pid)
    raise UserError(f"{what} did not become ready in {timeout:.0f}s; log {log_path}:\n{log_tail(log_path)}")


def port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0
