"""Least-privilege RBAC (deploy/kubernetes/), proven on the real apiserver.

The manifests are applied server-side; each service account gets a real token from the TokenRequest
API; the sink and a node agent then run as those identities (not `system:masters`) and do their whole
job, while the apiserver refuses every verb their ClusterRoles leave out (SelfSubjectAccessReview for
a table of calls, and real calls answered 403). deploy/kubernetes/README.md explains each rule.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from podledger.agents.kube import STRATEGIC_MERGE, Kube
from podledger.agents.kube_client import KubeError
from podledger.config import Settings
from podledger.schemas import decode
from podledger.streams.topics import ensure_topics
from podledger.types import CONFIG_MIRROR_ANNOTATION, JSONDict
from tests import pods
from tests.support import wait_for
from tests.support.kafka import read_topic
from tests.support.node import container_status, create_api_pod
from tests.support.processes import REPO_ROOT, podledger_env
from tests.support.rbac import access_review, apply_object, kubeconfig_with_token, service_account_token

MANIFESTS = REPO_ROOT / "deploy" / "kubernetes"
NAMESPACE = "podledger"
ROLES = {"sink": "podledger-sink", "node": "podledger-node"}  # identity -> SA and ClusterRole name


def manifest_objects() -> list[JSONDict]:
    """Every object of deploy/kubernetes/*.yaml, in the order `kubectl apply -f` takes them."""
    out: list[JSONDict] = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        out += [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    return out


@dataclass(frozen=True)
class Identity:
    username: str
    kubeconfig: str

    def kube(self) -> Kube:
        return Kube.from_kubeconfig(self.kubeconfig)


@pytest.fixture(scope="module")
def identities(kubeconfig: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Identity]:
    """The manifests applied (each one dry-run first), and a kubeconfig per service account that
    authenticates with a token from the TokenRequest API and nothing else."""
    admin = Kube.from_kubeconfig(kubeconfig)
    for obj in manifest_objects():
        assert apply_object(admin, obj, dry_run=True)["metadata"]["name"] == obj["metadata"]["name"]
        apply_object(admin, obj)
    workdir = tmp_path_factory.mktemp("rbac")
    out = {}
    for who, account in ROLES.items():
        token = service_account_token(admin, NAMESPACE, account)
        out[who] = Identity(
            f"system:serviceaccount:{NAMESPACE}:{account}",
            kubeconfig_with_token(kubeconfig, token, workdir / f"{who}.kubeconfig", account),
        )
    admin.close()
    return out


# ------------------------------------------------------------------------------------------------
# The manifests
# ------------------------------------------------------------------------------------------------


def test_manifests_hold_one_account_role_and_binding_per_identity_without_wildcards() -> None:
    objects = manifest_objects()
    by_kind: dict[str, dict[str, JSONDict]] = {}
    for obj in objects:
        by_kind.setdefault(obj["kind"], {})[obj["metadata"]["name"]] = obj
    assert set(by_kind) == {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"}
    assert objects[0]["kind"] == "Namespace" and objects[0]["metadata"]["name"] == NAMESPACE
    accounts = set(ROLES.values())
    assert set(by_kind["ServiceAccount"]) == set(by_kind["ClusterRole"]) == accounts
    assert {sa["metadata"]["namespace"] for sa in by_kind["ServiceAccount"].values()} == {NAMESPACE}
    for name, binding in by_kind["ClusterRoleBinding"].items():
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": name,
        }
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}]
    for role in by_kind["ClusterRole"].values():
        assert "aggregationRule" not in role
        for rule in role["rules"]:
            assert rule["apiGroups"] == [""] and "nonResourceURLs" not in rule
            for field in ("verbs", "resources"):
                assert "*" not in rule[field] and all("*" not in item for item in rule[field])


@pytest.mark.kube
def test_each_process_identity_is_its_service_account_not_an_admin(identities: dict[str, Identity]) -> None:
    for identity in identities.values():
        kube = identity.kube()
        review = kube.request(
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        )
        user = review["status"]["userInfo"]
        assert user["username"] == identity.username
        assert "system:masters" not in user.get("groups", [])
        assert set(user["groups"]) >= {"system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}"}
        kube.close()


# ------------------------------------------------------------------------------------------------
# What each role may and may not do
# ------------------------------------------------------------------------------------------------

# (identity, verb, resource, subresource, namespace, api group, allowed). Namespace "" is the whole
# cluster, as for the LIST and WATCH of /api/v1/pods; "elsewhere" stands for any other namespace.
ACCESS = [
    # The sink: reads pods everywhere, patches their status, deletes finished ones; GETs its Node.
    ("sink", "get", "pods", "", "default", "", True),
    ("sink", "get", "pods", "", "elsewhere", "", True),
    ("sink", "list", "pods", "", "", "", True),
    ("sink", "watch", "pods", "", "", "", True),
    ("sink", "patch", "pods", "status", "default", "", True),
    ("sink", "delete", "pods", "", "default", "", True),
    ("sink", "get", "nodes", "", "", "", False),
    ("sink", "create", "pods", "", "default", "", False),
    ("sink", "update", "pods", "", "default", "", False),
    ("sink", "patch", "pods", "", "default", "", False),
    ("sink", "deletecollection", "pods", "", "default", "", False),
    ("sink", "update", "pods", "status", "default", "", False),
    ("sink", "create", "pods", "eviction", "default", "", False),
    ("sink", "get", "pods", "log", "default", "", False),
    ("sink", "create", "pods", "exec", "default", "", False),
    ("sink", "list", "nodes", "", "", "", False),
    ("sink", "create", "nodes", "", "", "", False),
    ("sink", "patch", "nodes", "", "", "", False),
    ("sink", "patch", "nodes", "status", "", "", False),
    ("sink", "delete", "nodes", "", "", "", False),
    ("sink", "get", "secrets", "", "default", "", False),
    ("sink", "list", "secrets", "", "", "", False),
    ("sink", "get", "configmaps", "", "default", "", False),
    ("sink", "create", "events", "", "default", "", False),
    ("sink", "create", "serviceaccounts", "token", NAMESPACE, "", False),
    ("sink", "create", "clusterrolebindings", "", "", "rbac.authorization.k8s.io", False),
    # The node agent: reads pods (its own, by field selector), creates and deletes mirror pods in
    # any namespace, registers its Node. It writes no status: that is the sink's.
    ("node", "get", "pods", "", "default", "", True),
    ("node", "list", "pods", "", "", "", True),
    ("node", "watch", "pods", "", "", "", True),
    ("node", "create", "pods", "", "default", "", True),
    ("node", "create", "pods", "", "elsewhere", "", True),
    ("node", "delete", "pods", "", "default", "", True),
    ("node", "get", "nodes", "", "", "", True),
    ("node", "create", "nodes", "", "", "", True),
    ("node", "patch", "pods", "status", "default", "", False),
    ("node", "update", "pods", "status", "default", "", False),
    ("node", "patch", "pods", "", "default", "", False),
    ("node", "update", "pods", "", "default", "", False),
    ("node", "deletecollection", "pods", "", "default", "", False),
    ("node", "create", "pods", "eviction", "default", "", False),
    ("node", "create", "pods", "binding", "default", "", False),
    ("node", "list", "nodes", "", "", "", False),
    ("node", "patch", "nodes", "", "", "", False),
    ("node", "update", "nodes", "", "", "", False),
    ("node", "patch", "nodes", "status", "", "", False),
    ("node", "delete", "nodes", "", "", "", False),
    ("node", "get", "secrets", "", "default", "", False),
    ("node", "get", "configmaps", "", "default", "", False),
    ("node", "create", "events", "", "default", "", False),
    ("node", "create", "leases", "", "kube-node-lease", "coordination.k8s.io", False),
    ("node", "create", "serviceaccounts", "token", NAMESPACE, "", False),
    ("node", "create", "clusterrolebindings", "", "", "rbac.authorization.k8s.io", False),
]


def _access_id(case: tuple[Any, ...]) -> str:
    who, verb, resource, sub, namespace, _, allowed = case
    where = f"@{namespace}" if namespace else ""
    return f"{who}-{verb}-{resource}{'/' + sub if sub else ''}{where}-{'allowed' if allowed else 'denied'}"


@pytest.mark.kube
@pytest.mark.parametrize("case", ACCESS, ids=[_access_id(c) for c in ACCESS])
def test_access_review_allows_exactly_what_each_role_uses(
    identities: dict[str, Identity], case: tuple[Any, ...]
) -> None:
    who, verb, resource, subresource, namespace, group, allowed = case
    kube = identities[who].kube()
    try:
        status = access_review(
            kube, verb, resource, subresource=subresource, namespace=namespace, group=group
        )
    finally:
        kube.close()
    assert status["allowed"] is allowed, status


@pytest.mark.kube
def test_calls_outside_each_role_are_forbidden(kubeconfig: str, identities: dict[str, Identity]) -> None:
    admin = Kube.from_kubeconfig(kubeconfig)
    node_name = f"node-{uuid.uuid4().hex[:8]}"
    pod = create_api_pod(admin, node_name)  # the scheduler's part (and the Node), as the admin
    namespace, name = "default", pod["metadata"]["name"]
    sink, node = identities["sink"].kube(), identities["node"].kube()

    def forbidden(call: Any, *args: Any, **kwargs: Any) -> None:
        with pytest.raises(KubeError) as caught:
            call(*args, **kwargs)
        assert caught.value.status == 403, caught.value
        assert "forbidden" in caught.value.body.lower()

    relabel = {"metadata": {"labels": {"tampered": "yes"}}}
    # The sink: its own calls work, on any pod ...
    assert sink.get_pod(namespace, name)["metadata"]["uid"] == pod["metadata"]["uid"]
    sink.patch_pod_status(namespace, name, {"status": {"message": "from the sink"}})
    forbidden(sink.get_node, node_name)
    # ... and nothing else: no new pods, no spec changes, no secrets, no Node writes.
    forbidden(sink.create_pod, pods.pod(name=f"{name}-x", uid=None, node=node_name, image="app:1"))
    forbidden(
        sink.request, "PATCH", Kube.pod_path(namespace, name), body=relabel, content_type=STRATEGIC_MERGE
    )
    forbidden(sink.request, "GET", "/api/v1/namespaces/default/secrets")
    forbidden(sink.ensure_node, f"node-{uuid.uuid4().hex[:8]}")  # GET 404, then POST refused
    forbidden(sink.request, "DELETE", f"/api/v1/nodes/{node_name}")
    # The node agent: reads pods, but never writes a status or a spec, and never changes a Node.
    assert node.get_pod(namespace, name)["status"]["message"] == "from the sink"
    forbidden(node.patch_pod_status, namespace, name, {"status": {"message": "from a node"}})
    forbidden(
        node.request, "PATCH", Kube.pod_path(namespace, name), body=relabel, content_type=STRATEGIC_MERGE
    )
    forbidden(node.request, "PATCH", f"/api/v1/nodes/{node_name}", body=relabel, content_type=STRATEGIC_MERGE)
    forbidden(node.request, "DELETE", f"/api/v1/nodes/{node_name}")
    forbidden(node.request, "GET", "/api/v1/namespaces/default/configmaps")
    after = admin.get_pod(namespace, name)
    assert after["status"]["message"] == "from the sink" and "tampered" not in (
        after["metadata"].get("labels") or {}
    )
    for kube in (admin, sink, node):
        kube.close()


# ------------------------------------------------------------------------------------------------
# The processes, as those identities
# ------------------------------------------------------------------------------------------------

STATIC = """\
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  containers:
    - {{name: main, image: app:1}}
"""


def _get(kube: Kube, name: str) -> JSONDict | None:
    try:
        return kube.get_pod("default", name)
    except KubeError as exc:
        if exc.not_found:
            return None
        raise


@pytest.mark.kafka
@pytest.mark.kube
@pytest.mark.parametrize("sink_read", ["get", "watch"])
def test_sink_and_node_agent_do_their_whole_job_under_their_service_accounts(
    sink_read: str,
    settings: Settings,
    kubeconfig: str,
    identities: dict[str, Identity],
    podledger_process: Any,
    tmp_path: Path,
) -> None:
    """A node agent (sim runtime, apiserver and file sources) as podledger-node and the fold with the
    sink as podledger-sink: the node registers its Node, runs the pod bound to it and mirrors its static
    pod; the sink writes both statuses and deletes the pod once it has finished. The sink reads pods
    by GET (and LISTs them to reconcile), or from its LIST and WATCH (PODLEDGER_SINK_READ)."""
    asyncio.run(ensure_topics(settings))
    admin = Kube.from_kubeconfig(kubeconfig)
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    static = f"static-{uuid.uuid4().hex[:6]}"
    (manifests / "static.yaml").write_text(STATIC.format(name=static))
    with pytest.raises(KubeError) as missing:
        admin.get_node(settings.node)
    assert missing.value.not_found

    node = podledger_process(
        ["node"],
        env=podledger_env(
            settings,
            identities["node"].kubeconfig,
            PODLEDGER_RUNTIME="sim",
            PODLEDGER_MANIFEST_DIR=str(manifests),
            PODLEDGER_LOG_LEVEL="info",
        ),
    )
    # It registers its own Node (nobody else created it), which the sink's start-up check then finds.
    registered = wait_for(
        lambda: admin.get_node(settings.node), timeout=60, what="the Node registered", alive=node
    )
    assert registered["metadata"]["labels"]["node.podledger.io/managed"] == "true"
    sink = podledger_process(
        ["run", "--roles", "fold,sink"],
        env=podledger_env(
            settings,
            identities["sink"].kubeconfig,
            PODLEDGER_SINK_READ=sink_read,
            PODLEDGER_SINK_RECONCILE_MS="1000",
            PODLEDGER_LOG_LEVEL="info",
        ),
    )

    def running(name: str) -> JSONDict | None:
        pod = _get(admin, name)
        status = (pod or {}).get("status") or {}
        main = container_status(status, "main")
        return pod if status.get("phase") == "Running" and "running" in main.get("state", {}) else None

    # A pod bound to the node (the scheduler's part, done by the admin): the node agent sees it
    # (LIST/WATCH by field selector, then a GET of its binding) and runs it; the sink PATCHes its status.
    pod = create_api_pod(admin, settings.node)
    name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
    wait_for(lambda: running(name), timeout=90, what="the API pod Running in the apiserver", alive=sink)

    # The static pod: the node agent creates its mirror pod (owned by its Node), the sink writes the
    # static pod's status to it.
    mirror_name = f"{static}-{settings.node}"
    mirror = wait_for(lambda: running(mirror_name), timeout=60, what="the mirror pod Running", alive=sink)
    assert CONFIG_MIRROR_ANNOTATION in mirror["metadata"]["annotations"]
    [owner] = mirror["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"]) == ("Node", registered["metadata"]["uid"])

    # Deleted with a grace period: the node agent stops it, the sink DELETEs the finished pod.
    admin.delete_pod("default", name, grace_seconds=30)
    wait_for(
        lambda: _get(admin, name) is None, timeout=60, what="the finished pod deleted by the sink", alive=sink
    )
    deletions = [
        (key.decode(), decode("pod-deletions", value).name)
        for _, key, value in asyncio.run(read_topic(settings, "pod-deletions", 1, idle=0.5))
    ]
    assert (uid, name) in deletions
    assert _get(admin, mirror_name) is not None  # mirror pods are never the sink's to delete

    assert node.proc.poll() is None, node.output()[-3000:]
    for proc in (node, sink):
        output = proc.output()
        assert "forbidden" not in output.lower(), output[-3000:]
    assert sink.stop() == 0 and node.stop() == 0
    admin.close()
