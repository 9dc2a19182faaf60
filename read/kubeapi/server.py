"""`podledger serve`: the pod read paths of the Kubernetes API, answered from the ledger.

GET only. Discovery (/api, /api/v1, /apis, /version), list and get of pods (all namespaces, one
namespace, one pod, its status), watch (`?watch=true` or /api/v1/watch/...), and the same at a past
moment under /at/<RFC 3339 time>/. Objects are JSON, or a meta.k8s.io Table when the client asks
for one (kubectl does). Without a bearer token the server listens on loopback only: whoever can
reach it reads every pod (docs/consuming.md, "Who may read").
"""

from __future__ import annotations

import gc
import hmac
import logging
import time
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from typing import Any

import orjson
from aiohttp import web

from podledger.config import Settings
from podledger.read.client.position import InvalidToken, decode_position
from podledger.read.client.select import PodFilter, SelectorError
from podledger.read.kubeapi import objects
from podledger.read.kubeapi.history import PastAnswer, PastPods
from podledger.read.kubeapi.ledger import Ledger
from podledger.read.kubeapi.served import PodDoc, pod_list_chunks, selected, table_chunks
from podledger.read.kubeapi.table import Clock
from podledger.read.kubeapi.watch import serve_watch
from podledger.schemas.cloud_events import rfc3339_ms
from podledger.types import JSONDict

log = logging.getLogger(__name__)
AHEAD_WAIT_S = 3.0  # how long a request for a resourceVersion this server has not read yet waits

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def respond(body: JSONDict, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type="application/json")


def failure(body: JSONDict) -> web.Response:
    return respond(body, int(body["code"]))


