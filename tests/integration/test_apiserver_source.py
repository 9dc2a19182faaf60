"""The apiserver source for real: pods bound to the node become ADD, UPDATE, RECONCILE, DELETE
and REMOVE ops on pod-updates, through the real broker."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from podledger.agents.kube import Kube
from podledger.config import Settings
from podledger.schemas import decode
from podledger.streams.topics import ensure_topics
from tests import pods
from tests.support import podledger_env, read_topic, wait_for

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
