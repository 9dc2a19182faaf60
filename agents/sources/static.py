"""The file and http pod sources (config/file.go, config/http.go): static pods the node runs on its own.

Both produce whole snapshots (SET) of their pods, defaulted as config/common.go applyDefaults does, and
hand them to the kubelet's podStorage merge (agents/sources/pod_config.py), whose incremental ops go to
pod-updates. Reading and decoding happen here; what a decoded manifest means is decided by the pure
agents/sources/manifests.py.

Nothing a manifest holds stops a source: a file or body that fails to read, parse or validate is
reported once per content, with its path and reason, and the rest keeps working. A file that turns bad
keeps its last good pods running until it is fixed or removed (docs/kubelet-rules.md, "The file source").
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
from typing import Any, ClassVar

import aiohttp
import orjson
import yaml
from yaml.constructor import ConstructorError, SafeConstructor

from podledger.agents.sources.manifests import (
    MAX_DEPTH,
    MAX_MANIFEST_BYTES,
    FileResult,
    ManifestDirState,
    ManifestError,
    static_pods,
)
from podledger.agents.sources.pod_config import FILE_SOURCE, HTTP_SOURCE, PodStorage
from podledger.agents.sources.publish import publish_merge
from podledger.types import JSONDict, PublishUpdate

log = logging.getLogger(__name__)

URL_DEADLINE_S = 10.0  # upstream's http.Client Timeout: the whole request, redirects and body included
MAX_REDIRECTS = 10  # Go's http.Client follows at most 10 redirects
LOUD_URL_FAILURES = 3  # as upstream, later consecutive failures of the URL are logged at debug level

# ---------------------------------------------------------------------------------------------------
# Decoding one manifest
# ---------------------------------------------------------------------------------------------------

_CORE = "tag:yaml.org,2002:"


def _one_line(exc: object, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _yaml_reason(exc: yaml.YAMLError) -> str:
    """A YAML error in one line, with the line and column where it was found."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        text = ", ".join(str(part) for part in (exc.context, exc.problem) if part)
        text = _one_line(text) + (f" (line {mark.line + 1}, column {mark.column + 1})" if mark else "")
    else:
        text = _one_line(exc)
    return text if isinstance(exc, ConstructorError) else f"not valid YAML: {text}"


def _refuse_tag(loader: SafeConstructor, node: yaml.Node) -> Any:
    tag = node.tag.replace(_CORE, "!!")
    raise ConstructorError(
        None,
        None,
        f"tag {tag} is not allowed in a manifest (only maps, lists, strings, numbers, booleans and null)",
        node.start_mark,
    )


# libyaml when present: the pure-Python parser is about ten times slower.
_SafeLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _ManifestLoader(_SafeLoader):
    """PyYAML's safe loader cut down to what JSON holds: maps, lists, strings, numbers, booleans and
    null. Other tags (!!set, !!binary, !!omap, !!python/..., local ones) are refused; timestamps and the
    `=` value key stay strings, as the kubelet's YAML-to-JSON conversion leaves them."""

    yaml_constructors: ClassVar[dict[Any, Any]] = {}


for _tag in ("null", "bool", "int", "float", "str", "seq", "map"):
    _ManifestLoader.add_constructor(_CORE + _tag, SafeConstructor.yaml_constructors[_CORE + _tag])
for _tag in ("timestamp", "value"):
    _ManifestLoader.add_constructor(_CORE + _tag, SafeConstructor.construct_yaml_str)
_ManifestLoader.add_constructor(None, _refuse_tag)


def _check_depth(data: bytes) -> None:
    """Refuse nesting deeper than MAX_DEPTH from the parser's events alone, before anything recursive
    (libyaml's composer would overflow the C stack on a deep enough document)."""
    loader = _SafeLoader(data)
    try:
        depth = 0
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise ManifestError(f"the manifest is nested deeper than {MAX_DEPTH} levels")
            elif isinstance(event, yaml.SequenceEndEvent | yaml.MappingEndEvent):
                depth -= 1
    finally:
        loader.dispose()


