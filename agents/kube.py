"""The apiserver edge: the few REST calls podledger makes, on plain JSON.

Built on the kubernetes client's configuration and transport (kubeconfig, in-cluster, auth),
but requests and responses stay dicts parsed with orjson (docs/architecture.md#plain-data): the hot
paths never build the client's model classes. Calls are blocking; async callers use `asyncio.to_thread`.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import orjson
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from urllib3.exceptions import HTTPError as Urllib3HTTPError

from podledger.errors import UserError
from podledger.types import JSONDict

log = logging.getLogger(__name__)

STRATEGIC_MERGE = "application/strategic-merge-patch+json"

# The pod watch, as client-go's reflector runs it: each watch asks the server to end it after
# WATCH_TIMEOUT_S to 2 x WATCH_TIMEOUT_S seconds (jittered, so watches do not all restart at once), and
# the client gives up on a connection that stays silent a margin longer: a half-open connection is
# noticed by that read timeout, or sooner by TCP keepalive. Failures restart it with a back-off.
WATCH_TIMEOUT_S = 300  # client-go's minWatchTimeout
WATCH_READ_MARGIN_S = 30.0
WATCH_BACKOFF_FIRST_S, WATCH_BACKOFF_MAX_S = 1.0, 30.0
# A watch that ends sooner than this with no event is a failure (client-go's "very short watch").
WATCH_TOO_SHORT_S = 1.0


class ApiserverUnreachable(UserError):
    """The apiserver did not answer, or answered with a server error: worth waiting for."""


class KubeError(Exception):
    """An apiserver call failed; `status` is the HTTP status (0 when it was never reached)."""

    def __init__(self, status: int, reason: str, body: str = "") -> None:
        super().__init__(f"{status} {reason}: {body[:300]}")
        self.status = status
        self.reason = reason
        self.body = body

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409


def load_api_client(kubeconfig: str = "") -> k8s.ApiClient:
    """An ApiClient from `kubeconfig`, else $KUBECONFIG, else the in-cluster service account."""
    path = kubeconfig or os.environ.get("KUBECONFIG", "")
    configuration = k8s.Configuration()
    try:
        if path:
            if not os.path.exists(path):
                raise UserError(f"kubeconfig {path} does not exist: set KUBECONFIG to a valid file")
            k8s_config.load_kube_config(config_file=path, client_configuration=configuration)
        else:
            k8s_config.load_incluster_config(client_configuration=configuration)
    except ConfigException as exc:
        where = f"kubeconfig {path}" if path else "the in-cluster config"
        raise UserError(f"cannot load {where}: {exc}; set KUBECONFIG to a valid kubeconfig") from None
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise UserError(f"kubeconfig {path} is malformed ({exc.__class__.__name__}: {exc})") from None
    except Exception as exc:  # the YAML parser's own errors
        if exc.__class__.__module__.startswith("yaml"):
            raise UserError(f"kubeconfig {path} is not valid YAML: {exc}") from None
        raise
    # TCP keepalive on every connection, with client-go's timings (30 s idle): a peer that vanished
    # breaks an idle watch instead of leaving it open forever.
    configuration.keep_alive = True
    return k8s.ApiClient(configuration)


def watch_timeouts(base_s: int, jitter: float) -> tuple[int, float]:
    """(server timeoutSeconds, client read timeout) of one watch, `jitter` in [0, 1): the server's is
    base_s x (1 + jitter) as client-go's reflector picks it; the client waits for a byte at most that
    plus a margin (WATCH_READ_MARGIN_S, or base_s when it is shorter)."""
    server = max(1, int(base_s * (1.0 + jitter)))
    return server, server + min(WATCH_READ_MARGIN_S, float(max(base_s, 1)))


class WatchHealth:
    """Whether a list-and-watch loop hears from the apiserver: down from the start until its first
    list, and from any failure until a list or watch request succeeds again.

    Written by the watch thread, read by anyone (plain attribute stores). Times are `clock()` seconds.
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.down_since: float | None = clock()
        self.listed = False  # a list ever succeeded
        self.last_heard: float | None = None  # a list, a watch opening, an event or a bookmark
        self.error = "not started"
        self.failures = 0  # failures since it was last up

    def up(self) -> None:
        self.down_since = None
        self.last_heard = self.clock()
        self.failures = 0

    def heard(self) -> None:
        self.last_heard = self.clock()

    def down(self, error: str) -> None:
        if self.down_since is None:
            self.down_since = self.clock()
        self.error = error
        self.failures += 1

    def healthy(self, now: float, down_after_s: float) -> tuple[bool, str]:
        """Unhealthy once down for more than `down_after_s` seconds, with the reason."""
        if self.down_since is None or now - self.down_since <= down_after_s:
            return True, "ok"
        if not self.listed:
            return False, f"apiserver watch has yet to list pods ({now - self.down_since:.0f}s): {self.error}"
        return False, f"apiserver watch down for {now - self.down_since:.0f}s: {self.error}"


