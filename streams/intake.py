"""The fold's intake: Faust's consumer read in whole fetched batches, under Faust's per-event path.

Faust hands an agent one event at a time: for every record its fetcher builds a message, waits on
it against the flow-control event (a task per record), routes it through the conductor into a
channel queue, builds an event, runs the stream's processors, and acks it. The fold wants
batches, and that machinery cost more than a quarter of the live worker.

So the fold app replaces Faust's fetcher service (`IntakeFetcher`) with one that takes each fetch
of the app's consumer whole: ingress records go to the fold in arrival order (streams/arrival.py),
cut into batches of at most PODLEDGER_FOLD_BATCH_SIZE; records of any other topic (an agent of
another role in the same app) still take Faust's conductor path. Faust keeps everything else: the
consumer group and its rebalance callbacks, flow control (a rebalance suspends the flow and clears
the intake queue, as it does agent queues), offset commits, and the app's lifecycle.

Offsets are committed by Faust, as for an agent, from what is acknowledged: a batch is tracked
as in flight when the fold takes it (one Faust message per topic-partition stands for the batch,
so Faust waits for it on a rebalance or shutdown) and acknowledged by `acknowledge` only after the
fold stored it (streams/batch.py: records and markers before offsets).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import faust
from faust.transport.consumer import Fetcher
from faust.types import TP
from mode import Service
from mode.utils.objects import cached_property
from mode.utils.queues import FlowControlQueue

from podledger.streams.arrival import WaitingRoom, arrival_order, gaps, slices
from podledger.streams.fold_consumer import FetchSettings, fold_transport

log = logging.getLogger(__name__)

QUEUED_BATCHES = 4  # fetched batches waiting for the fold: the fetcher stops fetching past this
# Read records that may wait for a sibling topic, per partition, in batches: past this many the
# partition's records go to the fold as merged, so a sibling far behind costs order, not memory.
WAITING_BATCHES = 20
ROOM_POLL_S = 0.005


@dataclass(slots=True)
class Fetched:
    """Ingress records from one fetch, in arrival order, and the group generation they came in."""

    records: Sequence[Any]  # aiokafka ConsumerRecords
    generation: int


@dataclass(slots=True)
class Delivery:
    """A batch the fold took: its records in arrival order, and per topic-partition its offsets
    and the message that stands for it in Faust's in-flight bookkeeping."""

    records: list[Any] = field(default_factory=list)
    offsets: dict[TP, list[int]] = field(default_factory=dict)
    stand_ins: dict[TP, Any] = field(default_factory=dict)
    newest: dict[TP, Any] = field(default_factory=dict)  # the last record per topic-partition


