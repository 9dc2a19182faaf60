"""Sealed fold batches on their way to the broker: each batch's three write stages as tasks.

A batch's stages (streams/fold_writes.py) go in batch order within each stage: its journal
entries are delivered; then its versions and dead letters; then its records and markers are
stored. Every stage of batch n waits for the same stage of batch n-1 and the stage before it of
batch n, so the broker sees every topic's writes in batch order and a version only after its
journal entry, while stages of consecutive batches overlap (batch n's journal goes out while
n-1's records are stored). At most MAX_UNSTORED batches are on their way; the fold loop
(streams/fold_loop.py) waits for room beyond that.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from podledger.streams.batch import Batch
from podledger.streams.fold_writes import BatchWriter

# Batches folded and not stored yet, at most: the fold waits for the oldest one's store beyond this.
MAX_UNSTORED = 4


@dataclass(frozen=True, slots=True)
class _Stages:
    """One batch's three stages, as tasks."""

    journaled: asyncio.Task[dict[int, int]]
    published: asyncio.Task[None]
    stored: asyncio.Task[None]

    def cancel(self) -> None:
        for task in (self.journaled, self.published, self.stored):
            task.cancel()


class Flight:
    """The batches sealed and not stored yet, oldest first, and their stages."""

    def __init__(self, writer: BatchWriter) -> None:
        self.writer = writer
        self.unstored: list[Batch] = []  # what their stores will write, for the fold to read
        self._stages: deque[_Stages] = deque()

    def send(self, batch: Batch, folded: dict[int, dict[str, int]], on_stored: Callable[[], None]) -> None:
        """Start a sealed batch's three stages after those of the batch sent before it; `folded`:
        the newest input offsets it folded per partition and topic (its markers); `on_stored` runs
        once its records and markers are stored."""
        before = self._stages[-1] if self._stages else None
        self.unstored.append(batch)

        async def journal() -> dict[int, int]:
            if before is not None:
                await before.journaled
            return await self.writer.journal(batch)

        async def publish() -> None:
            if before is not None:
                await before.published
            await journaled
            await self.writer.outputs(batch)

        async def store() -> None:
            if before is not None:
                await before.stored
            journal_end = await journaled
            await published
            await self.writer.store(batch, journal_end, folded)
            self.unstored.remove(batch)
            on_stored()

        journaled = asyncio.create_task(journal())
        published = asyncio.create_task(publish())
        self._stages.append(_Stages(journaled, published, asyncio.create_task(store())))

    def reap(self) -> None:
        """Drop the stored batches from the front; raise the failure of one that failed."""
        while self._stages and self._stages[0].stored.done():
            self._stages.popleft().stored.result()

    async def room(self) -> None:
        """Wait until fewer than MAX_UNSTORED batches are on their way."""
        while len(self._stages) >= MAX_UNSTORED:
            await self._stages.popleft().stored

    async def settle(self) -> None:
        """Wait until every batch is stored."""
        while self._stages:
            await self._stages.popleft().stored

    def newest_store(self) -> asyncio.Task[None] | None:
        """The store of the batch sent last (it waits for every store before it), if any is on its way."""
        return self._stages[-1].stored if self._stages else None

    def cancel(self) -> None:
        """Stop every batch on its way: not stored, not acknowledged, folded again by whoever resumes."""
        for stages in self._stages:
            stages.cancel()
        self._stages.clear()
