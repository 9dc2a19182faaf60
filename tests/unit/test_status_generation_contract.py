"""generate_api_status's ownership contract (its docstring), over random pods, old statuses, runtime
snapshots, probe results and reason caches: it changes none of its inputs; the status, its lists, its
container statuses and its conditions are new dicts (the status manager changes them in place); and
nothing it hands out is kept by the module (changing every one of those dicts after the call leaves
the next call's answer as it was: no placeholder or constant leaks out of the generation).

The rules themselves are pinned by the vector tests (test_status_vectors.py,
test_status_manager_vectors.py, test_prober_vectors.py) and the golden digests of the fold.
"""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from podledger.streams.status import generate_api_status
from podledger.types import CONFIG_SOURCE_ANNOTATION, JSONDict
from tests import pods
from tests.unit.test_fold_canonical import container_specs

TIMES = st.sampled_from([None, "", "2026-01-01T10:00:00Z", "2026-01-01T10:00:01Z", "2026-01-01T10:00:02Z"])
TEXTS = st.sampled_from([None, "", "Error", "OOMKilled"])


STATES = st.one_of(
    st.just({}),
    st.builds(lambda t: {"running": {} if t is None else {"startedAt": t}}, TIMES),
    st.builds(lambda code: {"terminated": {"exitCode": code}}, st.sampled_from([0, 1, 137])),
    st.builds(
        lambda reason: {"waiting": {"reason": reason} if reason else {}},
        st.sampled_from([None, "ContainerCreating", "PodInitializing", "CrashLoopBackOff"]),
    ),
)


@st.composite
def container_statuses(draw: st.DrawFn, name: str) -> JSONDict:
    status: JSONDict = {
        "name": name,
        "state": draw(STATES),
        "lastState": draw(
            st.sampled_from([{}, {"terminated": {"exitCode": 1}}, {"terminated": {"exitCode": 0}}])
        ),
        "ready": draw(st.booleans()),
        "restartCount": draw(st.integers(0, 3)),
    }
    if draw(st.booleans()):
        status["started"] = draw(st.booleans())
    if draw(st.booleans()):
        status["containerID"] = f"process://{name}{draw(st.sampled_from(['1', '2']))}"
    return status


@st.composite
def api_statuses(draw: st.DrawFn, regular: list[str], init: list[str]) -> JSONDict:
    status: JSONDict = {}
    if draw(st.booleans()):
        status["phase"] = draw(st.sampled_from(["Pending", "Running", "Succeeded", "Failed"]))
    for key in ("reason", "message", "qosClass"):
        if draw(st.booleans()):
            status[key] = draw(st.sampled_from(["", "Evicted", "Burstable"]))
    for key, names in (("containerStatuses", regular), ("initContainerStatuses", init)):
        if draw(st.booleans()):
            status[key] = [draw(container_statuses(n)) for n in draw(st.permutations(names))]
    if draw(st.booleans()):
        types = draw(st.lists(st.sampled_from(["Ready", "DisruptionTarget", "example.com/gate", "Other"])))
        status["conditions"] = [
            {"type": t, "status": draw(st.sampled_from(["True", "False"]))} for t in types
        ]
    return status


@st.composite
def runtime_containers(draw: st.DrawFn, name: str) -> JSONDict:
    rc: JSONDict = {
        "id": f"{name}{draw(st.sampled_from(['1', '2', '3']))}",
        "name": name,
        "state": draw(st.sampled_from(["created", "running", "exited", "unknown"])),
        "restart_count": draw(st.integers(0, 3)),
        "image": draw(st.sampled_from([None, "", "example/x:1"])),
        "image_id": draw(st.sampled_from(["", "sha256:1"])),
    }
    for key in ("created_at", "started_at", "finished_at"):
        if draw(st.booleans()):
            rc[key] = draw(TIMES)
    if draw(st.booleans()):
        rc["exit_code"] = draw(st.sampled_from([None, 0, 1]))
    for key in ("reason", "message"):
        if draw(st.booleans()):
            rc[key] = draw(TEXTS)
    return rc


