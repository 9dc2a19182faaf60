"""The embedded default runtime: every container is a local process in its own process group.

It makes the whole pipeline run for real on any machine (docs/architecture.md#runtimes): real exit codes,
log files and graceful termination, without containerd. State is persisted to `<state_dir>/state.json`
after every change, so a restarted agent adopts the processes it left running instead of starting them
twice.

Limits, on purpose: `image` is only recorded, there is no isolation beyond the process group, env `valueFrom`
and `$(VAR)` expansion are not supported, and an adopted process's exit code cannot be known (it is not our
child), so such an exit is reported with state "unknown", which the fold turns into ContainerStatusUnknown.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from podledger.agents.runtime.base import ContainerRecord, exit_reason
from podledger.types import JSONDict, RuntimeContainer, RuntimeSnapshot

__all__ = ["DEFAULT_PATH", "MIN_GRACE_S", "POD_IP", "START_ERROR_EXIT_CODE", "ProcessRuntime"]


POD_IP = "127.0.0.1"  # processes share the host network, so every pod is reachable on loopback
MIN_GRACE_S = 2.0  # stop_container never waits less, so a SIGTERM handler always gets a moment to run
SANDBOX_STOP_GRACE_S = 2.0
START_ERROR_EXIT_CODE = 128  # what containerd reports when the entrypoint cannot be executed
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_POLL_S = 0.02
_STATE_FILE = "state.json"


def _proc_start_ticks(pid: int) -> int | None:
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


def _killpg(pgid: int | None, sig: int) -> None:
    if pgid is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _status_code(status: int) -> int:
    """A wait status as container runtimes report it: the exit code, or 128 + signal for a signal death."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


class _Container:
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


class _Pod:
    """Sandbox bookkeeping (there is no real sandbox) and the pod's containers in creation order."""

    def __init__(self, sandbox_id: str, ready: bool = True) -> None:
        self.sandbox_id = sandbox_id
        self.sandbox_ready = ready
        self.containers: dict[str, _Container] = {}


