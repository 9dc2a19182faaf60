"""The sink through an apiserver outage: the apiserver is stopped for 30 s while statuses keep
flowing; after it comes back every pod converges to its newest version, and nothing is lost."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import orjson
import pytest

from podledger import local
from podledger.agents.kube import Kube
from podledger.config import Settings
from podledger.streams.topics import ensure_topics
from podledger.types import JSONDict
from tests.pods import running_status, versioned
from tests.support import wait_for
from tests.support.kafka import publish_statuses, read_topic
from tests.support.node import create_api_pod

pytestmark = [pytest.mark.kafka, pytest.mark.kube]

PODS, VERSIONS, OUTAGE_S = 20, 6, 30


def test_apiserver_outage_then_every_pod_converges(
    settings: Settings, tmp_path: Path, podledger_process
) -> None:
    # An apiserver of its own, so the test may stop it (even when KUBECONFIG names a cluster).
    kube_handle = local.start_kube(tmp_path / "kube")
    try:
        asyncio.run(ensure_topics(settings))
        kube = Kube.from_kubeconfig(kube_handle.kubeconfig)
        pods = [create_api_pod(kube, settings.node) for _ in range(PODS)]

        def status(version: int) -> JSONDict:
            return {**running_status("True"), "message": f"version {version}"}

        env = {
            "PODLEDGER_BOOTSTRAP": settings.bootstrap,
            "KUBECONFIG": kube_handle.kubeconfig,
            "PODLEDGER_TOPIC_PREFIX": settings.topic_prefix,
            "PODLEDGER_PARTITIONS": str(settings.partitions),
            "PODLEDGER_NODE": settings.node,
            "PODLEDGER_SINK_RECONCILE_MS": "2000",
        }
        asyncio.run(publish_statuses(settings, *(versioned(p, settings.node, 1, status(1)) for p in pods)))
        proc = podledger_process(["run", "--roles", "sink"], env=env)

        def messages() -> set[str]:
            return {kube.get_pod("default", p["metadata"]["name"])["status"].get("message", "") for p in pods}

        wait_for(lambda: messages() == {"version 1"}, timeout=60, what="version 1 everywhere", alive=proc)

        kube_handle.stop_apiserver()
        started = time.monotonic()
        for version in range(2, VERSIONS + 1):  # statuses keep flowing while the apiserver is down
            asyncio.run(
                publish_statuses(
                    settings, *(versioned(p, settings.node, version, status(version)) for p in pods)
                )
            )
            time.sleep(OUTAGE_S / (VERSIONS - 1))
        assert time.monotonic() - started >= OUTAGE_S
        assert proc.proc.poll() is None, "the sink must survive the outage"
        kube_handle.start_apiserver()

        wait_for(
            lambda: messages() == {f"version {VERSIONS}"},
            timeout=120,
            what="the newest version everywhere",
            alive=proc,
        )
        # Nothing lost: the sink remembers the newest version of every pod as written.
        state = asyncio.run(read_topic(settings, "sink-state", PODS, idle=1.0))
        last = {k.decode(): orjson.loads(v)["version"] for _, k, v in state if v is not None}
        assert last == {p["metadata"]["uid"]: VERSIONS for p in pods}
        assert proc.stop() == 0, proc.output()
    finally:
        kube_handle.stop()
