"""The embedded default runtime: every container is a local process in its own process group.

It makes the whole pipeline run for real on any machine (docs/architecture.md#runtimes): real exit codes,
log files and graceful termination, without containerd. State is persisted to `<state_dir>/state.json`
after every change, so a restarted agent adopts the processes it left running instead of starting them
twice.

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

Every path built from a pod UID or container id goes through `contained_path`, which refuses anything
that would not lie strictly inside the state directory. The agent process is made non-dumpable, so even
a container of its own uid cannot read `/proc/<agent>/environ` or its memory.

Limits, on purpose: `image` is only recorded; there are no namespaces, so containers share the host's
network, process list and file system with whatever their uid may reach; supplementalGroups, fsGroup
and allowPrivilegeEscalation are not applied; env `valueFrom` and `$(VAR)` expansion are not supported;
and an adopted process's exit code cannot be known (it is not our child), so such an exit is reported
with state "unknown", which the fold turns into ContainerStatusUnknown.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import json
import logging
import os
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from podledger.agents.runtime.base import ContainerRecord, exit_reason
from podledger.logs import pod_logger
from podledger.types import JSONDict, RuntimeContainer, RuntimeSnapshot

__all__ = [
    "DEFAULT_PATH",
    "DEFAULT_RUN_AS_ID",
    "MAX_RUN_AS_ID",
    "MIN_GRACE_S",
    "POD_IP",
    "START_ERROR_EXIT_CODE",
    "ProcessRuntime",
    "UnsafePathError",
    "contained_path",
    "forbid_dumps",
    "requested_ids",
]

log = logging.getLogger(__name__)

POD_IP = "127.0.0.1"  # processes share the host network, so every pod is reachable on loopback
MIN_GRACE_S = 2.0  # stop_container never waits less, so a SIGTERM handler always gets a moment to run
SANDBOX_STOP_GRACE_S = 2.0
START_ERROR_EXIT_CODE = 128  # what containerd reports when the entrypoint cannot be executed
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # containerd's default
DEFAULT_RUN_AS_ID = 65534  # nobody/nogroup: what a root agent runs a container as when the pod says nothing
MAX_RUN_AS_ID = 2_147_483_647  # the apiserver's bound for runAsUser and runAsGroup
_POLL_S = 0.02
_STATE_FILE = "state.json"
_LOG_SUFFIX = ".log"
_WORK_SUFFIX = ".work"
_NAME_MAX = 255  # bytes in one path component (NAME_MAX)
_HOSTNAME_MAX = 63
_PR_SET_DUMPABLE = 4  # <linux/prctl.h>


class UnsafePathError(ValueError):
    """A pod UID or container id that would make a runtime path leave the state directory."""


def contained_path(state_dir: Path, *names: str) -> Path:
    """`state_dir/names[0]/names[1]/...` with symlinks resolved, or UnsafePathError.

    Each name must be one plain path component: not empty, not `.` or `..`, without `/` or NUL, at most
    255 bytes. The resolved result must lie strictly inside the resolved state directory (never the
    directory itself), so neither a crafted name nor a symlink planted on the way can lead out of it.
    """
    for name in names:
        if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\x00" in name:
            raise UnsafePathError(f"{name!r} is not a plain file name")
        try:
            size = len(os.fsencode(name))
        except UnicodeError:
            raise UnsafePathError(f"{name!r} is not a plain file name") from None
        if size > _NAME_MAX:
            raise UnsafePathError(f"{name[:40]!r}... is longer than {_NAME_MAX} bytes")
    root = Path(state_dir).resolve()
    path = root.joinpath(*names).resolve()
    if root not in path.parents:
        raise UnsafePathError(f"{'/'.join(names)!r} leads out of the runtime's state directory {root}")
    return path


def forbid_dumps() -> bool:
    """Make this process non-dumpable (prctl PR_SET_DUMPABLE 0); True if it now is.

    Then only root may read its /proc/<pid>/environ, mem, maps or fds, or ptrace it: a container running
    under the agent's own uid cannot read the credentials in the agent's environment. The costs: no core
    dumps, and attaching a debugger or profiler (py-spy) needs root. Linux only; elsewhere a no-op.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def requested_ids(pod: JSONDict, container: JSONDict) -> tuple[int | None, int | None]:
    """(runAsUser, runAsGroup) the container asks for: its own securityContext over the pod's, None where
    neither sets one (as the kubelet merges them).

    Raises ValueError for an id that is not an integer from 0 to 2147483647, and for runAsUser 0 together
    with runAsNonRoot true (the kubelet's "container's runAsUser breaks non-root policy").
    """
    pod_context = (pod.get("spec") or {}).get("securityContext") or {}
    own_context = container.get("securityContext") or {}
    name = container.get("name")

    def pick(key: str) -> Any:
        value = own_context.get(key)
        return pod_context.get(key) if value is None else value

    ids: list[int | None] = []
    for key in ("runAsUser", "runAsGroup"):
        value = pick(key)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_RUN_AS_ID
        ):
            raise ValueError(
                f"container {name!r}: securityContext.{key} must be an integer from 0 to {MAX_RUN_AS_ID},"
                f" not {value!r}"
            )
        ids.append(value)
    if pick("runAsNonRoot") is True and ids[0] == 0:
        raise ValueError(f"container {name!r}: its runAsUser 0 breaks the runAsNonRoot policy")
    return ids[0], ids[1]


def _pod_hostname(pod: JSONDict) -> str:
    """The pod's host name as the kubelet derives it: spec.hostname or the pod name, cut to 63 chars."""
    spec, meta = pod.get("spec") or {}, pod.get("metadata") or {}
    name = str(spec.get("hostname") or meta.get("name") or "")
    return name[:_HOSTNAME_MAX].rstrip("-.") if len(name) > _HOSTNAME_MAX else name


