"""The audit queries' results as text for a terminal, kubectl style. Pure: data in, lines out.

JSON and YAML output print the query results themselves (queries.py); this module only draws
the human forms: a table per pod life (`-o wide` adds columns), changes under each version
(`--diff`), and the `why` report.
"""

from __future__ import annotations

from typing import Any

from podledger.read.audit.diff import change_text
from podledger.read.audit.parse import format_time
from podledger.read.audit.summary import cause_text, container_text


def table(headers: list[str], rows: list[list[str]]) -> list[str]:
    """Columns padded to their widest cell, three spaces apart, as kubectl prints them."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    return [
        "   ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in (headers, *rows)
    ]


def life_title(life: dict[str, Any]) -> str:
    return f"pod {life['namespace']}/{life['name']}  uid {life['uid']}  node {life['node']}"


def history_lines(lives: list[dict[str, Any]], *, wide: bool = False, with_diff: bool = False) -> list[str]:
    """`podledger history` as text: a title and a table per life; with `with_diff`, each
    version's changes are listed under its row."""
    lines: list[str] = []
    for life in lives:
        if lines:
            lines.append("")
        lines.append(life_title(life))
        headers = ["VERSION", "TIME", "PHASE", "READY", "CONTAINERS", "CAUSE"]
        if wide:
            headers += ["CAUSE TIME"]
        rows = []
        for row in life["versions"]:
            cells = [
                f"v{row['version']}",
                row["time"],
                row["phase"],
                row["ready"] or "-",
                " ".join(container_text(c) for c in row["containers"]) or "-",
                cause_text(row["cause"]) if wide else str(row["cause"]["type"]),
            ]
            if wide:
                cells.append(format_time(int(row["cause"].get("ts_ms") or 0)))
            rows.append(cells)
        drawn = table(headers, rows)
        if not with_diff:
            lines += drawn
            continue
        lines.append(drawn[0])
        for row, line in zip(life["versions"], drawn[1:], strict=True):
            lines.append(line)
            lines += [f"    {change_text(c)}" for c in row.get("changes") or []]
    return lines


def _input_lines(inputs: list[dict[str, Any]]) -> list[str]:
    rows = [
        [
            i["time"],
            f"{i['input']['topic']}/{i['input']['partition']}@{i['input']['offset']}",
            i["summary"],
            i["effect"],
        ]
        for i in inputs
    ]
    return (
        [f"  {line}" for line in table(["TIME", "INPUT", "EVENT", "EFFECT"], rows)] if rows else ["  (none)"]
    )


def why_lines(result: dict[str, Any]) -> list[str]:
    """`podledger why` as text: the version, what changed, the chain of inputs, the deciding
    rules, and the inputs after it that changed nothing."""
    row = result["version"]
    containers = " ".join(container_text(c) for c in row["containers"]) or "-"
    phase, ready = row["phase"] or "-", row["ready"] or "-"
    before = result["previous_version"]
    lines = [
        f"pod {result['namespace']}/{result['name']}  uid {result['uid']}  node {result['node']}",
        f"version {row['version']} at {row['time']}: phase {phase}, ready {ready}, {containers}",
        f"caused by {cause_text(row['cause'])}",
        "",
        f"changes since version {before}:" if before else "changes (first version):",
    ]
    lines += [f"  {change_text(c)}" for c in result["changes"]] or ["  (none in kubelet-owned fields)"]
    lines += ["", "inputs applied since the previous version, in journal order:"]
    lines += _input_lines(result["chain"])
    lines += ["", "rules that decided it:"]
    lines += [f"  {rule}" for rule in result["rules"]] or ["  (no rule beyond the status generation itself)"]
    following = result["next_version"]
    lines += [
        "",
        f"inputs after it that changed nothing (until version {following}):"
        if following
        else "inputs after it that changed nothing (it is the latest version):",
    ]
    lines += _input_lines(result["unchanged_after"])
    lines += [f"note: {note}" for note in result["notes"]]
    return lines
