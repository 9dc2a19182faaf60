"""Authenticated, authorized Kafka on the real broker (README.md, "Securing Kafka"; the grants are in
podledger/acls.py): SASL_SSL with SCRAM-SHA-512 over TLS from the launcher's own CA, the
StandardAuthorizer, and `podledger acls apply`.

One secure broker serves the whole session (`secure_kafka`); each test has a topic prefix of its
own, so its topics and ACLs are its own too.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.conn import create_conn
from aiokafka.errors import (
    GroupAuthorizationFailedError,
    KafkaConnectionError,
    SaslAuthenticationFailed,
    TopicAuthorizationFailedError,
)
from aiokafka.helpers import create_ssl_context

from podledger.acls import Binding, Operation, PatternType, Permission, Principals, ResourceType
from podledger.agents.kube import Kube
from podledger.kafka_acls import apply_acls, create_acls, start_admin
from podledger.schemas import decode
from podledger.streams.topics import ensure_topics
from tests.support import wait_for
from tests.support.node import create_api_pod, pod_status
from tests.support.processes import podledger_env, run_podledger

pytestmark = pytest.mark.kafka

ROLES = Principals(nodes=("node-a", "node-b"), fold="fold", sink="sink", consumers=("consumer",))


PRINCIPAL_ARGS = ["--nodes", "node-a,node-b", "--fold", "fold", "--sink", "sink", "--consumers", "consumer"]


def admin_env(secure: Any, prefix: str) -> dict[str, str]:
    return {**secure.env("admin"), "PODLEDGER_TOPIC_PREFIX": prefix, "PODLEDGER_PARTITIONS": "3"}


def grant(secure: Any, prefix: str) -> None:
    """Topics (made by the admin, as `topics create` in production) and every role's ACLs."""
    admin = secure.settings("admin", prefix)
    asyncio.run(ensure_topics(admin))
    asyncio.run(apply_acls(admin, ROLES, f"{prefix}consumer."))


def denials(secure: Any, prefix: str) -> list[str]:
    """The broker's authorizer log lines that refused something on this test's resources."""
    return [
        line
        for line in secure.log.read_text(errors="replace").splitlines()
        if "is Denied operation" in line and prefix in line
    ]


# --------------------------------------------------------------------------------------------------
# podledger acls apply
# --------------------------------------------------------------------------------------------------


def test_acls_apply_prints_what_it_adds_changes_nothing_twice_and_removes_a_stale_grant(
    secure_kafka: Any, topic_prefix: str
) -> None:
    env = admin_env(secure_kafka, topic_prefix)
    created = run_podledger("topics", "create", env=env)
    assert created.returncode == 0, created.stderr

    dry = run_podledger("acls", "apply", "--dry-run", *PRINCIPAL_ARGS, env=env)
    assert dry.returncode == 0, dry.stderr
    assert f"would add    User:fold WRITE topic {topic_prefix}journal" in dry.stdout.splitlines()

    first = run_podledger("acls", "apply", *PRINCIPAL_ARGS, env=env)
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    added = [line.split(None, 1)[1] for line in lines if line.startswith("added ")]
    assert len(added) == 49  # 7 per node agent, 21 for the fold, 8 for the sink, 6 for the consumer
    for expected in (
        f"User:node-a WRITE topic {topic_prefix}pod-updates",
        f"User:node-b READ topic {topic_prefix}pod-status",
        f"User:fold READ group {topic_prefix}fold",
        f"User:sink WRITE topic {topic_prefix}pod-deletions",
        f"User:consumer READ group {topic_prefix}consumer.*",
    ):
        assert expected in added
    assert lines[-1] == "49 added, 0 removed, 0 unchanged"

    second = run_podledger("acls", "apply", *PRINCIPAL_ARGS, env=env)
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines() == ["no change: 49 bindings as wanted"]

    # A grant someone added by hand on podledger's topics is stale: apply removes it. A DENY and a
    # grant on another deployment's topic are not apply's to manage.
    stale = Binding(
        "User:consumer", ResourceType.TOPIC, f"{topic_prefix}pod-status", PatternType.LITERAL, Operation.WRITE
    )
    deny = Binding(
        "User:node-b",
        ResourceType.TOPIC,
        f"{topic_prefix}pleg",
        PatternType.LITERAL,
        Operation.WRITE,
        Permission.DENY,
    )
    foreign = Binding(
        "User:consumer", ResourceType.TOPIC, f"x{topic_prefix}pleg", PatternType.LITERAL, Operation.WRITE
    )

    async def add_by_hand() -> None:
        admin = await start_admin(secure_kafka.settings("admin", topic_prefix))
        try:
            await create_acls(admin, [stale, deny, foreign])
        finally:
            await admin.close()

    asyncio.run(add_by_hand())
    third = run_podledger("acls", "apply", *PRINCIPAL_ARGS, env=env)
    assert third.returncode == 0, third.stderr
    assert third.stdout.splitlines() == [
        f"removed      User:consumer WRITE topic {topic_prefix}pod-status",
        "0 added, 1 removed, 49 unchanged",
    ]
    # Dropping a node from the list removes its grants.
    fourth = run_podledger(
        "acls",
        "apply",
        "--nodes",
        "node-a",
        "--fold",
        "fold",
        "--sink",
        "sink",
        "--consumers",
        "consumer",
        env=env,
    )
    assert fourth.returncode == 0, fourth.stderr
    assert fourth.stdout.splitlines()[-1] == "0 added, 7 removed, 42 unchanged"
    assert all("User:node-b" in line for line in fourth.stdout.splitlines()[:-1])


