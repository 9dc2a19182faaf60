"""The apiserver edge: the few REST calls podledger makes, on plain JSON.

Built on the kubernetes client's configuration and transport (kubeconfig, in-cluster, auth),
but requests and responses stay dicts parsed with orjson (docs/architecture.md#plain-data): the hot
paths never build the client's model classes. Calls are blocking; async callers use `asyncio.to_thread`.
"""

from __future__ import annotations

import logging
import os
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
    return k8s.ApiClient(configuration)


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
    ) -> Any:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        if not stream:
            self.limiter.acquire()
        try:
            method, url, headers, body, _ = self.api.param_serialize(
                method=method,
                resource_path=path,
                query_params=query or [],
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
            )
            response = self.api.call_api(
                method,
                url,
                header_params=headers,
                body=body,
                _request_timeout=None if stream else (timeout or self.timeout),
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
            raise UserError(
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

    def list_pods(self, *, field_selector: str = "", resource_version: str = "") -> JSONDict:
        query: list[tuple[str, Any]] = []
        if field_selector:
            query.append(("fieldSelector", field_selector))
        if resource_version:
            query.append(("resourceVersion", resource_version))
        return dict(self.request("GET", "/api/v1/pods", query=query))

    def watch_pods(
        self, *, field_selector: str, resource_version: str, timeout_seconds: int = 300
    ) -> Iterator[JSONDict]:
        """Watch events ({type, object}) until the server closes the watch."""
        query: list[tuple[str, Any]] = [
            ("watch", "true"),
            ("fieldSelector", field_selector),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", timeout_seconds),
        ]
        raw = self.request("GET", "/api/v1/pods", query=query, stream=True)
        try:
            buffer = b""
            for chunk in raw.stream(65536, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield orjson.loads(line)
        except (Urllib3HTTPError, OSError) as exc:
            raise KubeError(0, "watch interrupted", str(exc)) from None
        finally:
            raw.release_conn()

    def list_and_watch_pods(
        self,
        on_event: Callable[[str, JSONDict], None],
        stop: threading.Event,
        *,
        field_selector: str = "",
    ) -> None:
        """List, then watch, until `stop` is set; blocking (run it in a thread).

        `on_event(kind, pod)` gets LISTED for every listed pod, then RELISTED with {"uids": [...]}
        once the listing is complete (pods not among them were deleted while nobody watched), then
        ADDED, MODIFIED and DELETED from the watch. A 410 Gone (our resourceVersion expired) relists;
        other errors retry with backoff from 1 s to 30 s.
        """
        resource_version = ""
        backoff = 1.0
        while not stop.is_set():
            try:
                if not resource_version:
                    listing = self.list_pods(field_selector=field_selector)
                    resource_version = listing["metadata"]["resourceVersion"]
                    items = listing.get("items") or []
                    for pod in items:
                        on_event("LISTED", pod)
                    on_event("RELISTED", {"uids": [p["metadata"]["uid"] for p in items]})
                for event in self.watch_pods(
                    field_selector=field_selector, resource_version=resource_version, timeout_seconds=60
                ):
                    if stop.is_set():
                        return
                    kind, obj = event["type"], event["object"]
                    if kind == "ERROR":
                        resource_version = ""  # 410 Gone: too old to resume from; relist
                        break
                    resource_version = obj["metadata"].get("resourceVersion", resource_version)
                    if kind in ("ADDED", "MODIFIED", "DELETED"):
                        on_event(kind, obj)
                backoff = 1.0
            except KubeError as exc:
                if stop.is_set():
                    return  # shutting down: the server closing our watch is expected
                log.warning("pod watch failed (retrying in %.0fs): %s", backoff, exc)
                if exc.status == 410:
                    resource_version = ""
                stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)

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
