"""The fold's side of node isolation (streams/batch.py, streams/fold.py): a record whose claimed node
is not its proven writer, that speaks for a pod bound to another node, or that replays a record its
node wrote earlier goes to dead-letter and has no other effect (docs/architecture.md, "Node
isolation on shared topics")."""

from __future__ import annotations

from typing import Any

import pytest

from podledger.partitioner import partition_for_node
from podledger.schemas import encode, models
from podledger.schemas.origin import NodeKeys, claimed, derive_keys, sign
from podledger.streams.batch import BatchFold
from podledger.streams.fold import Coordinates, HoldLimits, PodRecord
from podledger.types import JSONDict, LifecycleKind, PodOp, Topic
from tests import pods

PARTITIONS = 6
A = derive_keys("node-a", b"a" * 32)
B = derive_keys("node-b", b"b" * 32)
KEYRING = {"node-a": A.status, "node-b": B.status}
T0 = 1_700_000_000_000
UID = "uid-b1"


class Topics:
    """Ingress topics as lists, offsets per topic, and a table of records."""

    def __init__(self, keyring: dict[str, bytes] | None = KEYRING) -> None:
        self.keyring = keyring
        self.table: dict[bytes, PodRecord] = {}
        self.offsets: dict[str, int] = {}
        self.outputs: list[Any] = []
        self.journal: list[Any] = []

    def send(
        self,
        topic: str,
        value: Any,
        *,
        signer: NodeKeys | None,
        seq: int,
        partition_of: str = "node-b",
        headers: list[tuple[str, bytes]] | None = None,
        offset: int | None = None,
    ) -> list[Any]:
        """Fold one record; returns the outputs it produced other than the journal."""
        key, raw = value.uid.encode(), encode(value)
        if headers is None:
            headers = [] if signer is None else sign(signer, topic, seq, key, raw)
        if offset is None:
            offset = self.offsets[topic] = self.offsets.get(topic, -1) + 1
        at = Coordinates(topic, partition_for_node(partition_of, PARTITIONS), offset, T0 + seq)
        fold = BatchFold(self.table.get, HoldLimits(), 1 << 20, keyring=self.keyring, partitions=PARTITIONS)
        fold.add_message(at, key, raw, headers)
        for k, (_, record) in fold.batch.changed.items():
            if record is None:
                self.table.pop(k, None)
            else:
                self.table[k] = record
        self.journal += fold.batch.journal
        outputs = [out for _, out in fold.batch.outputs]
        self.outputs += outputs
        return outputs

    def record(self) -> PodRecord:
        return self.table[UID.encode()]


def add_b_pod(topics: Topics, seq: int = 1) -> None:
    pod = pods.pod(("main",), name="payments-0", namespace="prod", uid=UID, node="node-b")
    out = topics.send(
        Topic.POD_UPDATES, models.PodUpdate(PodOp.ADD, "api", "node-b", pod, T0), signer=B, seq=seq
    )
    assert dead_letters(out) == []
    assert "pod-status-history" in [o.topic for o in out]


def terminated(node: str) -> models.PodLifecycle:
    return models.PodLifecycle(UID, node, LifecycleKind.TERMINATED, T0 + 50)


def pleg_running(node: str) -> models.PlegEvent:
    runtime: JSONDict = {"containers": [], "ips": ["10.0.0.9"], "sandbox": {"id": "s", "ready": True}}
    return models.PlegEvent(UID, node, "ContainerStarted", "c1", runtime, T0 + 60)


def dead_letters(outputs: list[Any]) -> list[tuple[str, str]]:
    return [(o.value.reason, o.value.detail) for o in outputs if o.topic == "dead-letter"]


def only_dead_letter(outputs: list[Any], reason: str) -> str:
    assert [o.topic for o in outputs] == ["dead-letter"], outputs
    assert outputs[0].value.reason == reason
    return str(outputs[0].value.detail)


@pytest.mark.parametrize(
    ("attack", "detail"),
    [
        ("unsigned", "no proof of origin"),
        ("signed by node-a claiming node-b", "MAC does not match"),
        ("node-a's valid proof, event claims node-b", "speaks for node 'node-b'"),
        ("node-a's valid proof, event claims node-a", "bound to 'node-b'"),
        ("node-b's proof on node-a's partition", "writes to partition"),
        # A header with a null value (Kafka allows it): the MAC is missing, not a crash of the fold.
        ("node-b's node and sequence, a null MAC", "MAC does not match"),
        ("a null node", "no proof of origin"),
    ],
)
def test_forged_terminated_for_another_nodes_pod_changes_nothing(attack: str, detail: str) -> None:
    topics = Topics()
    add_b_pod(topics)
    before = topics.record()
    event, signer, partition_of, headers = terminated("node-b"), A, "node-b", None
    if attack == "unsigned":
        signer = None
    elif attack == "signed by node-a claiming node-b":
        headers = sign(A, Topic.POD_LIFECYCLE, 5, UID.encode(), encode(event))
        headers = [(n, b"node-b" if n == "podledger-node" else v) for n, v in headers]
    elif attack == "node-a's valid proof, event claims node-a":
        event = terminated("node-a")
        partition_of = "node-a"
    elif attack in ("node-b's node and sequence, a null MAC", "a null node"):
        nulled = "podledger-mac" if "MAC" in attack else "podledger-node"
        headers = [
            (n, None if n == nulled else v) for n, v in sign(B, Topic.POD_LIFECYCLE, 5, UID.encode(), b"")
        ]
    elif attack == "node-b's proof on node-a's partition":
        signer, partition_of = B, "node-a"
        if partition_for_node("node-a", PARTITIONS) == partition_for_node("node-b", PARTITIONS):
            pytest.skip("both nodes hash to one partition")
    out = topics.send(
        Topic.POD_LIFECYCLE, event, signer=signer, seq=5, partition_of=partition_of, headers=headers
    )
    assert detail in only_dead_letter(out, "forged")
    after = topics.record()
    assert (after["version"], after["terminated"], after["status"]) == (
        before["version"],
        before["terminated"],
        before["status"],
    )
    assert len(topics.journal) == 1  # only the ADD: a forged record is never journalled