def expanded_size(root: yaml.Node, limit: int = MAX_MANIFEST_BYTES) -> int:
    """The size of a composed YAML document with every alias expanded (a byte per node plus the scalars'
    text), refused above `limit`: an alias bomb is caught before anything is built from it. Shared
    nodes are measured once, so this costs one pass over the document as written."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: yaml.Node, depth: int) -> int:
        key = id(node)
        known = sizes.get(key)
        if known is not None:
            return known
        if key in open_nodes:
            raise ManifestError("an alias refers to a node that contains it")
        if depth > MAX_DEPTH:
            raise ManifestError(f"the manifest is nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, yaml.ScalarNode):
            total = 1 + len(node.value)
        else:
            open_nodes.add(key)
            if isinstance(node, yaml.SequenceNode):
                children = node.value
            else:  # a mapping: (key, value) pairs
                children = [part for pair in node.value for part in pair]
            total = 1 + sum(size(child, depth + 1) for child in children)
            open_nodes.discard(key)
        if total > limit:
            raise ManifestError(
                f"the manifest holds more than {limit} bytes with its aliases expanded"
                " (a YAML alias bomb, or simply too large)"
            )
        sizes[key] = total
        return total

    return size(root, 0)


def decode_manifest(data: bytes, limit: int = MAX_MANIFEST_BYTES) -> Any:
    """The one JSON or YAML document in `data` as plain data, or a ManifestError: larger than `limit`,
    not valid YAML, several documents, tags outside the JSON core, aliases expanding beyond `limit`."""
    if len(data) > limit:
        raise ManifestError(f"the manifest is {len(data)} bytes, more than {limit}")
    if not data.strip():
        raise ManifestError("the manifest is empty")
    if data.lstrip()[:1] in (b"{", b"["):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass  # YAML flow style, or broken JSON: the YAML parser says why
    try:
        _check_depth(data)
    except yaml.YAMLError as exc:
        raise ManifestError(_yaml_reason(exc)) from None
    loader = _ManifestLoader(data)
    try:
        node = loader.get_single_node()
        if node is None:
            raise ManifestError("the manifest is empty")
        expanded_size(node, limit)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise ManifestError(_yaml_reason(exc)) from None
    except RecursionError:
        raise ManifestError(f"the manifest is nested deeper than {MAX_DEPTH} levels") from None
    finally:
        loader.dispose()


def parse_manifest(data: bytes, *, node: str, source: str, path_or_url: str) -> list[JSONDict]:
    """Bytes of a manifest file (one Pod) or URL body (a Pod or a PodList) -> the defaulted pods, or a
    ManifestError with a one-line reason. No I/O: the same bytes always give the same answer."""
    return static_pods(decode_manifest(data), node=node, source=source, path_or_url=path_or_url)


# ---------------------------------------------------------------------------------------------------
# The file source
# ---------------------------------------------------------------------------------------------------


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
        return FileResult(where, None, f"{type(exc).__name__}: {_one_line(exc)}", content)
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
            error = f"{type(exc).__name__}: {_one_line(exc)}"
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


class HttpSource:
    """Polls a manifest URL every `period_s` (config/http.go): each request, redirects and body
    included, must finish within `deadline_s` (10 s); the body may hold at most `max_bytes` (10 MiB);
    at most 10 redirects are followed, to http or https only.

    A status other than 200, a failed request, an oversized or invalid body changes nothing: the last
    good pods stay. An empty body is an empty SET. A body identical to the last one is not decoded
    again, so an invalid body is reported once.
    """

    name = HTTP_SOURCE  # the pod-updates source tag

    def __init__(
        self,
        url: str,
        node: str,
        publish: PublishUpdate,
        storage: PodStorage,
        period_s: float = 20.0,
        *,
        deadline_s: float = URL_DEADLINE_S,
        max_bytes: int = MAX_MANIFEST_BYTES,
    ) -> None:
        self.url, self.node, self.publish, self.storage, self.period_s = url, node, publish, storage, period_s
        self.deadline_s, self.max_bytes = deadline_s, max_bytes
        self._last: bytes | None = None
        self._failures = 0  # consecutive failures, for upstream's log throttling

    async def get(self) -> tuple[int, bytes]:
        """(status, body) of one GET; the body only for a 200. ManifestError when it is too large,
        TimeoutError past the deadline, aiohttp.ClientError or OSError when the request fails."""
        timeout = aiohttp.ClientTimeout(total=self.deadline_s)
        async with (
            aiohttp.ClientSession(timeout=timeout, trust_env=True) as session,
            session.get(self.url, max_redirects=MAX_REDIRECTS) as response,
        ):
            if response.status != 200:
                return response.status, b""
            if response.content_length is not None and response.content_length > self.max_bytes:
                length = response.content_length
                raise ManifestError(f"the body is {length} bytes, more than {self.max_bytes}")
            body = bytearray()
            async for chunk in response.content.iter_chunked(65536):
                body += chunk
                if len(body) > self.max_bytes:
                    raise ManifestError(f"the body is larger than {self.max_bytes} bytes")
            return 200, bytes(body)

    def _failed(self, reason: str) -> None:
        self._failures += 1
        if self._failures <= LOUD_URL_FAILURES:
            quiet = " (further failures in a row are logged at debug level)" * (
                self._failures == LOUD_URL_FAILURES
            )
            log.warning("manifest URL %s: %s%s", self.url, reason, quiet)
        else:
            log.debug("manifest URL %s: %s", self.url, reason)

    def _succeeded(self) -> None:
        if self._failures:
            log.info("manifest URL %s read again", self.url)
        self._failures = 0

    async def fetch(self) -> list[JSONDict] | None:
        """The defaulted pods, or None when nothing changed or the fetch failed."""
        try:
            status, body = await self.get()
        except ManifestError as exc:
            self._failed(str(exc))
            return None
        except TimeoutError:
            self._failed(f"no complete answer within {self.deadline_s:g}s")
            return None
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            self._failed(f"request failed: {type(exc).__name__}: {_one_line(exc)}")
            return None
        if status != 200:
            self._failed(f"answered {status}")
            return None
        if body == self._last:
            return None
        self._last = body
        if not body.strip():
            self._failed("returned an empty body")
            return []
        try:
            pods = await asyncio.to_thread(
                parse_manifest, body, node=self.node, source=HTTP_SOURCE, path_or_url=self.url
            )
        except ManifestError as exc:
            self._failed(str(exc))
            return None
        self._succeeded()
        return pods

    async def run(self) -> None:
        while True:
            try:
                pods = await self.fetch()
            except Exception:  # nothing a server sends may stop the source
                log.exception("manifest URL %s: unexpected failure", self.url)
                pods = None
            if pods is not None:
                await publish_merge(self.storage, self.name, pods, self.node, self.publish)
            await asyncio.sleep(self.period_s)
