"""Node isolation on the shared topics, on the real broker and apiserver: two real node agents with
their own secrets, a fold with the keyring and the sink. Node A, holding its own secret and write
access to every ingress topic, attacks a pod of node B through each topic; nothing it sends runs a
container, makes a version, or reaches the apiserver, and each record is on dead-letter
(docs/architecture.md, "Node isolation on shared topics"). The sink and the node agents check the
apiserver's binding themselves (NodeRestriction)."""

from __future__ import annotations

import asyncio
import copy
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from podledger.agents.kube import Kube
from podledger.config import Settings
from podledger.keys import Signer, load_node_keys
from podledger.local.processes import free_port
from podledger.partitioner import partition_for_node
from podledger.schemas import decode, encode, models
from podledger.streams.topics import ensure_topics
from podledger.types import JSONDict, LifecycleKind, PodOp, Topic
from tests import pods
from tests.support import wait_for
from tests.support.kafka import publish_statuses, read_records
from tests.support.metrics import http_get, prometheus_samples, sample_value
from tests.support.node import RuntimeState
from tests.support.processes import podledger_env, run_podledger

pytestmark = [pytest.mark.kafka, pytest.mark.kube]


def two_node_names(settings: Settings) -> tuple[str, str]:
    """Names for nodes A and B on different partitions, so the partition check is exercised too."""
    suffix = uuid.uuid4().hex[:6]
    a = f"node-a-{suffix}"
    for i in range(100):
        b = f"node-b-{suffix}-{i}"
        if partition_for_node(b, settings.partitions) != partition_for_node(a, settings.partitions):
            return a, b
    raise AssertionError("no two partitions")


class Attacker:
    """Node A's position: its own secret, and a producer that writes any record to any partition."""

    def __init__(self, settings: Settings, signer: Signer) -> None:
        self.settings = settings
        self.signer = signer
        self.sent: list[tuple[str, int, int, str]] = []  # (topic, partition, offset, what)

    async def send(
        self,
        what: str,
        topic: str,
        value: Any,
        *,
        partition_of: str,
        sign: bool = True,
        raw: tuple[bytes, bytes, list[tuple[str, bytes]]] | None = None,
    ) -> None:
        if raw is not None:
            key, data, headers = raw
        else:
            key, data = value.uid.encode(), encode(value)
            headers = self.signer.headers(topic, key, data) if sign else []
        producer = AIOKafkaProducer(bootstrap_servers=self.settings.bootstrap)
        await producer.start()
        try:
            partition = partition_for_node(partition_of, self.settings.partitions)
            meta = await producer.send_and_wait(
                self.settings.topic(topic), key=key, value=data, partition=partition, headers=headers
            )
        finally:
            await producer.stop()
        self.sent.append((topic, meta.partition, meta.offset, what))


def b_pod(name: str, node: str, command: list[str]) -> JSONDict:
    return pods.pod([pods.container("main", "busybox", command=command)], name=name, uid=None, node=node)


