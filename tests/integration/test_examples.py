"""The examples in examples/ do what they say, on the real broker: the Python consumer (with a
resume), the kcat one-liner, and the kubectl commands against `podledger serve`."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

from podledger.config import Settings
from podledger.streams.topics import ensure_topics
from tests import pods
from tests.support.kafka import publish_desired, publish_versions
from tests.support.processes import REPO_ROOT, PodledgerProcess, start_serve

pytestmark = pytest.mark.kafka

EXAMPLES = REPO_ROOT / "examples"
make_pod = partial(pods.pod, ["main"], image="app:1", node="n1")


def seed(settings: Settings, *statuses, announce: tuple[dict, ...] = ()) -> None:
    async def go() -> None:
        await ensure_topics(settings)
        await publish_desired(settings, *announce)
        await publish_versions(settings, *statuses)

    asyncio.run(go())


def example_env(settings: Settings, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PODLEDGER_")}
    return {
        **env,
        "PODLEDGER_BOOTSTRAP": settings.bootstrap,
        "PODLEDGER_TOPIC_PREFIX": settings.topic_prefix,
        "PODLEDGER_PARTITIONS": str(settings.partitions),
        **extra,
    }


def run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, env=env, cwd=cwd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )


def test_the_python_consumer_lists_follows_and_resumes(settings: Settings, tmp_path: Path) -> None:
    web, db = (
        make_pod(name="web-1", uid="uid-web", metadata={"labels": {"app": "web"}}),
        make_pod(name="db-1", uid="uid-db"),
    )
    seed(settings, pods.versioned(web, "n1", 1, pods.running_status()),
         pods.versioned(db, "n1", 1, pods.running_status()), announce=(web, db))  # fmt: skip
    env = example_env(settings)
    first = run(
        [sys.executable, str(EXAMPLES / "consumer.py"), "--labels", "app=web", "--max-changes", "2"],
        env,
        tmp_path,
    )
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == [
        "LISTED default/web-1 v1 phase=Running ready=True",
        "-- listed; following changes",
    ]
    token = (tmp_path / "token").read_text()
    seed(settings, pods.versioned(web, "n1", 2, pods.running_status(ready="False")))
    resumed = run(
        [sys.executable, str(EXAMPLES / "consumer.py"), "--resume", token, "--max-changes", "1"],
        env,
        tmp_path,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.splitlines() == ["MODIFIED default/web-1 v2 phase=Running ready=False"]


def test_the_kcat_one_liner_prints_the_latest_statuses(settings: Settings, tmp_path: Path) -> None:
    assert shutil.which("kcat"), "kcat is installed by `make test` (the os-tools step)"
    web = make_pod(name="web-1", uid="uid-web")
    seed(settings, pods.versioned(web, "n1", 1, pods.running_status()), announce=(web,))
    out = run(["sh", str(EXAMPLES / "kcat.sh")], example_env(settings), tmp_path)
    assert out.returncode == 0, out.stderr
    [line] = out.stdout.splitlines()
    _partition, offset, key, value = line.split(" ", 3)
    assert (offset, key) == ("0", "uid-web")
    assert '"name":"web-1"' in value and '"version":1' in value


def test_the_kubectl_commands_against_serve(
    settings: Settings,
    podledger_process: Callable[..., PodledgerProcess],
    kubectl_binary: str,
    tmp_path: Path,
) -> None:
    web = make_pod(name="web-1", uid="uid-web")
    seed(settings, pods.versioned(web, "n1", 1, pods.running_status()), announce=(web,))
    _, url = start_serve(podledger_process, settings)
    env = example_env(settings, SERVE_URL=url, KUBECTL=kubectl_binary, WATCH_S="3", AT="2026-01-01T00:00:00Z")
    out = run(["sh", str(EXAMPLES / "kubectl.sh")], env, tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert lines[1].split()[:4] == ["default", "web-1", "1/1", "Running"]
    assert '"kind": "List"' in out.stdout and '"uid": "uid-web"' in out.stdout
    assert any(line.split()[:3] == ["ADDED", "default", "web-1"] for line in lines), "the watch's first event"
    assert "No resources found" in out.stderr, "before the pod existed, the past has no pods"
