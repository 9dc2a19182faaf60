"""The apiserver source for real: pods bound to the node become ADD, UPDATE, RECONCILE, DELETE
and REMOVE ops on pod-updates, through the real broker; and a watch whose connection goes half-open
is noticed within its read timeout, reported on /healthz, and recovered on a fresh connection."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest
import yaml

from podledger.agents.kube import Kube
from podledger.agents.node import NodeAgent
from podledger.agents.runtime.sim import SimRuntime
from podledger.config import Settings
from podledger.local import free_port
from podledger.schemas import decode
from podledger.streams.topics import ensure_topics
from tests import pods
from tests.support import wait_for
from tests.support.kafka import read_topic
from tests.support.node import create_api_pod
from tests.support.processes import podledger_env

pytestmark = [pytest.mark.kafka, pytest.mark.kube]


def test_apiserver_changes_become_incremental_ops(
    settings: Settings, kubeconfig: str, podledger_process
) -> None:
    asyncio.run(ensure_topics(settings))
    kube = Kube.from_kubeconfig(kubeconfig)
    kube.ensure_node(settings.node)
    proc = podledger_process(
        ["run", "--roles", "source"],
        env=podledger_env(settings, kubeconfig),
    )
    name = f"src-{uuid.uuid4().hex[:6]}"
    pod = kube.create_pod(pods.pod(name=name, uid=None, node=settings.node, image="app:1"))
    # A pod on another node is none of this node's business.
    kube.create_pod(pods.pod(name=f"{name}-x", uid=None, node="elsewhere", image="app:1"))

    def ops() -> list[str]:
        return [
            decode("pod-updates", v).op
            for _, _, v in asyncio.run(read_topic(settings, "pod-updates", 0, idle=0.5))
        ]

    wait_for(lambda: ops() == ["ADD"], timeout=60, what="ADD", alive=proc)
    kube.request(
        "PATCH",
        Kube.pod_path("default", name),
        body={"metadata": {"labels": {"tier": "web"}}},
        content_type="application/strategic-merge-patch+json",
    )
    wait_for(lambda: ops() == ["ADD", "UPDATE"], timeout=30, what="UPDATE on a label change", alive=proc)
    kube.patch_pod_status("default", name, {"status": {"message": "hello"}})
    wait_for(
        lambda: ops() == ["ADD", "UPDATE", "RECONCILE"],
        timeout=30,
        what="RECONCILE on a status change",
        alive=proc,
    )
    kube.delete_pod("default", name, grace_seconds=30)
    wait_for(lambda: ops() == ["ADD", "UPDATE", "RECONCILE", "DELETE"], timeout=30, what="DELETE", alive=proc)
    kube.delete_pod("default", name, grace_seconds=0)
    # Shortening the grace period is itself a change (DELETE again) before the pod goes (REMOVE).
    final = wait_for(lambda: (o := ops()) and o[-1] == "REMOVE" and o, timeout=30, what="REMOVE", alive=proc)
    assert final[:4] == ["ADD", "UPDATE", "RECONCILE", "DELETE"] and set(final[4:-1]) <= {"DELETE"}
    updates = [
        decode("pod-updates", v) for _, _, v in asyncio.run(read_topic(settings, "pod-updates", 5, idle=0.5))
    ]
    assert {u.uid for u in updates} == {pod["metadata"]["uid"]} and {u.source for u in updates} == {"api"}
    assert updates[1].pod["metadata"]["labels"] == {"tier": "web"}
    assert updates[0].pod["metadata"]["annotations"]["kubernetes.io/config.source"] == "api"
    assert updates[3].pod["metadata"]["deletionTimestamp"]
    assert proc.stop() == 0, proc.output()


class Blackhole:
    """A TCP proxy to `target` that can stop forwarding without closing anything: what a client sees
    when a middlebox drops a connection's packets (half-open). Connections open when the blackhole
    starts, or opened while it lasts, stay silent for good; only those made after heal() forward."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.generation = 0  # a connection forwards while the proxy is open in its generation
        self.open = True
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def blackhole(self) -> None:
        self.open, self.generation = False, self.generation + 1

    def heal(self) -> None:
        self.open, self.generation = True, self.generation + 1

    def close(self) -> None:
        for sock in [self.listener, *self.sockets]:
            sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self.sockets += [client, upstream]
            generation = self.generation if self.open else -1  # opened in a blackhole: never forwards
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(src, dst, generation), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, generation: int) -> None:
        try:
            while data := src.recv(65536):
                while not (self.open and self.generation == generation):
                    time.sleep(0.05)  # held, neither forwarded nor refused
                dst.sendall(data)
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            return


