"""Kafka lets every writer pick its codec, and a topic may set its own (compression.type): records
of every codec Kafka has (gzip, snappy, lz4, zstd) are read like plain ones. The fold worker folds
ingress written in each; what it writes to a topic the broker stores compressed is read back."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from aiokafka import AIOKafkaProducer

from podledger.config import Settings
from podledger.partitioner import partition_for_node
from podledger.schemas import encode
from podledger.streams.topics import ensure_topics
from podledger.types import Topic
from podledger.workload import workload
from tests.support.kafka import declared_configs, read_topic, set_topic_configs, wait_for_topic
from tests.support.processes import podledger_env

pytestmark = pytest.mark.kafka

CODECS = ("gzip", "snappy", "lz4", "zstd")
PODS, EVENTS = 6, 60  # per codec


async def store_compressed(settings: Settings, topic: str) -> None:
    """The broker compresses what it stores of `topic` with zstd, whatever the writer sent."""
    await set_topic_configs(settings, topic, declared_configs(settings, topic) | {"compression.type": "zstd"})


async def produce_with(settings: Settings, codec: str, seed: int) -> set[str]:
    """A workload written by a producer that compresses with `codec`; the pods' UIDs."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap, compression_type=codec, linger_ms=5)
    await producer.start()
    uids: set[str] = set()
    try:
        for event in workload(PODS, EVENTS, nodes=2, seed=seed):
            uids.add(event.key)
            await producer.send(
                settings.topic(event.topic),
                key=event.key.encode(),
                value=encode(event.value),
                partition=partition_for_node(event.node, settings.partitions),
            )
        await producer.flush()
    finally:
        await producer.stop()
    return uids


def test_records_of_every_codec_are_folded_and_compressed_outputs_read_back(
    settings: Settings, podledger_process
) -> None:
    asyncio.run(ensure_topics(settings))
    asyncio.run(store_compressed(settings, Topic.POD_STATUS_HISTORY))
    uids = {codec: asyncio.run(produce_with(settings, codec, seed)) for seed, codec in enumerate(CODECS, 1)}
    assert all(len(u) == PODS for u in uids.values()) and len(set().union(*uids.values())) == PODS * len(
        CODECS
    )
    proc = podledger_process(["run", "--roles", "fold"], env=podledger_env(settings))
    # Every input was folded (the journal holds each one), and every pod has versions on the topic
    # the broker stores in zstd, whatever its writer's codec.
    wait_for_topic(settings, Topic.JOURNAL, EVENTS * len(CODECS), alive=proc)
    history = asyncio.run(read_topic(settings, Topic.POD_STATUS_HISTORY, PODS * len(CODECS)))
    folded = {orjson.loads(value)["uid"] for _, _, value in history}
    for codec, pods in uids.items():
        assert pods <= folded, codec
    assert not asyncio.run(read_topic(settings, Topic.DEAD_LETTER, 0, timeout=2))
