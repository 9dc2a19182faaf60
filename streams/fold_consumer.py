"""The fold app's Kafka consumer: Faust's own, with the fetch settings the fold needs.

Faust makes its worker consumer with a fixed long-poll (`fetch_max_wait_ms=1500`) and aiokafka's
`fetch_min_bytes=1`: the broker answers a fetch as soon as one record waits. Under a steady stream
that is a fetch per few records, and each one wakes Faust's consumer thread, hands the records to
the app's loop across threads and takes the GIL from the fold. Measured on the benchmark (2,300
events/s offered to one worker), the fold worker then spent ~86 % of a core; asked to wait until
PODLEDGER_FOLD_FETCH_MIN_BYTES have gathered or PODLEDGER_FOLD_FETCH_WAIT_MS have passed, ~70 %,
and its median latency went from ~50 ms to ~18 ms (the fold takes the stream in fewer, larger
batches and the journal's round trip no longer waits behind them). The wait bounds what the
setting adds to a quiet stream's latency; a backlog fills `fetch_min_bytes` at once. Under a
saturating load a longer wait also lowers the tail: larger batches cost less per event
(docs/capacity.md has the default's measurements).

The settings go to aiokafka's consumer between Faust making it and starting it: the only point
where Faust lets them in without replacing its whole consumer.

The thread also rewinds differently (`seek_to_committed_or_start`). Faust drops records fetched
while a rebalance is under way and seeks every partition back to its committed offset to read them
again; aiokafka moves only partitions committed above 0. A partition the group never committed
(a worker killed before its first commit) stayed where the fetcher left it, past the dropped
records: they were never folded, and the partition's fold stalled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiokafka
from aiokafka import TopicPartition
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP


@dataclass(frozen=True, slots=True)
class FetchSettings:
    """When the broker answers a fold consumer's fetch: `min_bytes` waiting, or `wait_ms` passed."""

    min_bytes: int
    wait_ms: int

    def apply(self, consumer: aiokafka.AIOKafkaConsumer) -> None:
        """Set them on an aiokafka consumer not started yet (its fetcher is made at start)."""
        # The constructor's own fields: AIOKafkaConsumer.start() builds its Fetcher from them.
        consumer._fetch_min_bytes = self.min_bytes
        consumer._fetch_max_wait_ms = self.wait_ms


async def seek_to_committed_or_start(consumer: aiokafka.AIOKafkaConsumer) -> dict[TopicPartition, int | None]:
    """Move each assigned partition to its committed offset, or to its log's start when the group
    committed none there (or 0); return the committed offsets (None: none), as aiokafka's
    `seek_to_committed` does. It, alone, leaves those partitions where its fetcher is."""
    committed: dict[TopicPartition, int | None] = await consumer.seek_to_committed()
    unmoved = [tp for tp, offset in committed.items() if offset is None or offset <= 0]
    if unmoved:
        await consumer.seek_to_beginning(*unmoved)
    return committed


class FoldConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    """Faust's consumer thread, making its aiokafka consumer with the app's FetchSettings and
    rewinding every partition it seeks back (seek_to_committed_or_start)."""

    def unread(self, tp: TP) -> int | None:
        """How many records the broker holds of `tp` past what the consumer handed over, as of the
        last fetch response that covered it; None while that is not known (no position yet, or no
        response yet). A partition not assigned here holds nothing to wait for: 0. Read from the
        fetcher's partition state without a hop to the consumer thread (plain attributes)."""
        consumer = self._consumer
        subscription = consumer._subscription.subscription if consumer is not None else None
        assignment = subscription.assignment if subscription is not None else None
        state = assignment.state_value(tp) if assignment is not None else None
        if state is None:
            return 0
        end = state.lso if self.consumer.in_transaction else state.highwater
        # Read once: the consumer thread may reset the position between two reads (a seek).
        position = state._position
        if end is None or position is None:
            return None
        return max(end - position, 0)

    async def seek_to_committed(self) -> Mapping[TP, int]:  # as Faust types it; None where none is committed
        return await self.call_thread(seek_to_committed_or_start, self._ensure_consumer())

    def _create_consumer(self, loop: asyncio.AbstractEventLoop) -> aiokafka.AIOKafkaConsumer:
        consumer = super()._create_consumer(loop)
        fetch: FetchSettings | None = getattr(self.app, "fetch", None)
        if fetch is not None and not self.app.client_only:
            fetch.apply(consumer)
        return consumer


class FoldConsumer(faust_aiokafka.Consumer):
    _thread: FoldConsumerThread

    def unread(self, tp: TP) -> int | None:
        """FoldConsumerThread.unread."""
        return self._thread.unread(tp)

    def _new_consumer_thread(self) -> faust_aiokafka.AIOKafkaConsumerThread:
        return FoldConsumerThread(self, loop=self.loop, beacon=self.beacon)


class FoldTransport(faust_aiokafka.Transport):
    """Faust's aiokafka transport whose consumer is a FoldConsumer."""

    Consumer = FoldConsumer


def fold_transport(app: Any) -> FoldTransport:
    """The transport for a fold app (faust.App._new_transport, with the fold's consumer)."""
    return FoldTransport(app.conf.broker_consumer, app)
