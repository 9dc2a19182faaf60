"""Static pods from a manifest directory, made visible through mirror pods (docs/kubelet-rules.md,
"The file source" and "Mirror pods").

On the real broker and apiserver with the process runtime: a dropped-in manifest appears as a running
mirror pod with live status; a deleted mirror is recreated; editing the manifest restarts the pod under a
new UID (and a new mirror); removing it removes the mirror pod and stops the processes.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from podledger.agents.kube_client import KubeError
from podledger.config import Settings
from podledger.local import alive
from podledger.types import JSONDict
from tests.support import wait_for
from tests.support.node import container_status, start_node

pytestmark = [pytest.mark.kafka, pytest.mark.kube]

MANIFEST = """\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{app: static-test}}
spec:
  containers:
    - name: main
      image: busybox
      command: [sleep, "{seconds}"]
"""
MIRROR = "kubernetes.io/config.mirror"


def test_static_pod_lives_in_the_apiserver_through_its_mirror(
    settings: Settings, kubeconfig: str, podledger_process: Any, tmp_path: Path
) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    kube, proc, runtime = start_node(
        settings,
        kubeconfig,
        podledger_process,
        tmp_path / "runtime",
        PODLEDGER_MANIFEST_DIR=str(manifests),
        PODLEDGER_FILE_CHECK_S="60",  # inotify, not the rescan, must notice the changes
    )
    base = f"static-{uuid.uuid4().hex[:6]}"
    name = f"{base}-{settings.node}"
    manifest = manifests / "static.yaml"
    manifest.write_text(MANIFEST.format(name=base, seconds=1000))

    def mirror() -> JSONDict | None:
        try:
            return kube.get_pod("default", name)
        except KubeError as exc:
            if exc.not_found:
                return None
            raise

    def running_mirror(not_uid: str = "", hash_not: str = "") -> Any:
        def check() -> Any:
            pod = mirror()
            if pod is None or pod["metadata"]["uid"] == not_uid or pod["metadata"].get("deletionTimestamp"):
                return None
            if pod["metadata"]["annotations"].get(MIRROR) in ("", None, hash_not):
                return None
            main = container_status(pod.get("status") or {}, "main")
            ok = pod.get("status", {}).get("phase") == "Running" and "running" in main.get("state", {})
            return pod if ok else None

        return check

    # Dropped in: a mirror pod appears, owned by the Node, with the static pod's live status.
    pod = wait_for(running_mirror(), timeout=60, what="a running mirror pod", alive=proc)
    node = kube.ensure_node(settings.node)
    static_uid = pod["metadata"]["annotations"][MIRROR]
    assert (
        static_uid != pod["metadata"]["uid"]
    )  # the mirror has its own UID; its annotation names the static pod
    assert pod["metadata"]["annotations"]["kubernetes.io/config.source"] == "file"
    assert pod["metadata"]["labels"] == {"app": "static-test"}
    [owner] = pod["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Node", settings.node, node["metadata"]["uid"])
    assert pod["spec"]["nodeName"] == settings.node
    container_id = container_status(pod["status"], "main")["containerID"].split("://")[1]
    [first] = [c for c in runtime.containers(static_uid) if c["id"] == container_id]
    assert alive(first["pid"])

    # A deleted mirror is recreated, and gets the status again; the pod itself keeps running.
    kube.delete_pod("default", name, grace_seconds=0, uid=pod["metadata"]["uid"])
    again = wait_for(
        running_mirror(not_uid=pod["metadata"]["uid"]), timeout=60, what="the mirror recreated", alive=proc
    )
    assert again["metadata"]["annotations"][MIRROR] == static_uid
    assert container_status(again["status"], "main")["containerID"].endswith(container_id)
    assert alive(first["pid"])

    # Edited: the pod restarts under a new UID, with a new mirror.
    manifest.write_text(MANIFEST.format(name=base, seconds=2000))
    edited = wait_for(
        running_mirror(hash_not=static_uid), timeout=60, what="the edited pod's mirror", alive=proc
    )
    new_uid = edited["metadata"]["annotations"][MIRROR]
    assert new_uid != static_uid
    wait_for(lambda: not alive(first["pid"]), timeout=30, what="the old pod's process stopped", alive=proc)
    [second] = [c for c in runtime.containers(new_uid) if c["state"] == "running"]
    assert alive(second["pid"])

    # Removed: the mirror pod goes, and so do the processes.
    manifest.unlink()
    wait_for(lambda: mirror() is None, timeout=60, what="the mirror pod deleted", alive=proc)
    wait_for(lambda: not alive(second["pid"]), timeout=30, what="the pod's process stopped", alive=proc)
