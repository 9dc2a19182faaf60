"""podledger's topics (docs/architecture.md#topics-and-partitioning): names, cleanup, retention, and
their declarative creation."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import KafkaConnectionError, KafkaError

from podledger.config import Settings
from podledger.errors import UserError
from podledger.kafka import new_consumer
from podledger.streams.topic_state import (
    configs_match,
    topic_configs,
    topic_overrides,
    topic_partitions,
    topic_replication,
)
from podledger.types import Topic

DAY_MS = 86_400_000
TOPIC_ALREADY_EXISTS = 36  # Kafka protocol error code


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str  # logical name; the Kafka topic is prefix + name
    cleanup: str  # "delete" or "compact"
    retention_ms: int  # -1 keeps forever
    purpose: str
    extra: tuple[tuple[str, str], ...] = ()  # further topic configs, as (name, value)

    def configs(self, replication_factor: int = 1) -> dict[str, str]:
        configs = {
            "cleanup.policy": self.cleanup,
            "retention.ms": str(self.retention_ms),
            # With acks=all, a write needs this many in-sync copies: one broker's loss loses nothing
            # acknowledged, yet one broker down still lets writes through (3 replicas).
            "min.insync.replicas": str(min(2, replication_factor)),
        }
        if self.cleanup == "compact":
            # Tombstones stay a day so a consumer that lags less than that still sees them.
            configs["delete.retention.ms"] = str(DAY_MS)
        return configs | dict(self.extra)


# The broker stamps a record when it appends it, whatever the writer set: the stamps of a partition
# then rise with its offsets on one clock nobody can forge, which the watermark needs
# (streams/watermark.py); the fold's event time (held events, transition times) is that stamp too.
BROKER_TIME = (("message.timestamp.type", "LogAppendTime"),)
# The watermarks topic gets one record per partition per tick: small segments let compaction keep
# it at one record a key instead of a week of them.
WATERMARK_SEGMENTS = (("segment.ms", str(3_600_000)),)

# "Long retention" (pod-updates, journal, history) is 90 days: the audit window. Transient
# channels keep a week, enough to replay after an outage of the consumers.
TOPICS: tuple[TopicSpec, ...] = (
    TopicSpec(Topic.POD_UPDATES, "delete", 90 * DAY_MS, "pod config changes from the sources", BROKER_TIME),
    TopicSpec(Topic.PLEG, "delete", 7 * DAY_MS, "PLEG events with the runtime snapshot", BROKER_TIME),
    TopicSpec(Topic.PROBE_RESULTS, "delete", 7 * DAY_MS, "changed probe results", BROKER_TIME),
    # As long as pod-updates: a restarted node agent replays both to know which pods it finished.
    TopicSpec(
        Topic.POD_LIFECYCLE,
        "delete",
        90 * DAY_MS,
        "pod worker facts: sync results, termination",
        BROKER_TIME,
    ),
    TopicSpec(Topic.JOURNAL, "delete", 90 * DAY_MS, "input events in the order the fold applied them"),
    TopicSpec(Topic.POD_STATUS, "compact", -1, "latest versioned status per pod"),
    TopicSpec(Topic.POD_STATUS_HISTORY, "delete", 90 * DAY_MS, "every status version with its cause"),
    TopicSpec(Topic.POD_DELETIONS, "delete", 7 * DAY_MS, "pods the sink deleted from the apiserver"),
    TopicSpec(Topic.DEAD_LETTER, "delete", 30 * DAY_MS, "rejected input with reason and coordinates"),
    TopicSpec(
        Topic.POD_STATUS_WATERMARKS,
        "compact",
        -1,
        "per partition, the time up to which every input has been applied",
        BROKER_TIME + WATERMARK_SEGMENTS,
    ),
)
# Topics only podledger reads: their values are no public contract.
INTERNAL_TOPICS: tuple[TopicSpec, ...] = (
    TopicSpec(Topic.FOLD_STATE, "compact", -1, "the fold's pod records and journal markers (its changelog)"),
    TopicSpec(Topic.SINK_STATE, "compact", -1, "the last version the sink wrote, per API pod"),
)
ALL_TOPICS = TOPICS + INTERNAL_TOPICS


@dataclass(frozen=True, slots=True)
class TopicChange:
    topic: str
    action: str  # "created", "unchanged", "altered"
    detail: str = ""


def admin_client(settings: Settings, client_id: str = "podledger-admin") -> AIOKafkaAdminClient:
    return AIOKafkaAdminClient(
        bootstrap_servers=settings.bootstrap,
        client_id=client_id,
        request_timeout_ms=15000,
        **settings.kafka_client_options(),
    )


async def start_admin(settings: Settings, client_id: str = "podledger-admin") -> AIOKafkaAdminClient:
    """A started admin client, or a one-line UserError (a wrong password looks, to aiokafka, like
    an unreachable broker, so the message names both)."""
    admin = admin_client(settings, client_id)
    client_log = logging.getLogger("aiokafka")
    quiet, client_log.disabled = client_log.disabled, True  # our one-line error says it better
    try:
        await asyncio.wait_for(admin.start(), timeout=20)
    except (TimeoutError, KafkaConnectionError, KafkaError, OSError) as exc:
        await admin.close()
        who = f" as {settings.kafka_sasl_username!r}" if settings.kafka_sasl_username else ""
        raise UserError(
            f"cannot reach the Kafka broker at {settings.bootstrap!r}{who} ({exc.__class__.__name__}):"
            " start it with 'podledger local up' or set PODLEDGER_BOOTSTRAP, and check the"
            " PODLEDGER_KAFKA_* settings"
        ) from None
    finally:
        client_log.disabled = quiet
    return admin


async def ensure_topics(settings: Settings) -> list[TopicChange]:
    """Create every topic that is missing; bring drifted configs back. Idempotent."""
    admin = await start_admin(settings)
    rf = settings.replication_factor
    try:
        wanted = {settings.topic(t.name): t for t in ALL_TOPICS}
        existing = set(await admin.list_topics())
        missing = [name for name in wanted if name not in existing]
        changes: list[TopicChange] = []
        if missing:
            response = await admin.create_topics(
                [
                    NewTopic(
                        name,
                        num_partitions=settings.partitions,
                        replication_factor=settings.replication_factor,
                        topic_configs=wanted[name].configs(rf),
                    )
                    for name in missing
                ]
            )
            for name, code, *rest in response.topic_errors:
                if code == TOPIC_ALREADY_EXISTS:
                    existing.add(name)  # created meanwhile, e.g. by a concurrent run: verify it below
                elif code != 0:
                    message = rest[0] if rest else ""
                    raise UserError(f"creating topic {name} failed: error {code} {message or ''}".strip())
                else:
                    changes.append(TopicChange(name, "created"))
        created = [c.topic for c in changes]
        if created:
            await _until(lambda: _topics_listed(admin, created), "new topics to appear in the metadata")
            await _until_led(settings, created)
        present = [name for name in wanted if name in existing]
        if rf == 1 and not _is_loopback(settings.bootstrap):
            changes.append(
                TopicChange(
                    "*",
                    "warning",
                    f"replication factor 1 on {settings.bootstrap}: one broker's disk holds the only copy"
                    " (set PODLEDGER_REPLICATION_FACTOR=3)",
                )
            )
        if present:
            replication = await topic_replication(admin, present)
            for name, replicas in replication.items():
                if replicas < rf:
                    detail = f"{replicas} replicas, {rf} configured: reassign its partitions to raise it"
                    changes.append(TopicChange(name, "warning", detail))
            partitions = await topic_partitions(admin, present)

            def configs_of(name: str) -> dict[str, str]:
                # min.insync.replicas by the copies a topic really has: more than it has would
                # refuse every acks=all write until its partitions are reassigned.
                return wanted[name].configs(min(rf, replication[name]))

            for name in present:
                if partitions[name] != settings.partitions:
                    raise UserError(
                        f"topic {name} has {partitions[name]} partitions but podledger is configured"
                        f" for {settings.partitions}; all topics must share one count"
                        " (co-partitioning): set PODLEDGER_PARTITIONS or use another topic prefix"
                    )
            current = await topic_configs(admin, present)
            drifted = {
                name: {k: v for k, v in configs_of(name).items() if current[name].get(k) != v}
                for name in present
            }
            to_alter = {name: diff for name, diff in drifted.items() if diff}
            if to_alter:
                # AlterConfigs replaces the topic's whole config: send all of ours, over what else is
                # set on it (an operator's compression.type or retention.bytes stays as it was).
                kept = await topic_overrides(admin, list(to_alter))
                await admin.alter_configs(
                    [
                        ConfigResource(ConfigResourceType.TOPIC, name, kept[name] | configs_of(name))
                        for name in to_alter
                    ]
                )
                await _until(
                    lambda: configs_match(admin, {n: configs_of(n) for n in to_alter}),
                    "altered topic configs to take effect",
                )
            for name in present:
                if name in to_alter:
                    detail = ", ".join(f"{k}={v}" for k, v in to_alter[name].items())
                    changes.append(TopicChange(name, "altered", detail))
                else:
                    changes.append(TopicChange(name, "unchanged"))
        return sorted(changes, key=lambda c: c.topic)
    finally:
        await admin.close()


async def _until(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 30.0) -> None:
    """Metadata changes reach the brokers asynchronously: wait until `check` sees them."""
    try:
        async with asyncio.timeout(timeout):
            while not await check():
                await asyncio.sleep(0.1)
    except TimeoutError:
        raise UserError(f"the broker did not confirm {what} within {timeout:.0f}s") from None


async def _topics_listed(admin: AIOKafkaAdminClient, names: list[str]) -> bool:
    return set(names) <= set(await admin.list_topics())


async def _until_led(settings: Settings, names: list[str], timeout: float = 30.0) -> None:
    """Wait until the leader of every partition of the new topics `names` answers for it. A new
    topic is listed, its leader named, a moment before that leader takes requests: a write sent
    then is refused and retried, and lands after writes to other topics sent later than it."""
    consumer = new_consumer(settings)

    async def answered() -> bool:  # end_offsets itself retries a leader that does not answer yet
        await consumer.start()
        await consumer.end_offsets([TopicPartition(n, p) for n in names for p in range(settings.partitions)])
        return True

    try:
        await _until(answered, "every new partition's leader to answer", timeout)
    except KafkaError as exc:
        raise UserError(f"the broker refused to list the new topics' offsets: {exc}") from None
    finally:
        await consumer.stop()


def _is_loopback(bootstrap: str) -> bool:
    """Every bootstrap server is on this machine: the local broker, for tests and the demo."""
    hosts = [
        server.strip().rsplit(":", 1)[0].strip("[]") for server in bootstrap.split(",") if server.strip()
    ]
    return bool(hosts) and all(h in ("localhost", "::1") or h.startswith("127.") for h in hosts)


async def describe(settings: Settings) -> dict[str, dict[str, str]]:
    """Partitions and the configs podledger manages, as the broker reports them."""
    admin = await start_admin(settings)
    try:
        names = [settings.topic(t.name) for t in ALL_TOPICS]
        existing = set(await admin.list_topics())
        present = [n for n in names if n in existing]
        partitions = await topic_partitions(admin, present) if present else {}
        configs = await topic_configs(admin, present) if present else {}
        result: dict[str, dict[str, str]] = {}
        for spec in ALL_TOPICS:
            name = settings.topic(spec.name)
            if name not in existing:
                result[name] = {"state": "missing"}
                continue
            managed = {k: configs[name].get(k, "") for k in spec.configs(settings.replication_factor)}
            result[name] = {"partitions": str(partitions[name]), **managed}
        return result
    finally:
        await admin.close()
