"""The fold worker's consumer fetches as PODLEDGER_FOLD_FETCH_* say (streams/fold_consumer.py).

Faust makes that consumer itself; the settings reach aiokafka only through the fold's transport, so
this follows Faust's own path to it (the app's consumer, its thread, the consumer the thread makes)
and starts it on the real broker, where aiokafka's fetcher reads them."""

from __future__ import annotations

import asyncio
import dataclasses

from podledger.config import Settings
from podledger.streams.app import Pipeline
from podledger.streams.fold_consumer import FoldConsumerThread, FoldTransport


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
