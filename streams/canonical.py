"""The canonical form of a pod status: the status manager's normalizeStatus (messages cut to a byte
budget, times in whole seconds, container statuses sorted) and Go's semantic equality (missing,
null, empty string and empty list alike), over plain dicts. No I/O.

A status in canonical form compares by plain dict equality exactly when the kubelet would call
the two statuses semantically equal; the fold stores and publishes statuses in this form. The
rules: docs/kubelet-rules.md#status-manager.
"""

from __future__ import annotations

import re
from typing import Any

from podledger.streams.pod_json import json_copy
from podledger.types import JSONDict

MAX_TERMINATION_MESSAGE_BYTES = 12288  # MaxPodTerminationMessageLogLength
_FRACTION = re.compile(r"\.\d+(?=Z|[+-]\d\d:\d\d$)")
CONTAINER_LISTS = ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses")


def truncate_time(value: Any) -> Any:
    """RFC 3339 to whole seconds, as the apiserver stores times."""
    return _FRACTION.sub("", value) if isinstance(value, str) and "." in value else value


def _truncate_bytes(text: str, limit: int) -> str:
    if len(text) * 4 <= limit:  # no character takes more than 4 bytes: nothing to cut, no encoding
        return text
    raw = text.encode()
    # Cut on bytes like the kubelet; drop a character the cut split rather than emit invalid UTF-8.
    return text if len(raw) <= limit else raw[:limit].decode(errors="ignore")


def message_budget(pod: JSONDict) -> int:
    """Bytes of termination message each container may keep: the pod's budget split evenly."""
    spec = pod.get("spec") or {}
    count = sum(len(spec.get(k) or []) for k in ("containers", "initContainers", "ephemeralContainers"))
    return MAX_TERMINATION_MESSAGE_BYTES // count if count > 0 else MAX_TERMINATION_MESSAGE_BYTES


def normalize_status(pod: JSONDict, status: JSONDict) -> JSONDict:
    """A copy with messages cut to the byte budget, times in seconds, statuses sorted (normalizeStatus)."""
    return normalize_in_place(pod, json_copy(status))


def normalize_in_place(pod: JSONDict, status: JSONDict) -> JSONDict:
    """normalizeStatus on `status`, its lists, its container statuses and its conditions, which it
    changes in place; a container's state that needs a change is replaced by a changed copy (states
    may be shared with the cached status, which stays as it was)."""
    budget = message_budget(pod)
    for key in CONTAINER_LISTS:
        for cs in status.get(key) or []:
            normalize_container_status(cs, budget)
    if "startTime" in status:
        status["startTime"] = truncate_time(status["startTime"])
    for cond in status.get("conditions") or []:
        for t in ("lastProbeTime", "lastTransitionTime"):
            if t in cond:
                cond[t] = truncate_time(cond[t])

    for key in ("containerStatuses", "ephemeralContainerStatuses"):
        if status.get(key):
            status[key] = sorted(status[key], key=lambda s: s["name"])
    if status.get("initContainerStatuses"):
        spec = pod.get("spec") or {}
        order = {c["name"]: i for i, c in enumerate(spec.get("initContainers") or [])}
        status["initContainerStatuses"] = sorted(
            status["initContainerStatuses"], key=lambda s: order.get(s["name"], len(order))
        )
    return status


def normalize_container_status(cs: JSONDict, budget: int, *, drop_empty: bool = False) -> None:
    """One container status's states normalized, in place (on `cs`, never on its states).
    `drop_empty`: a message the cut leaves empty is dropped, as the canonical form has it."""
    for which in ("state", "lastState"):
        state = cs.get(which) or {}
        normalized = _normalized_state(state, budget, drop_empty)
        if normalized is not state:
            cs[which] = normalized


def _normalized_state(state: JSONDict, budget: int, drop_empty: bool = False) -> JSONDict:
    """A container state with its terminated message cut and its times in seconds: `state` itself
    when nothing changes, else a changed copy."""
    terminated = state.get("terminated")
    if terminated:
        changed = terminated
        if isinstance(terminated.get("message"), str):
            message = _truncate_bytes(terminated["message"], budget)
            if message != terminated["message"]:
                changed = {**changed, "message": message}
                if drop_empty and not message:  # a multi-byte character cut away whole
                    del changed["message"]
        for t in ("startedAt", "finishedAt"):
            if t in terminated:
                value = truncate_time(terminated[t])
                if value != terminated[t]:
                    changed = {**changed, t: value}
        if changed is not terminated:
            state = {**state, "terminated": changed}
    running = state.get("running")
    if running and "startedAt" in running:
        value = truncate_time(running["startedAt"])
        if value != running["startedAt"]:
            state = {**state, "running": {**running, "startedAt": value}}
    return state


