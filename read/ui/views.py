"""The UI's JSON answers shaped from the audit queries' data, and the pod a request names. Pure.

The page shows these strings as text (never as markup), so nothing here escapes HTML: pod names,
messages and reasons are user data and stay as they are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from podledger.read.audit.diff import change_text
from podledger.read.audit.parse import PodRef, format_time, parse_pod
from podledger.read.audit.summary import cause_text, container_text
from podledger.read.index.base import PodIdentity


class BadRequest(ValueError):
    """A request that names no pod or version the way the API expects (the message says how)."""


def pod_ref(query: Mapping[str, str]) -> PodRef:
    """`?uid=…` (one pod's UID) or `?pod=namespace/name` (every UID that carried the name)."""
    uid = query.get("uid", "").strip()
    if uid:
        return PodRef(uid=uid)
    try:
        return parse_pod(query.get("pod", ""))
    except ValueError as exc:
        raise BadRequest(f"give ?uid=UID or ?pod=namespace/name: {exc}") from None


def version_number(query: Mapping[str, str]) -> int:
    text = query.get("version", "")
    if not text.isdigit():
        raise BadRequest(f"?version= must be a version number, not {text!r}")
    return int(text)


def pod_row(pod: PodIdentity) -> dict[str, Any]:
    """A pod in the pod list: who it is and the time span its versions cover."""
    return {
        "uid": pod.uid,
        "namespace": pod.namespace,
        "name": pod.name,
        "node": pod.node,
        "first": format_time(pod.first_ts_ms),
        "last": format_time(pod.last_ts_ms),
        "last_ts_ms": pod.last_ts_ms,
    }


def _inputs(rows: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    return [
        {
            "time": i["time"],
            "input": f"{i['input']['topic']}/{i['input']['partition']}@{i['input']['offset']}",
            "event": i["summary"],
            "effect": i["effect"],
        }
        for i in rows
    ]


def detail(why: dict[str, Any]) -> dict[str, Any]:
    """One version for the detail pane: its status in brief and whole, what changed, its cause and
    the inputs around it (the `podledger why` data, with the lines the page shows)."""
    row = why["version"]
    before = why["previous_version"]
    return {
        **{k: why[k] for k in ("uid", "namespace", "name", "node")},
        "version": row["version"],
        "time": row["time"],
        "phase": row["phase"] or "-",
        "ready": row["ready"] or "-",
        "containers": [container_text(c) for c in row["containers"]],
        "cause": cause_text(row["cause"]),
        "previous_version": before,
        "next_version": why["next_version"],
        "changes_title": f"changes since version {before}" if before else "changes (first version)",
        "changes": [change_text(c) for c in why["changes"]],
        "chain": _inputs(why["chain"]),
        "rules": list(why["rules"]),
        "unchanged_after": _inputs(why["unchanged_after"]),
        "replayed": why["replayed"],
        "notes": list(why["notes"]),
        "status": row["status"],
    }
