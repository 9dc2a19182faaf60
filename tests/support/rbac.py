"""Identities on the apiserver: server-side apply of manifests, service-account tokens, a
kubeconfig that authenticates by token alone, and access reviews.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from podledger.agents.kube import Kube
from podledger.types import JSONDict

# kind -> (plural, namespaced) for the kinds podledger's manifests hold (deploy/kubernetes/).
_KINDS = {
    "Namespace": ("namespaces", False),
    "ServiceAccount": ("serviceaccounts", True),
    "ClusterRole": ("clusterroles", False),
    "ClusterRoleBinding": ("clusterrolebindings", False),
    "Role": ("roles", True),
    "RoleBinding": ("rolebindings", True),
}


def apply_object(kube: Kube, obj: JSONDict, *, dry_run: bool = False) -> JSONDict:
    """Server-side apply of one manifest object (as `kubectl apply --server-side [--dry-run=server]`);
    returns the object as the apiserver stores it (or would)."""
    plural, namespaced = _KINDS[obj["kind"]]
    api_version = obj["apiVersion"]
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    meta = obj["metadata"]
    scope = f"/namespaces/{meta.get('namespace') or 'default'}" if namespaced else ""
    query: list[tuple[str, Any]] = [("fieldManager", "podledger-tests"), ("force", "true")]
    if dry_run:
        query.append(("dryRun", "All"))
    return dict(
        kube.request(
            "PATCH",
            f"{base}{scope}/{plural}/{meta['name']}",
            body=obj,
            query=query,
            content_type="application/apply-patch+yaml",
        )
    )


def service_account_token(kube: Kube, namespace: str, name: str, seconds: int = 3600) -> str:
    """A token for the service account namespace/name from the TokenRequest API."""
    answer = kube.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        body={
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": seconds},
        },
    )
    return str(answer["status"]["token"])


def kubeconfig_with_token(kubeconfig: str, token: str, path: Path, user: str = "podledger-test") -> str:
    """A kubeconfig at `path` for the cluster of `kubeconfig`'s current context, authenticated by
    `token` alone (none of the original user's credentials); returns its path."""
    import yaml

    original = yaml.safe_load(Path(kubeconfig).read_text())
    context = next(c for c in original["contexts"] if c["name"] == original["current-context"])
    cluster = next(c for c in original["clusters"] if c["name"] == context["context"]["cluster"])
    ca_file = cluster["cluster"].get("certificate-authority")
    if ca_file and not Path(ca_file).is_absolute():  # relative to the kubeconfig it came from
        absolute = str((Path(kubeconfig).parent / ca_file).resolve())
        cluster = {**cluster, "cluster": {**cluster["cluster"], "certificate-authority": absolute}}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": user, "context": {"cluster": cluster["name"], "user": user}}],
        "current-context": user,
    }
    path.write_text(json.dumps(config, indent=2))  # JSON is valid YAML
    path.chmod(0o600)
    return str(path)


def access_review(
    kube: Kube, verb: str, resource: str, *, subresource: str = "", namespace: str = "", group: str = ""
) -> JSONDict:
    """The apiserver's answer to "may I?" for `kube`'s own identity (a SelfSubjectAccessReview):
    its status, with `allowed` and, when denied, `reason`."""
    attributes = {"verb": verb, "resource": resource, "group": group}
    if subresource:
        attributes["subresource"] = subresource
    if namespace:
        attributes["namespace"] = namespace
    review = kube.request(
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        body={
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes},
        },
    )
    return dict(review["status"])
