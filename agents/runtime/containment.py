"""How the process runtime keeps a container to what is its own (docs/architecture.md, "What the node
agent trusts"): the files and process a container gets, and what keeps it from the agent's.

- `contained_path`: every path built from a pod UID or container id, refused unless it lies strictly
  inside the state directory;
- `spawn_container`: the process in its own session, stdout+stderr on `<uid>/<id>.log` opened by the
  agent and handed over as a descriptor, a private scratch directory `<uid>/<id>.work` unless the
  spec sets `workingDir` (entered only if the container's own uid and gid could reach it), and the
  requested uid and gid with no supplementary groups;
- `forbid_dumps`: the agent made non-dumpable, so a container of its own uid cannot read
  `/proc/<agent>/environ` or its memory.

The runtime that uses them is agents.runtime.process.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = [
    "LOG_SUFFIX",
    "WORK_SUFFIX",
    "UnsafePathError",
    "contained_path",
    "forbid_dumps",
    "spawn_container",
]

LOG_SUFFIX = ".log"
WORK_SUFFIX = ".work"
_NAME_MAX = 255  # bytes in one path component (NAME_MAX)
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


def spawn_container(
    state_dir: Path,
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
    pod_dir = contained_path(state_dir, pod_uid)
    pod_dir.mkdir(mode=0o700, exist_ok=True)
    pod_dir.chmod(0o700)
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
    log_fd = os.open(contained_path(state_dir, pod_uid, cid + LOG_SUFFIX), flags, 0o600)
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
            work = contained_path(state_dir, pod_uid, cid + WORK_SUFFIX)
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
