"""The real kubectl (built from the apiserver's module version) against `podledger serve`:
`get pods -A` (the server's Table), `-o json`, `get pod NAME`, `-w`, and a past moment."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import pytest

from podledger.config import Settings
from podledger.streams.topics import ensure_topics
from tests import pods
from tests.support import wait_for
from tests.support.kafka import publish_desired, publish_versions
from tests.support.processes import PodledgerProcess, serve_kubeconfig, start_serve

pytestmark = pytest.mark.kafka

make_pod = partial(pods.pod, ["main"], image="app:1")


def desired(name: str, namespace: str = "default") -> dict:
    created = datetime.fromtimestamp(time.time() - 600, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    meta = {"labels": {"app": name.split("-")[0]}, "creationTimestamp": created}
    return make_pod(name=name, uid=f"uid-{name}", node="n1", namespace=namespace, metadata=meta)


def crash_looping(pod: dict, version: int):
    status = pods.running_status(ready="False")
    status["containerStatuses"][0].update(
        restartCount=4, state={"waiting": {"reason": "CrashLoopBackOff"}}, ready=False
    )
    return pods.versioned(pod, "n1", version, status)


def publish(settings: Settings, *statuses, announce: tuple[dict, ...] = ()) -> None:
    async def go() -> None:
        await ensure_topics(settings)
        if announce:
            await publish_desired(settings, *announce)
        await publish_versions(settings, *statuses)

    asyncio.run(go())


def kubectl(binary: str, config: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [binary, "--kubeconfig", config, "--cache-dir", str(tmp_path / "kube-cache"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_kubectl_get_and_watch_pods(
    settings: Settings,
    podledger_process: Callable[..., PodledgerProcess],
    kubectl_binary: str,
    tmp_path: Path,
) -> None:
    web, db = desired("web-1"), desired("db-1", namespace="data")
    publish(settings, pods.versioned(web, "n1", 1, pods.running_status()),
            pods.versioned(db, "n1", 1, pods.running_status(ready="False")), announce=(web, db))  # fmt: skip
    before_crash = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    time.sleep(1.5)
    _, url = start_serve(podledger_process, settings)
    config = serve_kubeconfig(url, tmp_path / "kubeconfig")

    listed = kubectl(kubectl_binary, config, tmp_path, "get", "pods", "-A")
    assert listed.returncode == 0, listed.stderr
    lines = [line.split() for line in listed.stdout.splitlines()]
    assert lines[0] == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert sorted(lines[1:]) == [["data", "db-1", "0/1", "Running", "0", "10m"],
                                 ["default", "web-1", "1/1", "Running", "0", "10m"]]  # fmt: skip

    as_json = kubectl(kubectl_binary, config, tmp_path, "get", "pods", "-A", "-o", "json")
    assert as_json.returncode == 0, as_json.stderr
    items = {p["metadata"]["name"]: p for p in json.loads(as_json.stdout)["items"]}
    assert items["web-1"]["metadata"]["labels"] == {"app": "web"}
    assert items["web-1"]["status"]["containerStatuses"][0]["ready"] is True
    assert items["db-1"]["spec"]["nodeName"] == "n1"

    one = kubectl(kubectl_binary, config, tmp_path, "get", "pod", "web-1", "-o", "wide")
    assert one.stdout.split("\n")[1].split()[:3] == ["web-1", "1/1", "Running"]
    assert "n1" in one.stdout
    missing = kubectl(kubectl_binary, config, tmp_path, "get", "pod", "nope")
    assert missing.returncode != 0 and 'pods "nope" not found' in missing.stderr
    refused = kubectl(kubectl_binary, config, tmp_path, "delete", "pod", "web-1")
    assert refused.returncode != 0

    watch_out = tmp_path / "watch.out"
    with open(watch_out, "w") as out:
        watcher = subprocess.Popen(
            [kubectl_binary, "--kubeconfig", config, "--cache-dir", str(tmp_path / "kube-cache"),
             "get", "pods", "-w", "--output-watch-events"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            wait_for(lambda: "web-1" in watch_out.read_text(), 30, what="kubectl's list")
            publish(settings, crash_looping(web, 2))
            wait_for(lambda: "CrashLoopBackOff" in watch_out.read_text(), 30, what="kubectl -w's change")
        finally:
            watcher.terminate()
            watcher.wait(10)
    changed = [line.split() for line in watch_out.read_text().splitlines() if "CrashLoopBackOff" in line]
    assert changed[0][:5] == ["MODIFIED", "web-1", "0/1", "CrashLoopBackOff", "4"]

    # The past: before the crash loop, web-1 was ready.
    then = serve_kubeconfig(f"{url}/at/{before_crash}", tmp_path / "kubeconfig-then")
    past = kubectl(kubectl_binary, then, tmp_path, "get", "pods")
    assert past.returncode == 0, past.stderr
    assert past.stdout.splitlines()[1].split()[:3] == ["web-1", "1/1", "Running"]
    now = kubectl(kubectl_binary, config, tmp_path, "get", "pods")
    assert now.stdout.splitlines()[1].split()[:4] == ["web-1", "0/1", "CrashLoopBackOff", "4"]
