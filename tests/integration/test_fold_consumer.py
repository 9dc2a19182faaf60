"""The fold worker's consumer fetches as PODLEDGER_FOLD_FETCH_* say (streams/fold_consumer.py).

Faust makes that consumer itself; the settings reach aiokafka only through the fold's transport, so
this follows Faust's own path to it (the app's consumer, its thread, the consumer the thread makes)
and starts it on the real broker, where aiokafka's fetcher reads them."""

from __future__ import annotations

import asyncio
import dataclasses

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from podledger.config import Settings
from podledger.streams.app import Pipeline
from podledger.streams.fold_consumer import FoldConsumerThread, FoldTransport, seek_to_committed_or_start
from podledger.streams.topics import ensure_topics
from podledger.types import Topic


def test_the_fold_consumer_fetches_with_the_configured_wait_and_size(settings: Settings) -> None:
    tuned = dataclasses.replace(settings, fold_fetch_min_bytes=4096, fold_fetch_wait_ms=7)

    async def fetcher_settings() -> tuple[int, int]:
        app = Pipeline(tuned).app
        assert isinstance(app.transport, FoldTransport)
        thread = app.consumer._thread  # type: ignore[attr-defined]
        assert isinstance(thread, FoldConsumerThread)
        consumer = thread._create_consumer(asyncio.get_running_loop())
        await consumer.start()
        try:
            fetcher = consumer._fetcher  # built at start, from what the consumer was given
            return fetcher._fetch_min_bytes, fetcher._fetch_max_wait_ms
        finally:
            await consumer.stop()

    assert asyncio.run(fetcher_settings()) == (4096, 7)


def test_by_default_the_fold_fetch_waits_briefly_for_a_batch_worth(settings: Settings) -> None:
    # Faust's own consumer would answer at the first byte and long-poll 1.5 s.
    assert settings.fold_fetch_min_bytes > 1
    assert 0 < settings.fold_fetch_wait_ms <= 50


def test_records_dropped_in_a_rebalance_are_read_again_where_the_group_committed_nothing(
    settings: Settings,
) -> None:
    """What the fold's consumer does when a rebalance begins while it fetches: the records are
    dropped and every partition sought back to its committed offset. Performed here on a partition
    the group never committed and on one committed at 3."""

    async def positions_after_rewinding() -> tuple[dict[int, int], dict[int, int], dict[int, int | None]]:
        await ensure_topics(settings)
        topic = settings.topic(Topic.POD_UPDATES)
        producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap, **settings.kafka_client_options())
        await producer.start()
        try:
            for partition in (0, 1):
                for n in range(5):
                    await producer.send_and_wait(topic, f"r{n}".encode(), partition=partition)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=settings.bootstrap,
            group_id=f"{settings.topic_prefix}rewind",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            **settings.kafka_client_options(),
        )
        await consumer.start()
        try:
            tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
            fetched = 0
            async with asyncio.timeout(60):
                while fetched < 10:  # all of both partitions fetched, then dropped
                    fetched += sum(map(len, (await consumer.getmany(timeout_ms=500)).values()))
            await consumer.commit({tps[1]: 3})
            await consumer.seek_to_committed()  # aiokafka's rewind alone
            alone = {tp.partition: await consumer.position(tp) for tp in tps}
            committed = await seek_to_committed_or_start(consumer)
            ours = {tp.partition: await consumer.position(tp) for tp in tps}
            return alone, ours, {tp.partition: offset for tp, offset in committed.items()}
        finally:
            await consumer.stop()

    alone, ours, committed = asyncio.run(positions_after_rewinding())
    assert (committed[0], committed[1]) == (None, 3)
    assert alone == {0: 5, 1: 3}  # partition 0 stays past the dropped records: never read again
    assert ours == {0: 0, 1: 3}
