"""What changed between two status versions, in the fields the kubelet owns, readable. Pure.

Both statuses are flattened to `path -> text` (lists keyed by container name or condition type,
a container state as one phrase), then compared. Conditions owned by others, and the probe and
transition times of conditions (which the status manager itself ignores when it decides whether
a status changed), are left out.
"""

from __future__ import annotations

from typing import Any

from podledger.streams.status import KUBELET_OWNED_CONDITIONS, SHARED_CONDITIONS

_CONTAINER_LISTS = ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses")
_CONDITION_TIMES = frozenset({"lastProbeTime", "lastTransitionTime"})


def state_text(state: dict[str, Any] | None) -> str:
    """`running since 2024-05-01T14:02:03Z`, `waiting CrashLoopBackOff: back-off 20s ...`,
    `terminated Error exit 1`, or `-` for none."""
    state = state or {}
    if state.get("running") is not None:
        started = state["running"].get("startedAt")
        return f"running since {started}" if started else "running"
    if state.get("terminated") is not None:
        t = state["terminated"]
        words = ["terminated", t.get("reason") or "", f"exit {t.get('exitCode')}"]
        if t.get("finishedAt"):
            words.append(f"at {t['finishedAt']}")
        return " ".join(w for w in words if w)
    if state.get("waiting") is not None:
        w = state["waiting"]
        text = " ".join(p for p in ("waiting", w.get("reason") or "") if p)
        return f"{text}: {w['message']}" if w.get("message") else text
    return "-"


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(_scalar(v.get("ip", v) if isinstance(v, dict) else v) for v in value)
    return "" if value is None else str(value)


def flatten(status: dict[str, Any] | None) -> dict[str, str]:
    """The kubelet-owned parts of a status as `path -> readable text`."""
    status = status or {}
    out: dict[str, str] = {}
    for key, value in status.items():
        if key in _CONTAINER_LISTS:
            for cs in value or []:
                base = f"{key}[{cs.get('name', '?')}]"
                for field, item in cs.items():
                    if field == "name":
                        continue
                    text = state_text(item) if field in ("state", "lastState") else _scalar(item)
                    out[f"{base}.{field}"] = text
        elif key == "conditions":
            for cond in value or []:
                ctype = cond.get("type", "?")
                if ctype not in KUBELET_OWNED_CONDITIONS and ctype not in SHARED_CONDITIONS:
                    continue
                words = [_scalar(cond.get("status"))]
                words += [_scalar(cond[k]) for k in ("reason", "message") if cond.get(k)]
                out[f"conditions[{ctype}]"] = " ".join(words)
        elif isinstance(value, dict):
            for field, item in value.items():
                out[f"{key}.{field}"] = _scalar(item)
        else:
            out[key] = _scalar(value)
    # Empty fields are left out, and so is an empty lastState ("-"); a container's state always shows.
    return {path: text for path, text in out.items() if text and (text != "-" or path.endswith(".state"))}


def diff(before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[dict[str, str]]:
    """The changes from `before` (None: nothing before) to `after`, in the order of `after`'s
    fields, then what `after` no longer has: [{path, before, after}], an absent side as ""."""
    old, new = flatten(before), flatten(after)
    changes = [
        {"path": path, "before": old.get(path, ""), "after": text}
        for path, text in new.items()
        if old.get(path) != text
    ]
    changes += [{"path": path, "before": text, "after": ""} for path, text in old.items() if path not in new]
    return changes


def change_text(change: dict[str, str]) -> str:
    """`phase: Running -> Failed`; `+` for a field that appears, `-` for one that goes."""
    if not change["before"]:
        return f"+ {change['path']}: {change['after']}"
    if not change["after"]:
        return f"- {change['path']}: {change['before']}"
    return f"{change['path']}: {change['before']} -> {change['after']}"
