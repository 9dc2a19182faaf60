"""NodeRestriction for a node agent: what it acts on from the shared log.

A kubelet runs only the pods the apiserver binds to it, and trusts its own config sources. A node
agent reads its pods back from pod-updates (and its past from pod-lifecycle), topics that other
writers can reach, so before it acts on a record it checks:

- with a node secret, that this node wrote the record (its self MAC, schemas/origin.py), and that
  the record is newer than the last one acted on for the same pod and topic (not a replay);
- for an API pod, what the apiserver says of the pod's binding (agents/worker/admission.py), not
  what the record says.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from podledger.agents.kube import Kube
from podledger.agents.kube_client import KubeError
from podledger.agents.worker.admission import api_update_refusal
from podledger.keys import Signer
from podledger.schemas import models
from podledger.schemas.origin import Forged, NodeKeys, verify_self
from podledger.types import PodOp, Topic

__all__ = ["NodeRestriction"]

log = logging.getLogger(__name__)

RECHECK_S = 5.0  # how often updates the apiserver could not be asked about are asked about again


class NodeRestriction:
    """Admits the records one node agent acts on."""

    def __init__(
        self,
        node: str,
        keys: NodeKeys | None,
        kube: Kube | None,
        signer: Signer | None,
        apply_update: Callable[[models.PodUpdate], None],
    ) -> None:
        self.node = node
        self.keys = keys
        self.kube = kube
        self.signer = signer
        self.apply_update = apply_update  # where an update confirmed late goes
        self._seqs: dict[tuple[bytes, str], int] = {}  # (pod UID, topic) -> last sequence acted on
        self._bound: set[str] = set()  # API pods the apiserver confirmed bound here (never changes)
        self._unconfirmed: dict[str, models.PodUpdate] = {}  # waiting for the apiserver to answer

    async def admit_update(self, update: models.PodUpdate, message: Any) -> bool:
        """Whether to apply this pod-updates record now. An API pod's update the apiserver cannot
        be asked about yet waits, and is applied by `recheck` once it can."""
        if not self.written_here(Topic.POD_UPDATES, message):
            return False
        if update.source != "api" or self.kube is None:
            return True
        if update.uid in self._unconfirmed:  # keep the order: it waits behind an earlier one
            self._unconfirmed[update.uid] = update
            return False
        return await self._confirm(update)

    def written_here(self, topic: str, message: Any) -> bool:
        """With a node secret: the record carries this node's own proof, newer than the last one
        acted on for its pod (a copy of an older record is a replay). Without one: True."""
        if self.keys is None:
            return True
        where = f"{topic} {message.partition}/{message.offset}"
        try:
            proof = verify_self(self.keys, topic, message.key, message.value, message.headers or ())
        except Forged as exc:
            log.warning("node %s: ignoring %s: %s", self.node, where, exc)
            return False
        if self.signer is not None:
            self.signer.floor(proof.seq)  # never reuse a sequence number an earlier agent used
        key = (message.key or b"", topic)
        if proof.seq <= self._seqs.get(key, -1):
            log.warning("node %s: ignoring %s: a replay of an older record", self.node, where)
            return False
        self._seqs[key] = proof.seq
        return True

    async def _confirm(self, update: models.PodUpdate) -> bool:
        assert self.kube is not None
        op, uid = update.op, update.uid
        if uid in self._bound and op not in (PodOp.DELETE, PodOp.REMOVE):
            return True
        meta = update.pod.get("metadata") or {}
        namespace, name = meta.get("namespace") or "default", meta.get("name") or ""
        try:
            api_pod = await asyncio.to_thread(self.kube.get_pod, namespace, name)
        except KubeError as exc:
            if not exc.not_found:
                self._unconfirmed[uid] = update
                log.warning("node %s: cannot ask the apiserver about pod %s yet: %s", self.node, uid, exc)
                return False
            api_pod = None
        refused = api_update_refusal(op, uid, self.node, api_pod)
        if refused is not None:
            log.warning(
                "node %s: not acting on %s of %s/%s (%s): %s", self.node, op, namespace, name, uid, refused
            )
            return False
        if op not in (PodOp.DELETE, PodOp.REMOVE):
            self._bound.add(uid)
        return True

    async def recheck(self) -> None:
        """Apply the updates the apiserver could not be asked about, once it answers."""
        while True:
            await asyncio.sleep(RECHECK_S)
            for uid, update in list(self._unconfirmed.items()):
                if self._unconfirmed.get(uid) is not update:
                    continue
                del self._unconfirmed[uid]
                if await self._confirm(update):
                    self.apply_update(update)
