"""Pods run as real processes, end to end, up to their graceful deletion (docs/kubelet-rules.md,
"Deleting a pod from end to end").

One `podledger run --roles fold,node,sink` process with the process runtime serves the node; the test
creates pods in the real apiserver, watches their status there, and checks the processes themselves
through the runtime's state file (pids) and the operating system.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from podledger.agents.kube_client import KubeError
from podledger.config import Settings
from podledger.local import alive, free_port
from podledger.schemas import decode
from podledger.types import JSONDict
from tests import pods
from tests.support import wait_for
from tests.support.kafka import read_topic
from tests.support.node import container_status, pod_status, start_node

pytestmark = [pytest.mark.kafka, pytest.mark.kube]


def test_process_pods_run_restart_fail_and_are_deleted_gracefully(
    settings: Settings, kubeconfig: str, podledger_process: Any, tmp_path: Path
) -> None:
    kube, proc, runtime = start_node(settings, kubeconfig, podledger_process, tmp_path / "runtime")
    port = free_port()
    web = f"web-{uuid.uuid4().hex[:6]}"
    pod = kube.create_pod(
        pods.pod(
            [
                pods.container(
                    "server",
                    "python:3.11",
                    command=[sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                    # As the test's own user: this interpreter may sit in a directory only it can enter.
                    securityContext={"runAsUser": os.getuid(), "runAsGroup": os.getgid()},
                ),
                pods.container("once", "busybox", command=["sh", "-c", "echo done"]),
                # Ignores SIGTERM (the ignore is inherited by sleep): only the grace period's SIGKILL ends it.
                pods.container(
                    "stubborn", "busybox", command=["sh", "-c", "trap '' TERM; sleep 1000 & wait"]
                ),
            ],
            name=web,
            uid=None,
            node=settings.node,
            restart_policy="OnFailure",
            terminationGracePeriodSeconds=30,
        )
    )
    uid = pod["metadata"]["uid"]

    # Running, with container states that match the processes.
    def running() -> JSONDict | None:
        status = pod_status(kube, web)
        server, once = container_status(status, "server"), container_status(status, "once")
        ok = (
            status.get("phase") == "Running"
            and "running" in server.get("state", {})
            and once.get("state", {}).get("terminated", {}).get("reason") == "Completed"
        )
        return status if ok else None

    status = wait_for(running, timeout=90, what="the pod Running in the apiserver", alive=proc)
    assert container_status(status, "once")["state"]["terminated"]["exitCode"] == 0
    assert status["podIP"] == "127.0.0.1"
    server_cs = container_status(status, "server")
    server = runtime.running(uid, "server")
    assert server is not None and alive(server["pid"])
    assert server_cs["containerID"] == f"process://{server['id']}"
    assert server_cs["restartCount"] == 0
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).read()
    assert b"Directory listing" in body

    # Killing the server raises restartCount and shows the real exit code (SIGKILL: 137).
    os.killpg(server["pid"], signal.SIGKILL)

    def restarted() -> JSONDict | None:
        cs = container_status(pod_status(kube, web), "server")
        return cs if cs.get("restartCount") == 1 and "running" in cs.get("state", {}) else None

    cs = wait_for(restarted, timeout=60, what="the server restarted", alive=proc)
    assert cs["lastState"]["terminated"]["exitCode"] == 137
    assert cs["lastState"]["terminated"]["reason"] == "Error"
    assert cs["containerID"] != server_cs["containerID"]
    new_server = runtime.running(uid, "server")
    assert new_server is not None and new_server["id"] != server["id"] and alive(new_server["pid"])
    assert not alive(server["pid"])

    # A restartPolicy Never pod whose only container exits 1 ends Failed.
    failing = f"fail-{uuid.uuid4().hex[:6]}"
    kube.create_pod(
        pods.pod(
            [pods.container("main", "busybox", command=["sh", "-c", "exit 1"])],
            name=failing,
            uid=None,
            node=settings.node,
            restart_policy="Never",
        )
    )
    status = wait_for(
        lambda: (s := pod_status(kube, failing)).get("phase") == "Failed" and s,
        timeout=60,
        what="the Never pod Failed",
        alive=proc,
    )
    terminated = container_status(status, "main")["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (1, "Error")
    assert container_status(status, "main")["restartCount"] == 0

    # Deleting with a grace period stops every process within it; then the sink deletes the pod.
    pids = [c["pid"] for c in runtime.containers(uid) if c["state"] == "running"]
    assert len(pids) == 2  # server and stubborn
    grace = 4
    deleted_at = time.monotonic()
    kube.delete_pod("default", web, grace_seconds=grace)
    wait_for(
        lambda: not any(alive(pid) for pid in pids),
        timeout=grace + 10,
        interval=0.1,
        what="the pod's processes gone",
        alive=proc,
    )
    stopped_after = time.monotonic() - deleted_at
    # The stubborn container ignores SIGTERM, so it took the grace period's SIGKILL; within the grace
    # period (plus a relist and a watch event of slack).
    assert stopped_after <= grace + 3, stopped_after

    def gone() -> bool:
        try:
            kube.get_pod("default", web)
        except KubeError as exc:
            return exc.not_found
        return False

    wait_for(gone, timeout=60, what="the pod deleted from the apiserver by the sink", alive=proc)
    history = [
        decode("pod-status-history", v)
        for _, _, v in asyncio.run(read_topic(settings, "pod-status-history", 1))
    ]
    versions = {vs.version: vs for vs in history if vs.uid == uid}
    deletions = [
        decode("pod-deletions", v) for _, _, v in asyncio.run(read_topic(settings, "pod-deletions", 1))
    ]
    deletion = next(d for d in deletions if d.uid == uid)
    assert (deletion.name, deletion.node) == (web, settings.node)
    # The sink deleted a version that was terminal and finished (the worker had terminated the pod).
    final = versions[deletion.version]
    print({v: (vs.cause.type, vs.status["phase"], vs.finished) for v, vs in versions.items()})
    assert final.status["phase"] in ("Succeeded", "Failed") and final.finished, final
    assert not final.could_have_running_containers
    # Once the pod is removed from the config, the runtime forgets it too.
    wait_for(lambda: runtime.containers(uid) == [], timeout=15, what="the runtime forgot the pod", alive=proc)
