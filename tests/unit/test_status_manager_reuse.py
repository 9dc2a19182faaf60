"""The status manager's shortcuts equal its plain steps, byte for byte, on random inputs.

set_pod_status(built=True) makes conditions canonical one by one and keeps a stored condition that
did not change (canonical.is_canonical_condition: the stored dict is shared, not rebuilt); it
normalizes only the container states that need it (canonical.normalize_generated) and compares the
rest of the status before the conditions (_kubelet_equal_canonical). Each is checked here against
the plain definition it stands for: the status manager's own steps (set the times, cut them to
seconds, semantic()) condition by condition, every container state normalized, the owned
conditions compared first. Values come from outside too: odd types, empty strings, nulls,
fractional times, fields in any order, repeated condition types.
"""

from __future__ import annotations

import copy
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from podledger.streams import canonical
from podledger.streams import status_manager as sm
from podledger.streams.pod_json import condition

TIMED = sorted(sm.TRANSITION_TIMED)
TYPES = st.sampled_from([*TIMED, "example.com/gate", ""])
SECONDS = ["2026-01-01T10:00:00Z", "2026-01-01T10:00:07Z"]
TIMES = st.sampled_from([*SECONDS, "2026-01-01T10:00:01.250Z", "2026-01-01T10:00:02.5+01:00"])
TEXTS = st.sampled_from(["True", "False", "Unknown", "ContainersNotReady", "containers ü", "x"])
ODD = st.sampled_from(["", None, 0, 1, True, False, {}, {"a": 1}, [], ["x"], 2.5])
FIELDS = ["type", "status", "reason", "message", "lastTransitionTime", "lastProbeTime"]


def dumps(value: Any) -> bytes:
    return orjson.dumps(value)


@st.composite
def generated(draw: st.DrawFn) -> dict[str, Any]:
    """A condition as status generation builds it (condition()), or one copied from outside."""
    if draw(st.integers(0, 3)):
        return condition(
            draw(TYPES.filter(bool)),
            draw(TEXTS),
            draw(st.sampled_from(["", "ContainersNotReady", "PodCompleted"])),
            draw(st.sampled_from(["", "containers with unready status: [a]", "ü"])),
        )
    keys = draw(st.permutations(FIELDS).map(lambda ks: ks[: draw(st.integers(1, len(FIELDS)))]))
    out: dict[str, Any] = {}
    for key in keys:
        if key == "type":
            out[key] = draw(TYPES | st.sampled_from([None, 0, True, 2.5]))  # keys of a dict
        elif key in canonical._TIMES:
            out[key] = draw(TIMES | ODD)
        else:
            out[key] = draw(TEXTS | ODD)
    return out


def plain_condition(cond: dict[str, Any], transition: Any) -> dict[str, Any]:
    """The status manager's own steps on one condition (update_last_transition_times, then
    normalizeStatus's times, then semantic()), on a copy."""
    cond = copy.deepcopy(cond)
    if transition is not None:
        cond.setdefault("lastProbeTime", None)
        cond["lastTransitionTime"] = transition
    for t in canonical._TIMES:
        if t in cond:
            cond[t] = canonical.truncate_time(cond[t])
    out = canonical.semantic(cond)
    out.setdefault("lastProbeTime", None)
    return out  # type: ignore[no-any-return]


def plain_conditions(old: dict[str, Any], conditions: list[dict[str, Any]], now: str) -> list[Any]:
    old_by_type = {c.get("type"): c for c in old.get("conditions") or []}
    return [
        plain_condition(c, sm._transition_time(old_by_type, c, now) if c.get("type") in TIMED else None)
        for c in conditions
    ]


@st.composite
def from_outside(draw: st.DrawFn, cond: dict[str, Any]) -> dict[str, Any]:
    """A stored condition as an API status may hold it: mostly as stored, else with its fields in
    another order or its time not cut to seconds."""
    change = draw(st.sampled_from(["none", "none", "order", "fraction"]))
    if change == "order":
        return {k: cond[k] for k in draw(st.permutations(list(cond)))}
    if change == "fraction" and type(cond.get("lastTransitionTime")) is str:
        return {**cond, "lastTransitionTime": cond["lastTransitionTime"].replace("Z", ".5Z")}
    return cond


