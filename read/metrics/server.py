"""The edge of the pod metrics: read pod-status and pod-status-history, serve /metrics over HTTP.

Where the numbers come from (docs/metrics.md):

- pod-status (compacted) holds the latest version of every pod that exists, and a tombstone for
  a pod just removed: it says which pods are on the page and what their gauges show, also for a
  pod whose history has aged out of retention.
- pod-status-history holds every version within retention: the counters are computed from it.

At start the feed reads pod-status to its end, then pod-status-history from its beginning to the
end it had when the feed started (history of pods that pod-status no longer holds is skipped:
they were removed), and only then answers /metrics; counters are therefore rebuilt after a
restart from what the history still holds. Then it follows both topics. Until caught up,
/metrics and /healthz answer 503.

`routes(feed)` and `make_app(feed)` let another server (e.g. `podledger serve`) mount the endpoint.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable

from aiohttp import web
from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from podledger.config import Settings
from podledger.kafka import new_consumer, read_to_end, started
from podledger.read.metrics.pods import PodMetrics
from podledger.read.metrics.text import CONTENT_TYPE
from podledger.schemas import DecodeError, decode, models
from podledger.types import Topic

__all__ = ["PodMetricsFeed", "make_app", "routes", "serve"]

log = logging.getLogger(__name__)

MAX_RECORDS = 10_000  # per poll while following the topics


class PodMetricsFeed:
    """Keeps a PodMetrics up to date from the two status topics."""

    def __init__(
        self, settings: Settings, metrics: PodMetrics | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        self.settings = settings
        self.metrics = metrics if metrics is not None else PodMetrics(settings.metrics_removed_keep_s)
        self.clock = clock
        self.ready = False  # caught up with both topics
        self.skipped = 0  # undecodable values

    async def run(self) -> None:
        """Catch up, then follow both topics until cancelled."""
        consumer = await started(
            lambda: new_consumer(self.settings), "pod metrics", self.settings.start_wait_s
        )
        try:
            status = self._partitions(Topic.POD_STATUS)
            history = self._partitions(Topic.POD_STATUS_HISTORY)
            await self._wait_for_topics(consumer, {status[0].topic, history[0].topic})
            consumer.assign(status + history)
            await self._catch_up(consumer, status, history)
            self.ready = True
            log.info("pod metrics: caught up with %d pods", len(self.metrics.pods))
            while True:
                batch = await consumer.getmany(timeout_ms=1000, max_records=MAX_RECORDS)
                for tp, records in batch.items():
                    for record in records:
                        if tp.topic == status[0].topic:
                            self._status(record)
                        else:
                            self._history(record)
        finally:
            await consumer.stop()

    async def _catch_up(
        self, consumer: AIOKafkaConsumer, status: list[TopicPartition], history: list[TopicPartition]
    ) -> None:
        # History's end is taken first: every version before it was on pod-status before the
        # pod-status read below, so a pod absent there was removed and its history is skipped.
        history_end = await consumer.end_offsets(history)
        status_end = await consumer.end_offsets(status)
        live: set[str] = set()
        for tp in status:
            async for record in read_to_end(consumer, tp, end=status_end[tp]):
                uid = self._status(record)
                if uid is not None:
                    (live.add if record.value is not None else live.discard)(uid)
        self.metrics.expire(math.inf)  # pods removed before the start: nothing of theirs to keep
        for tp in history:
            async for record in read_to_end(consumer, tp, end=history_end[tp]):
                if record.key is not None and record.key.decode(errors="replace") in live:
                    self._history(record)
        # read_to_end may have fetched past the ends it was given: follow on from exactly there.
        for tp, end in {**status_end, **history_end}.items():
            consumer.seek(tp, end)

    @staticmethod
    async def _wait_for_topics(consumer: AIOKafkaConsumer, names: set[str]) -> None:
        """Wait until the topics exist (a new cluster's `podledger topics create` may come later)."""
        waited = 0.0
        while missing := names - set(await consumer.topics()):
            if waited % 30 == 0:
                log.warning(
                    "pod metrics: waiting for topics %s (podledger topics create)", ", ".join(sorted(missing))
                )
            await asyncio.sleep(1.0)
            waited += 1.0

    def _partitions(self, topic: str) -> list[TopicPartition]:
        return [TopicPartition(self.settings.topic(topic), p) for p in range(self.settings.partitions)]

    def _status(self, record: ConsumerRecord) -> str | None:
        if record.key is None:
            return None
        uid = str(record.key.decode(errors="replace"))
        if record.value is None:
            self.metrics.remove(uid, self.clock())
            return uid
        vs = self._decode(Topic.POD_STATUS, record)
        if vs is not None:
            self.metrics.observe(vs)
        return uid

    def _history(self, record: ConsumerRecord) -> None:
        vs = self._decode(Topic.POD_STATUS_HISTORY, record)
        if vs is not None:
            self.metrics.apply(vs)

    def _decode(self, topic: str, record: ConsumerRecord) -> models.VersionedPodStatus | None:
        try:
            return decode(topic, record.value)
        except DecodeError as exc:
            self.skipped += 1
            log.warning(
                "skipping an undecodable %s value at %d/%d: %s", topic, record.partition, record.offset, exc
            )
            return None

    def page(self) -> str:
        self.metrics.expire(self.clock())
        return self.metrics.render()


def routes(feed: PodMetricsFeed) -> list[web.RouteDef]:
    """GET /metrics (the pod metrics) and /healthz (200 once caught up), for any aiohttp app."""

    async def metrics(request: web.Request) -> web.Response:
        if not feed.ready:
            return web.Response(status=503, text="catching up with pod-status and pod-status-history\n")
        return web.Response(body=feed.page().encode(), headers={"Content-Type": CONTENT_TYPE})

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(status=200 if feed.ready else 503, text="ok\n" if feed.ready else "catching up\n")

    return [web.get("/metrics", metrics), web.get("/healthz", healthz)]


def make_app(feed: PodMetricsFeed) -> web.Application:
    app = web.Application()
    app.add_routes(routes(feed))
    return app


async def serve(settings: Settings, host: str | None = None, port: int | None = None) -> None:
    """Serve the pod metrics on host:port (default: the settings') until cancelled."""
    feed = PodMetricsFeed(settings)
    runner = web.AppRunner(make_app(feed), access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host or settings.metrics_host, port or settings.metrics_port)
        await site.start()
        log.info(
            "pod metrics: serving /metrics on %s:%d",
            host or settings.metrics_host,
            port or settings.metrics_port,
        )
        await feed.run()
    finally:
        await runner.cleanup()
