"""Faust wiring: the app, its topics, its output producer, and the fold loop attached to it.

The fold loop (streams/fold_loop.py) takes batches of input records from the intake (Faust's
consumer read in whole fetches, streams/intake.py). Node-side sources and the apiserver sink attach
to the same app through `roles` (see podledger run): tasks, agents and `publish`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import faust

from podledger.config import Settings
from podledger.delivery import ProducerSlot, deliver
from podledger.kafka import node_signer
from podledger.keys import load_keyring
from podledger.partitioner import partition_for_node
from podledger.schemas import cloud_events, encode
from podledger.streams.fold_consumer import FetchSettings
from podledger.streams.fold_loop import FoldLoop
from podledger.streams.intake import FoldApp, Intake
from podledger.streams.topics import ALL_TOPICS
from podledger.types import INGRESS_TOPICS

log = logging.getLogger(__name__)


def faust_broker_url(bootstrap: str) -> str:
    return ";".join(f"kafka://{server.strip()}" for server in bootstrap.split(",") if server.strip())


def _faust_credentials(settings: Settings) -> Any:
    """Faust's credentials from the same options the plain aiokafka clients get.

    SASLCredentials picks SASL_SSL when it has an SSL context and SASL_PLAINTEXT otherwise; the
    mechanism arrives spelled as Kafka does (SCRAM-SHA-512), which is how Faust's enum names it.
    """
    opts = settings.kafka_client_options()
    protocol = opts["security_protocol"]
    if protocol == "PLAINTEXT":
        return None
    if protocol.startswith("SASL_"):
        return faust.SASLCredentials(
            username=opts["sasl_plain_username"],
            password=opts["sasl_plain_password"],
            mechanism=opts["sasl_mechanism"],
            ssl_context=opts.get("ssl_context") if protocol == "SASL_SSL" else None,
        )
    return faust.SSLCredentials(opts["ssl_context"])


class Pipeline:
    """The Faust app with podledger's topics, table and agents."""

    def __init__(self, settings: Settings, *, fold: bool = True) -> None:
        self.settings = settings
        datadir = Path(settings.faust_data_dir())
        datadir.parent.mkdir(parents=True, exist_ok=True)  # Faust creates only the last level
        self.app = (FoldApp if fold else faust.App)(
            settings.fold_app_id,
            broker=faust_broker_url(settings.bootstrap),
            broker_credentials=_faust_credentials(settings),
            store="memory://",
            autodiscover=False,
            web_enabled=False,
            topic_partitions=settings.partitions,
            topic_replication_factor=settings.replication_factor,
            consumer_auto_offset_reset="earliest",
            producer_acks=-1,
            broker_session_timeout=settings.session_timeout_ms / 1000,
            broker_heartbeat_interval=max(settings.session_timeout_ms / 3000, 0.5),
            datadir=str(datadir),
            logging_config=None,
        )
        self.topics: dict[str, faust.TopicT] = {
            spec.name: self.app.topic(
                settings.topic(spec.name),
                key_type=bytes,
                value_type=bytes,
                key_serializer="raw",
                value_serializer="raw",
                partitions=settings.partitions,
            )
            for spec in ALL_TOPICS
        }
        self.output = ProducerSlot(settings)  # what the node and sink roles publish
        self.signer = node_signer(settings)  # the node roles' proof of origin, if configured
        # What the fold has done, for /metrics: events folded, versions, dead letters by reason.
        self.counts: Counter[tuple[str, str]] = Counter()
        self.app.on_before_shutdown.connect(self.output.reset)
        self.fold: FoldLoop | None = None
        if fold:
            ingress = self.app.topic(
                *(settings.topic(name) for name in INGRESS_TOPICS),
                key_type=bytes,
                value_type=bytes,
                key_serializer="raw",
                value_serializer="raw",
            )
            # Subscribed by the app's consumer group as an agent's topic would be; read by the intake.
            self.app.topics.add(ingress)
            intake = Intake(
                self.app,
                [settings.topic(name) for name in INGRESS_TOPICS],
                settings.fold_batch_size,
                settings.fold_batch_ms / 1000,
                settings.fold_sync_wait_ms / 1000,
            )
            cast(FoldApp, self.app).intake = intake
            cast(FoldApp, self.app).fetch = FetchSettings(
                settings.fold_fetch_min_bytes, settings.fold_fetch_wait_ms
            )
            loop = FoldLoop(settings, self.app, intake, load_keyring(settings), self.counts)
            self.fold = loop
            self.app.on_partitions_revoked.connect(loop.on_revoked)

            async def fold_loop(_: Pipeline) -> None:
                await loop.run()

            async def publish_watermarks(_: Pipeline) -> None:
                await loop.publish_watermarks()

            self.add_task(publish_watermarks)
            self.add_task(fold_loop)

    def partition(self, node: str) -> int:
        return partition_for_node(node, self.settings.partitions)

    async def publish(self, topic: str, key: str, value: Any, node: str) -> None:
        """Send one value (a model, or None for a tombstone) with the shared partitioner, through the
        idempotent output producer, until the broker acknowledges it (never dropped). A deletion
        carries its CloudEvents headers (schemas/cloud_events.py)."""
        key_bytes, value_bytes = key.encode(), None if value is None else encode(value)
        headers = [
            *(self.signer.headers(topic, key_bytes, value_bytes) if self.signer is not None else []),
            *cloud_events.headers(value, self.settings.topic_prefix),
        ]

        async def send() -> asyncio.Future[Any]:
            producer = await self.output.get()
            return await producer.send(
                self.settings.topic(topic),
                key=key_bytes,
                value=value_bytes,
                partition=self.partition(node),
                headers=headers or None,
            )

        await deliver(send, f"{topic} record of pod {key}", self.output.health, self.output.reset)

    def add_task(self, factory: Callable[[Pipeline], Awaitable[None]]) -> None:
        """Run a long-lived node or sink task inside the app's lifecycle."""

        async def task() -> None:
            await factory(self)

        task.__name__ = getattr(factory, "__name__", "task")
        self.app.task(task)

    def healthy(self) -> tuple[bool, str]:
        """Whether what this app publishes is delivered: the roles' records and the fold's stages."""
        ok, why = self.output.health.healthy()
        if ok and self.fold is not None:
            return self.fold.writer.healthy()
        return ok, why
