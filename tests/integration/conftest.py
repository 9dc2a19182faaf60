"""Fixtures for the integration tests, which run on the real parts.

`kafka_bootstrap` and `kubeconfig` start a real Kafka broker and a real etcd + kube-apiserver
(deploy/local via podledger.local) once per test session on free loopback ports, or use the
ones PODLEDGER_BOOTSTRAP / KUBECONFIG name. They are stopped at the end of the session, also
when tests fail; their logs are printed when any test failed.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from podledger import local
from podledger.config import Settings
from tests.support.processes import PodledgerProcess

_started: list[Any] = []


def _users_or_ours(env_var: str, start: Callable[[Path], Any], workdir: Path, attr: str) -> Iterator[str]:
    """The instance `env_var` names, or one started in `workdir` and stopped afterwards."""
    existing = os.environ.get(env_var)
    if existing:
        yield existing
        return
    handle = start(workdir)
    _started.append(handle)
    try:
        yield getattr(handle, attr)
    finally:
        handle.stop()


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from _users_or_ours(
        "PODLEDGER_BOOTSTRAP", local.start_kafka, tmp_path_factory.mktemp("kafka"), "bootstrap"
    )


@pytest.fixture(scope="session")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from _users_or_ours("KUBECONFIG", local.start_kube, tmp_path_factory.mktemp("kube"), "kubeconfig")


SECURE_USERS = ("fold", "sink", "consumer", "node-a", "node-b")


class SecureKafka:
    """The session's broker with SASL_SSL (SCRAM-SHA-512) and ACLs: an `admin` super user and the
    users of SECURE_USERS, each with a random password (podledger.local.broker.KafkaSecurity)."""

    def __init__(self, handle: local.KafkaHandle, security: local.KafkaSecurity) -> None:
        self.handle, self.security = handle, security
        self.bootstrap, self.log = handle.bootstrap, Path(handle.log)

    def password(self, user: str) -> str:
        return self.security.all_users()[user]

    def env(self, user: str, password: str | None = None) -> dict[str, str]:
        """PODLEDGER_BOOTSTRAP and PODLEDGER_KAFKA_* for a podledger process acting as `user`."""
        return self.handle.client_env(user, self.password(user) if password is None else password)

    def settings(
        self, user: str, topic_prefix: str, password: str | None = None, **overrides: Any
    ) -> Settings:
        return Settings.from_env(
            env=self.env(user, password), topic_prefix=topic_prefix, partitions=3, **overrides
        )

    def client_options(self, user: str, password: str | None = None) -> dict[str, Any]:
        """aiokafka keyword arguments to connect as `user`."""
        return self.handle.client_options(user, self.password(user) if password is None else password)


@pytest.fixture(scope="session")
def secure_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureKafka]:
    """A second broker, started once per session: SASL_SSL + SCRAM-SHA-512, TLS from its own CA,
    the StandardAuthorizer (nothing allowed without an ACL). Always ours: it needs its passwords."""
    security = local.KafkaSecurity.with_users(*SECURE_USERS)
    handle = local.start_kafka(tmp_path_factory.mktemp("secure-kafka"), security=security)
    _started.append(handle)
    try:
        yield SecureKafka(handle, security)
    finally:
        handle.stop()


@pytest.fixture
def topic_prefix() -> str:
    """A prefix of its own for each test, so tests never see each other's messages."""
    return f"t{uuid.uuid4().hex[:10]}."


@pytest.fixture
def node_name() -> str:
    return f"node-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def settings(kafka_bootstrap: str, topic_prefix: str, node_name: str, tmp_path: Path) -> Settings:
    return Settings.from_env(
        env={},
        bootstrap=kafka_bootstrap,
        topic_prefix=topic_prefix,
        partitions=3,
        node=node_name,
        data_dir=str(tmp_path / "faust"),
    )


@pytest.fixture
def podledger_process(
    tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., PodledgerProcess]]:
    procs: list[PodledgerProcess] = []

    def start(args: list[str], env: dict[str, str] | None = None) -> PodledgerProcess:
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("PODLEDGER_")}
        # Faust's working files and the process runtime's state stay inside the test's temp dir.
        full_env["PODLEDGER_DATA_DIR"] = str(tmp_path / f"faust-{len(procs)}")
        full_env["PODLEDGER_RUNTIME_STATE_DIR"] = str(tmp_path / f"runtime-{len(procs)}")
        full_env.update(env or {})
        proc = PodledgerProcess(args, full_env, tmp_path / f"podledger-{len(procs)}.log")
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        proc.stop()
        failed = getattr(request.node, "rep_call", None)
        if failed is not None and failed.failed:
            sys.stderr.write(f"\n--- output of podledger {proc.proc.args[3:]} ---\n{proc.output()[-6000:]}\n")


@pytest.fixture(scope="session")
def kubectl_binary() -> str:
    """The real kubectl, built once (deploy/local/kubectl, the apiserver's version) and cached."""
    from podledger.local.artifacts import fetch_kubectl

    return str(fetch_kubectl())


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if exitstatus == 0:
        return
    for handle in _started:
        logs = [handle.log] if hasattr(handle, "log") else list(handle.logs)
        for path in logs:
            sys.stderr.write(f"\n--- last lines of {path} ---\n{local.log_tail(Path(path), 40)}\n")