class Intake:
    """Moves fetched ingress records from the app's consumer to the fold, and acks them."""

    def __init__(
        self,
        app: faust.App,
        topics: Sequence[str],
        batch_size: int,
        within_s: float,
        sync_wait_s: float,
    ) -> None:
        self.app = app
        self.topics = frozenset(topics)  # the ingress topics' Kafka names, in fold order
        self.rank = {name: n for n, name in enumerate(topics)}
        self.batch_size = batch_size
        self.within_s = within_s
        # Read records wait here while a sibling topic of their partition is behind (arrival.py).
        self.waiting: WaitingRoom[TP, Any] = WaitingRoom(self.rank, sync_wait_s, WAITING_BATCHES * batch_size)
        self._queue: FlowControlQueue[Fetched] | None = None
        self._carry: Fetched | None = None  # taken from the queue but past the batch size

    @property
    def queue(self) -> FlowControlQueue[Fetched]:
        if self._queue is None:  # made lazily: inside the running loop, once the app has its flow control
            self._queue = FlowControlQueue(flow_control=self.app.flow_control, clear_on_resume=True)
        return self._queue

    # ---- the fetcher side ----

    async def drain(self, fetcher: Service) -> None:
        """Fetch until the consumer or `fetcher` stops (the body of IntakeFetcher's task)."""
        consumer: Any = self.app.consumer
        while not (consumer.should_stop or fetcher.should_stop):
            records, active = await consumer._wait_next_records(self._fetch_wait_s())
            if consumer.should_stop or not (records or self.waiting.runs):
                continue
            if not consumer.flow_active:  # a rebalance began: read these again from the commits
                self.waiting.clear()  # the rebalance's recovery seeks back to the commits
                if records:
                    await consumer.perform_seek()
                continue
            # Tagged with the generation they are read in: a later rebalance seeks back to the
            # committed offsets, and the fold drops what is still queued from before it.
            generation = self.app.consumer_generation_id
            ours: dict[Any, Sequence[Any]] = {}
            for tp, batch in (records or {}).items():
                if active is not None and tp not in active and tp not in consumer._buffered_partitions:
                    continue  # paused or revoked while fetching (Faust's getmany skips them too)
                batch = await self._read(consumer, tp, batch)
                if not batch:
                    continue
                if tp.topic in self.topics:
                    ours[tp] = batch
                else:
                    await self._to_conductor(consumer, tp, batch)
            ready = self.waiting.ready(ours, generation, time.monotonic(), self._behind)
            for part in slices(arrival_order(ready, self.rank), self.batch_size):
                await self._room(consumer, fetcher)
                await self.queue.put(Fetched(part, generation))

    def _fetch_wait_s(self) -> float:
        """How long one wait for records may last: a second, or until a waiting record is due."""
        due = self.waiting.deadline()
        if due is None:
            return 1.0
        return min(max(due + self.waiting.wait_s - time.monotonic(), 0.0), 1.0)

    def _behind(self, partition: int) -> list[TP]:
        """The partition's ingress topic-partitions the broker holds more of than was read (or may)."""
        consumer: Any = self.app.consumer
        out = []
        for topic in self.topics:
            tp = TP(topic, partition)
            unread = consumer.unread(tp)
            if unread is None or unread > 0:
                out.append(tp)
        return out

    async def _room(self, consumer: Any, fetcher: Service) -> None:
        """Wait while QUEUED_BATCHES batches wait for the fold (the broker keeps the rest). Polled:
        Faust's flow control empties the queue on a rebalance without waking a blocked put."""
        while self.queue.qsize() >= QUEUED_BATCHES and not (consumer.should_stop or fetcher.should_stop):
            await asyncio.sleep(ROOM_POLL_S)

    async def _read(self, consumer: Any, tp: Any, batch: Sequence[Any]) -> Sequence[Any]:
        """What Faust's own fetcher does per record, once per fetched run: drop what lies before
        the read offset, and report skipped offsets as gaps so commits can pass them."""
        last = consumer._read_offset[tp]
        if last is not None and batch[0].offset < last:
            batch = [r for r in batch if r.offset >= last]
            if not batch:
                return batch
        for first, end in gaps(last, (r.offset for r in batch)):
            await consumer._add_gap(tp, first, end)
        consumer._read_offset[tp] = batch[-1].offset
        return batch

    async def _to_conductor(self, consumer: Any, tp: Any, batch: Sequence[Any]) -> None:
        for record in batch:
            await consumer.callback(consumer._to_message(tp, record))

    # ---- the fold side ----

    async def take(self) -> Delivery:
        """The next batch: what is fetched, up to the batch size, waiting at most PODLEDGER_FOLD_BATCH_MS
        for more once something came (by default not at all: what queues up while the fold is busy
        makes the batches, so they grow with the load and cost no wait when it is light). Batches
        fetched before a rebalance are dropped (the new assignment reads them again from the
        committed offsets); the batch returned is in flight for Faust until `acknowledge`."""
        while True:
            delivery = await self._gather(self.within_s, wait=True)
            if delivery is not None:
                return delivery

    async def take_nowait(self) -> Delivery | None:
        """The next batch if one is fetched already (as `take`, with no wait for more), else None."""
        return await self._gather(0.0, wait=False)

    async def _gather(self, within_s: float, *, wait: bool) -> Delivery | None:
        """What is fetched, up to the batch size, once something came (waiting for it with `wait`),
        and then for at most `within_s` more; None when nothing current came."""
        loop = asyncio.get_running_loop()
        parts: list[Fetched] = []
        size = 0
        deadline: float | None = None
        while size < self.batch_size:
            nxt = self._next_nowait()
            if nxt is None:
                if deadline is None and not wait:
                    break
                timeout = None if deadline is None else deadline - loop.time()
                if timeout is not None and timeout <= 0:
                    break
                try:
                    nxt = await asyncio.wait_for(self.queue.get(), timeout)
                except TimeoutError:
                    break
            if not self._current(nxt):
                continue
            if parts and size + len(nxt.records) > self.batch_size:
                self._carry = nxt
                break
            parts.append(nxt)
            size += len(nxt.records)
            if deadline is None:
                deadline = loop.time() + within_s
        parts = [p for p in parts if self._current(p)]  # a rebalance may have begun meanwhile
        return self._in_flight(parts) if parts else None

    def _next_nowait(self) -> Fetched | None:
        if self._carry is not None:
            carried, self._carry = self._carry, None
            return carried
        try:
            return self.queue.get_nowait()
        except asyncio.QueueEmpty:
            return None

    def _current(self, fetched: Fetched) -> bool:
        consumer: Any = self.app.consumer
        return bool(consumer.flow_active) and fetched.generation == self.app.consumer_generation_id

    def _in_flight(self, parts: list[Fetched]) -> Delivery:
        consumer: Any = self.app.consumer
        delivery = Delivery()
        for part in parts:
            delivery.records += part.records
        for record in delivery.records:
            tp = TP(record.topic, record.partition)
            delivery.offsets.setdefault(tp, []).append(record.offset)
            delivery.newest[tp] = record
        now = time.monotonic()
        inbound = self.app.monitor.stream_inbound_time  # Faust's stall check looks for it
        for tp, record in delivery.newest.items():
            stand_in = consumer._to_message(tp, record)
            consumer.track_message(stand_in)
            delivery.stand_ins[tp] = stand_in
            inbound[tp] = now
        return delivery

    def acknowledge(self, delivery: Delivery) -> None:
        """The batch is stored: Faust may commit past it. Its offsets are added to Faust's acked
        offsets as its own ack() would add them one by one; the stand-in is acked last, which
        ends the batch's time in flight."""
        consumer: Any = self.app.consumer
        for tp, offsets in delivery.offsets.items():
            committed = consumer._committed_offset[tp]
            index = consumer._acked_index[tp]
            fresh = [o for o in offsets[:-1] if (committed is None or o >= committed) and o not in index]
            consumer._acked[tp].extend(fresh)
            index.update(fresh)
            consumer._n_acked += len(fresh)
            stand_in = delivery.stand_ins[tp]
            if consumer.ack(stand_in):
                self.app.sensors.on_message_out(tp, stand_in.offset, stand_in)


class IntakeFetcher(Fetcher):
    """Faust's fetcher service, draining the consumer through an Intake."""

    def __init__(self, app: faust.App, intake: Intake, **kwargs: Any) -> None:
        self.intake = intake
        super().__init__(app, **kwargs)

    @Service.task
    async def _fetcher(self) -> None:
        consumer: Any = self.app.consumer
        try:
            await self.intake.drain(self)
        except consumer.consumer_stopped_errors:
            if not self.app.should_stop:
                raise
        except asyncio.CancelledError as exc:
            if not self.app.rebalancing:
                raise
            # Faust's fetcher restarts this way when a rebalance cancels it mid-fetch.
            await self.crash(exc)
            if self.supervisor is not None:
                self.supervisor.wakeup()
        finally:
            self.set_shutdown()


class FoldApp(faust.App):
    """The fold's Faust app: its consumer feeds `intake` and fetches as `fetch` says (both set
    before the app starts; streams/fold_consumer.py)."""

    intake: Intake
    fetch: FetchSettings | None = None

    def _new_transport(self) -> Any:
        return fold_transport(self)

    @cached_property
    def _fetcher(self) -> Fetcher:
        return IntakeFetcher(self, self.intake, loop=self.loop, beacon=self.consumer.beacon)