class TokenBucket:
    """client-go's token-bucket rate limiter: `qps` tokens a second, at most `burst` saved up."""

    def __init__(
        self,
        qps: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError("qps must be > 0 and burst >= 1")
        self.qps, self.burst = qps, burst
        self._clock, self._sleep = clock, sleep
        self._tokens = float(burst)
        self._last = clock()
        self._lock = threading.Lock()

    def acquire(self) -> float:
        """Take one token, waiting for it if none is left; returns the seconds waited."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
            self._last = now
            self._tokens -= 1.0
            wait = -self._tokens / self.qps if self._tokens < 0 else 0.0
        if wait > 0:
            self._sleep(wait)
        return wait


class Kube:
    """Raw-JSON access to the core/v1 resources podledger reads and writes.

    Every request takes a token from one rate limiter, as every kubelet request does (its
    kubeAPIQPS and kubeAPIBurst default to 50 and 100). Long-running watches do not count.
    """

    def __init__(
        self, api_client: k8s.ApiClient, *, qps: float = 50.0, burst: int = 100, timeout: float = 30.0
    ) -> None:
        self.api = api_client
        # List-and-watch gets a connection pool of its own, emptied after a failure, so a restart dials
        # a fresh connection and never picks up one that went half-open. urllib3 does not retry in it:
        # a failure is the loop's to restart, with its back-off, and to count in its health.
        self.watch_api = k8s.ApiClient(api_client.configuration)
        self.watch_api.rest_client.pool_manager.connection_pool_kw["retries"] = False
        self.timeout = timeout
        self.limiter = TokenBucket(qps, burst)

    @classmethod
    def from_kubeconfig(cls, kubeconfig: str = "", *, qps: float = 50.0, burst: int = 100) -> Kube:
        return cls(load_api_client(kubeconfig), qps=qps, burst=burst)

    @property
    def server(self) -> str:
        return str(self.api.configuration.host)

    def close(self) -> None:
        self.api.close()
        self.watch_api.close()

    def reset_watch_connections(self) -> None:
        """Close the watch pool's idle connections: the next watch dials a new one."""
        self.watch_api.rest_client.pool_manager.clear()

    # -- transport

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: list[tuple[str, Any]] | None = None,
        content_type: str = "application/json",
        stream: bool = False,
        timeout: float | None = None,
        watch_pool: bool = False,
    ) -> Any:
        """One call. With `stream`, the raw urllib3 response on the watch pool, `timeout` then being
        the read timeout (the longest silence, also the bound on connecting) rather than the whole
        call's. `watch_pool`: the list of a list-and-watch, on the watch pool too."""
        headers = {"Accept": "application/json", "Content-Type": content_type}
        if not stream:
            self.limiter.acquire()
        api = self.watch_api if stream or watch_pool else self.api
        request_timeout: Any = timeout or self.timeout
        if stream:  # (connect, read): a silent server fails it, a slow stream does not
            request_timeout = (min(self.timeout, timeout or self.timeout), timeout)
        try:
            method, url, headers, body, _ = api.param_serialize(
                method=method,
                resource_path=path,
                query_params=query or [],
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
            )
            response = api.call_api(
                method,
                url,
                header_params=headers,
                body=body,
                _request_timeout=request_timeout,
            )
        except ApiException as exc:
            raise KubeError(exc.status or 0, str(exc.reason), str(exc.body or "")) from None
        except (Urllib3HTTPError, OSError) as exc:
            raise KubeError(0, "unreachable", f"{self.server}: {exc}") from None
        if not 200 <= response.status < 300:
            data = response.read() or b""
            raise KubeError(response.status, str(response.reason), data.decode(errors="replace"))
        if stream:
            return response.response
        data = response.read()
        return orjson.loads(data) if data else None

    def check(self) -> str:
        """The server's version; a one-line UserError when it cannot be reached or used."""
        try:
            info = self.request("GET", "/version", timeout=10)
        except KubeError as exc:
            if exc.status in (401, 403):
                raise UserError(
                    f"the apiserver at {self.server} refused our credentials ({exc.status}):"
                    " check the user in KUBECONFIG"
                ) from None
            raise ApiserverUnreachable(
                f"cannot reach the apiserver at {self.server}: {exc.body or exc.reason};"
                " start one with 'podledger local up' or set KUBECONFIG"
            ) from None
        return str(info.get("gitVersion", "?"))

    # -- pods

    @staticmethod
    def pod_path(namespace: str, name: str, sub: str = "") -> str:
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}"
        return f"{path}/{sub}" if sub else path

    def get_pod(self, namespace: str, name: str) -> JSONDict:
        return dict(self.request("GET", self.pod_path(namespace, name)))

    def create_pod(self, pod: JSONDict) -> JSONDict:
        ns = pod["metadata"].get("namespace") or "default"
        return dict(self.request("POST", f"/api/v1/namespaces/{quote(ns, safe='')}/pods", body=pod))

    def patch_pod_status(self, namespace: str, name: str, patch: JSONDict) -> JSONDict:
        """Strategic-merge PATCH of pods/status; put metadata.uid in `patch` as a precondition."""
        return dict(
            self.request(
                "PATCH", self.pod_path(namespace, name, "status"), body=patch, content_type=STRATEGIC_MERGE
            )
        )

    def delete_pod(
        self, namespace: str, name: str, *, grace_seconds: int | None = None, uid: str | None = None
    ) -> JSONDict:
        options: JSONDict = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if grace_seconds is not None:
            options["gracePeriodSeconds"] = grace_seconds
        if uid is not None:
            options["preconditions"] = {"uid": uid}
        return dict(self.request("DELETE", self.pod_path(namespace, name), body=options))

    def list_pods(
        self, *, field_selector: str = "", resource_version: str = "", watch_pool: bool = False
    ) -> JSONDict:
        query: list[tuple[str, Any]] = []
        if field_selector:
            query.append(("fieldSelector", field_selector))
        if resource_version:
            query.append(("resourceVersion", resource_version))
        return dict(self.request("GET", "/api/v1/pods", query=query, watch_pool=watch_pool))

    def watch_pods(
        self,
        *,
        field_selector: str,
        resource_version: str,
        timeout_seconds: int = WATCH_TIMEOUT_S,
        read_timeout_s: float | None = None,
        on_open: Callable[[], None] | None = None,
    ) -> Iterator[JSONDict]:
        """Watch events ({type, object}) until the server ends the watch after `timeout_seconds`.

        A connection silent for `read_timeout_s` (default: `timeout_seconds` plus a margin) raises
        KubeError(0), as does any transport failure. `on_open` is called once the server accepted it.
        """
        if read_timeout_s is None:
            read_timeout_s = timeout_seconds + min(WATCH_READ_MARGIN_S, float(timeout_seconds))
        query: list[tuple[str, Any]] = [
            ("watch", "true"),
            ("fieldSelector", field_selector),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", timeout_seconds),
        ]
        raw = self.request("GET", "/api/v1/pods", query=query, stream=True, timeout=read_timeout_s)
        finished = False
        try:
            if on_open is not None:
                on_open()
            buffer = b""
            for chunk in raw.stream(65536, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield orjson.loads(line)
            finished = True
        except (Urllib3HTTPError, OSError) as exc:
            raise KubeError(0, "watch interrupted", str(exc)) from None
        finally:
            if not finished:  # never hand a connection with unread data back to the pool
                raw.close()
            raw.release_conn()

    def list_and_watch_pods(
        self,
        on_event: Callable[[str, JSONDict], None],
        stop: threading.Event,
        *,
        field_selector: str = "",
        watch_timeout_s: int = WATCH_TIMEOUT_S,
        health: WatchHealth | None = None,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        """List, then watch, until `stop` is set; blocking (run it in a thread). It never gives up.

        `on_event(kind, pod)` gets LISTED for every listed pod, then RELISTED with {"uids": [...]}
        once the listing is complete (pods not among them were deleted while nobody watched), then
        ADDED, MODIFIED and DELETED from the watch. Each watch asks the server to end it after
        `watch_timeout_s` to twice that (jittered) and reads with a timeout a margin longer, so a
        half-open connection is noticed. A watch the server ends is resumed from the last
        resourceVersion; 410 Gone relists at once; any other failure, of whatever kind, restarts on a
        fresh connection after a back-off from 1 s doubling to 30 s (jittered): resuming after a
        transport failure, relisting after anything else. `health` follows the outcome.
        """
        health = health if health is not None else WatchHealth()
        resource_version = ""
        backoff = WATCH_BACKOFF_FIRST_S

        def opened() -> None:
            nonlocal backoff
            health.up()
            backoff = WATCH_BACKOFF_FIRST_S

        while not stop.is_set():
            try:
                if not resource_version:
                    listing = self.list_pods(field_selector=field_selector, watch_pool=True)
                    items = listing.get("items") or []
                    for pod in items:
                        on_event("LISTED", pod)
                    on_event("RELISTED", {"uids": [p["metadata"]["uid"] for p in items]})
                    resource_version = listing["metadata"]["resourceVersion"]
                    health.listed = True
                    opened()
                server_s, read_s = watch_timeouts(watch_timeout_s, jitter())
                started, quiet = time.monotonic(), True
                for event in self.watch_pods(
                    field_selector=field_selector,
                    resource_version=resource_version,
                    timeout_seconds=server_s,
                    read_timeout_s=read_s,
                    on_open=opened,
                ):
                    if stop.is_set():
                        return
                    health.heard()
                    quiet = False
                    kind, obj = event["type"], event["object"]
                    if kind == "ERROR":
                        code = int(obj.get("code") or 0)
                        if code == 410:  # our resourceVersion is too old to resume from: relist
                            log.info("pod watch expired (410 Gone); relisting")
                            resource_version = ""
                            break
                        reason = str(obj.get("reason") or "watch error")
                        raise KubeError(code, reason, str(obj.get("message") or ""))
                    if kind in ("ADDED", "MODIFIED", "DELETED"):
                        on_event(kind, obj)
                    resource_version = obj["metadata"].get("resourceVersion") or resource_version
                else:
                    if quiet and time.monotonic() - started < WATCH_TOO_SHORT_S and not stop.is_set():
                        raise KubeError(0, "very short watch", "the watch ended at once with no event")
            except Exception as exc:
                if stop.is_set():
                    return  # shutting down: the server closing our watch is expected
                transport = isinstance(exc, KubeError) and exc.status != 410
                if not transport:
                    resource_version = ""  # 410, bad data or a failing handler: start from a new list
                reason = str(exc) if isinstance(exc, KubeError) else f"{type(exc).__name__}: {exc}"
                health.down(reason)
                delay = backoff * (0.5 + jitter() / 2)
                log.warning(
                    "pod watch failed (%s in a row; %s in %.1fs): %s",
                    health.failures,
                    "resuming" if resource_version else "relisting",
                    delay,
                    reason,
                )
                self.reset_watch_connections()
                stop.wait(delay)
                backoff = min(backoff * 2, WATCH_BACKOFF_MAX_S)

    # -- nodes

    def get_node(self, name: str) -> JSONDict:
        return dict(self.request("GET", f"/api/v1/nodes/{quote(name, safe='')}"))

    def ensure_node(self, name: str) -> JSONDict:
        """The Node object for `name`, created if missing (the kubelet registers itself the same way)."""
        try:
            return self.get_node(name)
        except KubeError as exc:
            if not exc.not_found:
                raise
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {"kubernetes.io/hostname": name, "node.podledger.io/managed": "true"},
            },
        }
        try:
            return dict(self.request("POST", "/api/v1/nodes", body=node))
        except KubeError as exc:
            if exc.conflict:
                return self.get_node(name)
            raise