def _require_search(fd: int, uid: int, gid: int, path: str) -> None:
    """PermissionError unless `uid`:`gid` (no supplementary groups) may search the directory `fd`."""
    st = os.fstat(fd)
    if st.st_uid == uid:
        bit = stat.S_IXUSR
    elif st.st_gid == gid:
        bit = stat.S_IXGRP
    else:
        bit = stat.S_IXOTH
    if not st.st_mode & bit:
        raise PermissionError(errno.EACCES, f"not reachable by uid {uid} gid {gid}", path)


def _open_dir_for(path: str, uid: int, gid: int) -> int:
    """An O_PATH descriptor of the directory `path` (relative: from /), opened only if `uid`:`gid` could
    reach and enter it themselves; OSError otherwise.

    subprocess changes directory before it switches uid, so a working directory is handed over as
    /proc/self/fd/<this descriptor>, and this walk is what keeps a container from being placed inside
    a directory its own uid could not reach (say, under a 0700 /root). Symlinks are resolved first; the
    walk then refuses any that appears on the way.
    """
    real = os.path.realpath(os.path.join("/", path))
    flags = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
    fd = os.open("/", flags)
    try:
        for name in Path(real).parts[1:]:
            if uid != 0:
                _require_search(fd, uid, gid, path)
            child = os.open(name, flags | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = child
        if uid != 0:
            _require_search(fd, uid, gid, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


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
        self._pods: dict[str, _Pod] = {}
        self._load()

    def _path(self, pod_uid: str, name: str | None = None) -> Path:
        """The pod's directory, or the file `name` in it; UnsafePathError if it would not be inside the
        state directory (every path the runtime builds from a UID or container id comes from here)."""
        names = (pod_uid,) if name is None else (pod_uid, name)
        return contained_path(self._dir, *names)

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
        tmp = contained_path(self._dir, _STATE_FILE + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with open(fd, "w") as out:
            out.write(json.dumps(data))
        os.replace(tmp, contained_path(self._dir, _STATE_FILE))

    def _load(self) -> None:
        """Adopt a previous runtime's pods: live processes stay running, vanished ones become "unknown"."""
        path = contained_path(self._dir, _STATE_FILE)
        if not path.exists():
            return
        data = json.loads(path.read_text())
        for uid, raw in data.items():
            try:
                self._path(uid)
            except UnsafePathError as e:  # kept so its processes can be stopped; its files are never touched
                log.warning("runtime state names an unsafe pod UID: %s", e)
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
        self._path(uid)  # a UID that cannot name a directory inside the state directory gets no sandbox
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
        argv = [str(a) for a in (container.get("command") or [])] + [
            str(a) for a in (container.get("args") or [])
        ]
        if not argv:
            raise ValueError(f"container {name!r}: no command or args (images have no entrypoint here)")
        ids = self._run_as(pod, container)
        env = {"PATH": DEFAULT_PATH, "HOSTNAME": _pod_hostname(pod)}  # nothing of the agent's environment
        for item in container.get("env") or []:
            env[str(item["name"])] = str(item.get("value") or "")
        cid = secrets.token_hex(16)
        log_path = self._path(uid, cid + _LOG_SUFFIX)
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
            popen = self._spawn(argv, env, container.get("workingDir"), ids, uid, cid)
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

    def _run_as(self, pod: JSONDict, container: JSONDict) -> tuple[int, int] | None:
        """(uid, gid) to start the container as, or None when the agent cannot switch (it is not root)."""
        uid, gid = requested_ids(pod, container)
        if self._switch_ids:
            default_uid, default_gid = self._default_ids
            return (default_uid if uid is None else uid, default_gid if gid is None else gid)
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

    def _spawn(
        self,
        argv: list[str],
        env: dict[str, str],
        working_dir: Any,
        ids: tuple[int, int] | None,
        pod_uid: str,
        cid: str,
    ) -> subprocess.Popen[bytes]:
        """Start the process: its own session, stdout+stderr on the log file (the agent opens it and hands
        the descriptor over, so the state directory stays closed to the container), and with `ids` set,
        that uid and gid with no supplementary groups."""
        pod_dir = self._path(pod_uid)
        pod_dir.mkdir(mode=0o700, exist_ok=True)
        pod_dir.chmod(0o700)
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
        log_fd = os.open(self._path(pod_uid, cid + _LOG_SUFFIX), flags, 0o600)
        cwd_fd: int | None = None
        try:
            if ids is not None:
                os.fchown(log_fd, *ids)  # its own stdout: reopening /dev/stdout must work, as with a pipe
            if working_dir:
                if ids is not None:
                    cwd_fd = _open_dir_for(str(working_dir), *ids)
                    cwd = f"/proc/self/fd/{cwd_fd}"
                else:
                    cwd = os.path.join("/", str(working_dir))
            else:
                work = self._path(pod_uid, cid + _WORK_SUFFIX)
                work.mkdir(mode=0o700)
                if ids is not None:
                    os.chown(work, *ids)
                cwd = str(work)
            return subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log_fd,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=cwd,
                start_new_session=True,
                close_fds=True,
                user=None if ids is None else ids[0],
                group=None if ids is None else ids[1],
                extra_groups=None if ids is None else [],
            )
        finally:
            os.close(log_fd)
            if cwd_fd is not None:
                os.close(cwd_fd)

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
            os.unlink(self._path(pod_uid, container_id + _LOG_SUFFIX))
        shutil.rmtree(self._path(pod_uid, container_id + _WORK_SUFFIX), ignore_errors=True)

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