def test_node_a_cannot_move_a_pod_of_node_b_through_any_topic(
    settings: Settings, kubeconfig: str, podledger_process: Any, tmp_path: Path
) -> None:
    node_a, node_b = two_node_names(settings)
    keys_dir = tmp_path / "keys"
    made = run_podledger(
        "keys", "new", node_a, node_b, "--dir", str(keys_dir), "--keyring", str(keys_dir / "ring")
    )
    assert made.returncode == 0, made.stderr
    asyncio.run(ensure_topics(settings))
    kube = Kube.from_kubeconfig(kubeconfig)
    for node in (node_a, node_b):
        kube.ensure_node(node)

    port = free_port()
    fold_sink = podledger_process(
        ["run", "--roles", "fold,sink"],
        env=podledger_env(
            settings,
            kubeconfig,
            PODLEDGER_HEALTH_PORT=str(port),
            PODLEDGER_KEYRING_FILE=str(keys_dir / "ring"),
            PODLEDGER_SINK_RECONCILE_MS="2000",
            PODLEDGER_LOG_LEVEL="info",
        ),
    )
    state: dict[str, RuntimeState] = {}
    agents = {}
    for node in (node_a, node_b):
        state[node] = RuntimeState(tmp_path / f"runtime-{node}")
        agents[node] = podledger_process(
            ["node"],
            env=podledger_env(
                settings,
                kubeconfig,
                PODLEDGER_NODE=node,
                PODLEDGER_NODE_SECRET_FILE=str(keys_dir / f"{node}.key"),
                PODLEDGER_RUNTIME="process",
                PODLEDGER_RUNTIME_STATE_DIR=str(tmp_path / f"runtime-{node}"),
                PODLEDGER_LOG_LEVEL="info",
            ),
        )

    # Node B's pod, running and Running in the apiserver.
    victim = kube.create_pod(b_pod(f"payments-{uuid.uuid4().hex[:6]}", node_b, ["sleep", "600"]))
    uid, name = victim["metadata"]["uid"], victim["metadata"]["name"]

    def running() -> JSONDict | None:
        status = kube.get_pod("default", name).get("status") or {}
        container = state[node_b].running(uid, "main")
        return container if status.get("phase") == "Running" and container else None

    container = wait_for(running, timeout=120, what="node B's pod Running", alive=fold_sink)
    history = asyncio.run(read_records(settings, Topic.POD_STATUS_HISTORY))
    versions_before = max(
        decode(Topic.POD_STATUS_HISTORY, r.value).version for r in history if r.key == uid.encode()
    )

    # ---------------------------------------------------------------- node A attacks node B's pod
    keys = load_node_keys(Settings(node=node_a, node_secret_file=str(keys_dir / f"{node_a}.key")))
    assert keys is not None
    attacker = Attacker(settings, Signer(keys))
    marker = tmp_path / "pwned"
    evil_command = ["sh", "-c", f"touch {marker}; sleep 600"]
    now = int(time.time() * 1000)

    def evil_pod(node: str, source_uid: str | None = None, name_: str | None = None) -> JSONDict:
        pod = pods.pod(
            [pods.container("main", "busybox", command=evil_command)],
            name=name_ or f"evil-{uuid.uuid4().hex[:6]}",
            uid=source_uid or str(uuid.uuid4()),
            node=node,
        )
        return pod

    deleting = copy.deepcopy(victim)
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    exited_runtime = {
        "containers": [
            {
                "id": "x1",
                "name": "main",
                "image": "busybox",
                "image_id": "",
                "state": "exited",
                "exit_code": 1,
                "reason": "Error",
                "message": None,
                "created_at": None,
                "started_at": None,
                "finished_at": None,
                "restart_count": 0,
            }
        ],
        "ips": ["127.0.0.1"],
        "sandbox": {"id": "s", "ready": False},
    }
    b_pleg = [r for r in asyncio.run(read_records(settings, Topic.PLEG)) if r.key == uid.encode()]
    assert b_pleg, "node B published pleg events for its pod"
    replayed = b_pleg[-1]

    async def attack() -> None:
        a = attacker
        static_b = models.PodUpdate(PodOp.ADD, "file", node_b, evil_pod(node_b), now)
        await a.send("static pod for B, A's proof", Topic.POD_UPDATES, static_b, partition_of=node_b)
        static_b2 = models.PodUpdate(PodOp.ADD, "file", node_b, evil_pod(node_b), now)
        await a.send(
            "static pod for B, unsigned", Topic.POD_UPDATES, static_b2, partition_of=node_b, sign=False
        )
        delete_b = models.PodUpdate(PodOp.DELETE, "api", node_b, deleting, now)
        await a.send("delete B's pod", Topic.POD_UPDATES, delete_b, partition_of=node_b)
        remove_b = models.PodUpdate(PodOp.REMOVE, "api", node_b, victim, now)
        await a.send("remove B's pod", Topic.POD_UPDATES, remove_b, partition_of=node_b)
        await a.send(
            "terminated, claims B",
            Topic.POD_LIFECYCLE,
            models.PodLifecycle(uid, node_b, LifecycleKind.TERMINATED, now),
            partition_of=node_b,
        )
        await a.send(
            "terminated, claims A",
            Topic.POD_LIFECYCLE,
            models.PodLifecycle(uid, node_a, LifecycleKind.TERMINATED, now),
            partition_of=node_a,
        )
        await a.send(
            "container died",
            Topic.PLEG,
            models.PlegEvent(uid, node_b, "ContainerDied", "x1", exited_runtime, now),
            partition_of=node_b,
        )
        await a.send(
            "readiness failure",
            Topic.PROBE_RESULTS,
            models.ProbeResult(uid, node_b, "main", container["id"], "readiness", "Failure", now),
            partition_of=node_b,
        )
        await a.send(
            "replay of B's own pleg record",
            Topic.PLEG,
            None,
            partition_of=node_b,
            raw=(replayed.key, replayed.value, list(replayed.headers)),
        )
        # A, under its own valid proof, claims B's pod for itself, with another command.
        hijack = models.PodUpdate(PodOp.ADD, "api", node_a, evil_pod(node_a, uid, name), now)
        await a.send("B's pod claimed by A", Topic.POD_UPDATES, hijack, partition_of=node_a)

    asyncio.run(attack())
    # A's own, validly signed claim of an API pod the apiserver does not have: A's agent refuses it.
    ghost = models.PodUpdate(PodOp.ADD, "api", node_a, evil_pod(node_a), now)
    asyncio.run(attacker.send("API pod the apiserver lacks", Topic.POD_UPDATES, ghost, partition_of=node_a))
    expected_letters = {(t, p, o): what for t, p, o, what in attacker.sent[:-1]}

    def all_dead_lettered() -> dict[tuple[str, int, int], str] | None:
        letters = [
            decode(Topic.DEAD_LETTER, r.value) for r in asyncio.run(read_records(settings, Topic.DEAD_LETTER))
        ]
        found = {(d.topic, d.partition, d.offset): d.reason for d in letters}
        return found if expected_letters.keys() <= found.keys() else None

    try:
        found = wait_for(all_dead_lettered, timeout=60, what="every attack on dead-letter", alive=fold_sink)
    except AssertionError:
        letters = [
            decode(Topic.DEAD_LETTER, r.value) for r in asyncio.run(read_records(settings, Topic.DEAD_LETTER))
        ]
        shown = {(d.topic, d.partition, d.offset): (d.reason, d.detail) for d in letters}
        raise AssertionError(f"sent {attacker.sent}; dead-letter holds {shown}") from None
    reasons = {expected_letters[k]: found[k] for k in expected_letters}
    assert reasons == {
        what: ("replayed" if what.startswith("replay") else "forged") for what in expected_letters.values()
    }
    time.sleep(5)  # give any effect time to show: two relists, a sink pass and a reconcile

    # No version, no journal entry came from any attack.
    attacked = {(t, p, o) for t, p, o, _ in attacker.sent[:-1]}
    journal = [decode(Topic.JOURNAL, r.value) for r in asyncio.run(read_records(settings, Topic.JOURNAL))]
    assert not attacked & {(j.topic, j.partition, j.offset) for j in journal}
    history = [
        decode(Topic.POD_STATUS_HISTORY, r.value)
        for r in asyncio.run(read_records(settings, Topic.POD_STATUS_HISTORY))
    ]
    causes = {(v.cause.topic, v.cause.partition, v.cause.offset) for v in history}
    assert not attacked & causes
    assert max(v.version for v in history if v.uid == uid) == versions_before

    # The apiserver: B's pod is still there, Running, not deleted, with no status from A.
    api = kube.get_pod("default", name)
    assert api["metadata"]["uid"] == uid and not api["metadata"].get("deletionTimestamp")
    assert api["status"]["phase"] == "Running"
    ready = {c["type"]: c["status"] for c in api["status"]["conditions"]}["Ready"]
    assert ready == "True"

    # The nodes: B's container runs on, nothing evil ran anywhere.
    still = state[node_b].running(uid, "main")
    assert still is not None and still["id"] == container["id"]
    assert not marker.exists()
    for node in (node_a, node_b):
        known = state[node].path.read_text() if state[node].path.exists() else ""
        assert "evil-" not in known and evil_command[2] not in known
    assert state[node_a].containers(uid) == []
    assert state[node_a].containers(ghost.uid) == []
    for agent in agents.values():
        assert agent.proc.poll() is None, agent.output()
    assert "apiserver binds the pod to" in agents[node_a].output()
    assert "the apiserver has no such pod" in agents[node_a].output()

    # With the keyring the native core folded the proven batches; those with an attack went to the
    # Python fold, which dead-lettered it.
    samples = prometheus_samples(http_get(port, "/metrics")[1])
    native = sample_value(samples, "podledger_fold_native_batches_total") or 0
    python = sample_value(samples, "podledger_fold_python_batches_total") or 0
    assert native >= 1 and python >= 1, (native, python)


