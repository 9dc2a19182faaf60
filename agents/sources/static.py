"""The file and http pod sources (config/file.go, config/http.go): static pods the node runs on its own.

Both produce whole snapshots (SET) of their pods, defaulted as config/common.go applyDefaults does, and
hand them to the kubelet's podStorage merge (agents/sources/pod_config.py), whose incremental ops go to
pod-updates.
A manifest that fails to parse is logged and skipped; the others still count.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import os
import select
import threading
import urllib.error
import urllib.request
from pathlib import Path

import yaml

from podledger.agents.sources.pod_config import PodStorage, apply_static_defaults
from podledger.agents.sources.publish import publish_merge
from podledger.types import JSONDict, PublishUpdate

log = logging.getLogger(__name__)


def parse_manifest(text: str | bytes) -> list[JSONDict]:
    """A Pod, or the items of a PodList, from YAML or JSON text."""
    doc = yaml.safe_load(text)
    if not isinstance(doc, dict):
        raise ValueError("not a Pod or PodList object")
    if doc.get("kind") == "PodList" or ("items" in doc and "spec" not in doc):
        pods = list(doc.get("items") or [])
    else:
        pods = [doc]
    for pod in pods:
        if not isinstance(pod, dict) or not (pod.get("metadata") or {}).get("name"):
            raise ValueError("a pod without metadata.name")
        if not (pod.get("spec") or {}).get("containers"):
            raise ValueError(f"pod {pod['metadata']['name']} has no containers")
    return pods


def read_manifest_dir(path: Path, node: str) -> list[JSONDict]:
    """The defaulted pods of a static pod directory (top-level entries not starting with '.',
    sorted, no recursion). A missing directory is an empty set, not an error."""
    if not path.exists():
        return []
    files = (
        [path]
        if path.is_file()
        else sorted(p for p in path.iterdir() if not p.name.startswith(".") and p.is_file())
    )
    pods: list[JSONDict] = []
    for file in files:
        try:
            for pod in parse_manifest(file.read_bytes()):
                pods.append(apply_static_defaults(pod, node, source="file", path_or_url=str(file)))
        except (OSError, ValueError, yaml.YAMLError) as exc:
            log.warning("skipping manifest %s: %s", file, exc)
    return pods


class _Inotify:
    """Linux inotify through libc: wakes the file source at once when the directory changes."""

    MASK = 0x2 | 0x4 | 0x8 | 0x40 | 0x80 | 0x100 | 0x200  # modify attrib close_write moved create delete

    def __init__(self, path: Path) -> None:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        self.fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
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

    def close(self) -> None:
        os.close(self.fd)


class FileSource:
    """Rescans the directory on every inotify event and at least every `period_s`."""

    name = "file"  # the pod-updates source tag

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

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        changed: asyncio.Queue[None] = asyncio.Queue()
        stop = threading.Event()
        threading.Thread(
            target=self._watch, args=(loop, changed, stop), name="file-source", daemon=True
        ).start()
        try:
            while True:
                pods = await asyncio.to_thread(read_manifest_dir, self.path, self.node)
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
        while not stop.is_set():
            if notify is None and self.path.is_dir():
                try:
                    notify = _Inotify(self.path)
                except OSError as exc:
                    log.info(
                        "inotify unavailable for %s (%s); polling every %.0fs", self.path, exc, self.period_s
                    )
            if notify is not None:
                notify.wait(self.period_s)
            else:
                stop.wait(self.period_s)
            if stop.is_set():
                break
            try:
                loop.call_soon_threadsafe(changed.put_nowait, None)
            except RuntimeError:  # the loop closed while we waited: the source is gone
                break
        if notify is not None:
            notify.close()


class HttpSource:
    """Polls a manifest URL every `period_s` with a 10 s timeout (config/http.go)."""

    name = "http"  # the pod-updates source tag

    def __init__(
        self, url: str, node: str, publish: PublishUpdate, storage: PodStorage, period_s: float = 20.0
    ) -> None:
        self.url, self.node, self.publish, self.storage, self.period_s = url, node, publish, storage, period_s
        self._last: bytes | None = None

    def fetch(self) -> list[JSONDict] | None:
        """The defaulted pods, or None when nothing changed or the fetch failed."""
        try:
            with urllib.request.urlopen(self.url, timeout=10) as response:
                status, body = response.status, response.read()
        except urllib.error.HTTPError as exc:
            log.warning("manifest URL %s answered %s", self.url, exc.code)
            return None
        except (OSError, urllib.error.URLError) as exc:
            log.warning("manifest URL %s failed: %s", self.url, exc)
            return None
        if status != 200:
            log.warning("manifest URL %s answered %s", self.url, status)
            return None
        if body == self._last:
            return None
        self._last = body
        if not body.strip():
            log.warning("manifest URL %s returned an empty body", self.url)
            return []
        try:
            pods = parse_manifest(body)
        except (ValueError, yaml.YAMLError) as exc:
            log.warning("manifest URL %s: %s", self.url, exc)
            return None
        return [apply_static_defaults(p, self.node, source="http", path_or_url=self.url) for p in pods]

    async def run(self) -> None:
        while True:
            pods = await asyncio.to_thread(self.fetch)
            if pods is not None:
                await publish_merge(self.storage, self.name, pods, self.node, self.publish)
            await asyncio.sleep(self.period_s)
