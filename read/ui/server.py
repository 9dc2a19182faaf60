"""`podledger ui`'s web server: one static page (HTML, CSS, plain JavaScript, no build step and
nothing loaded from elsewhere) and read-only JSON endpoints over the audit index.

  GET /                          the page
  GET /static/app.js|app.css     its script and style
  GET /api/info                  the index and whether it is kept up to date
  GET /api/namespaces            namespaces with their pod counts
  GET /api/pods?namespace=&q=    pods, most recently seen first
  GET /api/pod?uid=|pod=ns/name  a pod's lives as a timeline
  GET /api/namespace?namespace=  many pods' lanes on one time scale
  GET /api/version?uid=&version= one version: status, changes, cause and the inputs around it

The index is opened read-only in one thread of its own (a sqlite3 connection stays in the thread
that opened it; queries never block the event loop); in WAL mode it sees what a writer commits.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from typing import Any

import orjson
from aiohttp import web

from podledger.read.audit import queries
from podledger.read.audit.parse import PodRef
from podledger.read.index.base import AuditIndex
from podledger.read.ui import catalog, views
from podledger.read.ui.guard import Listen, host_allowed
from podledger.read.ui.timeline import timeline
from podledger.streams.fold import DEFAULT_HOLD, HoldLimits

log = logging.getLogger(__name__)

NAMESPACE_VIEW_PODS = 100  # lanes in a namespace view: the most recently seen pods
POD_LIST_LIMIT = 500
STATIC = {"app.js": "text/javascript", "app.css": "text/css"}
# The page loads only its own script and style and talks only to this server; nothing may frame it.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self';"
    " connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

Follow = Callable[[asyncio.Event], Awaitable[Any]]


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    """JSON by orjson: a namespace view runs to megabytes, which the standard library encodes
    several times slower."""
    body = orjson.dumps(data)
    return web.Response(body=body, status=status, headers=headers, content_type="application/json")


class IndexReader:
    """The index, opened on first use in the one thread that runs every query on it."""

    def __init__(self, open_index: Callable[[], AuditIndex]) -> None:
        self._open = open_index
        self._index: AuditIndex | None = None
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="ui-index")

    def _run(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self._index is None:
            self._index = self._open()
        return fn(self._index, *args, **kwargs)

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(self._run, fn, args, kwargs))

    async def close(self) -> None:
        def close() -> None:
            if self._index is not None:
                self._index.close()

        await asyncio.get_running_loop().run_in_executor(self._pool, close)
        self._pool.shutdown()


def pod_timeline(index: AuditIndex, ref: PodRef) -> dict[str, Any]:
    lives = queries.history(index, ref)
    first = lives[0]
    return {"title": f"{first['namespace']}/{first['name']}", **timeline(lives)}


def namespace_timeline(index: AuditIndex, namespace: str) -> dict[str, Any]:
    found = catalog.pods(index, namespace=namespace, limit=NAMESPACE_VIEW_PODS)
    lives = [life for pod in found for life in queries.history(index, PodRef(uid=pod.uid))]
    lives.sort(key=lambda life: (life["name"], life["versions"][0]["ts_ms"]))
    return {
        "title": f"namespace {namespace}",
        "namespace": namespace,
        "truncated": len(found) >= NAMESPACE_VIEW_PODS,
        **timeline(lives, points=False),
    }


def version_detail(index: AuditIndex, uid: str, version: int, limits: HoldLimits) -> dict[str, Any]:
    return views.detail(queries.why(index, PodRef(uid=uid), version=version, limits=limits))


def _pods(index: AuditIndex, namespace: str, contains: str) -> list[dict[str, Any]]:
    found = catalog.pods(index, namespace=namespace, contains=contains, limit=POD_LIST_LIMIT)
    return [views.pod_row(p) for p in found]


class Ui:
    """The aiohttp application and the state its answers read."""

    def __init__(
        self, reader: IndexReader, *, loopback_only: bool, index_path: str, limits: HoldLimits
    ) -> None:
        self.reader = reader
        self.loopback_only = loopback_only
        self.limits = limits
        self.info: dict[str, Any] = {"index": index_path, "refresh": "off"}
        files = resources.files("podledger.read.ui").joinpath("static")
        self.page = files.joinpath("index.html").read_bytes()
        self.static = {name: files.joinpath(name).read_bytes() for name in STATIC}

    @web.middleware
    async def guard(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if not host_allowed(request.headers.get("Host"), self.loopback_only):
            response: web.StreamResponse = json_response(
                {"error": "this UI answers requests addressed to localhost only"}, status=421
            )
        else:
            try:
                response = await handler(request)
            except views.BadRequest as exc:
                response = json_response({"error": str(exc)}, status=400)
            except queries.NotFound as exc:
                response = json_response({"error": str(exc)}, status=404)
            except web.HTTPException as exc:  # no such page, or a method other than GET
                allow = {k: v for k, v in exc.headers.items() if k == "Allow"}
                response = json_response({"error": exc.reason}, status=exc.status, headers=allow)
        response.headers.update(SECURITY_HEADERS)
        return response

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self.guard])
        app.router.add_get("/", self.index)
        app.router.add_get("/static/{name}", self.static_file)
        app.router.add_get("/api/info", self.api_info)
        app.router.add_get("/api/namespaces", self.api_namespaces)
        app.router.add_get("/api/pods", self.api_pods)
        app.router.add_get("/api/pod", self.api_pod)
        app.router.add_get("/api/namespace", self.api_namespace)
        app.router.add_get("/api/version", self.api_version)
        return app

    async def index(self, request: web.Request) -> web.Response:
        return web.Response(body=self.page, content_type="text/html", charset="utf-8")

    async def static_file(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in self.static:
            raise web.HTTPNotFound()
        return web.Response(body=self.static[name], content_type=STATIC[name], charset="utf-8")

    async def api_info(self, request: web.Request) -> web.Response:
        return json_response(self.info)

    async def api_namespaces(self, request: web.Request) -> web.Response:
        return json_response(await self.reader.call(catalog.namespaces))

    async def api_pods(self, request: web.Request) -> web.Response:
        q = request.query
        return json_response(await self.reader.call(_pods, q.get("namespace", ""), q.get("q", "")))

    async def api_pod(self, request: web.Request) -> web.Response:
        ref = views.pod_ref(request.query)
        return json_response(await self.reader.call(pod_timeline, ref))

    async def api_namespace(self, request: web.Request) -> web.Response:
        namespace = request.query.get("namespace", "")
        if not namespace:
            raise views.BadRequest("give ?namespace=NAME")
        return json_response(await self.reader.call(namespace_timeline, namespace))

    async def api_version(self, request: web.Request) -> web.Response:
        uid = request.query.get("uid", "")
        if not uid:
            raise views.BadRequest("give ?uid=UID&version=N")
        version = views.version_number(request.query)
        return json_response(await self.reader.call(version_detail, uid, version, self.limits))


async def _following(follow: Follow, stop: asyncio.Event, info: dict[str, Any]) -> None:
    """Keep the index up to date until stopped; a failure leaves the UI serving the index as it is."""
    info["refresh"] = "following the topics"
    try:
        await follow(stop)
        info["refresh"] = "stopped"
    except Exception as exc:
        log.warning("the index is no longer kept up to date: %s", exc)
        info["refresh"] = f"failed ({type(exc).__name__}): the index is shown as it is"


async def run_ui(
    open_index: Callable[[], AuditIndex],
    listen: Listen,
    stop: asyncio.Event,
    *,
    index_path: str = "",
    limits: HoldLimits = DEFAULT_HOLD,
    follow: Follow | None = None,
    ready: Callable[[str], Any] | None = None,
) -> None:
    """Serve until `stop` is set, then close the listener, the index and the follower."""
    reader = IndexReader(open_index)
    ui = Ui(reader, loopback_only=listen.loopback, index_path=index_path, limits=limits)
    runner = web.AppRunner(ui.app(), access_log=None, handle_signals=False)
    await runner.setup()
    follower: asyncio.Task[None] | None = None
    try:
        site = web.TCPSite(runner, listen.host, listen.port)
        await site.start()
        if follow is not None:
            follower = asyncio.create_task(_following(follow, stop, ui.info))
        if ready is not None:
            host, port = runner.addresses[0][:2]
            ready(f"http://{f'[{host}]' if ':' in host else host}:{port}/")
        await stop.wait()
    finally:
        stop.set()
        await runner.cleanup()
        if follower is not None:
            with contextlib.suppress(Exception):
                await follower
        await reader.close()
