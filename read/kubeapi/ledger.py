"""The live side of `podledger serve`: the pod store kept current from the topics, and the
watches it feeds."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

import orjson

from podledger.config import Settings
from podledger.read.client.position import Position, encode_position
from podledger.read.client.reader import Cursor, Decoding, LedgerReader, StatusRecord, now_ms
from podledger.read.client.select import PodFilter
from podledger.read.client.watch import TOMBSTONE_RETENTION_MS
from podledger.read.kubeapi.records import StatusFields, desired_json, status_fields
from podledger.read.kubeapi.served import PodDoc, pod_doc
from podledger.read.kubeapi.store import PodStore, StoreEvent

log = logging.getLogger(__name__)
# What serve reads of the values: the fields of a Pod, the desired pod as JSON (records.py).
SERVED: Decoding[StatusFields, bytes] = Decoding(status_fields, desired_json)
WATCH_QUEUE = 50_000  # events a watch may fall behind by before it is closed (the client resumes)


@dataclass(eq=False)
class Watcher:
    """One open watch: the store's events for it, in order, until it falls too far behind."""

    pod_filter: PodFilter
    queue: asyncio.Queue[StoreEvent | None] = field(default_factory=lambda: asyncio.Queue(WATCH_QUEUE))
    overflowed: bool = False

    def offer(self, event: StoreEvent) -> None:
        if self.overflowed:
            return
        if self.queue.qsize() >= WATCH_QUEUE - 1:
            self.overflowed = True
            self.queue.put_nowait(None)  # the watch ends; its client resumes from its last version
            return
        self.queue.put_nowait(event)


class Ledger:
    """The store, its position, and the task that follows pod-status into it."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.reader = LedgerReader(settings, decoding=SERVED)
        self.store = PodStore(settings.partitions)
        self.position = Position(tuple([0] * settings.partitions), 0)
        self.watchers: set[Watcher] = set()
        self.moved = asyncio.Event()  # set (and replaced) whenever the position moves
        self._task: asyncio.Task[None] | None = None

    @property
    def resource_version(self) -> str:
        return encode_position(self.position)

    async def start(self) -> None:
        """Load every pod (the server answers only afterwards), then follow in the background."""
        await self.reader.start(wait_s=self.settings.start_wait_s)
        listed: str | None = None
        async for batch in self.reader.load():
            listed = listed or encode_position(self.reader.position())
            for r in batch:
                self.store.apply(r.partition, r.offset, r.uid, self._doc(r, listed), listed, r.ts_ms)
        self.position = self.reader.position()
        self._task = asyncio.create_task(self._follow())

    async def following(self) -> None:
        """Until the following task ends (it ends only by an error, which this raises)."""
        assert self._task is not None, "Ledger.start() first"
        await self._task

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.reader.stop()

    async def _follow(self) -> None:
        async for batch in self.reader.follow(idle_ms=200):
            self._moved(self.reader.position())
            cursor = Cursor(self.reader)
            for r in batch:
                rv = encode_position(cursor.after(r))
                event = self.store.apply(r.partition, r.offset, r.uid, self._doc(r, rv), rv, r.ts_ms)
                if event is not None:
                    for watcher in self.watchers:
                        watcher.offer(event)
            if batch:
                self._moved(Position(tuple(cursor.offsets), cursor.safe_ms))
            self.store.forget_gone(now_ms() - TOMBSTONE_RETENTION_MS)

    def _doc(self, record: StatusRecord[StatusFields], rv: str) -> PodDoc | None:
        """The record's version joined with its desired pod (None for a tombstone)."""
        if record.status is None:
            return None
        desired = self.reader.desired.get(record.uid)
        return pod_doc(record.status, None if desired is None else orjson.loads(desired), rv)

    def _moved(self, position: Position) -> None:
        if position != self.position:
            self.position = position
            self.moved.set()
            self.moved = asyncio.Event()

    async def reached(self, offsets: tuple[int, ...], timeout_s: float) -> bool:
        """Wait until the store has read up to `offsets` (a client ahead of this server)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while any(o > mine for o, mine in zip(offsets, self.position.offsets, strict=True)):
            if loop.time() >= deadline:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.moved.wait(), deadline - loop.time())
        return True
