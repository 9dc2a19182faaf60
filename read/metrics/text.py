"""The Prometheus text exposition format (version 0.0.4): metric families with HELP and TYPE lines.

podledger/health.py has a smaller writer for process counters; this one also writes HELP lines,
keeps each family's samples in the order given and prints large values (Unix timestamps) exactly,
which kube-state-metrics' series need.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "CONTENT_TYPE",
    "Family",
    "Labels",
    "Sample",
    "format_value",
    "render",
    "render_lines",
    "sample_line",
]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Labels = tuple[tuple[str, str], ...]
"""Label pairs in the order they are printed."""

Sample = tuple[Labels, float]


@dataclass(frozen=True, slots=True)
class Family:
    name: str
    kind: str  # "gauge" or "counter"
    help: str


def render(families: Sequence[Family], samples: Mapping[str, Iterable[Sample]]) -> str:
    """Every family of `families` that has samples, in that order, as exposition text."""
    return render_lines(
        families,
        {
            name: [sample_line(name, labels, value) for labels, value in rows]
            for name, rows in samples.items()
        },
    )


def render_lines(families: Sequence[Family], lines: Mapping[str, Iterable[str]]) -> str:
    """Like `render`, from sample lines already formatted by `sample_line` (a cache keeps them)."""
    out: list[str] = []
    for family in families:
        rows = list(lines.get(family.name) or ())
        if rows:
            out.append(f"# HELP {family.name} {_escape_help(family.help)}")
            out.append(f"# TYPE {family.name} {family.kind}")
            out += rows
    return "\n".join(out) + "\n" if out else ""


def sample_line(name: str, labels: Labels, value: float, head: tuple[Labels, str] = ((), "")) -> str:
    """One sample line, without its newline. `head` is leading labels with their text already
    formatted by `label_text` (a pod's namespace, pod and uid start each of its lines)."""
    first, text = head
    if first and labels[: len(first)] == first:
        rest = label_text(labels[len(first) :])
        rendered = f"{text},{rest}" if rest else text
    else:
        rendered = label_text(labels)
    return f"{name}{{{rendered}}} {format_value(value)}"


def label_text(labels: Labels) -> str:
    return ",".join(f'{k}="{_escape(v)}"' for k, v in labels)


def format_value(value: float) -> str:
    """Integral values as integers (counts, Unix seconds), others as Python's shortest repr."""
    if math.isfinite(value) and value == int(value) and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


def _escape(value: str) -> str:
    if "\\" not in value and '"' not in value and "\n" not in value:
        return value
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n")
