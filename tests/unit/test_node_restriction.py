"""NodeRestriction's two pure decisions: what a node agent may act on given the apiserver's answer
(agents/worker/admission.py), and where the sink may write a status (agents/sink/decisions.py)."""

from __future__ import annotations

import pytest

from podledger.agents.sink.decisions import binding_refusal
from podledger.agents.worker.admission import api_update_refusal
from podledger.types import CONFIG_MIRROR_ANNOTATION, JSONDict
from tests import pods


def api_pod(
    uid: str = "u1", node: str | None = "node-b", *, deleting: bool = False, mirror: bool = False
) -> JSONDict:
    pod = pods.pod(("main",), uid=uid, node=node)
    if deleting:
        pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if mirror:
        pod["metadata"]["annotations"] = {CONFIG_MIRROR_ANNOTATION: "static-uid"}
    return pod


# (case id, op, apiserver's pod or None, the refusal's words or None when allowed)
ADMISSION_CASES = [
    ("add bound here", "ADD", api_pod(), None),
    ("add not found", "ADD", None, "no such pod"),
    ("add bound elsewhere", "ADD", api_pod(node="node-a"), "binds the pod to 'node-a'"),
    ("add unscheduled", "ADD", api_pod(node=None), "binds the pod to 'no node'"),
    ("add recreated under the name", "UPDATE", api_pod(uid="u2"), "has UID 'u2'"),
    ("reconcile bound here", "RECONCILE", api_pod(), None),
    ("delete shown by the apiserver", "DELETE", api_pod(deleting=True), None),
    ("delete the apiserver does not show", "DELETE", api_pod(), "shows no deletion"),
    ("delete of a pod already gone", "DELETE", None, None),
    ("remove of a pod gone", "REMOVE", None, None),
    ("remove of a pod replaced", "REMOVE", api_pod(uid="u2"), None),
    ("remove of a pod still bound here", "REMOVE", api_pod(), "still has the pod bound"),
]


@pytest.mark.parametrize(
    ("op", "answer", "refusal"), [c[1:] for c in ADMISSION_CASES], ids=[c[0] for c in ADMISSION_CASES]
)
def test_a_node_acts_on_an_api_pod_only_as_the_apiserver_binds_it(
    op: str, answer: JSONDict | None, refusal: str | None
) -> None:
    got = api_update_refusal(op, "u1", "node-b", answer)
    if refusal is None:
        assert got is None
    else:
        assert got is not None and refusal in got


# (case id, API pod, version's node, version is static, the refusal's words or None)
BINDING_CASES = [
    ("bound to the version's node", api_pod(), "node-b", False, None),
    ("bound to another node", api_pod(node="node-a"), "node-b", False, "bound to 'node-a'"),
    ("not scheduled", api_pod(node=None), "node-b", False, "bound to 'no node'"),
    ("static status to its mirror", api_pod(mirror=True), "node-b", True, None),
    ("static status to another node's mirror", api_pod(node="node-a", mirror=True), "node-b", True, "node-a"),
    ("static status to a plain pod", api_pod(), "node-b", True, "only to its mirror"),
    ("api status to a mirror pod", api_pod(mirror=True), "node-b", False, "only its static pod"),
]


@pytest.mark.parametrize(
    ("pod", "node", "static", "refusal"), [c[1:] for c in BINDING_CASES], ids=[c[0] for c in BINDING_CASES]
)
def test_the_sink_writes_only_to_pods_bound_to_the_versions_node(
    pod: JSONDict, node: str, static: bool, refusal: str | None
) -> None:
    got = binding_refusal(pod, node, static)
    if refusal is None:
        assert got is None
    else:
        assert got is not None and refusal in got
