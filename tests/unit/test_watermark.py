"""The watermark's claim (streams/watermark.py): vectors of offsets, broker stamps and clock readings
in, the time T out, such that every input stamped at or before T has been applied."""

from __future__ import annotations

import pytest

from podledger.schemas import models
from podledger.streams.record import held_since
from podledger.streams.watermark import (
    Progress,
    Stamping,
    combine,
    isr_allowance,
    oldest_held,
    partition_bound,
    topic_bound,
)
from podledger.types import INGRESS_TOPICS, Topic

# (next offset, end offset, newest applied stamp, clock reading, ISR allowance) -> T
TOPIC_VECTORS = [
    ("nothing applied, nothing read, no clock", 0, None, None, None, 0, None),
    ("an empty partition, no clock yet", 0, 0, None, None, 0, None),
    ("an empty partition: up to just before the clock", 0, 0, None, 5_000, 0, 4_999),
    ("behind: just below the newest applied stamp (ties in a ms)", 3, 10, 1_000, 5_000, 0, 999),
    ("behind, the newest stamp unknown (restored from a marker)", 3, 10, None, 5_000, 0, None),
    ("caught up: the clock, read before the end offsets", 10, 10, 1_000, 5_000, 0, 4_999),
    ("caught up with a record stamped after the reading", 10, 10, 6_000, 5_000, 0, 5_999),
    ("caught up, no clock: the newest stamp", 10, 10, 1_000, None, 0, 999),
    ("ahead of an end read earlier: caught up", 12, 10, 1_000, 5_000, 0, 4_999),
    ("end offsets not read: never caught up", 10, None, 1_000, 5_000, 0, 999),
    # Several replicas: the end offsets are the high watermark; a record the leader stamped up to
    # the allowance before the reading may still be above them.
    ("replicated, caught up: the allowance before the clock", 10, 10, 1_000, 50_000, 30_000, 19_999),
    ("replicated, caught up: the newest stamp if later", 10, 10, 40_000, 50_000, 30_000, 39_999),
    ("replicated, an empty partition", 0, 0, None, 50_000, 30_000, 19_999),
    ("replicated, behind: the allowance changes nothing", 3, 10, 1_000, 50_000, 30_000, 999),
    ("replicated, a young clock: before the epoch, never a false claim", 0, 0, None, 10, 30_000, -29_991),
]


@pytest.mark.parametrize(
    ("case", "next_offset", "end", "newest", "clock", "lag", "expected"),
    TOPIC_VECTORS,
    ids=[v[0] for v in TOPIC_VECTORS],
)
def test_topic_bound(
    case: str,
    next_offset: int,
    end: int | None,
    newest: int | None,
    clock: int | None,
    lag: int,
    expected: int | None,
) -> None:
    assert topic_bound(next_offset, end, newest, clock, lag) == expected


# (replicas the ingress partitions have, PODLEDGER_WATERMARK_ISR_LAG_MS) -> the allowance
ALLOWANCE_VECTORS = [
    ("one replica: the high watermark is the log end", 1, 30_000, 0),
    ("three replicas: the in-sync followers' lag", 3, 30_000, 30_000),
    ("two replicas, a broker with a shorter lag", 2, 10_000, 10_000),
    ("allowance set to 0", 3, 0, 0),
]


@pytest.mark.parametrize(
    ("case", "replicas", "lag", "expected"), ALLOWANCE_VECTORS, ids=[v[0] for v in ALLOWANCE_VECTORS]
)
def test_isr_allowance(case: str, replicas: int, lag: int, expected: int) -> None:
    assert isr_allowance(replicas, lag) == expected


# (topic bounds, oldest held stamp, previous T) -> T
PARTITION_VECTORS = [
    ("the slowest topic decides", [4_999, 999, 4_999, 4_999], None, None, 999),
    ("a topic without a bound: no claim", [4_999, None, 4_999, 4_999], None, None, None),
    ("... but the previous claim stays", [4_999, None, 4_999, 4_999], None, 700, 700),
    ("a held input keeps T below its stamp", [4_999] * 4, 2_000, None, 1_999),
    ("a held input newer than the bounds changes nothing", [4_999] * 4, 9_000, None, 4_999),
    ("never below a claim made before", [4_999] * 4, 2_000, 3_000, 3_000),
    ("no topics", [], None, None, None),
]


