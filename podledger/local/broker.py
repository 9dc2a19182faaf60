"""A single-node KRaft Kafka broker on free loopback ports."""

from __future__ import annotations

import asyncio
import base64
import logging
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from aiokafka.admin import AIOKafkaAdminClient

from podledger.errors import UserError
from podledger.local.artifacts import fetch_kafka
from podledger.local.processes import free_port, need_tool, port_open, spawn, stop_process, wait_until

KAFKA_JAVA_OPTS = ["-Xms256m", "-Xmx1g", "-XX:+UseG1GC", "-Djava.awt.headless=true"]


@dataclass
class KafkaHandle:
    bootstrap: str
    pid: int
    workdir: str
    log: str

    def stop(self) -> None:
        stop_process(self.pid)


_KAFKA_LOG4J = """\
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.coordinator=WARN
log4j.logger.org.apache.kafka.coordinator=WARN
log4j.logger.state.change.logger=WARN
"""


def _kafka_properties(workdir: Path, port: int, controller_port: int) -> str:
    return "\n".join(
        [
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{controller_port}",
            f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
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


def start_kafka(workdir: Path, *, detached: bool = False, timeout: float = 120.0) -> KafkaHandle:
    """Format a KRaft single-node data dir in `workdir` and run the broker on free ports."""
    libs = fetch_kafka()
    java = need_tool("java", "install a Java 17 runtime (e.g. apt-get install openjdk-17-jre-headless)")
    workdir.mkdir(parents=True, exist_ok=True)
    port, controller_port = free_port(), free_port()
    props = workdir / "server.properties"
    props.write_text(_kafka_properties(workdir, port, controller_port))
    (workdir / "log4j.properties").write_text(_KAFKA_LOG4J)
    classpath = f"{libs}/*"
    log_opts = [f"-Dlog4j.configuration=file:{workdir / 'log4j.properties'}", f"-Dkafka.logs.dir={workdir}"]
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    fmt = subprocess.run(
        [
            java,
            *log_opts,
            "-cp",
            classpath,
            "kafka.tools.StorageTool",
            "format",
            "-t",
            cluster_id,
            "-c",
            str(props),
        ],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    if fmt.returncode != 0:
        raise UserError(f"formatting the Kafka data dir failed:\n{fmt.stdout}{fmt.stderr}")
    log_path = workdir / "kafka.log"
    pid = spawn(
        [java, *KAFKA_JAVA_OPTS, *log_opts, "-cp", classpath, "kafka.Kafka", str(props)],
        log_path,
        detached=detached,
    )

    def ready() -> bool:
        return (
            port_open(port)
            and "Kafka Server started" in log_path.read_text(errors="replace")
            and _group_coordinator_ready(f"127.0.0.1:{port}")
        )

    wait_until(ready, pid, timeout, "the Kafka broker", log_path)
    return KafkaHandle(f"127.0.0.1:{port}", pid, str(workdir), str(log_path))


def _group_coordinator_ready(bootstrap: str) -> bool:
    """Ask for a group coordinator: on a new broker this creates __consumer_offsets, so the
    first consumer group does not start with 'coordinator not available' errors."""

    async def check() -> bool:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
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