def test_the_sink_writes_only_to_pods_bound_to_the_versions_node(
    settings: Settings, kubeconfig: str, podledger_process: Any
) -> None:
    """A pod-status version that names another node than the API pod's binding is neither PATCHed
    nor DELETEd (as NodeRestriction refuses a kubelet); the right node's version is written."""
    asyncio.run(ensure_topics(settings))
    kube = Kube.from_kubeconfig(kubeconfig)
    bound_to = f"node-c-{uuid.uuid4().hex[:6]}"
    pod = kube.create_pod(b_pod(f"ledger-{uuid.uuid4().hex[:6]}", bound_to, ["sleep", "1"]))
    name = pod["metadata"]["name"]
    sink = podledger_process(
        ["run", "--roles", "sink"], env=podledger_env(settings, kubeconfig, PODLEDGER_LOG_LEVEL="info")
    )
    running = pods.running_status(image="busybox")
    asyncio.run(publish_statuses(settings, pods.versioned(pod, bound_to, 1, running)))
    wait_for(
        lambda: (kube.get_pod("default", name).get("status") or {}).get("phase") == "Running",
        timeout=60,
        what="the bound node's version written",
        alive=sink,
    )
    failed = {**running, "phase": "Failed"}
    forged = pods.versioned(pod, "node-a", 2, failed, running=False, finished=True)
    asyncio.run(publish_statuses(settings, forged))
    wait_for(lambda: "v2 not written" in sink.output(), timeout=60, what="the sink refusing v2", alive=sink)
    api = kube.get_pod("default", name)
    assert api["status"]["phase"] == "Running"
    assert f"bound to '{bound_to}', the status comes from node 'node-a'" in sink.output()