@pytest.mark.parametrize(
    ("case", "bounds", "held", "previous", "expected"),
    PARTITION_VECTORS,
    ids=[v[0] for v in PARTITION_VECTORS],
)
def test_partition_bound(
    case: str, bounds: list[int | None], held: int | None, previous: int | None, expected: int | None
) -> None:
    assert partition_bound(bounds, held, previous) == expected


ENDS = {str(t): 0 for t in INGRESS_TOPICS}


def test_progress_claims_the_clock_when_caught_up_and_the_newest_stamp_when_behind() -> None:
    progress = Progress(3)
    record, caught_up = progress.watermark(ENDS, None)
    assert (record.t_ms, caught_up) == (None, True)  # caught up, but no reading of the clock yet
    assert progress.watermark(ENDS, 5_000)[0] == models.Watermark(3, 4_999, ENDS, None)

    progress.applied(Topic.PLEG, 0, 6_000)
    progress.applied(Topic.PLEG, 1, 6_000)
    ends = {**ENDS, "pleg": 5}
    record, caught_up = progress.watermark(ends, 6_500)
    assert (record.t_ms, caught_up) == (5_999, False)  # offsets 2..4 not applied: stamped >= 6000
    assert record.offsets["pleg"] == 2
    ends = {**ENDS, "pleg": 2}
    assert progress.watermark(ends, 6_500)[0].t_ms == 6_499


def test_progress_never_goes_back_and_a_held_input_holds_it() -> None:
    progress = Progress(0, last=models.Watermark(0, 9_000, ENDS, None))
    progress.applied(Topic.POD_UPDATES, 0, 8_000)  # a lagging stamp: a bound below the last claim
    assert progress.watermark({**ENDS, "pod-updates": 3}, 10_000)[0].t_ms == 9_000  # kept
    progress.applied(Topic.POD_UPDATES, 1, 9_500)
    assert progress.watermark({**ENDS, "pod-updates": 3}, 10_000)[0].t_ms == 9_499
    progress.held_ms = 9_800
    fresh = Progress(0, held_ms=9_800)
    assert fresh.watermark(ENDS, 12_000)[0].t_ms == 9_799


def test_a_record_the_broker_did_not_stamp_says_nothing_about_the_records_after_it() -> None:
    progress = Progress(1)
    progress.applied(Topic.PROBE_RESULTS, 0, 4_000)
    progress.applied(Topic.PROBE_RESULTS, 1, None)  # CreateTime: its writer's stamp
    record, _ = progress.watermark({**ENDS, "probe-results": 5}, 5_000)
    assert record.t_ms is None and record.offsets["probe-results"] == 2  # behind: no bound
    progress.applied(Topic.PROBE_RESULTS, 2, 4_500)  # broker-stamped again: stamps rise from here
    assert progress.watermark({**ENDS, "probe-results": 5}, 5_000)[0].t_ms == 4_499


def test_without_claims_the_record_withdraws_t_and_the_next_claims_start_afresh() -> None:
    progress = Progress(2, last=models.Watermark(2, 9_000, ENDS, None))
    record, caught_up = progress.watermark(ENDS, 12_000, claims=False)
    assert (record.t_ms, caught_up) == (None, False)  # not carried on: it may have been false
    assert record.offsets == ENDS
    progress.last = record  # published
    progress.applied(Topic.PLEG, 0, 8_000)  # after the repair, a record behind the old claim
    assert progress.watermark({**ENDS, "pleg": 3}, 12_000)[0].t_ms == 7_999  # no floor at 9_000


def test_the_isr_allowance_holds_a_caught_up_partition_back() -> None:
    progress = Progress(0)
    progress.applied(Topic.PLEG, 0, 40_000)
    ends = {**ENDS, "pleg": 1}
    assert progress.watermark(ends, 100_000)[0].t_ms == 99_999
    assert progress.watermark(ends, 100_000, lag_ms=30_000)[0].t_ms == 69_999
    # pleg's newest stamp is later than the allowance, but the other (empty) topics' bounds are not
    assert progress.watermark(ends, 60_000, lag_ms=30_000)[0].t_ms == 29_999