@st.composite
def generations(draw: st.DrawFn) -> tuple[JSONDict, JSONDict | None, JSONDict | None, dict[str, Any]]:
    """(pod, old, runtime, keyword arguments) of one generate_api_status call."""
    regular = draw(st.lists(st.sampled_from(["a", "b", "main"]), max_size=3, unique=True))
    init = draw(st.lists(st.sampled_from(["i", "j"]), max_size=2, unique=True))
    pod = pods.pod(
        [draw(container_specs(n, False)) for n in regular],
        [draw(container_specs(n, True)) for n in init],
        restart_policy=draw(st.sampled_from([None, "Always", "OnFailure", "Never"])),
        readiness_gates=draw(st.sampled_from([(), ("example.com/gate",)])),
    )
    if draw(st.booleans()):
        pod["metadata"]["deletionTimestamp"] = "2026-01-01T10:00:00Z"
    if draw(st.booleans()):
        pod["metadata"]["annotations"] = {CONFIG_SOURCE_ANNOTATION: draw(st.sampled_from(["api", "file"]))}
    if draw(st.booleans()):
        pod["status"] = draw(api_statuses(regular, init))
    old = draw(st.none() | api_statuses(regular, init))
    names = [*regular, *init, "gone"]
    runtime: JSONDict | None = None
    if draw(st.integers(0, 4)):
        runtime = {
            "containers": [
                draw(runtime_containers(n)) for n in draw(st.lists(st.sampled_from(names), max_size=5))
            ]
        }
        runtime["ips"] = draw(st.sampled_from([[], ["10.0.0.1"], ["10.0.0.1", "fd00::1", "10.0.0.2"]]))
        runtime["host_ips"] = draw(st.sampled_from([[], ["192.168.0.1", "fd00::2"]]))
        runtime["runtime_type"] = draw(st.sampled_from(["", "process"]))
        runtime["sandbox"] = draw(
            st.sampled_from([None, {"id": "s", "ready": True}, {"id": "s", "ready": False}])
        )
    probes = {
        name: {
            f"process://{name}{instance}": {
                probe: draw(st.sampled_from(["Success", "Failure", "Unknown"]))
                for probe in draw(st.lists(st.sampled_from(["startup", "readiness", "liveness"]), max_size=2))
            }
            for instance in draw(st.lists(st.sampled_from(["1", "2"]), max_size=2))
        }
        for name in draw(st.lists(st.sampled_from(names), max_size=3))
    }
    reasons = {
        name: {"reason": draw(st.sampled_from(["", "CrashLoopBackOff"])), "message": draw(TEXTS) or ""}
        for name in draw(st.lists(st.sampled_from(names), max_size=3))
    }
    kwargs = {"probes": probes, "reasons": reasons, "pod_is_terminal": draw(st.booleans())}
    return pod, old, runtime, kwargs


def _containers(value: Any) -> list[Any]:
    """Every dict and list in a JSON value, the value included."""
    found: list[Any] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found.append(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            found.append(item)
            stack.extend(item)
    return found


def _owned(status: JSONDict) -> list[Any]:
    """What the caller owns: the status, its lists, its container statuses and its conditions."""
    owned: list[Any] = [status]
    for value in status.values():
        if isinstance(value, list):
            owned.append(value)
            owned.extend(item for item in value if isinstance(item, dict))
    return owned


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(generations())
def test_inputs_are_unchanged_and_the_caller_owns_the_top_levels(
    generation: tuple[JSONDict, JSONDict | None, JSONDict | None, dict[str, Any]],
) -> None:
    pod, old, runtime, kwargs = generation
    before = orjson.dumps(generation)
    status = generate_api_status(pod, old, runtime, **kwargs)
    assert orjson.dumps(generation) == before
    inputs = {id(c) for c in _containers(generation)}
    owned = _owned(status)
    assert not [o for o in owned if id(o) in inputs]
    assert len({id(o) for o in owned}) == len(owned)  # no container status or condition twice


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(generations())
def test_changing_what_the_caller_owns_does_not_reach_the_next_call(
    generation: tuple[JSONDict, JSONDict | None, JSONDict | None, dict[str, Any]],
) -> None:
    pod, old, runtime, kwargs = generation
    first = generate_api_status(pod, old, runtime, **kwargs)
    expected = orjson.dumps(first)
    for owned in _owned(first):
        if isinstance(owned, dict):
            owned["poison"] = True  # (a dict of the input would change the next call's answer)
        else:
            owned.append({"poison": True})
    assert orjson.dumps(generate_api_status(pod, old, runtime, **kwargs)) == expected
