"""The apiserver edge: the few REST calls podledger makes, on plain JSON.

Built on the kubernetes client's configuration and transport (kubeconfig, in-cluster, auth; loaded by
agents/kube_client.py), but requests and responses stay dicts parsed with orjson
(docs/architecture.md#plain-data): the hot paths never build the client's model classes. Calls are
blocking; async callers use `asyncio.to_thread`. The pod list-and-watch loop built on these calls
is agents/pod_watch.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import orjson
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError as Urllib3HTTPError

from podledger.agents.kube_client import ApiserverUnreachable, KubeError, load_api_client
from podledger.agents.token_bucket import TokenBucket
from podledger.agents.watch_policy import WATCH_READ_MARGIN_S, WATCH_TIMEOUT_S
from podledger.errors import UserError
from podledger.types import JSONDict

STRATEGIC_MERGE = "application/strategic-merge-patch+json"


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