LOG_APPEND = {str(t): "LogAppendTime" for t in INGRESS_TOPICS}


def test_no_claims_before_the_configs_are_read_nor_while_a_topic_is_writer_stamped() -> None:
    stamping = Stamping()
    assert not stamping.claims and stamping.stale
    assert stamping.configs(LOG_APPEND) == (set(), set())
    assert stamping.claims and not stamping.stale

    # Found per topic (one config for all its partitions): no claims on any partition.
    assert stamping.configs({**LOG_APPEND, "pleg": "CreateTime"}) == ({"pleg"}, set())
    assert not stamping.claims
    assert stamping.configs({**LOG_APPEND, "pleg": "CreateTime"}) == (set(), set())  # warned once
    assert stamping.configs(LOG_APPEND) == (set(), {"pleg"}) and stamping.claims  # repaired

    missing = {k: v for k, v in LOG_APPEND.items() if k != "pod-lifecycle"}
    assert stamping.configs(missing) == ({"pod-lifecycle"}, set()) and not stamping.claims


def test_a_writer_stamped_record_asks_for_a_new_reading_of_the_configs() -> None:
    stamping = Stamping()
    assert stamping.configs({**LOG_APPEND, "probe-results": "CreateTime"}) == ({"probe-results"}, set())
    stamping.writer_stamped()
    assert stamping.stale and not stamping.claims
    stamping.configs(LOG_APPEND)  # repaired: the record predates it
    assert stamping.claims
    stamping.writer_stamped()
    assert stamping.stale  # read again at the next tick; the partition's own bound waits meanwhile


def test_offsets_only_advance_and_stamps_follow_the_newest_offset() -> None:
    progress = Progress(2)
    progress.applied(Topic.PLEG, 5, 1_000)
    progress.applied(Topic.PLEG, 3, 2_000)  # a redelivery below: changes nothing
    assert (progress.next["pleg"], progress.newest_ms["pleg"]) == (6, 1_000)
    progress.stored({"pleg": 9})  # a restored marker ahead: its stamp is not known
    assert progress.next["pleg"] == 10 and "pleg" not in progress.newest_ms
    progress.stored({"pleg": 4})
    assert progress.next["pleg"] == 10


def test_a_partition_taken_over_resumes_from_its_last_watermark() -> None:
    last = models.Watermark(4, 7_000, {**ENDS, "pleg": 8}, 7_500)
    resumed = Progress.resumed(4, last)
    assert (resumed.next["pleg"], resumed.held_ms, resumed.last) == (8, 7_500, last)
    record, caught_up = resumed.watermark({**ENDS, "pleg": 8}, 9_000)
    assert caught_up and record.t_ms == 7_499  # the held input still holds it
    assert Progress.resumed(4, None) == Progress(4)

    restored = Progress(4, held_ms=None)
    restored.applied(Topic.PLEG, 2, 5_000)
    restored.adopt(last)  # restored itself: its own held input (none), the record's offsets and T
    assert restored.next["pleg"] == 8 and restored.held_ms is None and restored.last == last


def test_oldest_held_per_partition() -> None:
    records = [
        {"uid": "a", "pod": None, "held": [["pleg", 1, 4, 3_000, {}], ["pleg", 1, 5, 2_500, {}]]},
        {"uid": "b", "pod": None, "held": [["probe-results", 2, 0, 9_000, {}, ["n", 1]]]},
        {"uid": "c", "pod": {}, "held": []},
        None,
    ]
    waiting = [since for since in map(held_since, records) if since is not None]
    assert waiting == [(1, 2_500), (2, 9_000)]
    assert oldest_held([*waiting, (1, 2_700)]) == {1: 2_500, 2: 9_000}


def test_combine_is_the_smallest_and_none_until_every_partition_has_one() -> None:
    def mark(t: int | None) -> models.Watermark:
        return models.Watermark(0, t, {}, None)

    assert combine({0: mark(5), 1: mark(3), 2: mark(9)}, range(3)) == 3
    assert combine({0: mark(5), 1: None, 2: mark(9)}, range(3)) is None
    assert combine({0: mark(5), 1: mark(None), 2: mark(9)}, range(3)) is None
    assert combine({0: mark(5), 1: None}, [0]) == 5
    assert combine({}, []) is None
