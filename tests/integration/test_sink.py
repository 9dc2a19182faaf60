"""The sink as the writing half of the status manager (syncBatch and syncPod in
status_manager.go), on the real apiserver and broker; docs/kubelet-rules.md, "Sink and API sync"."""

from __future__ import annotations

import asyncio
import time
import uuid

import orjson
import pytest

from podledger.agents.kube import Kube
from podledger.agents.kube_client import KubeError
from podledger.config import Settings
from podledger.schemas import decode
from podledger.streams.topics import ensure_topics
from podledger.types import CONFIG_MIRROR_ANNOTATION, JSONDict
from tests import pods
from tests.pods import API_TIME, api_condition, running_status, versioned
from tests.support import wait_for
from tests.support.kafka import publish_statuses, read_topic
from tests.support.node import create_api_pod

pytestmark = [pytest.mark.kafka, pytest.mark.kube]


@pytest.fixture(params=["get", "watch"])
def sink_env(settings: Settings, kubeconfig: str, request: pytest.FixtureRequest) -> dict[str, str]:
    """The sink's environment; every test runs with a GET per write (as the kubelet) and with
    pods read from the sink's watch cache."""
    asyncio.run(ensure_topics(settings))
    return {
        "PODLEDGER_BOOTSTRAP": settings.bootstrap,
        "KUBECONFIG": kubeconfig,
        "PODLEDGER_TOPIC_PREFIX": settings.topic_prefix,
        "PODLEDGER_PARTITIONS": str(settings.partitions),
        "PODLEDGER_NODE": settings.node,
        "PODLEDGER_SINK_READ": request.param,
        "PODLEDGER_SINK_RECONCILE_MS": "1000",
        "PODLEDGER_LOG_LEVEL": "info",
    }


def api_conditions(kube: Kube, pod: JSONDict) -> dict[str, str]:
    status = kube.get_pod("default", pod["metadata"]["name"]).get("status") or {}
    return {c["type"]: c["status"] for c in status.get("conditions") or []}


def test_sync_pod_patches_and_remembers_the_written_version(
    settings: Settings, kubeconfig: str, sink_env, podledger_process
) -> None:
    kube = Kube.from_kubeconfig(kubeconfig)
    pod = create_api_pod(kube, settings.node)
    asyncio.run(
        publish_statuses(
            settings,
            versioned(pod, settings.node, 1, running_status("False")),
            versioned(pod, settings.node, 2, running_status("True")),
        )
    )
    proc = podledger_process(["run", "--roles", "sink"], env=sink_env)
    wait_for(
        lambda: api_conditions(kube, pod).get("Ready") == "True", timeout=60, what="Ready=True", alive=proc
    )
    api = kube.get_pod("default", pod["metadata"]["name"])["status"]
    assert api["phase"] == "Running" and api["containerStatuses"][0]["state"] == {
        "running": {"startedAt": API_TIME}
    }
    # The last written version is kept in sink-state (only the newest version was written: coalescing).
    state = wait_for(
        lambda: asyncio.run(read_topic(settings, "sink-state", 1, idle=0.5)), timeout=30, what="sink-state"
    )
    assert [(k.decode(), orjson.loads(v)) for _, k, v in state][-1] == (
        pod["metadata"]["uid"],
        {"version": 2, "api_uid": pod["metadata"]["uid"]},
    )
    assert proc.stop() == 0


def test_sync_pod_checks_mismatched_uid_and_keeps_other_conditions(
    settings: Settings, kubeconfig: str, sink_env, podledger_process
) -> None:
    kube = Kube.from_kubeconfig(kubeconfig)
    old = create_api_pod(kube, settings.node)
    name = old["metadata"]["name"]
    kube.delete_pod("default", name, grace_seconds=0)
    wait_for(lambda: _gone(kube, name), timeout=30, what="old pod gone")
    recreated = create_api_pod(kube, settings.node, name=name)
    # Another controller owns a condition of the recreated pod.
    kube.patch_pod_status(
        "default", name, {"status": {"conditions": [api_condition("example.com/feature", "True")]}}
    )
    stale = versioned(old, settings.node, 5, running_status("True"))
    fresh = versioned(recreated, settings.node, 1, running_status("False"))
    asyncio.run(publish_statuses(settings, stale, fresh))
    proc = podledger_process(["run", "--roles", "sink"], env=sink_env)
    wait_for(
        lambda: api_conditions(kube, recreated).get("Ready") == "False",
        timeout=60,
        what="fresh status",
        alive=proc,
    )
    time.sleep(2)  # give the stale status every chance to be (wrongly) written
    conditions = api_conditions(kube, recreated)
    assert conditions["Ready"] == "False" and conditions["example.com/feature"] == "True"
    assert proc.stop() == 0


def test_reconcile_pod_status_restores_a_drifted_kubelet_condition(
    settings: Settings, kubeconfig: str, sink_env, podledger_process
) -> None:
    kube = Kube.from_kubeconfig(kubeconfig)
    pod = create_api_pod(kube, settings.node)
    asyncio.run(publish_statuses(settings, versioned(pod, settings.node, 1, running_status("True"))))
    proc = podledger_process(["run", "--roles", "sink"], env=sink_env)
    wait_for(
        lambda: api_conditions(kube, pod).get("Ready") == "True", timeout=60, what="Ready=True", alive=proc
    )
    # Someone else flips a kubelet-owned condition; the sink puts it back.
    kube.patch_pod_status(
        "default", pod["metadata"]["name"], {"status": {"conditions": [api_condition("Ready", "False")]}}
    )
    assert api_conditions(kube, pod)["Ready"] == "False"
    wait_for(
        lambda: api_conditions(kube, pod).get("Ready") == "True",
        timeout=30,
        what="drift repaired",
        alive=proc,
    )
    assert proc.stop() == 0