@st.composite
def histories(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    """An old status (stored by an earlier step, or straight from outside) and the next generated
    conditions: mostly the same ones again, some changed, reordered, added or dropped."""
    now = draw(st.sampled_from(SECONDS))
    earlier = draw(st.lists(generated(), max_size=6))
    if draw(st.booleans()):
        stored = [draw(from_outside(c)) for c in plain_conditions({}, earlier, draw(TIMES))]
    else:
        stored = [draw(generated()) for _ in earlier]
    nxt = [copy.deepcopy(c) for c in earlier if draw(st.integers(0, 5))]
    for _ in range(draw(st.integers(0, 2))):
        nxt.insert(draw(st.integers(0, len(nxt))), draw(generated()))
    if draw(st.booleans()):
        nxt = draw(st.permutations(nxt))
    return {"conditions": stored}, nxt, now


@settings(max_examples=400, deadline=None)
@given(cond=generated(), transition=st.none() | TIMES | st.sampled_from([5, True, {"a": 1}]))
def test_canonical_condition_is_the_plain_steps(cond: dict[str, Any], transition: Any) -> None:
    assert dumps(canonical.canonical_condition(copy.deepcopy(cond), transition)) == dumps(
        plain_condition(cond, transition)
    )


@settings(max_examples=400, deadline=None)
@given(stored=generated(), cond=generated(), transition=TIMES)
def test_a_kept_condition_is_what_the_plain_steps_give(
    stored: dict[str, Any], cond: dict[str, Any], transition: str
) -> None:
    """is_canonical_condition never says yes wrongly, and says yes to what canonical_condition
    made from the same fields with a time in seconds."""
    if canonical.is_canonical_condition(stored, cond):
        kept = sm._transition_time({cond.get("type"): stored}, cond, "2030-01-01T00:00:00Z")
        assert kept == stored["lastTransitionTime"]
        assert dumps(stored) == dumps(plain_condition(cond, kept))
    made = plain_condition(cond, transition)
    plain = all(type(v) is str and v for v in cond.values()) and not set(cond) & set(canonical._TIMES)
    assert canonical.is_canonical_condition(made, cond) == plain


@settings(max_examples=600, deadline=None)
@given(history=histories())
def test_conditions_made_canonical_equal_the_plain_steps(
    history: tuple[dict[str, Any], list[dict[str, Any]], str],
) -> None:
    old, conditions, now = history
    before = dumps(old)
    expected = plain_conditions(old, conditions, now)
    got = sm._canonical_conditions(old, copy.deepcopy(conditions), now)
    assert dumps(got) == dumps(expected)
    assert dumps(old) == before  # the stored status is never changed


def test_an_unchanged_condition_is_the_stored_one() -> None:
    not_ready = condition("Ready", "False", "R", "m")
    first = sm._canonical_conditions({}, [dict(not_ready)], SECONDS[0])
    again = sm._canonical_conditions({"conditions": first}, [dict(not_ready)], SECONDS[1])
    assert again[0] is first[0]
    moved = sm._canonical_conditions({"conditions": first}, [condition("Ready", "True")], SECONDS[1])
    assert moved[0] is not first[0] and moved[0]["lastTransitionTime"] == SECONDS[1]


# --------------------------------------------------------------------------- container states

RUNNING_TIMES = st.sampled_from([None, "", 7, *SECONDS, "2026-01-01T10:00:01.250Z"])
MESSAGES = st.sampled_from([None, "", "Error", "boom " * 700, "ü" * 3000, 3])


@st.composite
def states(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["none", "empty", "waiting", "running", "terminated", "both"]))
    if kind == "none":
        return None
    if kind == "empty":
        return {}
    if kind == "waiting":
        return {"waiting": {"reason": "CrashLoopBackOff"}}
    running = {} if draw(st.booleans()) else {"startedAt": draw(RUNNING_TIMES)}
    terminated: dict[str, Any] = {"exitCode": draw(st.integers(0, 2))}
    for key in ("startedAt", "finishedAt"):
        if draw(st.booleans()):
            terminated[key] = draw(RUNNING_TIMES)
    if draw(st.booleans()):
        terminated["message"] = draw(MESSAGES)
    if kind == "running":
        return {"running": running}
    if kind == "terminated":
        return {"terminated": draw(st.sampled_from([terminated, {}, None]))}
    return {"running": running, "terminated": terminated}