def test_a_replayed_record_of_the_right_node_is_refused() -> None:
    topics = Topics()
    add_b_pod(topics, seq=10)
    assert topics.send(Topic.PLEG, pleg_running("node-b"), signer=B, seq=11)  # a new version
    version = topics.record()["version"]
    # node-a copies node-b's earlier, validly signed pleg record onto the topic again.
    out = topics.send(Topic.PLEG, pleg_running("node-b"), signer=B, seq=11)
    assert "not above 11" in only_dead_letter(out, "replayed")
    assert topics.record()["version"] == version
    assert topics.send(Topic.PLEG, pleg_running("node-b"), signer=B, seq=12) == []  # newer: applied


def test_a_pod_update_cannot_move_a_pod_to_another_node_even_unsigned() -> None:
    """Without a keyring the claimed node is unproven, but a node still speaks only for its own pods."""
    topics = Topics(keyring=None)
    add_b_pod(topics)
    moved = pods.pod(("main",), name="payments-0", namespace="prod", uid=UID, node="node-a")
    out = topics.send(
        Topic.POD_UPDATES, models.PodUpdate(PodOp.UPDATE, "api", "node-a", moved, T0 + 5), signer=None, seq=2
    )
    assert "bound to 'node-b'" in only_dead_letter(out, "forged")
    assert topics.record()["node"] == "node-b"
    out = topics.send(Topic.POD_LIFECYCLE, terminated("node-a"), signer=None, seq=3)
    assert only_dead_letter(out, "forged")
    assert topics.record()["terminated"] is False


def test_a_claim_from_another_partition_is_refused_and_leaves_the_offsets_alone() -> None:
    """Offsets are the pod's own partition's: a foreign record from another partition, even at an
    offset below the pod's, is refused (not skipped as a redelivery), and one far above it cannot
    make the pod's own later records look applied already."""
    topics = Topics()
    add_b_pod(topics, seq=1)
    applied = dict(topics.record()["applied"])
    for offset in (0, 10_000):
        moved = pods.pod(("main",), name="payments-0", namespace="prod", uid=UID, node="node-a")
        claim = models.PodUpdate(PodOp.ADD, "api", "node-a", moved, T0)
        out = topics.send(
            Topic.POD_UPDATES, claim, signer=A, seq=2 + offset, partition_of="node-a", offset=offset
        )
        assert "bound to 'node-b'" in only_dead_letter(out, "forged")
        assert topics.record()["applied"] == applied
    assert topics.send(Topic.PLEG, pleg_running("node-b"), signer=B, seq=3)  # node-b goes on


def test_held_events_keep_their_proof_until_the_pod_is_announced() -> None:
    topics = Topics()
    assert topics.send(Topic.PLEG, pleg_running("node-b"), signer=B, seq=20) == []  # held
    held = topics.table[UID.encode()]["held"]
    assert held[0][5] == ["node-b", 20]
    add_b_pod(topics, seq=21)
    assert topics.record()["seqs"] == {"pod-updates": 21, "pleg": 20}
    out = topics.send(Topic.PLEG, pleg_running("node-b"), signer=B, seq=20)
    assert only_dead_letter(out, "replayed")


def test_held_events_from_another_node_are_refused_at_the_announcement() -> None:
    topics = Topics(keyring=None)
    topics.send(Topic.POD_LIFECYCLE, terminated("node-a"), signer=None, seq=1, partition_of="node-a")
    pod = pods.pod(("main",), name="payments-0", namespace="prod", uid=UID, node="node-b")
    out = topics.send(
        Topic.POD_UPDATES, models.PodUpdate(PodOp.ADD, "api", "node-b", pod, T0), signer=None, seq=2
    )
    assert [reason for reason, _ in dead_letters(out)] == ["forged"]
    assert topics.record()["terminated"] is False


def test_the_journal_carries_the_proof_and_recovery_restores_the_sequence() -> None:
    topics = Topics()
    add_b_pod(topics, seq=30)
    topics.send(Topic.PLEG, pleg_running("node-b"), signer=B, seq=31)
    _, (_, pleg_out) = topics.journal
    assert claimed(pleg_out.headers).seq == 31
    # A successor that lost the records re-applies the journal with its headers.
    fold = BatchFold({}.get, HoldLimits(), 1 << 20, keyring=KEYRING, partitions=PARTITIONS)
    for _, out in topics.journal:
        fold.add_journal_entry(0, out.value, out.headers)
    record = fold.batch.changed[UID.encode()][1]
    assert record is not None and record["seqs"] == {"pod-updates": 30, "pleg": 31}


def test_without_a_keyring_records_are_unchanged() -> None:
    """No keyring, no proof: the record has no sequence field and the journal no headers, so a
    deployment without secrets folds exactly as before."""
    topics = Topics(keyring=None)
    pod = pods.pod(("main",), name="payments-0", namespace="prod", uid=UID, node="node-b")
    topics.send(Topic.POD_UPDATES, models.PodUpdate(PodOp.ADD, "api", "node-b", pod, T0), signer=B, seq=1)
    assert "seqs" not in topics.record()
    assert topics.journal[0][1].headers is None
