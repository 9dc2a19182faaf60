"""A past answer's read of pod-updates (read/kubeapi/history.py) stops at the moment, even when a
record is appended while its bounds are read: an answer marked complete shows nothing later."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping

from aiokafka import TopicPartition
from aiokafka.structs import OffsetAndTimestamp

from podledger.read.kubeapi.history import _ends_at

TP = TopicPartition("podledger.pod-updates", 0)


class IdleLog:
    """One partition's broker stamps; a record stamped `late_ms` is appended right after the
    offsets-for-times answer (the idle partition has nothing after the moment until then)."""

    def __init__(self, stamps: Iterable[int], late_ms: int) -> None:
        self.stamps, self.late_ms = list(stamps), late_ms

    async def end_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: len(self.stamps) for tp in tps}

    async def offsets_for_times(
        self, query: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        out: dict[TopicPartition, OffsetAndTimestamp | None] = {}
        for tp, ts in query.items():
            first = next((i for i, s in enumerate(self.stamps) if s >= ts), None)
            out[tp] = None if first is None else OffsetAndTimestamp(first, self.stamps[first])
        self.stamps.append(self.late_ms)
        return out


def test_a_record_appended_while_the_bounds_are_read_is_not_inside_them() -> None:
    log = IdleLog([1_000, 2_000], late_ms=3_000)
    assert asyncio.run(_ends_at(log, [TP], 2_500)) == {TP: 2}


def test_the_first_record_after_the_moment_bounds_the_read() -> None:
    log = IdleLog([1_000, 2_000, 2_600, 2_700], late_ms=3_000)
    assert asyncio.run(_ends_at(log, [TP], 2_500)) == {TP: 2}
    assert asyncio.run(_ends_at(log, [TP], 2_000)) == {TP: 2}
    assert asyncio.run(_ends_at(log, [TP], 999)) == {TP: 0}
