"""Probe reactions end to end, on the real broker and apiserver with the process runtime.

Readiness flips Ready in the apiserver, a failing liveness probe restarts its container, and a slow
starter guarded by a startup probe is not killed by its liveness probe before it has started. The probes
are exec probes on files the test creates and removes, so the test decides when they pass. The rules
are docs/kubelet-rules.md's "Probe results in the status" and "Reacting to results".
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from podledger.config import Settings
from podledger.types import JSONDict
from tests import pods
from tests.support import wait_for
from tests.support.node import container_status, pod_status, start_node

pytestmark = [pytest.mark.kafka, pytest.mark.kube]


def exec_probe(path: Path, **fields: Any) -> JSONDict:
    return {"exec": {"command": ["test", "-f", str(path)]}, "periodSeconds": 1, **fields}


def create(kube: Any, node: str, name: str, container: JSONDict) -> str:
    """A pod whose one container "main" sleeps, with `container`'s further fields (its probes)."""
    # As the test's own user: its exec probes test files under the test's private temp directory.
    run_as = {"securityContext": {"runAsUser": os.getuid(), "runAsGroup": os.getgid()}}
    main = pods.container("main", "busybox", command=["sleep", "1000"], **run_as, **container)
    pod = kube.create_pod(pods.pod([main], name=name, uid=None, node=node, terminationGracePeriodSeconds=2))
    return str(pod["metadata"]["uid"])


def condition(status: JSONDict, kind: str) -> str | None:
    return next((c["status"] for c in status.get("conditions") or [] if c["type"] == kind), None)


def test_probes_drive_ready_restarts_and_startup(
    settings: Settings, kubeconfig: str, podledger_process: Any, tmp_path: Path
) -> None:
    kube, proc, _ = start_node(settings, kubeconfig, podledger_process, tmp_path / "runtime")
    suffix = uuid.uuid4().hex[:6]
    ready_file, alive_file, started_file = tmp_path / "ready", tmp_path / "alive", tmp_path / "started"
    alive_file.touch()

    flipper = f"flip-{suffix}"
    create(kube, settings.node, flipper, {"readinessProbe": exec_probe(ready_file)})
    liveness = f"live-{suffix}"
    create(kube, settings.node, liveness, {"livenessProbe": exec_probe(alive_file, failureThreshold=1)})
    slow = f"slow-{suffix}"
    create(
        kube,
        settings.node,
        slow,
        {
            # Liveness would fail at once; only the startup probe's success lets it run.
            "livenessProbe": exec_probe(started_file, failureThreshold=1),
            "startupProbe": exec_probe(started_file, failureThreshold=60),
        },
    )

    def ready_is(name: str, value: str) -> Any:
        def check() -> Any:
            status = pod_status(kube, name)
            ok = condition(status, "Ready") == value and condition(status, "ContainersReady") == value
            return status if ok and status.get("phase") == "Running" else None

        return check

    # Readiness: False until the file exists, then True, False, True as the test flips it.
    status = wait_for(ready_is(flipper, "False"), timeout=60, what="flip running, not ready", alive=proc)
    assert container_status(status, "main")["ready"] is False
    ready_file.touch()
    status = wait_for(ready_is(flipper, "True"), timeout=30, what="flip Ready True", alive=proc)
    assert container_status(status, "main")["ready"] is True
    ready_file.unlink()
    wait_for(ready_is(flipper, "False"), timeout=30, what="flip Ready False again", alive=proc)
    ready_file.touch()
    status = wait_for(ready_is(flipper, "True"), timeout=30, what="flip Ready True again", alive=proc)
    assert container_status(status, "main")["restartCount"] == 0  # readiness never restarts anything

    # The slow starter has been failing its startup probe all along and was never killed.
    slow_main = container_status(pod_status(kube, slow), "main")
    assert slow_main["restartCount"] == 0 and slow_main["started"] is False
    assert "running" in slow_main["state"]

    # Liveness: a container whose probe starts failing is killed and restarted.
    live_main = container_status(pod_status(kube, liveness), "main")
    assert live_main["restartCount"] == 0 and "running" in live_main["state"]
    alive_file.unlink()
    restarted = wait_for(
        lambda: (c := container_status(pod_status(kube, liveness), "main")).get("restartCount", 0) >= 1 and c,
        timeout=40,
        what="the liveness failure restarting the container",
        alive=proc,
    )
    # Killed by SIGTERM from the worker: sleep exits 143.
    assert restarted["lastState"]["terminated"]["exitCode"] in (137, 143)
    assert restarted["containerID"] != live_main["containerID"]
    alive_file.touch()  # let the new instance live

    # The slow starter starts once its startup probe passes; it was not restarted on the way.
    started_at = time.monotonic()
    started_file.touch()
    slow_main = wait_for(
        lambda: (c := container_status(pod_status(kube, slow), "main")).get("started") and c,
        timeout=30,
        what="the slow starter started",
        alive=proc,
    )
    assert slow_main["restartCount"] == 0 and slow_main["ready"] is True
    assert time.monotonic() - started_at < 30