def semantic(value: Any) -> Any:
    """The canonical form of JSON data under Go's semantic equality: a missing field, null, an
    empty string and an empty list are alike and dropped. An empty object is kept: it stands for
    a set pointer to an empty struct (`waiting: {}`), which Go tells apart from a nil one.
    Every dict and list in the result is new (the status manager stores it)."""
    kind = type(value)
    if kind is list:
        return [semantic(item) if type(item) is dict or type(item) is list else item for item in value]
    if kind is not dict:
        return value
    out: JSONDict = {}
    for key, item in value.items():
        put(out, key, item)
    return out


# --------------------------------------------------------------------------- built canonical
# Status generation builds its dicts in canonical form (streams/status.py): these keep a value from
# outside (the runtime, the API status, the reason cache) out of that form's way without a walk
# over the whole status.


def put(target: JSONDict, key: str, value: Any) -> None:
    """`target[key] = semantic(value)`, or no key where semantic() drops the field: what semantic()
    does to one field, for a dict built field by field."""
    kind = type(value)
    if kind is str:
        if value:
            target[key] = value
    elif kind is bool or kind is int:
        target[key] = value
    elif kind is dict:
        target[key] = semantic(value)
    elif kind is list:
        if value:
            target[key] = semantic(value)
    elif not (value is None or value == "" or value == []):
        target[key] = value


_TIMES = ("lastProbeTime", "lastTransitionTime")


def canonical_condition(cond: JSONDict, transition: Any) -> JSONDict:
    """A fresh condition in canonical form with lastTransitionTime `transition` (None: a condition
    whose times the status manager does not keep), as the stored status shows it: times in whole
    seconds, no empty field, and lastProbeTime, null unless set, last. `cond` may be changed."""
    if "lastTransitionTime" not in cond and "lastProbeTime" not in cond:
        for value in cond.values():  # the generated conditions: non-empty strings, no times yet
            if type(value) is not str or not value:
                break
        else:
            if transition is None:
                return {**cond, "lastProbeTime": None}
            if type(transition) is str and "." in transition:
                transition = truncate_time(transition)
            return {**cond, "lastTransitionTime": transition, "lastProbeTime": None}
    if transition is not None:  # anything else takes the status manager's own steps
        cond.setdefault("lastProbeTime", None)
        cond["lastTransitionTime"] = transition
    for t in _TIMES:
        if t in cond:
            cond[t] = truncate_time(cond[t])
    out = semantic(cond)
    out.setdefault("lastProbeTime", None)
    return out


def is_canonical_condition(stored: JSONDict, cond: JSONDict) -> bool:
    """Whether `stored` is, byte for byte, canonical_condition(cond, its own lastTransitionTime):
    `cond`'s fields (non-empty strings) in their order, then that time (set, in whole seconds) and
    a null lastProbeTime. Then `stored` has `cond`'s status and keeps its time: a condition that
    did not change is the stored one itself."""
    if len(stored) != len(cond) + 2:
        return False
    fields = iter(stored.items())
    for field in cond.items():
        value = field[1]
        if type(value) is not str or not value or field != next(fields):
            return False
    key, transition = next(fields)
    return (
        key == "lastTransitionTime"
        and type(transition) is str
        and transition != ""
        and "." not in transition
        and next(fields) == ("lastProbeTime", None)
    )


def normalize_generated(pod: JSONDict, status: JSONDict) -> None:
    """normalize_in_place for a status generation built (streams/status.py): its container lists are
    in canonical order already (regular ones by name, init ones in spec order) and its conditions
    are made canonical apart (canonical_condition), so only the container states are left; most
    have nothing to change (no terminated state, a running one already in whole seconds)."""
    budget = 0  # the pod's message budget, worked out for the first terminated state
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in status.get(key) or ():
            for which in ("state", "lastState"):
                state = cs.get(which)
                if not state:
                    continue
                if "terminated" not in state:
                    running = state.get("running")
                    started = running.get("startedAt") if running else None
                    if type(started) is not str or "." not in started:
                        continue  # nothing _normalized_state would change
                if not budget:
                    budget = message_budget(pod)
                normalized = _normalized_state(state, budget, True)
                if normalized is not state:
                    cs[which] = normalized
    if status.get("initContainerStatuses"):  # spec order, unless the spec repeats a name
        spec = pod.get("spec") or {}
        order = {c["name"]: i for i, c in enumerate(spec.get("initContainers") or [])}
        status["initContainerStatuses"] = sorted(
            status["initContainerStatuses"], key=lambda s: order.get(s["name"], len(order))
        )


def is_canonical(value: Any) -> bool:
    """Whether semantic(value) == value: no field anywhere is null, an empty string or an empty list.
    A walk that builds nothing, for a value from outside (a pod's API status) checked before use."""
    kind = type(value)
    if kind is list:
        return all(is_canonical(item) for item in value if type(item) is dict or type(item) is list)
    if kind is not dict:
        return True
    for item in value.values():
        kind = type(item)
        if kind is str:
            if not item:
                return False
        elif kind is dict or kind is list:
            if (not item and kind is list) or not is_canonical(item):
                return False
        elif kind is not bool and kind is not int and (item is None or item == "" or item == []):
            return False
    return True