class KubeApi:
    def __init__(
        self, settings: Settings, ledger: Ledger, *, token: str = "", bookmark_s: float = 60.0
    ) -> None:
        self.settings = settings
        self.ledger = ledger
        self.token = token
        self.bookmark_s = bookmark_s
        self.past = PastPods(settings)

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard])
        app.router.add_route("*", "/{tail:.*}", self._handle)
        return app

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Read-only, and with a token configured, nothing without it."""
        if request.method not in ("GET", "HEAD"):
            response = failure(objects.method_not_allowed(request.method))
            response.headers["Allow"] = "GET, HEAD"
            return response
        if self.token:
            given = request.headers.get("Authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode()):
                return failure(objects.unauthorized())
        return await handler(request)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            moment, what, namespace, name, legacy_watch = objects.parse_path(request.path)
        except objects.PathError:
            return failure(
                objects.status(404, "NotFound", "the server could not find the requested resource")
            )
        if what == "health":
            return web.Response(text="ok")
        if what == "api":
            return respond(objects.api_versions(request.host))
        if what == "apis":
            return respond(objects.api_groups())
        if what == "v1":
            return respond(objects.api_resources())
        if what == "version":
            return respond(objects.version_info(version("podledger")))
        query = request.query
        try:
            gv = objects.table_version(request.headers.get("Accept", ""))
            include = objects.include_object(query.get("includeObject"))
            pod_filter = PodFilter.parse(
                namespace, None, query.get("labelSelector"), _with_name(query.get("fieldSelector"), name)
            )
            moment_ms = None if moment is None else objects.parse_moment(moment)
        except (SelectorError, ValueError) as exc:
            return failure(objects.bad_request(str(exc)))
        watch = legacy_watch or objects.parse_bool(query.get("watch"))
        if moment_ms is not None:
            if watch:
                return failure(
                    objects.bad_request("a past moment cannot be watched: list it, or watch the present")
                )
            return await self._past(request, moment_ms, pod_filter, name, gv, include)
        if watch:
            return await serve_watch(request, self.ledger, pod_filter, gv, include, self.bookmark_s)
        rv = query.get("resourceVersion", "")
        if rv not in ("", "0"):
            refused = await self._check_version(rv, query.get("resourceVersionMatch", ""))
            if refused is not None:
                return refused
        if name is not None:
            doc = self.ledger.store.get(namespace or "", name)
            docs = [] if doc is None else [doc]
        else:
            docs = self.ledger.store.select(pod_filter)
        return await _answer(request, docs, self.ledger.resource_version, name, gv, include)

    async def _check_version(self, rv: str, match: str) -> web.Response | None:
        """A list or get at a resourceVersion: served at the newest point, which is never older."""
        try:
            position = decode_position(rv)
        except InvalidToken as exc:
            return failure(objects.bad_request(f"resourceVersion {rv!r}: {exc}"))
        if position.partitions != self.settings.partitions:
            return failure(objects.expired("the resourceVersion is for other topics"))
        if match == "Exact" and position.offsets != self.ledger.position.offsets:
            return failure(
                objects.expired("only the newest version is listed here; /at/<time>/ lists the past")
            )
        if not await self.ledger.reached(position.offsets, AHEAD_WAIT_S):
            return failure(objects.too_large("this server has not read that far yet"))
        return None

    async def _past(
        self,
        request: web.Request,
        moment_ms: int,
        pod_filter: PodFilter,
        name: str | None,
        gv: str | None,
        include: str,
    ) -> web.StreamResponse:
        now_ms = int(_now_s() * 1000)
        if moment_ms > now_ms:
            return failure(objects.bad_request("that moment is in the future"))
        answer = await self.past.at(moment_ms)
        docs = selected(answer.docs, pod_filter)
        return await _answer(request, docs, "", name, gv, include, past_headers(answer))


def past_headers(answer: PastAnswer) -> dict[str, str]:
    """Whether a past answer is complete (docs/guarantees.md, "Completeness: the watermark"):
    `Podledger-Complete`, `Podledger-Watermark`, and when it is not, a warning kubectl prints."""
    mark = "none" if answer.watermark_ms is None else rfc3339_ms(answer.watermark_ms)
    headers = {"Podledger-Complete": str(answer.complete).lower(), "Podledger-Watermark": mark}
    if not answer.complete:
        why = f"the ledger has applied every input only up to {mark}"
        headers["Warning"] = f'299 - "incomplete: {why}; versions may still be added to this moment"'
    return headers


async def _answer(
    request: web.Request,
    docs: list[PodDoc],
    rv: str,
    name: str | None,
    gv: str | None,
    include: str,
    headers: dict[str, str] | None = None,
) -> web.StreamResponse:
    """A get (`name`: the one pod, or 404) or a list of `docs`, as objects or as a Table. A list
    is streamed in chunks of the pods' ready JSON: no 40 MB string for 100,000 pods."""
    headers = headers or {}
    if name is not None and not docs:
        missing = failure(objects.not_found(name))
        missing.headers.update(headers)
        return missing
    if request.method == "HEAD":  # the headers alone: a streamed body would follow them regardless
        return web.Response(content_type="application/json", headers=headers)
    if name is not None and gv is None:
        return web.Response(body=docs[0].json, content_type="application/json", headers=headers)
    if gv is None:
        written = pod_list_chunks(docs, rv)
    else:
        written = table_chunks(docs[:1] if name is not None else docs, rv, gv, include, Clock(_now_s()))
    response = web.StreamResponse(headers={"Content-Type": "application/json", **headers})
    response.enable_chunked_encoding()
    await response.prepare(request)
    for chunk in written:
        await response.write(chunk)
    await response.write_eof()
    return response


def _with_name(field_selector: str | None, name: str | None) -> str | None:
    """A get of one pod is a list with metadata.name fixed (also how a watch of one pod is asked)."""
    if name is None:
        return field_selector
    return ",".join(s for s in (field_selector, f"metadata.name={name}") if s)


def _now_s() -> float:
    return time.time()


async def run_server(settings: Settings, host: str, port: int, *, token: str = "", bookmark_s: float = 60.0,
                     ready: Callable[[str], Any] | None = None) -> None:  # fmt: skip
    """Load the pods, then answer until cancelled."""
    ledger = Ledger(settings)
    # Loading keeps what it parses or drops it at once: collecting cycles meanwhile would walk the
    # growing store again and again. Afterwards the loaded pods are frozen out of collections.
    gc.disable()
    try:
        await ledger.start()
    finally:
        gc.enable()
    gc.collect()
    gc.freeze()
    runner = web.AppRunner(
        KubeApi(settings, ledger, token=token, bookmark_s=bookmark_s).app(), access_log=None
    )
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    try:
        if ready is not None:
            ready(f"http://{host}:{port}")
        await ledger.following()
    finally:
        await runner.cleanup()
        await ledger.stop()
