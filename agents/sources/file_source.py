"""The file pod source (config/file.go): static pods from the manifests in the static pod path.

Each rescan reads every manifest and publishes the good files' pods as one whole snapshot (SET) to the
kubelet's podStorage merge (agents/sources/pod_config.py), whose incremental ops go to pod-updates.
Rescans happen on every inotify event and at least every period. Nothing a manifest holds stops the
source: a file that fails to read, parse or validate is reported once per content, with its path and
reason, and a file that turns bad keeps its last good pods running until it is fixed or removed
(docs/kubelet-rules.md, "The file source"). Decoding is agents/sources/manifest_decoding.py.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import hashlib
import logging
import os
import select
import stat
import threading
from pathlib import Path

from podledger.agents.sources.manifest_decoding import one_line, parse_manifest
from podledger.agents.sources.manifests import MAX_MANIFEST_BYTES, FileResult, ManifestDirState, ManifestError
from podledger.agents.sources.pod_config import FILE_SOURCE, PodStorage
from podledger.agents.sources.publish import publish_merge
from podledger.types import JSONDict, PublishUpdate

__all__ = ["FileSource", "read_manifest_file", "read_manifest_result", "scan_manifest_path"]

log = logging.getLogger(__name__)


def read_manifest_file(path: Path, limit: int = MAX_MANIFEST_BYTES) -> bytes:
    """A regular file's bytes, refused beyond `limit` (upstream ReadAtMost(maxConfigLength))."""
    # O_NONBLOCK: a FIFO dropped into the directory must not block the rescan.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            raise ManifestError("not a regular file")
        data = file.read(limit + 1)
    if len(data) > limit:
        raise ManifestError(f"the manifest is larger than {limit} bytes")
    return data


def read_manifest_result(path: Path, node: str) -> FileResult:
    """One file's pods, or why it was refused. FileNotFoundError when it vanished meanwhile."""
    where = str(path)
    try:
        data = read_manifest_file(path)
    except ManifestError as exc:
        return FileResult(where, None, str(exc), f"refused: {exc}")
    except FileNotFoundError:
        raise
    except OSError as exc:
        return FileResult(where, None, f"cannot read it: {exc.strerror or exc}", f"unreadable: {exc}")
    content = hashlib.sha256(data).hexdigest()
    try:
        pods = parse_manifest(data, node=node, source=FILE_SOURCE, path_or_url=where)
    except ManifestError as exc:
        return FileResult(where, None, str(exc), content)
    except Exception as exc:  # a manifest nobody foresaw must not stop the directory
        return FileResult(where, None, f"{type(exc).__name__}: {one_line(exc)}", content)
    return FileResult(where, tuple(pods), content=content)


def scan_manifest_path(path: Path, node: str) -> list[FileResult]:
    """Every manifest of the static pod path: a directory's top-level regular files not starting with
    '.', sorted, without recursion; or the path itself when it is a file. A missing path has none.
    OSError when the directory cannot be listed."""
    if path.is_dir():
        entries = sorted(p for p in path.iterdir() if not p.name.startswith("."))
    elif path.exists():
        entries = [path]
    else:
        return []
    results: list[FileResult] = []
    for entry in entries:
        try:
            if entry.is_file():  # subdirectories, sockets and dangling links are not manifests
                results.append(read_manifest_result(entry, node))
        except FileNotFoundError:  # removed while we looked: as if we had looked a moment later
            continue
    return results


