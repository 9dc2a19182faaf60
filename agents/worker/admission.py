"""What a node agent may act on: the apiserver's word on an API pod, not the log's.

A kubelet runs only the pods the apiserver binds to it. A node agent reads its pods from the
shared pod-updates topic, which other writers can reach, so before it acts on an API pod's
update it asks the apiserver (agents/node.py) and this pure function decides from the answer.
Pure: plain data in, a reason (or None) out.
"""

from __future__ import annotations

from podledger.types import JSONDict, PodOp


def api_update_refusal(op: str, uid: str, node: str, api_pod: JSONDict | None) -> str | None:
    """Why the node `node` must not act on a pod-updates `op` for the API pod `uid`, given that
    pod as the apiserver returns it by namespace and name (None: NotFound); None when it may.

    ADD, UPDATE and RECONCILE need the pod to exist with this UID and be bound to this node.
    DELETE (a graceful deletion) needs the apiserver to show the deletion, or the pod gone.
    REMOVE (the pod left the node's config) needs the pod gone, replaced, or bound elsewhere.
    """
    meta = (api_pod or {}).get("metadata") or {}
    same_pod = api_pod is not None and meta.get("uid") == uid
    bound_here = same_pod and ((api_pod or {}).get("spec") or {}).get("nodeName") == node
    if op == PodOp.REMOVE:
        return "the apiserver still has the pod bound to this node" if bound_here else None
    if op == PodOp.DELETE:
        if bound_here and not meta.get("deletionTimestamp"):
            return "the apiserver shows no deletion of the pod"
        return None
    if api_pod is None:
        return "the apiserver has no such pod"
    if not same_pod:
        return f"the apiserver's pod of that name has UID {meta.get('uid')!r}"
    if not bound_here:
        bound = ((api_pod or {}).get("spec") or {}).get("nodeName") or "no node"
        return f"the apiserver binds the pod to {bound!r}"
    return None
