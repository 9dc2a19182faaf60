"""`podledger serve` on the real broker, with the Python `kubernetes` client as the judge: list,
get, watch (resume, bookmarks, 410 Gone), a past moment, and the guards (read-only, bearer token,
loopback)."""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import pytest
from kubernetes import client, config, watch

from podledger.config import Settings
from podledger.read.client import decode_position, encode_position
from podledger.streams.topics import DAY_MS, ensure_topics
from tests import pods
from tests.support import wait_for
from tests.support.kafka import publish_desired, publish_versions
from tests.support.processes import PodledgerProcess, serve_kubeconfig, start_serve

pytestmark = pytest.mark.kafka

make_pod = partial(pods.pod, ["main"], image="app:1")


def desired(name: str, node: str = "n1", app: str = "web", namespace: str = "default") -> dict:
    meta = {"labels": {"app": app}, "creationTimestamp": "2026-01-01T00:00:00Z"}
    return make_pod(name=name, uid=f"uid-{name}", node=node, namespace=namespace, metadata=meta)


def version(pod: dict, n: int, ready: str = "True"):
    return pods.versioned(pod, pod["spec"]["nodeName"], n, pods.running_status(ready=ready))


def api(url: str, tmp_path: Path, token: str = "") -> client.CoreV1Api:
    api_client = config.new_client_from_config(serve_kubeconfig(url, tmp_path / "kubeconfig", token))
    return client.CoreV1Api(api_client)


def seed(settings: Settings, *pairs: tuple[dict, int], removed: tuple[dict, ...] = ()) -> None:
    async def go() -> None:
        await ensure_topics(settings)
        await publish_desired(settings, *{p["metadata"]["uid"]: p for p, _ in pairs}.values())
        await publish_versions(
            settings,
            *(version(p, n) for p, n in pairs),
            removed=tuple((p["metadata"]["uid"], p["spec"]["nodeName"]) for p in removed),
        )

    asyncio.run(go())


class Collector:
    """A kubernetes-client watch in a thread, its events kept."""

    def __init__(self, call: Callable[..., object], *args: object, **kwargs: object) -> None:
        self.events: list[dict] = []
        self.error: Exception | None = None
        self.watch = watch.Watch()
        self.thread = threading.Thread(target=self._run, args=(call, args, kwargs), daemon=True)
        self.thread.start()

    def _run(self, call: Callable[..., object], args: tuple, kwargs: dict) -> None:
        try:
            for event in self.watch.stream(call, *args, **kwargs):
                self.events.append(event)
        except Exception as exc:
            self.error = exc

    def kinds(self) -> list[tuple[str, str]]:
        return [(e["type"], e["raw_object"]["metadata"].get("name", "")) for e in self.events]


def test_list_get_and_watch_with_the_kubernetes_client(
    settings: Settings, podledger_process: Callable[..., PodledgerProcess], tmp_path: Path
) -> None:
    web1, web2, db = (
        desired("web-1"),
        desired("web-2", node="n2"),
        desired("db-1", app="db", namespace="data"),
    )
    seed(settings, (web1, 1), (web1, 2), (web2, 1), (db, 1))
    _, url = start_serve(podledger_process, settings, "--bookmark-s", "0.5")
    v1 = api(url, tmp_path)

    listed = v1.list_pod_for_all_namespaces()
    assert sorted(p.metadata.name for p in listed.items) == ["db-1", "web-1", "web-2"]
    assert {p.metadata.name for p in v1.list_namespaced_pod("default", label_selector="app=web").items} == {
        "web-1", "web-2"
    }  # fmt: skip
    on_n2 = v1.list_pod_for_all_namespaces(field_selector="spec.nodeName=n2")
    assert [p.metadata.name for p in on_n2.items] == ["web-2"]
    pod = v1.read_namespaced_pod("web-1", "default")
    assert pod.metadata.labels == {"app": "web"} and pod.status.phase == "Running"
    assert pod.metadata.annotations["podledger.io/status-version"] == "2"
    with pytest.raises(client.ApiException) as missing:
        v1.read_namespaced_pod("nope", "default")
    assert missing.value.status == 404

    watcher = Collector(
        v1.list_namespaced_pod, "default", resource_version=listed.metadata.resource_version,
        allow_watch_bookmarks=True, timeout_seconds=20,
    )  # fmt: skip
    time.sleep(1)
    web3 = desired("web-3")
    seed(settings, (web1, 3), (web3, 1), (db, 2), removed=(web2,))
    wait_for(lambda: {"MODIFIED", "ADDED", "DELETED", "BOOKMARK"} <= {t for t, _ in watcher.kinds()}, 20,
             what="the watch's events")  # fmt: skip
    changes = [(t, n) for t, n in watcher.kinds() if t != "BOOKMARK"]
    assert sorted(changes) == [("ADDED", "web-3"), ("DELETED", "web-2"), ("MODIFIED", "web-1")], (
        "db-1 is elsewhere"
    )
    bookmark_rv = next(e for e in watcher.events if e["type"] == "BOOKMARK")["raw_object"]["metadata"]
    assert decode_position(bookmark_rv["resourceVersion"]).partitions == settings.partitions
    watcher.watch.stop()

    # Resuming from the first change's resourceVersion gives the changes after it, and no more.
    first = next(e for e in watcher.events if e["type"] != "BOOKMARK")
    resumed = list(
        watch.Watch().stream(
            v1.list_namespaced_pod, "default",
            resource_version=first["raw_object"]["metadata"]["resourceVersion"], timeout_seconds=2,
        )
    )  # fmt: skip
    assert sorted((e["type"], e["object"].metadata.name) for e in resumed) == sorted(
        c for c in changes if c[1] != first["raw_object"]["metadata"]["name"]
    )
    # A watch from "now" (no resourceVersion) starts with the current pods as ADDED.
    fresh = list(watch.Watch().stream(v1.list_namespaced_pod, "default", timeout_seconds=1))
    assert sorted((e["type"], e["object"].metadata.name) for e in fresh) == [
        ("ADDED", "web-1"),
        ("ADDED", "web-3"),
    ]