def test_delete_pod_finished(settings: Settings, kubeconfig: str, sink_env, podledger_process) -> None:
    kube = Kube.from_kubeconfig(kubeconfig)
    pod = create_api_pod(kube, settings.node)
    name = pod["metadata"]["name"]
    kube.delete_pod(
        "default", name, grace_seconds=30
    )  # the apiserver only marks it: a kubelet must finish it
    assert kube.get_pod("default", name)["metadata"]["deletionTimestamp"]
    failed = {
        **running_status("False"),
        "phase": "Failed",
        "containerStatuses": [
            {
                "name": "main",
                "ready": False,
                "restartCount": 0,
                "image": "app:1",
                "imageID": "",
                "state": {"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown"}},
                "lastState": {},
            }
        ],
    }
    asyncio.run(
        publish_statuses(
            settings, versioned(pod, settings.node, 3, failed, running=False, finished=True, deleting=True)
        )
    )
    proc = podledger_process(["run", "--roles", "sink"], env=sink_env)
    wait_for(lambda: _gone(kube, name), timeout=60, what="the finished pod deleted", alive=proc)
    [(_, key, value)] = asyncio.run(read_topic(settings, "pod-deletions", 1, idle=0.5))
    deletion = decode("pod-deletions", value)
    assert key.decode() == pod["metadata"]["uid"]
    assert (deletion.name, deletion.version, deletion.node) == (name, 3, settings.node)
    assert proc.stop() == 0


def test_do_not_delete_mirror_pods(settings: Settings, kubeconfig: str, sink_env, podledger_process) -> None:
    kube = Kube.from_kubeconfig(kubeconfig)
    kube.ensure_node(settings.node)
    name = f"mirror-{uuid.uuid4().hex[:6]}"
    static_uid = f"static-{uuid.uuid4()}"  # a static pod's UID is its config hash, named by its mirror
    mirror = kube.create_pod(
        pods.pod(
            ("main",),
            name=name,
            uid=None,
            node=settings.node,
            image="app:1",
            annotations={CONFIG_MIRROR_ANNOTATION: static_uid},
            source="file",
        )
    )
    kube.delete_pod("default", name, grace_seconds=30)
    static = {**mirror, "metadata": {**mirror["metadata"], "uid": static_uid}}
    failed = {**running_status("False"), "phase": "Failed"}
    vs = versioned(
        static,
        settings.node,
        1,
        failed,
        running=False,
        finished=True,
        static=True,
        mirror_uid=mirror["metadata"]["uid"],
    )
    asyncio.run(publish_statuses(settings, vs))
    proc = podledger_process(["run", "--roles", "sink"], env=sink_env)
    wait_for(
        lambda: kube.get_pod("default", name)["status"].get("phase") == "Failed",
        timeout=60,
        what="the mirror's status written",
        alive=proc,
    )
    time.sleep(2)
    assert kube.get_pod("default", name)["metadata"]["uid"] == mirror["metadata"]["uid"]  # still there
    assert proc.stop() == 0


def _gone(kube: Kube, name: str) -> bool:
    try:
        kube.get_pod("default", name)
    except KubeError as exc:
        return exc.not_found
    return False


def test_TestStaleUpdates_not_written_again_after_a_restart(
    settings: Settings, kubeconfig: str, sink_env, podledger_process
) -> None:
    """TestStaleUpdates (status_manager_test.go) across a sink restart: a version already written is
    not written again, even by a new sink; a newer one is."""
    kube = Kube.from_kubeconfig(kubeconfig)
    pod = create_api_pod(kube, settings.node)
    asyncio.run(publish_statuses(settings, versioned(pod, settings.node, 2, running_status("True"))))
    env = {**sink_env, "PODLEDGER_SINK_RECONCILE_MS": "3600000"}  # no reconcile: only versions count
    first = podledger_process(["run", "--roles", "sink"], env=env)
    wait_for(
        lambda: api_conditions(kube, pod).get("Ready") == "True", timeout=60, what="v2 written", alive=first
    )
    wait_for(
        lambda: asyncio.run(read_topic(settings, "sink-state", 1, idle=0.5)), timeout=30, what="sink-state"
    )
    assert first.stop() == 0
    # Behind the sink's back the API copy changes; a sink that forgot v2 would write it again.
    kube.patch_pod_status(
        "default", pod["metadata"]["name"], {"status": {"conditions": [api_condition("Ready", "False")]}}
    )
    second = podledger_process(["run", "--roles", "sink"], env=env)
    # Once the new sink has written another pod's status, it has read (and skipped) ours.
    other = create_api_pod(kube, settings.node)
    asyncio.run(publish_statuses(settings, versioned(other, settings.node, 1, running_status("True"))))
    wait_for(
        lambda: api_conditions(kube, other).get("Ready") == "True", timeout=60, what="sink live", alive=second
    )
    assert api_conditions(kube, pod)["Ready"] == "False"
    # A newer version is written at once.
    asyncio.run(publish_statuses(settings, versioned(pod, settings.node, 3, running_status("True"))))
    wait_for(
        lambda: api_conditions(kube, pod).get("Ready") == "True", timeout=60, what="v3 written", alive=second
    )
    assert second.stop() == 0