@st.composite
def generated_statuses(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    names = [f"c{i}" for i in range(draw(st.integers(1, 3)))]
    spec = {"containers": [{"name": n} for n in names] * draw(st.integers(1, 3))}
    status: dict[str, Any] = {}
    for key in ("containerStatuses", "initContainerStatuses"):
        if draw(st.booleans()):
            listed = []
            for name in draw(st.permutations(names)):
                cs = {"name": name}
                for which in ("state", "lastState"):
                    if draw(st.integers(0, 4)):
                        cs[which] = draw(states())
                listed.append(cs)
            status[key] = listed
            if key == "initContainerStatuses":
                spec["initContainers"] = [{"name": n} for n in draw(st.permutations(names))]
    return {"spec": spec}, status


def plain_normalize_generated(pod: dict[str, Any], status: dict[str, Any]) -> None:
    budget = canonical.message_budget(pod)
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in status.get(key) or ():
            canonical.normalize_container_status(cs, budget, drop_empty=True)
    if status.get("initContainerStatuses"):
        order = {c["name"]: i for i, c in enumerate(pod["spec"].get("initContainers") or [])}
        status["initContainerStatuses"].sort(key=lambda s: order.get(s["name"], len(order)))


@settings(max_examples=400, deadline=None)
@given(case=generated_statuses())
def test_normalize_generated_normalizes_every_state(case: tuple[dict[str, Any], dict[str, Any]]) -> None:
    pod, status = case
    shared = dumps(status)  # the states may be shared with the cached status: never changed
    expected = copy.deepcopy(status)
    plain_normalize_generated(pod, expected)
    got = {k: [dict(cs) for cs in v] for k, v in status.items()}
    canonical.normalize_generated(pod, got)
    assert dumps(got) == dumps(expected)
    assert dumps(status) == shared


# --------------------------------------------------------------------------- kubelet equality

OWNED = st.sampled_from([*sorted(sm.KUBELET_OWNED_CONDITIONS), "DisruptionTarget", "example.com/x"])


@st.composite
def stored_conditions(draw: st.DrawFn) -> dict[str, Any]:
    cond = {"type": draw(OWNED), "status": draw(st.sampled_from(["True", "False"]))}
    if draw(st.booleans()):
        cond["reason"] = draw(st.sampled_from(["R", "S"]))
    cond["lastTransitionTime"] = draw(st.sampled_from(SECONDS))
    cond["lastProbeTime"] = None
    return cond


@st.composite
def status_pairs(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    old: dict[str, Any] = {"phase": draw(st.sampled_from(["Pending", "Running"]))}
    if draw(st.booleans()):
        old["conditions"] = draw(st.lists(stored_conditions(), max_size=4))
    if draw(st.booleans()):
        old["podIP"] = "10.0.0.1"
    new = copy.deepcopy(old)
    change = draw(st.sampled_from(["none", "phase", "ip", "conditions", "drop", "add"]))
    if change == "phase":
        new["phase"] = "Failed"
    elif change == "ip":
        new["podIP"] = "10.0.0.2"
    elif change == "conditions":
        new["conditions"] = draw(st.lists(stored_conditions(), max_size=4))
    elif change == "drop":
        new.pop("conditions", None)
    elif change == "add":
        new["message"] = "m"
    return old, new


def plain_kubelet_equal(old: dict[str, Any], new: dict[str, Any]) -> bool:
    if not sm._owned_conditions_match(old, new):
        return False
    replaced = {k: v for k, v in old.items() if k != "conditions"}
    if "conditions" in new:
        replaced["conditions"] = new["conditions"]
    return replaced == new


@settings(max_examples=400, deadline=None)
@given(pair=status_pairs())
def test_kubelet_equality_checks_the_rest_first_with_the_same_verdict(
    pair: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    old, new = pair
    assert sm._kubelet_equal_canonical(old, new) == plain_kubelet_equal(old, new)
    assert sm._kubelet_equal_canonical(old, new) == sm.is_pod_status_by_kubelet_equal(old, new)
