"""A single-node KRaft Kafka broker on free loopback ports.

By default its one client listener is PLAINTEXT, without authentication (tests, benchmarks,
`make demo`). With `security=KafkaSecurity(...)` it is authenticated and authorized instead:

- clients connect over SASL_SSL with SCRAM-SHA-512; the certificates come from a private CA made
  for this instance (podledger.local.tls), the handle's `ca_file`;
- the SCRAM users (an `admin` super user plus the ones given) exist from the start: they are
  written into the metadata log when the data dir is formatted;
- brokers talk to each other as `admin` over SCRAM, and the controller listener (loopback) asks
  for a client certificate signed by the instance's CA, whose key is thrown away after signing;
- the KRaft StandardAuthorizer denies whatever no ACL allows (`podledger acls apply` grants each
  role what it needs); denials appear in the broker log (kafka.authorizer.logger).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import re
import secrets
import subprocess
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient

from podledger.errors import UserError
from podledger.local.artifacts import fetch_kafka
from podledger.local.processes import free_port, need_tool, port_open, spawn, stop_process, wait_until
from podledger.local.tls import make_broker_certs, write_private

KAFKA_JAVA_OPTS = ["-Xms256m", "-Xmx1g", "-XX:+UseG1GC", "-Djava.awt.headless=true"]


SCRAM_MECHANISM = "SCRAM-SHA-512"
# User names and passwords go into server.properties and the format command unquoted: keep them to
# characters that need no quoting there (secrets.token_urlsafe makes such passwords).
_SAFE = re.compile(r"[A-Za-z0-9._-]+")


def new_password() -> str:
    return secrets.token_urlsafe(24)


@dataclass(frozen=True)
class KafkaSecurity:
    """Run the broker with SASL_SSL (SCRAM-SHA-512), TLS and the StandardAuthorizer.

    `users` maps SCRAM user names to passwords; `admin` is a super user (no ACL applies to it)
    and the identity brokers use between themselves. Passwords never appear in repr().
    """

    admin_password: str = field(default_factory=new_password, repr=False)
    users: Mapping[str, str] = field(default_factory=dict, repr=False)
    admin: str = "admin"

    @classmethod
    def with_users(cls, *names: str) -> KafkaSecurity:
        """An admin and the named users, each with a new random password."""
        return cls(users={name: new_password() for name in names})

    def all_users(self) -> dict[str, str]:
        return {**self.users, self.admin: self.admin_password}

    def check(self) -> None:
        for name, password in self.all_users().items():
            if not _SAFE.fullmatch(name):
                raise UserError(f"Kafka user name {name!r}: use letters, digits, '.', '_' and '-' only")
            if not _SAFE.fullmatch(password):
                raise UserError(
                    f"the password of Kafka user {name!r} has characters other than letters, digits,"
                    " '.', '_' and '-'"
                )


@dataclass
class KafkaHandle:
    bootstrap: str
    pid: int
    workdir: str
    log: str
    # Set for a broker started with KafkaSecurity: what a client needs besides its user and password.
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = ""
    ca_file: str = ""

    def stop(self) -> None:
        stop_process(self.pid)

    def client_env(self, username: str = "", password: str = "") -> dict[str, str]:
        """The PODLEDGER_* variables that point a podledger process at this broker as `username`."""
        env = {
            "PODLEDGER_BOOTSTRAP": self.bootstrap,
            "PODLEDGER_KAFKA_SECURITY_PROTOCOL": self.security_protocol,
        }
        if self.security_protocol != "PLAINTEXT":
            env.update(
                PODLEDGER_KAFKA_SASL_MECHANISM=self.sasl_mechanism,
                PODLEDGER_KAFKA_SASL_USERNAME=username,
                PODLEDGER_KAFKA_SASL_PASSWORD=password,
                PODLEDGER_KAFKA_SSL_CAFILE=self.ca_file,
            )
        return env

    def client_options(self, username: str = "", password: str = "") -> dict[str, Any]:
        """aiokafka keyword arguments (bootstrap, security) to connect as `username`."""
        opts: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap,
            "security_protocol": self.security_protocol,
        }
        if self.security_protocol != "PLAINTEXT":
            from aiokafka.helpers import create_ssl_context

            opts.update(
                sasl_mechanism=self.sasl_mechanism,
                sasl_plain_username=username,
                sasl_plain_password=password,
                ssl_context=create_ssl_context(cafile=self.ca_file),
            )
        return opts


_KAFKA_LOG4J = """\
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.coordinator=WARN
log4j.logger.org.apache.kafka.coordinator=WARN
log4j.logger.state.change.logger=WARN
"""


def _listener_properties(port: int, controller_port: int) -> list[str]:
    return [
        f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
        "inter.broker.listener.name=PLAINTEXT",
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
    ]


def _secure_listener_properties(
    port: int, controller_port: int, security: KafkaSecurity, ca: str, keystore: str, cert_principal: str
) -> list[str]:
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required"
        f' username="{security.admin}" password="{security.admin_password}";'
    )
    return [
        f"listeners=SASL_SSL://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        f"advertised.listeners=SASL_SSL://127.0.0.1:{port}",
        "inter.broker.listener.name=SASL_SSL",
        "listener.security.protocol.map=CONTROLLER:SSL,SASL_SSL:SASL_SSL",
        # Clients and brokers: SCRAM over TLS.
        f"sasl.enabled.mechanisms={SCRAM_MECHANISM}",
        f"sasl.mechanism.inter.broker.protocol={SCRAM_MECHANISM}",
        f"listener.name.sasl_ssl.{SCRAM_MECHANISM.lower()}.sasl.jaas.config={jaas}",
        # One PEM keystore (key + chain) and the instance's CA as the truststore, for every listener.
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={keystore}",
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={ca}",
        # The controller listener only accepts a certificate from the instance's CA: the broker's own.
        "listener.name.controller.ssl.client.auth=required",
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found=false",
        f"super.users=User:{security.admin};{cert_principal}",
    ]


def _kafka_properties(workdir: Path, controller_port: int, listeners: list[str]) -> str:
    return "\n".join(
        [
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{controller_port}",
            *listeners,
            "controller.listener.names=CONTROLLER",
            f"log.dirs={workdir / 'data'}",
            # One node: every internal topic has one replica, and groups start without delay.
            "default.replication.factor=1",
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=10",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "transaction.state.log.num.partitions=10",
            "share.coordinator.state.topic.replication.factor=1",
            "group.initial.rebalance.delay.ms=0",
            "num.partitions=1",
            "auto.create.topics.enable=true",
            "log.flush.interval.messages=9223372036854775807",
            "",
        ]
    )


def start_kafka(
    workdir: Path,
    *,
    detached: bool = False,
    timeout: float = 120.0,
    security: KafkaSecurity | None = None,
) -> KafkaHandle:
    """Format a KRaft single-node data dir in `workdir` and run the broker on free ports.

    Without `security` the client listener is PLAINTEXT; with it, SASL_SSL + SCRAM-SHA-512 and ACLs
    (see the module docstring).
    """
    libs = fetch_kafka()
    java = need_tool("java", "install a Java 17 runtime (e.g. apt-get install openjdk-17-jre-headless)")
    workdir.mkdir(parents=True, exist_ok=True)
    port, controller_port = free_port(), free_port()
    format_args: list[str] = []
    ca_file = ""
    if security is None:
        listeners = _listener_properties(port, controller_port)
    else:
        security.check()
        certs = make_broker_certs(workdir / "tls")
        ca_file = certs.ca
        listeners = _secure_listener_properties(
            port, controller_port, security, certs.ca, certs.keystore, certs.principal
        )
        for name, password in sorted(security.all_users().items()):
            format_args += ["--add-scram", f"{SCRAM_MECHANISM}=[name={name},password={password}]"]
    props = workdir / "server.properties"
    # 0600: with security on it holds the admin's password (the inter-broker login).
    write_private(props, _kafka_properties(workdir, controller_port, listeners).encode())
    (workdir / "log4j.properties").write_text(_KAFKA_LOG4J)
    classpath = f"{libs}/*"
    log_opts = [f"-Dlog4j.configuration=file:{workdir / 'log4j.properties'}", f"-Dkafka.logs.dir={workdir}"]
    # As one "--cluster-id=" argument: a random id may start with "-", which argparse reads as an option.
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    # The format command's arguments (passwords, with security on) go through a 0600 argument file
    # that java reads itself, so they never show on a command line (ps, /proc/<pid>/cmdline).
    argfile = workdir / "format.args"
    storage_tool = [*log_opts, "-cp", classpath, "kafka.tools.StorageTool"]
    fmt_args = [*storage_tool, "format", f"--cluster-id={cluster_id}", "-c", str(props), *format_args]
    write_private(argfile, "\n".join(map(_argfile_quote, fmt_args)).encode())
    try:
        fmt = subprocess.run([java, f"@{argfile}"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    finally:
        argfile.unlink(missing_ok=True)
    if fmt.returncode != 0:
        output = fmt.stdout + fmt.stderr
        for password in security.all_users().values() if security else ():
            output = output.replace(password, "***")
        raise UserError(f"formatting the Kafka data dir failed:\n{output}")
    log_path = workdir / "kafka.log"
    pid = spawn(
        [java, *KAFKA_JAVA_OPTS, *log_opts, "-cp", classpath, "kafka.Kafka", str(props)],
        log_path,
        detached=detached,
    )

    handle = KafkaHandle(f"127.0.0.1:{port}", pid, str(workdir), str(log_path))
    if security is not None:
        handle.security_protocol, handle.sasl_mechanism, handle.ca_file = "SASL_SSL", SCRAM_MECHANISM, ca_file
        client = handle.client_options(security.admin, security.admin_password)
    else:
        client = handle.client_options()

    def ready() -> bool:
        return (
            port_open(port)
            and "Kafka Server started" in log_path.read_text(errors="replace")
            and _group_coordinator_ready(client)
        )

    wait_until(ready, pid, timeout, "the Kafka broker", log_path)
    return handle


def _argfile_quote(arg: str) -> str:
    """One argument of a java @argfile: in double quotes, where a backslash escapes."""
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _group_coordinator_ready(client: dict[str, Any]) -> bool:
    """Ask for a group coordinator: on a new broker this creates __consumer_offsets, so the
    first consumer group does not start with 'coordinator not available' errors."""

    async def check() -> bool:
        admin = AIOKafkaAdminClient(**client, request_timeout_ms=5000)
        try:
            await admin.start()
            await admin.find_coordinator("podledger-startup-probe")
            return True
        except Exception:
            return False
        finally:
            await admin.close()

    client_log = logging.getLogger("aiokafka")
    quiet, client_log.disabled = client_log.disabled, True
    try:
        return asyncio.run(check())
    finally:
        client_log.disabled = quiet


def restart_kafka(
    handle: KafkaHandle,
    *,
    security: KafkaSecurity | None = None,
    detached: bool = False,
    timeout: float = 120.0,
) -> None:
    """Stop the broker and start it again on the same data directory and ports, from the
    server.properties start_kafka wrote (no format: every topic and offset is kept), so clients
    ride through on the bootstrap address they have. `handle.pid` becomes the new process.

    Readiness is judged on the log written after this restart; for a broker started with
    `security`, pass it again so the group coordinator can be asked as the admin."""
    workdir, log_path = Path(handle.workdir), Path(handle.log)
    props = workdir / "server.properties"
    if not props.exists():
        raise UserError(f"no server.properties in {workdir}: not a broker start_kafka made")
    stop_process(handle.pid)
    java = need_tool("java", "install a Java 17 runtime (e.g. apt-get install openjdk-17-jre-headless)")
    log_opts = [f"-Dlog4j.configuration=file:{workdir / 'log4j.properties'}", f"-Dkafka.logs.dir={workdir}"]
    log_from = log_path.stat().st_size if log_path.exists() else 0
    handle.pid = spawn(
        [java, *KAFKA_JAVA_OPTS, *log_opts, "-cp", f"{fetch_kafka()}/*", "kafka.Kafka", str(props)],
        log_path,
        detached=detached,
    )
    port = int(handle.bootstrap.rsplit(":", 1)[1])
    admin = (security.admin, security.admin_password) if security is not None else ("", "")
    probe = handle.security_protocol == "PLAINTEXT" or security is not None

    def ready() -> bool:
        with open(log_path, "rb") as f:
            f.seek(log_from)
            started = b"Kafka Server started" in f.read()
        return (
            port_open(port)
            and started
            and (not probe or _group_coordinator_ready(handle.client_options(*admin)))
        )

    wait_until(ready, handle.pid, timeout, "the restarted Kafka broker", log_path)
