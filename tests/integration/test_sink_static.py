"""TestStaticPod (status_manager_test.go) on the real apiserver: a static pod's status goes only through
its current mirror pod, and the calls the sink makes to get there (docs/kubelet-rules.md, "Mirror pods")."""

from __future__ import annotations

import time
import uuid
from functools import partial

import pytest

from podledger.agents.kube import Kube
from podledger.agents.mirror import build_mirror_pod
from podledger.agents.sink.writer import Sink
from podledger.config import Settings
from podledger.types import JSONDict
from tests import pods
from tests.pods import running_status, versioned
from tests.support import wait_for

pytestmark = pytest.mark.kube


async def _no_publish(*_: object) -> None:
    raise AssertionError("syncPod itself publishes nothing")


@pytest.mark.parametrize("read", ["get", "watch"])
def test_TestStaticPod(kubeconfig: str, node_name: str, read: str) -> None:
    kube = Kube.from_kubeconfig(kubeconfig)
    node = kube.ensure_node(node_name)
    name = f"static-{uuid.uuid4().hex[:6]}-{node_name}"
    static_uid = uuid.uuid4().hex  # file pods' UIDs are their config hash
    make_static = partial(pods.pod, ("main",), name=name, uid=static_uid, image="app:1")
    static = make_static(annotations={"kubernetes.io/config.hash": static_uid}, source="file")
    vs = versioned(static, node_name, 1, running_status(), static=True)
    sink = Sink(
        kube,
        Settings.from_env(env={}, bootstrap="unused:9092", node=node_name),
        publish=_no_publish,
        read_from_cache=read == "watch",
    )
    if sink.cache is not None:
        sink.cache.start()
        sink.cache.synced.wait(30)
    try:
        # No mirror: nothing is written (and with the watch cache, nothing is even asked).
        assert sink._sync_pod(static_uid, vs) == ("no-mirror", None)
        assert sink.stats["patches"] == 0
        assert sink.stats["gets"] == (1 if read == "get" else 0)

        # Mirror added: one GET and one PATCH, preconditioned on the mirror's UID.
        mirror = kube.create_pod(build_mirror_pod(static, node))
        if sink.cache is not None:
            wait_for(lambda: sink.cache.get("default", name), timeout=10, what="the mirror in the cache")
        gets = sink.stats["gets"]
        assert sink._sync_pod(static_uid, vs) == ("patched", mirror["metadata"]["uid"])
        assert sink.stats["patches"] == 1
        assert sink.stats["gets"] - gets == (1 if read == "get" else 0)
        assert kube.get_pod("default", name)["status"]["phase"] == "Running"

        # A stale mirror (another static pod's hash) is never written.
        kube.delete_pod("default", name, grace_seconds=0)
        other = make_static(annotations={"kubernetes.io/config.hash": "x"})
        wait_for(lambda: _created(kube, build_mirror_pod(other, node)), timeout=10, what="stale mirror")
        if sink.cache is not None:
            wait_for(
                lambda: (
                    (p := sink.cache.get("default", name))
                    and p["metadata"]["annotations"]["kubernetes.io/config.mirror"] == "x"
                ),
                timeout=10,
                what="the stale mirror in the cache",
            )
        assert sink._sync_pod(static_uid, vs)[0] == "no-mirror"
        assert sink.stats["patches"] == 1
        assert "phase" not in (kube.get_pod("default", name).get("status") or {}) or (
            kube.get_pod("default", name)["status"].get("phase") == "Pending"
        )
    finally:
        if sink.cache is not None:
            sink.cache.stop()


def _created(kube: Kube, pod: JSONDict) -> bool:
    try:
        kube.create_pod(pod)
    except Exception:
        time.sleep(0.2)  # the old one may still be going
        return False
    return True
