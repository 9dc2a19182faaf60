"""What the process runtime knows of its pods and containers, and how it keeps that true.

- the records: a pod's sandbox bookkeeping and its containers, each with the persisted facts and the
  live Popen when this runtime started it;
- persistence and adoption: `<state_dir>/state.json` written atomically after every change, and read
  back by a restarted agent, which keeps the processes it left running instead of starting them twice;
- exit detection: noticing that a container's process has exited, and how. A pid is only trusted
  together with its start time, so a recycled pid is never taken for our process; an adopted process
  is not our child, so its exit code cannot be known and its exit is recorded as "unknown".

The runtime that uses them is agents.runtime.process.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from podledger.agents.runtime.base import ContainerRecord, exit_reason
from podledger.agents.runtime.containment import UnsafePathError, contained_path
from podledger.types import JSONDict

__all__ = [
    "ContainerState",
    "PodState",
    "killpg",
    "load_state",
    "poll_exit",
    "proc_start_ticks",
    "save_state",
]

log = logging.getLogger(__name__)

_STATE_FILE = "state.json"


class ContainerState:
    """One container instance: the persisted facts plus the live Popen when this runtime started it."""

    def __init__(self, **fields: Any) -> None:
        self.id: str = fields["id"]
        self.name: str = fields["name"]
        self.image: str | None = fields.get("image")
        self.restart_count: int = int(fields.get("restart_count", 0))
        self.state: str = fields.get("state", "created")
        self.pid: int | None = fields.get("pid")
        self.pgid: int | None = fields.get("pgid")
        self.start_ticks: int | None = fields.get("start_ticks")
        self.log_path: str = fields.get("log_path", "")
        self.created_at: float | None = fields.get("created_at")
        self.started_at: float | None = fields.get("started_at")
        self.finished_at: float | None = fields.get("finished_at")
        self.exit_code: int | None = fields.get("exit_code")
        self.reason: str | None = fields.get("reason")
        self.message: str | None = fields.get("message")
        self.popen: subprocess.Popen[bytes] | None = None  # None when adopted from a previous runtime

    def to_json(self) -> JSONDict:
        return {k: v for k, v in vars(self).items() if k != "popen"}

    def record(self) -> ContainerRecord:
        return ContainerRecord(
            id=self.id,
            name=self.name,
            image=self.image,
            state=self.state,
            restart_count=self.restart_count,
            created_at=self.created_at,
            started_at=self.started_at,
            finished_at=self.finished_at,
            exit_code=self.exit_code,
            reason=self.reason,
            message=self.message,
        )


class PodState:
    """Sandbox bookkeeping (there is no real sandbox) and the pod's containers in creation order."""

    def __init__(self, sandbox_id: str, ready: bool = True) -> None:
        self.sandbox_id = sandbox_id
        self.sandbox_ready = ready
        self.containers: dict[str, ContainerState] = {}


# ---------------------------------------------------------------------- persistence and adoption


def save_state(state_dir: Path, pods: dict[str, PodState]) -> None:
    """Write the state atomically (temp file + rename), so a crash never leaves half a file to adopt."""
    data = {
        uid: {
            "sandbox_id": pod.sandbox_id,
            "sandbox_ready": pod.sandbox_ready,
            "containers": [c.to_json() for c in pod.containers.values()],
        }
        for uid, pod in pods.items()
    }
    tmp = contained_path(state_dir, _STATE_FILE + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with open(fd, "w") as out:
        out.write(json.dumps(data))
    os.replace(tmp, contained_path(state_dir, _STATE_FILE))


def load_state(state_dir: Path, clock: Callable[[], float]) -> dict[str, PodState] | None:
    """A previous runtime's pods, or None when it left no state: live processes stay running, vanished
    ones become "unknown"."""
    path = contained_path(state_dir, _STATE_FILE)
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    pods: dict[str, PodState] = {}
    for uid, raw in data.items():
        try:
            contained_path(state_dir, uid)
        except UnsafePathError as e:  # kept so its processes can be stopped; its files are never touched
            log.warning("runtime state names an unsafe pod UID: %s", e)
        pod = PodState(str(raw["sandbox_id"]), bool(raw["sandbox_ready"]))
        for fields in raw["containers"]:
            c = ContainerState(**fields)
            if c.state == "running" and not _alive(c):
                _mark_unknown(c, clock())
            pod.containers[c.id] = c
        pods[uid] = pod
    return pods


# ---------------------------------------------------------------------- exit detection


def proc_start_ticks(pid: int) -> int | None:
    """The process's start time (clock ticks since boot) from /proc, or None if gone or a zombie.

    Recorded at start and compared on adoption and polling, so a recycled pid is never taken for our process.
    """
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = raw[raw.rfind(")") + 2 :].split()  # the comm field may contain spaces and parentheses
    if not fields or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def killpg(pgid: int | None, sig: int) -> None:
    if pgid is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _status_code(status: int) -> int:
    """A wait status as container runtimes report it: the exit code, or 128 + signal for a signal death."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _alive(c: ContainerState) -> bool:
    return c.pid is not None and c.start_ticks is not None and proc_start_ticks(c.pid) == c.start_ticks


def _mark_unknown(c: ContainerState, now: float) -> None:
    c.state, c.finished_at, c.exit_code, c.reason = "unknown", now, None, None
    c.message = "the process exited while not observed by this runtime; its exit code is unknown"


def poll_exit(c: ContainerState, now: float) -> bool:
    """Notice whether a running container has exited, recording how; True when its state changed.

    The group is SIGKILLed before the leader is reaped, so leftovers die with it (as a container's
    pid namespace does) while the pgid cannot have been recycled yet.
    """
    if c.state != "running" or c.pid is None:
        return False
    code: int | None = None
    try:
        info = os.waitid(os.P_PID, c.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:  # adopted from another runtime process: not our child
        if _alive(c):
            return False
        killpg(c.pgid, signal.SIGKILL)
        _mark_unknown(c, now)
        return True
    if info is None:
        return False
    killpg(c.pgid, signal.SIGKILL)
    if c.popen is not None:
        code = c.popen.wait()
        code = 128 - code if code < 0 else code
    else:
        with contextlib.suppress(ChildProcessError):
            _, status = os.waitpid(c.pid, 0)
            code = _status_code(status)
    if code is None:
        _mark_unknown(c, now)
    else:
        c.state, c.finished_at, c.exit_code, c.reason = "exited", now, code, exit_reason(code)
    return True