class _Inotify:
    """Linux inotify through libc: wakes the file source at once when the directory changes."""

    MASK = 0x2 | 0x4 | 0x8 | 0x40 | 0x80 | 0x100 | 0x200  # modify attrib close_write moved create delete

    def __init__(self, path: Path) -> None:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        self.fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        info = os.stat(path)
        self.inode = (info.st_dev, info.st_ino)  # a directory removed and made again needs a new watch
        if libc.inotify_add_watch(self.fd, str(path).encode(), self.MASK) < 0:
            os.close(self.fd)
            raise OSError(ctypes.get_errno(), f"inotify_add_watch({path}) failed")

    def wait(self, timeout: float) -> bool:
        """True when something changed within `timeout` seconds."""
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if ready:
            try:
                while os.read(self.fd, 65536):
                    pass
            except BlockingIOError:
                pass
            return True
        return False

    def watches(self, path: Path) -> bool:
        """Whether the watched directory is still the one at `path`."""
        try:
            info = os.stat(path)
        except OSError:
            return False
        return (info.st_dev, info.st_ino) == self.inode

    def close(self) -> None:
        os.close(self.fd)


class FileSource:
    """Rescans the static pod path on every inotify event and at least every `period_s`.

    Each rescan publishes every good file's pods as one SET. A file that fails is reported once per
    content; if it was good before, its last good pods stay in the SET (ManifestDirState).
    """

    name = FILE_SOURCE  # the pod-updates source tag

    def __init__(
        self, path: Path, node: str, publish: PublishUpdate, storage: PodStorage, period_s: float = 20.0
    ) -> None:
        self.path, self.node, self.publish, self.storage, self.period_s = (
            path,
            node,
            publish,
            storage,
            period_s,
        )
        self.state = ManifestDirState()
        self._path_error = ""  # the last error listing the path, reported once

    def rescan(self) -> list[JSONDict] | None:
        """The pods of the path now (blocking; runs in a thread), or None when the path cannot be
        listed at all: then nothing is known, and nothing is published."""
        try:
            results = scan_manifest_path(self.path, self.node)
        except Exception as exc:  # permissions, I/O errors: retried on the next rescan
            error = f"{type(exc).__name__}: {one_line(exc)}"
            if error != self._path_error:
                log.warning("cannot read the static pod path %s: %s", self.path, error)
                self._path_error = error
            return None
        self._path_error = ""
        pods, reports = self.state.apply(results)
        for report in reports:
            if report.kind == "skipped":
                log.warning("skipping manifest %s: %s", report.path, report.reason)
            elif report.kind == "kept":
                log.warning(
                    "manifest %s is refused; its last good pod keeps running: %s", report.path, report.reason
                )
            else:
                log.info("manifest %s is valid again", report.path)
        return pods

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        changed: asyncio.Queue[None] = asyncio.Queue()
        stop = threading.Event()
        threading.Thread(
            target=self._watch, args=(loop, changed, stop), name="file-source", daemon=True
        ).start()
        try:
            while True:
                pods = await asyncio.to_thread(self.rescan)
                if pods is not None:
                    await publish_merge(self.storage, self.name, pods, self.node, self.publish)
                await changed.get()
                while not changed.empty():  # a burst of events is one rescan
                    changed.get_nowait()
        finally:
            stop.set()

    def _watch(
        self, loop: asyncio.AbstractEventLoop, changed: asyncio.Queue[None], stop: threading.Event
    ) -> None:
        notify: _Inotify | None = None
        unavailable = ""
        while not stop.is_set():
            try:
                if notify is not None and not notify.watches(self.path):
                    notify.close()
                    notify = None
                if notify is None and self.path.is_dir():
                    try:
                        notify = _Inotify(self.path)
                    except OSError as exc:
                        if str(exc) != unavailable:
                            log.info(
                                "inotify unavailable for %s (%s); polling every %.0fs",
                                self.path,
                                exc,
                                self.period_s,
                            )
                            unavailable = str(exc)
                if notify is not None:
                    notify.wait(self.period_s)
                else:
                    stop.wait(self.period_s)
            except Exception as exc:  # the watch must never end: fall back to polling for a period
                log.warning("watching %s failed (%s); polling", self.path, exc)
                if notify is not None:
                    notify.close()
                    notify = None
                stop.wait(self.period_s)
            if stop.is_set():
                break
            try:
                loop.call_soon_threadsafe(changed.put_nowait, None)
            except RuntimeError:  # the loop closed while we waited: the source is gone
                break
        if notify is not None:
            notify.close()
