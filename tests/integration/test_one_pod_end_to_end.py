"""One pod through the real apiserver, Kafka, fold and sink: created in the apiserver, it comes back
with the status the fold computed (docs/architecture.md, "The flow")."""

from __future__ import annotations

import asyncio
import uuid

import orjson
import pytest

from podledger.agents.kube import Kube
from podledger.config import Settings
from podledger.partitioner import partition_for_node
from podledger.schemas import decode
from podledger.streams.topics import ensure_topics
from podledger.types import JSONDict
from tests import pods
from tests.support import wait_for
from tests.support.kafka import read_topic
from tests.support.processes import podledger_env

pytestmark = [pytest.mark.kafka, pytest.mark.kube]


def test_pod_created_in_apiserver_gets_status_from_the_pipeline(
    settings: Settings, kubeconfig: str, podledger_process
) -> None:
    asyncio.run(ensure_topics(settings))
    kube = Kube.from_kubeconfig(kubeconfig)
    kube.ensure_node(settings.node)
    namespace = "default"
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    pod = kube.create_pod(
        pods.pod(
            ("main",), name=name, namespace=namespace, uid=None, node=settings.node, image="example/app:1"
        )
    )
    uid = pod["metadata"]["uid"]
    assert pod.get("status", {}).get("conditions") is None  # nobody has written status yet

    proc = podledger_process(
        ["run"],
        env=podledger_env(settings, kubeconfig, PODLEDGER_LOG_LEVEL="info"),
    )

    def scheduled_condition() -> JSONDict | None:
        status = kube.get_pod(namespace, name).get("status") or {}
        return next((c for c in status.get("conditions") or [] if c["type"] == "PodScheduled"), None)

    cond = wait_for(scheduled_condition, timeout=90, what="PodScheduled written by the sink", alive=proc)
    assert proc.proc.poll() is None, proc.output()
    api_status = kube.get_pod(namespace, name)["status"]
    assert cond["status"] == "True"
    assert api_status["phase"] == "Pending"
    assert api_status["startTime"]

    # The apiserver source published the pod to pod-updates, on the node's partition.
    partition = partition_for_node(settings.node, settings.partitions)
    updates = asyncio.run(read_topic(settings, "pod-updates", 1))
    p, key, value = updates[0]
    update = decode("pod-updates", value)
    assert (p, key, update.op, update.source, update.uid) == (partition, uid.encode(), "ADD", "api", uid)
    # The sink's own write comes back through the watch as a status-only change.
    assert [decode("pod-updates", v).op for _, _, v in updates[1:]] in ([], ["RECONCILE"])

    # The fold wrote version 1 to pod-status (and the history), with its cause.
    [(p, key, value)] = asyncio.run(read_topic(settings, "pod-status", 1))
    vs = decode("pod-status", value)
    assert (p, key, vs.uid, vs.version, vs.name, vs.node) == (
        partition,
        uid.encode(),
        uid,
        1,
        name,
        settings.node,
    )
    assert vs.status["phase"] == "Pending"
    assert vs.cause.type == "pod-updates:ADD" and vs.cause.topic == "pod-updates"
    # ... and the RECONCILE of its own write did not make a second version.
    [(_, _, history)] = asyncio.run(read_topic(settings, "pod-status-history", 1))
    assert orjson.loads(history) == orjson.loads(value)

    # The status in the apiserver is the one the fold computed.
    assert api_status["conditions"] == vs.status["conditions"]
    assert api_status["startTime"] == vs.status["startTime"]
    assert api_status["qosClass"] == vs.status["qosClass"] == "BestEffort"

    assert proc.stop() == 0, proc.output()