class ProcessRuntime:
    """The `Runtime` interface over local processes (runtime_type "process")."""

    runtime_type = "process"

    def __init__(self, state_dir: Path, clock: Callable[[], float] = time.time) -> None:
        self._dir = Path(state_dir)
        self._dir.mkdir(parents=True, exist_ok=True)
        self._clock = clock
        self._pods: dict[str, _Pod] = {}
        self._load()

    # ------------------------------------------------------------------ persistence and adoption

    def _save(self) -> None:
        """Write the state atomically (temp file + rename), so a crash never leaves half a file to adopt."""
        data = {
            uid: {
                "sandbox_id": pod.sandbox_id,
                "sandbox_ready": pod.sandbox_ready,
                "containers": [c.to_json() for c in pod.containers.values()],
            }
            for uid, pod in self._pods.items()
        }
        tmp = self._dir / (_STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, self._dir / _STATE_FILE)

    def _load(self) -> None:
        """Adopt a previous runtime's pods: live processes stay running, vanished ones become "unknown"."""
        path = self._dir / _STATE_FILE
        if not path.exists():
            return
        data = json.loads(path.read_text())
        for uid, raw in data.items():
            pod = _Pod(str(raw["sandbox_id"]), bool(raw["sandbox_ready"]))
            for fields in raw["containers"]:
                c = _Container(**fields)
                if c.state == "running" and not self._alive(c):
                    self._mark_unknown(c, self._clock())
                pod.containers[c.id] = c
            self._pods[uid] = pod
        self._save()

    @staticmethod
    def _alive(c: _Container) -> bool:
        return c.pid is not None and c.start_ticks is not None and _proc_start_ticks(c.pid) == c.start_ticks

    @staticmethod
    def _mark_unknown(c: _Container, now: float) -> None:
        c.state, c.finished_at, c.exit_code, c.reason = "unknown", now, None, None
        c.message = "the process exited while not observed by this runtime; its exit code is unknown"

    # ------------------------------------------------------------------ exit detection

    def _poll(self, c: _Container, now: float) -> bool:
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
            if self._alive(c):
                return False
            _killpg(c.pgid, signal.SIGKILL)
            self._mark_unknown(c, now)
            return True
        if info is None:
            return False
        _killpg(c.pgid, signal.SIGKILL)
        if c.popen is not None:
            code = c.popen.wait()
            code = 128 - code if code < 0 else code
        else:
            with contextlib.suppress(ChildProcessError):
                _, status = os.waitpid(c.pid, 0)
                code = _status_code(status)
        if code is None:
            self._mark_unknown(c, now)
        else:
            c.state, c.finished_at, c.exit_code, c.reason = "exited", now, code, exit_reason(code)
        return True

    # ------------------------------------------------------------------ the Runtime interface

    async def create_sandbox(self, pod: JSONDict) -> str:
        """Bookkeeping only: a fresh ready sandbox id; processes share the host network (POD_IP)."""
        uid = str(pod["metadata"]["uid"])
        sandbox_id = secrets.token_hex(16)
        state = self._pods.get(uid)
        if state is None:
            self._pods[uid] = _Pod(sandbox_id)
        else:
            state.sandbox_id, state.sandbox_ready = sandbox_id, True
        self._save()
        return sandbox_id

    async def stop_sandbox(self, pod_uid: str) -> None:
        """Stop every running container (2 s grace), then mark the sandbox not ready."""
        state = self._pods.get(pod_uid)
        if state is None:
            return
        for cid in list(state.containers):
            await self.stop_container(pod_uid, cid, SANDBOX_STOP_GRACE_S)
        state.sandbox_ready = False
        self._save()

    async def start_container(self, pod: JSONDict, container: JSONDict, *, attempt: int) -> str:
        """Start `command` + `args` (command replaces the entrypoint) with env and workingDir.

        A start that cannot exec (missing binary or working dir) is recorded as exited 128 StartError, as
        containerd reports it, and the error is raised so the pod worker sees the failed start.
        """
        uid = str(pod["metadata"]["uid"])
        state = self._pods.get(uid)
        name = str(container["name"])
        if state is None or not state.sandbox_ready:
            raise RuntimeError(f"pod {uid}: no ready sandbox to start container {name!r} in")
        argv = [str(a) for a in (container.get("command") or [])] + [
            str(a) for a in (container.get("args") or [])
        ]
        if not argv:
            raise ValueError(f"container {name!r}: no command or args (images have no entrypoint here)")
        env = {"PATH": os.environ.get("PATH") or DEFAULT_PATH}
        for item in container.get("env") or []:
            env[str(item["name"])] = str(item.get("value") or "")
        cid = secrets.token_hex(16)
        log_dir = self._dir / uid
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / f"{cid}.log"
        now = self._clock()
        c = _Container(
            id=cid,
            name=name,
            image=container.get("image"),
            restart_count=attempt,
            log_path=str(log_path),
            created_at=now,
        )
        state.containers[cid] = c
        try:
            with open(log_path, "ab") as log:
                popen = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=container.get("workingDir") or None,
                    start_new_session=True,
                )
        except OSError as e:
            c.state, c.finished_at, c.exit_code = "exited", now, START_ERROR_EXIT_CODE
            c.reason, c.message = "StartError", str(e)
            self._save()
            raise
        c.popen, c.pid, c.pgid = popen, popen.pid, popen.pid
        c.start_ticks = _proc_start_ticks(popen.pid)
        c.state, c.started_at = "running", now
        self._save()
        return cid

    async def stop_container(self, pod_uid: str, container_id: str, grace_s: float) -> None:
        """SIGTERM the group, wait up to max(grace_s, 2) s, then SIGKILL it; a no-op unless running."""
        state = self._pods.get(pod_uid)
        c = state.containers.get(container_id) if state is not None else None
        if c is None or c.state != "running":
            return
        _killpg(c.pgid, signal.SIGTERM)
        deadline = time.monotonic() + max(grace_s, MIN_GRACE_S)
        while not self._poll(c, self._clock()):
            if time.monotonic() >= deadline:
                _killpg(c.pgid, signal.SIGKILL)
                deadline = float("inf")
            await asyncio.sleep(_POLL_S)
        self._save()

    async def remove_container(self, pod_uid: str, container_id: str) -> None:
        """Forget the container and delete its log; a running one is killed first, as a forced remove is."""
        state = self._pods.get(pod_uid)
        c = state.containers.get(container_id) if state is not None else None
        if state is None or c is None:
            return
        if c.state == "running":
            await self.stop_container(pod_uid, container_id, 0.0)
        del state.containers[container_id]
        with contextlib.suppress(FileNotFoundError):
            os.unlink(c.log_path)
        self._save()

    async def remove_sandbox(self, pod_uid: str) -> None:
        """Forget the pod: its containers are killed if still running, its logs deleted (RemovePodSandbox)."""
        state = self._pods.get(pod_uid)
        if state is None:
            return
        for cid in list(state.containers):
            await self.remove_container(pod_uid, cid)
        self._pods.pop(pod_uid, None)
        shutil.rmtree(self._dir / pod_uid, ignore_errors=True)
        self._save()

    def relist(self, now: float) -> dict[str, RuntimeSnapshot]:
        """{pod uid: snapshot} at `now`, after a non-blocking check of every running process."""
        return {uid: snapshot for uid in list(self._pods) if (snapshot := self.pod_snapshot(uid, now))}

    def pod_snapshot(self, pod_uid: str, now: float) -> RuntimeSnapshot | None:
        """One pod's snapshot at `now` (None if unknown), newest container first like the sim runtime,
        so the fold takes a restart within the same second as the current instance."""
        state = self._pods.get(pod_uid)
        if state is None:
            return None
        changed = False
        containers: list[RuntimeContainer] = []
        for c in reversed(state.containers.values()):
            changed |= self._poll(c, now)
            containers.append(c.record().snapshot())
        if changed:
            self._save()
        return {
            "containers": containers,
            "ips": [POD_IP] if state.sandbox_ready else [],
            "runtime_type": self.runtime_type,
            "sandbox": {"id": state.sandbox_id, "ready": state.sandbox_ready},
        }

    def log_path(self, pod_uid: str, container_id: str) -> Path | None:
        """Where the container's stdout+stderr go (for `kubectl logs`-style readers), or None if unknown."""
        state = self._pods.get(pod_uid)
        c = state.containers.get(container_id) if state is not None else None
        return None if c is None else Path(c.log_path)

    def pids(self, pod_uid: str, container_id: str) -> tuple[int | None, int | None]:
        """(pid, pgid) of the container's process, for tests and diagnostics."""
        state = self._pods.get(pod_uid)
        c = state.containers.get(container_id) if state is not None else None
        return (None, None) if c is None else (c.pid, c.pgid)
