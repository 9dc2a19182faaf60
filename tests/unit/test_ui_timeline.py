"""The timeline's pure parts (read/ui/timeline.py): a pod's versions as phase and Ready bands,
restart marks and a time scale, by vectors and over a history the real fold made."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from podledger.read.audit import queries
from podledger.read.audit.parse import PodRef
from podledger.read.index import SqliteIndex
from podledger.read.ui import timeline as tl
from tests.support.audit import fill_audit_index, pod_stories

T0 = 1_780_000_000_000


def row(version: int, ts: int, phase: str, ready: str, restarts: int = 0, sidecar: int = 0) -> dict[str, Any]:
    """A history row as queries.history gives it (the fields the timeline reads)."""
    containers = [
        {"name": "app", "state": "running", "reason": "", "ready": ready == "True", "restarts": restarts},
        {"name": "side", "state": "running", "reason": "", "ready": True, "restarts": sidecar},
    ]
    return {
        "version": version,
        "ts_ms": ts,
        "time": f"t{ts}",
        "phase": phase,
        "ready": ready,
        "containers": containers,
        "cause": {"type": "pleg:ContainerStarted"},
    }


def life(*rows: dict[str, Any], uid: str = "u1", name: str = "web") -> dict[str, Any]:
    return {"uid": uid, "namespace": "shop", "name": name, "node": "n1", "versions": list(rows)}


WINDOW = tl.Window(T0, T0 + 10_000)


@pytest.mark.parametrize(
    ("points", "expected"),
    [
        ([], []),
        # one value: one open band to the window's end
        ([(T0, "Running", 1)], [("Running", T0, T0 + 10_000, 1, 1, True)]),
        # equal neighbours merge; a change starts a band where its version is
        (
            [
                (T0, "Pending", 1),
                (T0 + 1000, "Running", 2),
                (T0 + 4000, "Running", 3),
                (T0 + 6000, "Failed", 4),
            ],
            [
                ("Pending", T0, T0 + 1000, 1, 1, False),
                ("Running", T0 + 1000, T0 + 6000, 2, 3, False),
                ("Failed", T0 + 6000, T0 + 10_000, 4, 4, True),
            ],
        ),
        # a value that comes back is a band of its own
        (
            [(T0, "False", 1), (T0 + 2000, "True", 2), (T0 + 5000, "False", 3)],
            [
                ("False", T0, T0 + 2000, 1, 1, False),
                ("True", T0 + 2000, T0 + 5000, 2, 2, False),
                ("False", T0 + 5000, T0 + 10_000, 3, 3, True),
            ],
        ),
    ],
)
def test_bands_merge_equal_neighbours_and_the_last_stays_open(
    points: list[tuple[int, str, int]], expected: list[tuple[Any, ...]]
) -> None:
    got = tl.bands(points, WINDOW, tl.PHASE_COLOURS, tl.NO_PHASE_COLOUR)
    keys = ("value", "from_ms", "to_ms", "first_version", "last_version", "open")
    assert [tuple(b[k] for k in keys) for b in got] == expected
    for band in got:
        assert band["colour"] == tl.PHASE_COLOURS.get(band["value"], tl.NO_PHASE_COLOUR)
        assert band["x"] == WINDOW.x(band["from_ms"])
        assert band["width"] == pytest.approx(WINDOW.x(band["to_ms"]) - band["x"], abs=0.002)


def test_band_positions_are_percent_of_the_window_and_tile_it() -> None:
    got = tl.bands(
        [(T0, "False", 1), (T0 + 2500, "True", 2), (T0 + 7500, "", 3)], WINDOW, tl.READY_COLOURS, "?"
    )
    assert [(b["x"], b["width"]) for b in got] == [(0.0, 25.0), (25.0, 50.0), (75.0, 25.0)]
    assert [b["colour"] for b in got] == [
        tl.READY_COLOURS["False"],
        tl.READY_COLOURS["True"],
        tl.READY_COLOURS[""],
    ]
    assert got[-1]["label"] == "none"  # no Ready condition at all


def test_restart_marks_where_a_count_goes_up_and_not_on_the_first_version() -> None:
    rows = [
        row(1, T0, "Running", "True", restarts=2),  # counts before the first version mark nothing
        row(2, T0 + 1000, "Running", "False", restarts=2),
        row(3, T0 + 2000, "Running", "True", restarts=3),
        row(4, T0 + 3000, "Running", "True", restarts=3, sidecar=1),
        row(5, T0 + 4000, "Running", "True", restarts=5, sidecar=1),
    ]
    marks = tl.restart_marks(rows, WINDOW)
    assert [(m["container"], m["restarts"], m["version"], m["x"]) for m in marks] == [
        ("app", 3, 3, 20.0),
        ("side", 1, 4, 30.0),
        ("app", 5, 5, 40.0),
    ]
    assert marks[0]["label"] == "app restart 3 (v3)"


def test_window_spans_the_versions_with_room_for_the_last_band() -> None:
    lives = [life(row(1, T0 + 5000, "Pending", "False")), life(row(1, T0, "Running", "True"), uid="u2")]
    window = tl.window_of(lives)
    assert window.start_ms == T0
    assert window.end_ms == T0 + 5000 + tl.MIN_SPAN_MS // 2  # 4% of 5 s is less than half a second
    long = tl.window_of([life(row(1, T0, "Running", "True"), row(2, T0 + 100_000, "Running", "False"))])
    assert long.end_ms == T0 + 104_000
    one = tl.window_of([life(row(1, T0, "Running", "True"))])
    assert one.end_ms - one.start_ms == tl.MIN_SPAN_MS // 2 and one.x(T0) == 0.0
    assert tl.window_of([]) == tl.Window(0, tl.MIN_SPAN_MS)


@pytest.mark.parametrize(
    ("span_ms", "step_ms"),
    [
        (1_000, 1_000),
        (8_000, 1_000),
        (9_000, 2_000),
        (60_000, 10_000),
        (3_600_000, 600_000),
        (86_400_000 * 30, 0),
    ],
)
def test_tick_step_is_round_and_gives_at_most_eight_ticks(span_ms: int, step_ms: int) -> None:
    step = tl.tick_step(span_ms)
    assert span_ms / step <= 8
    if step_ms:
        assert step == step_ms
    else:  # beyond a day per tick: an even split
        assert step == -(-span_ms // 8)


def test_ticks_are_round_moments_inside_the_window_labelled_by_time_of_day() -> None:
    window = tl.Window(T0 + 300, T0 + 20_300)  # T0 is a round second
    ticks = tl.ticks(window)
    assert [t["ts_ms"] for t in ticks] == [T0 + s * 5000 for s in range(1, 5)]
    assert all(0 <= t["x"] <= 100 for t in ticks)
    assert ticks[0]["label"] == "20:26:45"
    days = tl.ticks(tl.Window(T0, T0 + 3 * 86_400_000))
    assert days[0]["label"] == "2026-05-29 00:00"


def test_a_lane_of_a_crash_looping_pod_folded_for_real(tmp_path: Path) -> None:
    index = SqliteIndex(tmp_path / "audit.sqlite", topics="test")
    fill_audit_index(index, pod_stories(T0, [("shop", "web", 18)]))
    [pod_life] = queries.history(index, PodRef(namespace="shop", name="web"))
    view = tl.timeline([pod_life])
    [lane] = view["lanes"]
    rows = pod_life["versions"]

    # The phase: Pending until the container starts, then Running to the end.
    assert [(b["value"], b["first_version"], b["last_version"]) for b in lane["phase"]] == [
        ("Pending", 1, 1),
        ("Running", 2, rows[-1]["version"]),
    ]
    # Ready follows the readiness probe through every restart: a band per change, in order.
    changes = [r for i, r in enumerate(rows) if i == 0 or r["ready"] != rows[i - 1]["ready"]]
    assert [(b["value"], b["first_version"]) for b in lane["ready"]] == [
        (r["ready"], r["version"]) for r in changes
    ]
    assert {b["value"] for b in lane["ready"]} == {"True", "False"}
    # Each restart of `app` is a mark at the version whose count went up: 1, 2, 3.
    assert [(m["container"], m["restarts"]) for m in lane["restarts"]] == [("app", 1), ("app", 2), ("app", 3)]
    counts = {r["version"]: r["containers"][0]["restarts"] for r in rows}
    assert all(counts[m["version"]] == counts[m["version"] - 1] + 1 for m in lane["restarts"])
    # Bands tile the window without gaps; every version is a click target at its time.
    for strip in (lane["phase"], lane["ready"]):
        assert strip[0]["x"] == 0.0
        assert sum(b["width"] for b in strip) == pytest.approx(100.0, abs=0.01)
        assert all(a["to_ms"] == b["from_ms"] for a, b in itertools.pairwise(strip))
    assert [v["version"] for v in lane["versions"]] == [r["version"] for r in rows]
    assert lane["versions"][5]["containers"][0].startswith("app=waiting:CrashLoopBackOff")
    assert view["legend"]["phase"][0] == {"value": "Pending", "colour": tl.PHASE_COLOURS["Pending"]}
