"""A pod's versions as a timeline: phase and Ready as coloured bands, container restarts as marks,
on a time scale shared by every lane of a view. Pure: the page only draws what this computes.

Input is the audit's own shape (`queries.history` lives: {uid, namespace, name, node, versions:
[version_row...]}); positions are percentages of the view's width, so the page needs no scale
of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from podledger.read.audit.parse import format_time
from podledger.read.audit.summary import container_text

PHASE_COLOURS = {
    "Pending": "#e8a33d",
    "Running": "#4a86c5",
    "Succeeded": "#3c9d74",
    "Failed": "#c94a3f",
    "Unknown": "#8a8a8a",
}
READY_COLOURS = {"True": "#3a9d5d", "False": "#e06666", "": "#c8c8c8"}
NO_PHASE_COLOUR = "#c8c8c8"
MIN_SPAN_MS = 1_000  # a view of one instant still has a width
RIGHT_PAD = 0.04  # of the span: the latest version's band stays visible
TICK_STEPS_MS = tuple(
    s * 1000
    for s in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
)


@dataclass(frozen=True, slots=True)
class Window:
    """The time span a view shows; x() places a moment on it, in percent of the width."""

    start_ms: int
    end_ms: int

    def x(self, ts_ms: int) -> float:
        return round(100.0 * (ts_ms - self.start_ms) / (self.end_ms - self.start_ms), 3)


def window_of(lives: Sequence[dict[str, Any]]) -> Window:
    """From the first version shown to the last, padded on the right so the newest band has a width."""
    stamps = [int(v["ts_ms"]) for life in lives for v in life["versions"]]
    if not stamps:
        return Window(0, MIN_SPAN_MS)
    first, last = min(stamps), max(stamps)
    span = max(last - first, MIN_SPAN_MS)
    return Window(first, last + max(int(span * RIGHT_PAD), MIN_SPAN_MS // 2))


def bands(
    points: Sequence[tuple[int, str, int]], window: Window, colours: dict[str, str], missing: str
) -> list[dict[str, Any]]:
    """(ts_ms, value, version) points, in time order, as intervals of one value each: a value
    holds from its version to the next version that changes it (the last one stays open to the
    window's end)."""
    out: list[dict[str, Any]] = []
    for ts, value, version in points:
        if out and out[-1]["value"] == value:
            out[-1]["last_version"] = version
            continue
        if out:
            out[-1]["to_ms"] = ts
        out.append(
            {
                "value": value,
                "colour": colours.get(value, missing),
                "from_ms": ts,
                "to_ms": window.end_ms,
                "first_version": version,
                "last_version": version,
            }
        )
    for i, band in enumerate(out):
        band["open"] = i == len(out) - 1
        band["x"] = window.x(band["from_ms"])
        band["width"] = round(window.x(band["to_ms"]) - band["x"], 3)
        band["label"] = band["value"] or "none"
    return out


def restart_marks(versions: Sequence[dict[str, Any]], window: Window) -> list[dict[str, Any]]:
    """A mark where a container's restart count went up against the version before (the first
    version of a life has nothing before it, so it marks nothing)."""
    marks: list[dict[str, Any]] = []
    before: dict[str, int] | None = None
    for row in versions:
        counts = {c["name"]: int(c["restarts"]) for c in row["containers"]}
        if before is not None:
            for name, count in counts.items():
                if count > before.get(name, 0):
                    ts = int(row["ts_ms"])
                    marks.append(
                        {"container": name, "restarts": count, "version": row["version"], "ts_ms": ts,
                         "x": window.x(ts), "label": f"{name} restart {count} (v{row['version']})"}
                    )  # fmt: skip
        before = counts
    return marks


def version_points(versions: Sequence[dict[str, Any]], window: Window) -> list[dict[str, Any]]:
    """One click target per version, with what a tooltip shows."""
    return [
        {
            "version": row["version"],
            "ts_ms": row["ts_ms"],
            "time": row["time"],
            "x": window.x(int(row["ts_ms"])),
            "phase": row["phase"],
            "ready": row["ready"],
            "containers": [container_text(c) for c in row["containers"]],
            "cause": (row.get("cause") or {}).get("type") or "",
            "label": f"v{row['version']} {row['time']} {row['phase'] or '-'}"
            f" ready={row['ready'] or '-'} ({(row.get('cause') or {}).get('type') or '?'})",
        }
        for row in versions
    ]


def lane(life: dict[str, Any], window: Window, *, points: bool = True) -> dict[str, Any]:
    """One life of a pod on the view's window; with `points`, a click target per version (a
    namespace view leaves them out: most of a lane's weight, and it opens the pod instead)."""
    versions = life["versions"]
    phases = [(int(v["ts_ms"]), str(v["phase"] or ""), int(v["version"])) for v in versions]
    ready = [(int(v["ts_ms"]), str(v["ready"] or ""), int(v["version"])) for v in versions]
    return {
        **{k: life.get(k, "") for k in ("uid", "namespace", "name", "node")},
        "first_version": versions[0]["version"] if versions else None,
        "last_version": versions[-1]["version"] if versions else None,
        "phase": bands(phases, window, PHASE_COLOURS, NO_PHASE_COLOUR),
        "ready": bands(ready, window, READY_COLOURS, READY_COLOURS[""]),
        "restarts": restart_marks(versions, window),
        "versions": version_points(versions, window) if points else [],
    }


def tick_step(span_ms: int, most: int = 8) -> int:
    """The smallest round step that puts at most `most` ticks on the span."""
    return next((step for step in TICK_STEPS_MS if span_ms / step <= most), -(-span_ms // most))


def ticks(window: Window, most: int = 8) -> list[dict[str, Any]]:
    """Round moments on the window, labelled by time of day (UTC), with the date when the view
    spans more than a day."""
    span = window.end_ms - window.start_ms
    step = tick_step(span, most)
    first = -(-window.start_ms // step) * step
    out = []
    for ts in range(first, window.end_ms + 1, step):
        text = format_time(ts)  # 2026-11-23T13:35:06.054Z
        label = text[:16].replace("T", " ") if span > 86_400_000 else text[11:19]
        out.append({"ts_ms": ts, "x": window.x(ts), "label": label})
    return out


def timeline(lives: Sequence[dict[str, Any]], *, points: bool = True, legend: bool = True) -> dict[str, Any]:
    """A view: the window, its ticks and one lane per life, all on one scale."""
    window = window_of(lives)
    out: dict[str, Any] = {
        "window": {
            "start_ms": window.start_ms,
            "end_ms": window.end_ms,
            "start": format_time(window.start_ms),
            "end": format_time(window.end_ms),
        },
        "ticks": ticks(window),
        "lanes": [lane(life, window, points=points) for life in lives if life["versions"]],
    }
    if legend:
        out["legend"] = {
            "phase": [{"value": k, "colour": c} for k, c in PHASE_COLOURS.items()],
            "ready": [{"value": k or "none", "colour": c} for k, c in READY_COLOURS.items()],
        }
    return out
