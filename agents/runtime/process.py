"""The embedded default runtime: every container is a local process in its own process group.

It makes the whole pipeline run for real on any machine (docs/architecture.md#runtimes): real exit codes,
log files and graceful termination, without containerd. State is persisted to `<state_dir>/state.json`
after every change, so a restarted agent adopts the processes it left running instead of starting them
twice (agents.runtime.process_state).

What a container gets (docs/architecture.md, "What the node agent trusts"):

- its spec's env on top of PATH and HOSTNAME defaults, never the agent's environment;
- when the agent is root, the uid and gid of `securityContext.runAsUser`/`runAsGroup` (the container's
  over the pod's) or else the runtime's unprivileged default (65534), with no supplementary groups;
  a non-root agent cannot switch, and its containers run as itself;
- its log file `<uid>/<id>.log` as stdout/stderr, opened by the agent and handed over as a descriptor
  (the file is the container's, so reopening /dev/stdout works), and a private scratch directory
  `<uid>/<id>.work` as working directory unless the spec sets `workingDir`, which it gets only if its
  own uid and gid could reach it. Each pod's directory, and the state directory when the runtime
  creates it, stay the agent's alone (0700), so no container reaches another's files through them.

What the spec asks for is read by the pure agents.runtime.process_spec; the files and the process are
made by agents.runtime.containment. Every path built from a pod UID or container id goes through its
`contained_path`, which refuses anything that would not lie strictly inside the state directory. The
agent process is made non-dumpable, so even a container of its own uid cannot read
`/proc/<agent>/environ` or its memory.

Limits, on purpose: `image` is only recorded; there are no namespaces, so containers share the host's
network, process list and file system with whatever their uid may reach; supplementalGroups, fsGroup
and allowPrivilegeEscalation are not applied; env `valueFrom` and `$(VAR)` expansion are not supported;
and an adopted process's exit code cannot be known (it is not our child), so such an exit is reported
with state "unknown", which the fold turns into ContainerStatusUnknown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path

from podledger.agents.runtime.containment import (
    LOG_SUFFIX,
    WORK_SUFFIX,
    contained_path,
    forbid_dumps,
    spawn_container,
)
from podledger.agents.runtime.process_spec import (
    DEFAULT_RUN_AS_ID,
    MAX_RUN_AS_ID,
    POD_IP,
    container_argv,
    container_env,
    requested_ids,
    run_as_ids,
)
from podledger.agents.runtime.process_state import (
    ContainerState,
    PodState,
    killpg,
    load_state,
    poll_exit,
    proc_start_ticks,
    save_state,
)
from podledger.logs import pod_logger
from podledger.types import JSONDict, RuntimeContainer, RuntimeSnapshot

__all__ = ["MIN_GRACE_S", "START_ERROR_EXIT_CODE", "ProcessRuntime"]

log = logging.getLogger(__name__)

MIN_GRACE_S = 2.0  # stop_container never waits less, so a SIGTERM handler always gets a moment to run
SANDBOX_STOP_GRACE_S = 2.0
START_ERROR_EXIT_CODE = 128  # what containerd reports when the entrypoint cannot be executed
_POLL_S = 0.02


class ProcessRuntime:
    """The `Runtime` interface over local processes (runtime_type "process")."""

    runtime_type = "process"

    def __init__(
        self,
        state_dir: Path,
        clock: Callable[[], float] = time.time,
        *,
        default_uid: int = DEFAULT_RUN_AS_ID,
        default_gid: int = DEFAULT_RUN_AS_ID,
    ) -> None:
        """`default_uid`/`default_gid`: what a root agent runs containers as when their pod sets no
        runAsUser/runAsGroup (Settings.runtime_default_uid and _gid); never 0."""
        for what, value in (("uid", default_uid), ("gid", default_gid)):
            if isinstance(value, bool) or not 1 <= value <= MAX_RUN_AS_ID:
                raise ValueError(f"default container {what} must be from 1 to {MAX_RUN_AS_ID}, not {value}")
        self._dir = Path(state_dir)
        self._dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._clock = clock
        self._default_ids = (default_uid, default_gid)
        self._switch_ids = os.geteuid() == 0  # only root can start a process as another user
        if not forbid_dumps():
            log.warning("could not make the node agent non-dumpable: its uid can read its environment")
        self._pods: dict[str, PodState] = {}
        self._load()

    def _path(self, pod_uid: str, name: str | None = None) -> Path:
        """The pod's directory, or the file `name` in it; UnsafePathError if it would not be inside the
        state directory (every path the runtime builds from a UID or container id comes from here)."""
        names = (pod_uid,) if name is None else (pod_uid, name)
        return contained_path(self._dir, *names)

    # ------------------------------------------------------------------ persistence and adoption

    def _save(self) -> None:
        save_state(self._dir, self._pods)

    def _load(self) -> None:
        """Adopt a previous runtime's pods: live processes stay running, vanished ones become "unknown"."""
        pods = load_state(self._dir, self._clock)
        if pods is None:
            return
        self._pods.update(pods)
        self._save()

    # ------------------------------------------------------------------ the Runtime interface

    async def create_sandbox(self, pod: JSONDict) -> str:
        """Bookkeeping only: a fresh ready sandbox id; processes share the host network (POD_IP)."""
        uid = str(pod["metadata"]["uid"])
        self._path(uid)  # a UID that cannot name a directory inside the state directory gets no sandbox
        sandbox_id = secrets.token_hex(16)
        state = self._pods.get(uid)
        if state is None:
            self._pods[uid] = PodState(sandbox_id)
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
        """Start `command` + `args` (command replaces the entrypoint) with env and workingDir, as the uid and
        gid the securityContext asks for (see the module docstring).

        A start that cannot exec (missing binary, working dir missing or out of the uid's reach) is recorded
        as exited 128 StartError, as containerd reports it, and the error is raised so the pod worker sees
        the failed start. A spec that cannot be run at all (no command, an invalid securityContext) is
        refused with ValueError before anything is created.
        """
        uid = str(pod["metadata"]["uid"])
        state = self._pods.get(uid)
        name = str(container["name"])
        if state is None or not state.sandbox_ready:
            raise RuntimeError(f"pod {uid}: no ready sandbox to start container {name!r} in")
        argv = container_argv(container)
        if not argv:
            raise ValueError(f"container {name!r}: no command or args (images have no entrypoint here)")
        ids = self._run_as(pod, container)
        env = container_env(pod, container)
        cid = secrets.token_hex(16)
        log_path = self._path(uid, cid + LOG_SUFFIX)
        now = self._clock()
        c = ContainerState(
            id=cid,
            name=name,
            image=container.get("image"),
            restart_count=attempt,
            log_path=str(log_path),
            created_at=now,
        )
        state.containers[cid] = c
        try:
            popen = spawn_container(self._dir, argv, env, container.get("workingDir"), ids, uid, cid)
        except OSError as e:
            c.state, c.finished_at, c.exit_code = "exited", now, START_ERROR_EXIT_CODE
            c.reason, c.message = "StartError", str(e)
            self._save()
            raise
        c.popen, c.pid, c.pgid = popen, popen.pid, popen.pid
        c.start_ticks = proc_start_ticks(popen.pid)
        c.state, c.started_at = "running", now
        self._save()
        return cid

    def _run_as(self, pod: JSONDict, container: JSONDict) -> tuple[int, int] | None:
        """(uid, gid) to start the container as, or None when the agent cannot switch (it is not root)."""
        if self._switch_ids:
            return run_as_ids(pod, container, self._default_ids)
        uid, gid = requested_ids(pod, container)
        if (uid is not None and uid != os.getuid()) or (gid is not None and gid != os.getgid()):
            meta = pod.get("metadata") or {}
            pod_logger(log, meta.get("namespace"), meta.get("name"), meta.get("uid")).warning(
                "container %s asks for uid %s gid %s, but the node agent is not root: it runs as %d:%d",
                container.get("name"),
                uid,
                gid,
                os.getuid(),
                os.getgid(),
            )
        return None

    async def stop_container(self, pod_uid: str, container_id: str, grace_s: float) -> None:
        """SIGTERM the group, wait up to max(grace_s, 2) s, then SIGKILL it; a no-op unless running."""
        state = self._pods.get(pod_uid)
        c = state.containers.get(container_id) if state is not None else None
        if c is None or c.state != "running":
            return
        killpg(c.pgid, signal.SIGTERM)
        deadline = time.monotonic() + max(grace_s, MIN_GRACE_S)
        while not poll_exit(c, self._clock()):
            if time.monotonic() >= deadline:
                killpg(c.pgid, signal.SIGKILL)
                deadline = float("inf")
            await asyncio.sleep(_POLL_S)
        self._save()

    async def remove_container(self, pod_uid: str, container_id: str) -> None:
        """Forget the container and delete its log and scratch directory; a running one is killed first,
        as a forced remove is."""
        state = self._pods.get(pod_uid)
        c = state.containers.get(container_id) if state is not None else None
        if state is None or c is None:
            return
        if c.state == "running":
            await self.stop_container(pod_uid, container_id, 0.0)
        del state.containers[container_id]
        self._save()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._path(pod_uid, container_id + LOG_SUFFIX))
        shutil.rmtree(self._path(pod_uid, container_id + WORK_SUFFIX), ignore_errors=True)

    async def remove_sandbox(self, pod_uid: str) -> None:
        """Forget the pod: its containers are killed if still running, its directory (logs and scratch
        directories) deleted (RemovePodSandbox).

        A UID that does not name a directory strictly inside the state directory is forgotten with its
        processes stopped, but nothing is deleted: UnsafePathError is raised instead.
        """
        state = self._pods.get(pod_uid)
        if state is None:
            return
        for cid, c in list(state.containers.items()):
            if c.state == "running":
                await self.stop_container(pod_uid, cid, 0.0)
        self._pods.pop(pod_uid, None)
        self._save()
        shutil.rmtree(self._path(pod_uid), ignore_errors=True)

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
            changed |= poll_exit(c, now)
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