def test_only_an_admin_may_apply_acls_or_create_topics(secure_kafka: Any, topic_prefix: str) -> None:
    env = {**secure_kafka.env("fold"), "PODLEDGER_TOPIC_PREFIX": topic_prefix}
    refused = run_podledger("acls", "apply", env=env)
    assert refused.returncode == 2
    assert "refused to describe ACLs (ClusterAuthorizationFailedError)" in refused.stderr
    refused = run_podledger("topics", "create", env={**env, "PODLEDGER_PARTITIONS": "3"})
    assert refused.returncode != 0
    assert "TopicAuthorizationFailed" in refused.stderr or "creating topic" in refused.stderr


def test_acls_user_adds_and_changes_a_scram_user_on_the_running_broker(secure_kafka: Any) -> None:
    name, first, second = f"auditor-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex, uuid.uuid4().hex

    def set_password(password: str) -> None:
        # As run_podledger, with the password on stdin (never on the command line).
        base = {k: v for k, v in os.environ.items() if not k.startswith("PODLEDGER_") and k != "KUBECONFIG"}
        result = subprocess.run(
            [sys.executable, "-m", "podledger.cli", "acls", "user", name],
            env={**base, **secure_kafka.env("admin")},
            input=f"{password}\n",
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout == f"set SCRAM-SHA-512 credential of {name}\n"
        assert password not in result.stdout + result.stderr

    async def authenticates(password: str) -> bool:
        try:
            conn = await _connect(secure_kafka, **_sasl(secure_kafka, name, password))
        except SaslAuthenticationFailed:
            return False
        conn.close()
        return True

    set_password(first)
    wait_for(lambda: asyncio.run(authenticates(first)), timeout=30, what="the new user to authenticate")
    set_password(second)
    wait_for(lambda: asyncio.run(authenticates(second)), timeout=30, what="the new password to work")
    assert not asyncio.run(authenticates(first))


# --------------------------------------------------------------------------------------------------
# Every role end to end under its own principal
# --------------------------------------------------------------------------------------------------


@pytest.mark.kube
def test_each_role_works_end_to_end_under_its_own_principal(
    secure_kafka: Any, topic_prefix: str, node_name: str, kubeconfig: str, podledger_process: Any
) -> None:
    grant(secure_kafka, topic_prefix)
    settings = secure_kafka.settings("admin", topic_prefix, node=node_name)
    kube = Kube.from_kubeconfig(kubeconfig)
    kube.ensure_node(node_name)

    def env(user: str, **extra: str) -> dict[str, str]:
        return podledger_env(
            settings, kubeconfig, **secure_kafka.env(user), PODLEDGER_LOG_LEVEL="info", **extra
        )

    procs = {
        "node": podledger_process(["node"], env=env("node-a", PODLEDGER_RUNTIME="sim")),
        "fold": podledger_process(["run", "--roles", "fold"], env=env("fold")),
        # Its own Faust app id: a Faust worker joins the group named after it (README, "Securing Kafka").
        "sink": podledger_process(
            ["run", "--roles", "sink"], env=env("sink", PODLEDGER_APP_ID=f"{topic_prefix}sink-worker")
        ),
    }
    name = f"auth-{uuid.uuid4().hex[:6]}"
    uid = create_api_pod(kube, node_name, name)["metadata"]["uid"]

    def running() -> bool:
        for role, proc in procs.items():
            assert proc.proc.poll() is None, f"the {role} exited:\n{proc.output()[-3000:]}"
        return pod_status(kube, name).get("phase") == "Running"

    wait_for(running, timeout=120, what="the pod Running in the apiserver")
    users = {"node": "node-a", "fold": "fold", "sink": "sink"}
    for role, proc in procs.items():
        assert f"Authenticated as {users[role]} via SCRAM-SHA-512" in proc.output()

    # The read-only consumer reads pod-status in a group under its prefix, and commits there.
    async def consume() -> list[Any]:
        consumer = AIOKafkaConsumer(
            f"{topic_prefix}pod-status",
            group_id=f"{topic_prefix}consumer.audit",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            **secure_kafka.client_options("consumer"),
        )
        await consumer.start()
        try:
            seen: list[Any] = []
            async with asyncio.timeout(30):
                while not any(vs.uid == uid and vs.status.get("phase") == "Running" for vs in seen):
                    batch = await consumer.getmany(timeout_ms=1000)
                    seen += [decode("pod-status", m.value) for ms in batch.values() for m in ms if m.value]
            await consumer.commit()
            return seen
        finally:
            await consumer.stop()

    statuses = asyncio.run(consume())
    assert {vs.node for vs in statuses if vs.uid == uid} == {node_name}
    # Nothing any role did was refused: the grants are enough.
    assert denials(secure_kafka, topic_prefix) == []

    # ... but the consumer cannot commit offsets for the fold's group.
    async def commit_as_the_fold() -> None:
        consumer = AIOKafkaConsumer(
            group_id=f"{topic_prefix}fold",
            enable_auto_commit=False,
            **secure_kafka.client_options("consumer"),
        )
        await consumer.start()
        try:
            tp = TopicPartition(f"{topic_prefix}pod-status", 0)
            consumer.assign([tp])
            await consumer.commit({tp: 0})
        finally:
            await consumer.stop()

    with pytest.raises(GroupAuthorizationFailedError):
        asyncio.run(commit_as_the_fold())


# --------------------------------------------------------------------------------------------------
# What the broker refuses
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def granted_prefix(secure_kafka: Any) -> str:
    """One prefix with topics and every role's ACLs, shared by the refusal tests below."""
    prefix = f"t{uuid.uuid4().hex[:10]}."
    grant(secure_kafka, prefix)
    return prefix


OUTSIDE_THE_GRANT = [
    ("node-a", "pod-status"),
    ("node-a", "journal"),
    ("node-b", "fold-state"),
    ("fold", "pod-updates"),
    ("fold", "pod-deletions"),
    ("sink", "pod-status"),
    ("sink", "pod-updates"),
    ("consumer", "pod-status"),
    ("consumer", "journal"),
    ("consumer", "pod-updates"),
    ("consumer", "dead-letter"),
]


@pytest.mark.parametrize(("user", "topic"), OUTSIDE_THE_GRANT)
def test_a_write_outside_the_grant_is_refused(
    secure_kafka: Any, granted_prefix: str, user: str, topic: str
) -> None:
    async def produce() -> None:
        producer = AIOKafkaProducer(**secure_kafka.client_options(user), request_timeout_ms=10000)
        await producer.start()
        try:
            await producer.send_and_wait(f"{granted_prefix}{topic}", b"forged", key=b"uid", partition=0)
        finally:
            await producer.stop()

    with pytest.raises(TopicAuthorizationFailedError):
        asyncio.run(produce())


def test_a_write_inside_the_grant_is_accepted(secure_kafka: Any, granted_prefix: str) -> None:
    """The counterpart of the refusals: same client, same code path, a topic the user may write."""

    async def produce() -> None:
        producer = AIOKafkaProducer(**secure_kafka.client_options("node-a"), enable_idempotence=True)
        await producer.start()
        try:
            await producer.send_and_wait(f"{granted_prefix}pleg", b"{}", key=b"uid", partition=0)
        finally:
            await producer.stop()

    asyncio.run(produce())


def _connect(secure: Any, **options: Any) -> Any:
    host, port = secure.bootstrap.rsplit(":", 1)
    return create_conn(host, int(options.pop("port", port)), request_timeout_ms=10000, **options)


def _sasl(secure: Any, user: str, password: str) -> dict[str, Any]:
    return {
        "security_protocol": "SASL_SSL",
        "ssl_context": create_ssl_context(cafile=secure.handle.ca_file),
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }


@pytest.mark.parametrize(
    ("user", "password"),
    [("fold", "not-the-password"), ("admin", "not-the-password"), ("mallory", "anything")],
)
def test_a_wrong_password_or_an_unknown_user_is_not_authenticated(
    secure_kafka: Any, user: str, password: str
) -> None:
    with pytest.raises(SaslAuthenticationFailed):
        asyncio.run(_connect(secure_kafka, **_sasl(secure_kafka, user, password)))


def test_plaintext_on_the_tls_port_and_the_controller_without_a_certificate_are_refused(
    secure_kafka: Any,
) -> None:
    async def ask(**options: Any) -> None:
        from aiokafka.protocol.metadata import MetadataRequest

        conn = await _connect(secure_kafka, **options)
        try:
            await conn.send(MetadataRequest([]))
        finally:
            conn.close()

    with pytest.raises(KafkaConnectionError):
        asyncio.run(ask())
    # The controller listener (loopback) wants a client certificate from the instance's CA, whose
    # key is gone: TLS with the right CA but no certificate gets nowhere.
    props = (Path(secure_kafka.handle.workdir) / "server.properties").read_text()
    voters = re.search(r"controller\.quorum\.voters=1@127\.0\.0\.1:(\d+)", props)
    assert voters is not None
    controller_port = int(voters.group(1))
    with pytest.raises(KafkaConnectionError):
        asyncio.run(
            ask(
                port=controller_port,
                security_protocol="SSL",
                ssl_context=create_ssl_context(cafile=secure_kafka.handle.ca_file),
            )
        )


# --------------------------------------------------------------------------------------------------
# Passwords stay secret
# --------------------------------------------------------------------------------------------------


def test_the_password_never_appears_in_a_failed_run_or_in_settings(
    secure_kafka: Any, topic_prefix: str, tmp_path: Path
) -> None:
    wrong = f"wrong-{uuid.uuid4().hex}"
    real = secure_kafka.password("fold")
    base = {
        "PODLEDGER_TOPIC_PREFIX": topic_prefix,
        "PODLEDGER_PARTITIONS": "3",
        "PODLEDGER_LOG_LEVEL": "debug",
    }
    runs = {
        # Not authenticated: one error line, naming the user, not the password.
        "topics create": run_podledger("topics", "create", env={**base, **secure_kafka.env("admin", wrong)}),
        "acls apply": run_podledger("acls", "apply", env={**base, **secure_kafka.env("admin", wrong)}),
        "node": run_podledger(
            "node",
            env={
                **base,
                **secure_kafka.env("node-a", wrong),
                "PODLEDGER_API_SOURCE": "false",
                "PODLEDGER_RUNTIME": "sim",
                "PODLEDGER_RUNTIME_STATE_DIR": str(tmp_path / "runtime"),
            },
            timeout=120,
        ),
        # Authenticated, but this prefix has no ACLs: Faust's worker stops on the refusal.
        "run --roles fold": run_podledger(
            "run",
            "--roles",
            "fold",
            env={**base, **secure_kafka.env("fold"), "PODLEDGER_DATA_DIR": str(tmp_path / "faust")},
            timeout=120,
        ),
    }
    for what, result in runs.items():
        assert result.returncode != 0, what
        output = result.stdout + result.stderr
        assert wrong not in output and real not in output, what
    assert "cannot reach the Kafka broker" in runs["acls apply"].stderr
    assert "as 'admin'" in runs["acls apply"].stderr
    assert "TopicAuthorizationFailedError" in runs["run --roles fold"].stderr
    # The debug lines of aiokafka were there, SASL exchanges included, with the tokens hidden.
    assert "<SASL token hidden>" in runs["run --roles fold"].stderr

    settings = secure_kafka.settings("fold", topic_prefix)
    assert real not in repr(settings) and real not in str(settings)
    # Nor does the broker log any password.
    log = secure_kafka.log.read_text(errors="replace")
    assert not any(
        secure_kafka.password(user) in log for user in ("admin", "fold", "sink", "consumer", "node-a")
    )