def test_a_point_the_topics_no_longer_hold_is_410_gone(
    settings: Settings, podledger_process: Callable[..., PodledgerProcess], tmp_path: Path
) -> None:
    web = desired("web-1")
    seed(settings, (web, 1))
    _, url = start_serve(podledger_process, settings)
    v1 = api(url, tmp_path)
    rv = v1.list_pod_for_all_namespaces().metadata.resource_version
    position = decode_position(rv)
    stale = encode_position(replace(position, safe_ms=position.safe_ms - 2 * DAY_MS))
    with pytest.raises(client.ApiException) as gone:
        list(watch.Watch().stream(v1.list_pod_for_all_namespaces, resource_version=stale))
    assert gone.value.status == 410
    with urllib.request.urlopen(
        f"{url}/api/v1/pods?watch=true&resourceVersion={stale}", timeout=10
    ) as response:
        assert response.status == 200
        event = json.loads(response.readline())
    assert event["type"] == "ERROR"
    assert (event["object"]["kind"], event["object"]["code"], event["object"]["reason"]) == (
        "Status",
        410,
        "Expired",
    )


def test_the_pods_at_a_past_moment(
    settings: Settings, podledger_process: Callable[..., PodledgerProcess], tmp_path: Path
) -> None:
    web, db = desired("web-1"), desired("db-1", app="db")
    seed(settings, (web, 1), (db, 1))
    time.sleep(1.5)
    between = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    time.sleep(1.5)
    seed(settings, (web, 2))
    asyncio.run(publish_desired(settings, db, op="REMOVE"))
    seed(settings, removed=(db,))
    _, url = start_serve(podledger_process, settings)
    then = api(f"{url}/at/{between}", tmp_path)
    pods_then = {p.metadata.name: p for p in then.list_pod_for_all_namespaces().items}
    assert sorted(pods_then) == ["db-1", "web-1"]
    assert pods_then["web-1"].metadata.annotations["podledger.io/status-version"] == "1"
    assert then.read_namespaced_pod("db-1", "default").metadata.labels == {"app": "db"}
    now = api(url, tmp_path)
    assert [(p.metadata.name, p.metadata.annotations["podledger.io/status-version"])
            for p in now.list_pod_for_all_namespaces().items] == [("web-1", "2")]  # fmt: skip
    with pytest.raises(client.ApiException) as watched:
        list(watch.Watch().stream(then.list_pod_for_all_namespaces, timeout_seconds=1))
    assert watched.value.status == 400


def request(url: str, method: str = "GET", token: str = "") -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, method=method, headers=headers), timeout=10
        ) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_serve_is_read_only_and_needs_its_token(
    settings: Settings, podledger_process: Callable[..., PodledgerProcess], tmp_path: Path
) -> None:
    web = desired("web-1")
    seed(settings, (web, 1))
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token-of-the-test-0123456789\n")
    _, url = start_serve(podledger_process, settings, "--token-file", str(token_file))
    pod_url = f"{url}/api/v1/namespaces/default/pods/web-1"
    assert request(pod_url) == 401
    assert request(pod_url, token="guess-0123456789abcdef") == 401
    assert request(pod_url, token="s3cret-token-of-the-test-0123456789") == 200
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        assert request(pod_url, method, token="s3cret-token-of-the-test-0123456789") == 405
    v1 = api(url, tmp_path, token="s3cret-token-of-the-test-0123456789")
    assert [p.metadata.name for p in v1.list_pod_for_all_namespaces().items] == ["web-1"]
    # HEAD of a list (written as a stream) answers the headers alone: the connection then serves
    # the next request, which a body after them would garble.
    conn = http.client.HTTPConnection(url.removeprefix("http://"), timeout=10)
    auth = {"Authorization": "Bearer s3cret-token-of-the-test-0123456789"}
    conn.request("HEAD", "/api/v1/pods", headers=auth)
    head = conn.getresponse()
    assert (head.status, head.read()) == (200, b"")
    conn.request("GET", "/api/v1/pods", headers=auth)
    got = conn.getresponse()
    assert got.status == 200 and [p["metadata"]["name"] for p in json.loads(got.read())["items"]] == ["web-1"]
    conn.close()
    # Beyond loopback without a token: refused at start.
    wide = podledger_process(
        ["serve", "--listen", "0.0.0.0:0"], env={"PODLEDGER_BOOTSTRAP": settings.bootstrap}
    )
    assert wide.proc.wait(60) == 2
    assert "beyond loopback" in wide.output()
