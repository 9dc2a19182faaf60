"""The UI's web server in process (read/ui/server.py), over an index filled by the real fold:
the page and its assets (nothing from elsewhere), the JSON answers, errors, the headers that keep
the page to itself, a DNS-rebinding request refused, and a clean stop."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from podledger.read.index import SqliteIndex
from podledger.read.ui.guard import Listen
from podledger.read.ui.server import IndexReader, Ui, run_ui
from podledger.streams.fold import DEFAULT_HOLD
from tests.support import wait_for
from tests.support.audit import fill_audit_index, pod_stories

T0 = 1_780_000_000_000


@pytest.fixture(scope="module")
def index_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ui") / "audit.sqlite"
    index = SqliteIndex(path, topics="test")
    fill_audit_index(
        index, pod_stories(T0, [("shop", "web", 12), ("shop", "cart", 4), ("default", "batch", 6)])
    )
    index.close()
    return path


def with_client(index_path: Path, check: Callable[[TestClient[Any, Any]], Awaitable[None]]) -> None:
    async def go() -> None:
        reader = IndexReader(lambda: SqliteIndex(index_path, read_only=True))
        ui = Ui(reader, loopback_only=True, index_path=str(index_path), limits=DEFAULT_HOLD)
        async with TestClient(TestServer(ui.app())) as client:
            await check(client)
        await reader.close()

    asyncio.run(go())


async def get_json(client: TestClient[Any, Any], path: str, status: int = 200, **headers: str) -> Any:
    response = await client.get(path, headers=headers)
    assert response.status == status, await response.text()
    assert response.content_type == "application/json"
    return await response.json()


def test_the_page_and_its_assets_load_nothing_from_elsewhere(index_path: Path) -> None:
    async def check(client: TestClient[Any, Any]) -> None:
        page = await client.get("/")
        assert page.status == 200 and page.content_type == "text/html"
        html = await page.text()
        refs = re.findall(r'(?:src|href)="([^"]*)"', html)
        assert set(refs) == {"static/app.css", "static/app.js", "#/"}
        for name, kind in (("app.js", "text/javascript"), ("app.css", "text/css")):
            asset = await client.get(f"/static/{name}")
            assert asset.status == 200 and asset.content_type == kind
            text = await asset.text()
            # no URL but the SVG namespace's name (an identifier, never fetched)
            assert re.findall(r"[a-z]+://[^\s\"')]+", text) in ([], ["http://www.w3.org/2000/svg"])
            assert "@import" not in text and "url(" not in text
        csp = page.headers["Content-Security-Policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert page.headers["X-Content-Type-Options"] == "nosniff"
        for path in ("/static/../server.py", "/static/index.html", "/static/timeline.py"):
            assert (await client.get(path)).status == 404

    with_client(index_path, check)


def test_pods_timelines_and_a_version_as_json(index_path: Path) -> None:
    async def check(client: TestClient[Any, Any]) -> None:
        info = await get_json(client, "/api/info")
        assert info == {"index": str(index_path), "refresh": "off"}
        assert await get_json(client, "/api/namespaces") == [
            {"namespace": "default", "pods": 1},
            {"namespace": "shop", "pods": 2},
        ]
        pods = await get_json(client, "/api/pods?namespace=shop")
        assert [p["name"] for p in pods] == ["web", "cart"]  # most recently seen first
        assert [p["name"] for p in await get_json(client, "/api/pods?q=CAR")] == ["cart"]
        web = pods[0]

        by_uid = await get_json(client, f"/api/pod?uid={web['uid']}")
        by_name = await get_json(client, "/api/pod?pod=shop/web")
        assert by_uid == by_name and by_uid["title"] == "shop/web"
        [lane] = by_uid["lanes"]
        assert (lane["uid"], lane["first_version"], lane["last_version"]) == (web["uid"], 1, 12)
        assert [b["value"] for b in lane["phase"]] == ["Pending", "Running"]
        assert [m["restarts"] for m in lane["restarts"]] == [1, 2]
        assert by_uid["ticks"] and by_uid["legend"]["ready"]

        shop = await get_json(client, "/api/namespace?namespace=shop")
        assert [lane["name"] for lane in shop["lanes"]] == ["cart", "web"] and shop["truncated"] is False
        assert shop["window"]["start_ms"] == T0  # one scale for every lane
        assert all(lane["versions"] == [] and lane["ready"] for lane in shop["lanes"])  # bands, no dots

        v6 = await get_json(client, f"/api/version?uid={web['uid']}&version=6")
        assert (v6["version"], v6["phase"], v6["previous_version"]) == (6, "Running", 5)
        assert v6["chain"][-1]["effect"] == "new version 6"

    with_client(index_path, check)


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/api/pod?pod=shop/nope", 404, "no pod shop/nope in the index"),
        ("/api/pod", 400, "give ?uid=UID or ?pod=namespace/name"),
        ("/api/pod?pod=a/b/c", 400, "is not a pod"),
        ("/api/namespace", 400, "give ?namespace=NAME"),
        ("/api/version?version=3", 400, "give ?uid=UID&version=N"),
        ("/api/version?uid=x&version=three", 400, "must be a version number"),
        ("/api/version?uid=nope&version=1", 404, "no pod nope in the index"),
        ("/api/nothing", 404, "Not Found"),
    ],
)
def test_errors_are_json_with_a_reason(index_path: Path, path: str, status: int, message: str) -> None:
    async def check(client: TestClient[Any, Any]) -> None:
        body = await get_json(client, path, status)
        assert message in body["error"]

    with_client(index_path, check)


def test_a_version_the_pod_never_had_is_not_found(index_path: Path) -> None:
    async def check(client: TestClient[Any, Any]) -> None:
        [web] = await get_json(client, "/api/pods?q=web")
        body = await get_json(client, f"/api/version?uid={web['uid']}&version=99", 404)
        assert "has no version 99" in body["error"] and "(it has 1..12)" in body["error"]

    with_client(index_path, check)


def test_a_dns_rebinding_request_gets_no_data(index_path: Path) -> None:
    """A page on evil.example whose name then resolves to 127.0.0.1 sends Host: evil.example."""

    async def check(client: TestClient[Any, Any]) -> None:
        port = client.server.port
        for path in ("/", "/api/pods", "/api/namespace?namespace=shop", "/static/app.js"):
            response = await client.get(path, headers={"Host": f"evil.example:{port}"})
            text = await response.text()
            assert response.status == 421, text
            assert "web" not in text and "shop" not in text and "function" not in text
        assert (await client.get("/api/pods", headers={"Host": f"localhost:{port}"})).status == 200

    with_client(index_path, check)


def test_it_is_read_only(index_path: Path) -> None:
    async def check(client: TestClient[Any, Any]) -> None:
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            response = await client.request(method, "/api/pods")
            assert response.status == 405 and response.headers["Allow"] == "GET,HEAD"

    with_client(index_path, check)


def test_run_ui_serves_until_stopped_then_closes_the_follower_and_the_index(index_path: Path) -> None:
    events: list[str] = []

    class Closing(SqliteIndex):
        def close(self) -> None:
            events.append("index closed")
            super().close()

    async def follow(stop: asyncio.Event) -> None:
        events.append("following")
        await stop.wait()
        events.append("follower stopped")

    async def go() -> None:
        stop = asyncio.Event()
        urls: list[str] = []
        task = asyncio.create_task(
            run_ui(
                lambda: Closing(index_path, read_only=True),
                Listen("127.0.0.1", 0, True),
                stop,
                follow=follow,
                ready=urls.append,
            )
        )
        await asyncio.to_thread(wait_for, lambda: urls, 10, what="the UI to listen")
        from aiohttp import ClientSession

        async with ClientSession() as session, session.get(urls[0] + "api/info") as response:
            assert (await response.json())["refresh"] == "following the topics"
        async with ClientSession() as session, session.get(urls[0] + "api/namespaces") as response:
            assert response.status == 200
        stop.set()
        await asyncio.wait_for(task, 10)
        assert events == ["following", "follower stopped", "index closed"]
        async with ClientSession() as session:
            with pytest.raises(OSError):
                await session.get(urls[0])

    asyncio.run(go())