def kubeconfig_through(kubeconfig: str, port: int, path: Path) -> str:
    """A copy of `kubeconfig` whose current cluster is reached on 127.0.0.1:`port` instead."""
    config = yaml.safe_load(Path(kubeconfig).read_text())
    context = next(c for c in config["contexts"] if c["name"] == config["current-context"])
    cluster = next(c for c in config["clusters"] if c["name"] == context["context"]["cluster"])["cluster"]
    server = urlsplit(cluster["server"])
    assert server.hostname == "127.0.0.1", "the proxy test needs the local apiserver"
    cluster["server"] = server._replace(netloc=f"127.0.0.1:{port}").geturl()
    ca = cluster.get("certificate-authority")
    if ca and not Path(ca).is_absolute():
        cluster["certificate-authority"] = str((Path(kubeconfig).parent / ca).resolve())
    path.write_text(orjson.dumps(config).decode())  # JSON is valid YAML
    return str(path)


async def _get(port: int, path: str) -> tuple[int, str]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
    await writer.drain()
    response = (await asyncio.wait_for(reader.read(), 10)).decode()
    writer.close()
    head, _, body = response.partition("\r\n\r\n")
    return int(head.split()[1]), body


async def _until(check: Callable[[], Awaitable[Any]], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := await check():
            return result
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def test_a_half_open_watch_is_noticed_reported_on_healthz_and_recovered(
    settings: Settings, kubeconfig: str, tmp_path: Path
) -> None:
    """The watch's read timeout notices a connection that stopped carrying bytes without closing;
    /healthz fails while the watch is down; a pod created meanwhile is seen once the network is back,
    through a new connection (the silent one never recovers)."""
    asyncio.run(ensure_topics(settings))
    direct = Kube.from_kubeconfig(kubeconfig)
    direct.ensure_node(settings.node)
    apiserver = urlsplit(direct.server)
    proxy = Blackhole((apiserver.hostname or "127.0.0.1", apiserver.port or 443))
    proxied = Kube.from_kubeconfig(
        kubeconfig_through(kubeconfig, proxy.port, tmp_path / "proxied.kubeconfig")
    )
    node_settings = replace(settings, runtime="sim", health_port=free_port(), api_watch_down_s=1.0)
    agent = NodeAgent(node_settings, SimRuntime(), kube=proxied)
    source = next(s for s in agent.sources if s.name == "api")
    # Each watch asks the server to end it after 2-3 s and reads with a 4-5 s timeout.
    source.watch_timeout_s = 2  # type: ignore[attr-defined]
    port = node_settings.health_port

    def seen(pod: dict[str, Any]) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            return pod["metadata"]["uid"] in source.current  # type: ignore[attr-defined]

        return check

    async def health(path: str = "/healthz") -> tuple[int, str]:
        return await _get(port, path)

    async def scenario() -> dict[str, float]:
        task = asyncio.ensure_future(agent.run())
        try:
            await asyncio.wait_for(agent.ready.wait(), 60)
            first = await asyncio.to_thread(
                create_api_pod, direct, settings.node, f"before-{uuid.uuid4().hex[:6]}"
            )
            await _until(seen(first), 30, "the pod created before the blackhole")
            assert await health() == (200, "ok\n")
            await asyncio.sleep(3)  # watches restart every 2-3 s: the source keeps up
            assert await health() == (200, "ok\n")

            proxy.blackhole()
            started = time.monotonic()
            second = await asyncio.to_thread(
                create_api_pod, direct, settings.node, f"during-{uuid.uuid4().hex[:6]}"
            )

            async def watch_down() -> tuple[int, str] | None:
                answer = await health()
                return answer if answer[0] == 500 else None

            _, body = await _until(watch_down, 20, "/healthz to report the watch down")
            noticed = time.monotonic() - started
            assert body.startswith("apiserver watch down for") and "Read timed out" in body, body
            assert await health("/healthz/pleg") == (200, "ok\n")
            assert (await health("/healthz/apiserver"))[0] == 500
            assert not await seen(second)()  # nothing passes the blackhole
            await asyncio.sleep(2)
            assert (await health())[0] == 500  # and it stays down while the network is

            proxy.heal()
            healed = time.monotonic()
            await _until(seen(second), 30, "the pod created during the blackhole")

            async def healthy() -> bool:
                return await health() == (200, "ok\n")

            await _until(healthy, 10, "/healthz to recover")
            return {"noticed": noticed, "recovered": time.monotonic() - healed}
        finally:
            proxy.close()  # the silent connections end now, so nothing waits for them
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    timings = asyncio.run(scenario())
    print("half-open watch timings:", timings)
    # Noticed within the read timeout (at most 5 s) plus the 1 s threshold and a poll.
    assert timings["noticed"] < 9, timings
    # Recovered within the back-off (at most 2 s here) plus one request through a fresh connection.
    assert timings["recovered"] < 15, timings
