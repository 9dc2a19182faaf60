"""One status version, or one input event, summarised as plain data or one line. Pure.

Values are read as plain JSON dicts (the raw topic values), so fields added to them later pass
through untouched and fields missing from odd values show as empty.
"""

from __future__ import annotations

import re
from typing import Any

from podledger.read.audit.parse import format_time

_BACKOFF = re.compile(r"back-off \d+[a-z]*")


def container_state(cs: dict[str, Any]) -> dict[str, Any]:
    """A container status in brief: name, state, reason, exit code, ready, restarts."""
    state = cs.get("state") or {}
    kind = next((k for k in ("running", "waiting", "terminated") if state.get(k) is not None), "unknown")
    detail = state.get(kind) or {}
    out: dict[str, Any] = {
        "name": cs.get("name", "?"),
        "state": kind,
        "reason": detail.get("reason") or "",
        "ready": bool(cs.get("ready")),
        "restarts": int(cs.get("restartCount") or 0),
    }
    if kind == "terminated":
        out["exit_code"] = detail.get("exitCode")
    return out


def container_text(c: dict[str, Any]) -> str:
    """`worker=waiting:CrashLoopBackOff,restarts=3` (`,ready` when ready)."""
    state = c["state"]
    if c.get("reason"):
        state += f":{c['reason']}"
    if c["state"] == "terminated":
        state += f"({c.get('exit_code')})"
    ready = ",ready" if c["ready"] else ""
    return f"{c['name']}={state}{ready},restarts={c['restarts']}"


def condition_status(status: dict[str, Any], type_: str) -> str:
    found = next((c for c in status.get("conditions") or [] if c.get("type") == type_), None)
    return str(found.get("status", "")) if found else ""


def version_row(value: dict[str, Any]) -> dict[str, Any]:
    """A history value as the audit shows it: time, version, phase, readiness, containers, cause."""
    status = value.get("status") or {}
    cause = value.get("cause") or {}
    statuses = (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or [])
    return {
        "uid": value.get("uid", ""),
        "namespace": value.get("namespace", ""),
        "name": value.get("name", ""),
        "node": value.get("node", ""),
        "version": value.get("version"),
        "ts_ms": value.get("ts_ms"),
        "time": format_time(int(value.get("ts_ms") or 0)),
        "phase": status.get("phase", ""),
        "ready": condition_status(status, "Ready"),
        "containers": [container_state(cs) for cs in statuses],
        "cause": {k: cause.get(k) for k in ("type", "topic", "partition", "offset", "ts_ms")},
    }


def cause_text(cause: dict[str, Any]) -> str:
    """`pleg:ContainerDied pleg/2@1417`: the event type and the input's topic/partition@offset."""
    return f"{cause.get('type')} {cause.get('topic')}/{cause.get('partition')}@{cause.get('offset')}"


def _runtime_container(event: dict[str, Any]) -> dict[str, Any]:
    """The container a pleg event is about, from its snapshot (the sandbox has no container entry)."""
    runtime = event.get("runtime") or {}
    cid = str(event.get("container_id") or "")
    ids = (cid, cid.split("://", 1)[-1])
    if (runtime.get("sandbox") or {}).get("id") in ids:
        return {"name": "sandbox"}
    return next((c for c in runtime.get("containers") or [] if c.get("id") in ids), {})


def _sync_text(result: dict[str, Any]) -> str:
    reason = str(result.get("reason") or "")
    message = str(result.get("message") or "")
    backoff = _BACKOFF.search(message)
    detail = backoff.group(0) if backoff else message.split(";")[0][:60]
    return " ".join(p for p in (reason, detail) if p)


def event_line(entry: dict[str, Any]) -> str:
    """One line for a journal entry's input event, e.g. `pleg ContainerDied worker exit 1` or
    `pod-lifecycle sync_result CrashLoopBackOff back-off 20s`."""
    topic = str(entry.get("topic", "?"))
    event = entry.get("event") or {}
    if topic == "pod-updates":
        pod = event.get("pod") or {}
        words = [topic, str(event.get("op", "?")), f"source={event.get('source', '?')}"]
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            words.append("deleting")
        return " ".join(words)
    if topic == "pleg":
        container = _runtime_container(event)
        words = [
            topic,
            str(event.get("type", "?")),
            str(container.get("name") or event.get("container_id") or ""),
        ]
        if container.get("state") == "exited":
            words.append(f"exit {container.get('exit_code')}")
        return " ".join(w for w in words if w)
    if topic == "probe-results":
        return f"{topic} {event.get('probe')} {event.get('container_name')} {event.get('result')}"
    kind = str(event.get("kind", "?"))
    if kind == "sync_result":
        results = [f"{r.get('container', '?')}: {_sync_text(r)}" for r in event.get("sync_results") or []]
        if len(results) == 1:
            results = [_sync_text((event.get("sync_results") or [{}])[0])]
        return f"{topic} {kind} {'; '.join(results) or 'ok'}"
    if kind == "terminating" and event.get("grace_s") is not None:
        return f"{topic} {kind} grace {event['grace_s']}s"
    return f"{topic} {kind}"
