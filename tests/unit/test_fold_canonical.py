"""Statuses built canonical equal statuses made canonical: the fold's fast path (status generation
emits no empty field and the status manager finishes only conditions and container states,
streams/status_manager.py `set_pod_status(built=True)`) publishes, byte for byte, what the plain path
publishes (the generic walk `canonical.semantic` over the whole normalized status), on random lives
of pods of random shapes with odd values from outside: empty strings and nulls in runtime snapshots,
sync results and API statuses, fractional times, long and multi-byte messages, and schema-valid
poison (tests/fuzz.py) in between.

The golden digests (test_fold_golden.py) pin both paths to the fold before the fast path; this test
reaches the corners those workloads do not.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from podledger.schemas import encode
from podledger.streams import canonical, fold
from podledger.streams.replay import replay
from podledger.types import Topic
from tests import pods
from tests.fuzz import EXAMPLES, odd_values

T0 = 1_767_261_600_000
UID, NODE = "canon-1", "node-a"

# Values from outside, empty or odd where the schemas let them be.
texts = st.sampled_from(["", "x", "Error", "boom " * 700, "ü" * 3000, "Completed"])
times = st.sampled_from(
    [None, "", "2026-01-01T10:00:00Z", "2026-01-01T10:00:01.250Z", "2026-01-01T10:00:02+01:00"]
)
maybe = st.none() | texts


@st.composite
def container_specs(draw: st.DrawFn, name: str, init: bool) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for probe in ("readinessProbe", "startupProbe"):
        if draw(st.booleans()):
            fields[probe] = {"exec": {"command": ["true"]}}
    if init and draw(st.booleans()):
        fields["restartPolicy"] = "Always"
    if draw(st.booleans()):
        fields["resources"] = {"limits": {"cpu": "1"}}
    return pods.container(name, draw(st.sampled_from([None, "", f"example/{name}:1"])), **fields)


@st.composite
def api_statuses(draw: st.DrawFn, names: list[str]) -> dict[str, Any] | None:
    """An API status; half of them without any empty field (so the fast path takes them as the old
    status of the first version)."""
    if draw(st.booleans()):
        return None
    clean = draw(st.booleans())
    text = texts.filter(bool) if clean else texts
    time = times.filter(bool) if clean else times
    conditions = [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": draw(time)},
        {"type": "DisruptionTarget", "status": "True", "reason": draw(text), "lastProbeTime": draw(time)},
        {
            "type": "example.com/gate",
            "status": draw(st.sampled_from(["True", "False", ""]).filter(lambda s: s or not clean)),
        },
        {
            "type": "PodHasNetwork",
            "lastTransitionTime": draw(time),
            "status": "True",
            "message": draw(text if clean else maybe),
        },
    ]
    status: dict[str, Any] = {
        "phase": draw(
            st.sampled_from(["Pending", "Running", "Succeeded", "Failed", ""]).filter(
                lambda s: s or not clean
            )
        )
    }
    status["conditions"] = draw(st.lists(st.sampled_from(conditions), min_size=int(clean), max_size=3))
    for key in ("qosClass", "reason", "message", "startTime"):
        if draw(st.booleans()):
            status[key] = draw(time if key == "startTime" else text if clean else maybe)
    if draw(st.booleans()):
        state = draw(
            st.sampled_from(
                [
                    {"running": {"startedAt": "2026-01-01T09:00:00.5Z"}},
                    {"terminated": {"exitCode": 1, "message": "ü" * 3000}},
                    {"waiting": {}},
                ]
            )
        )
        status["containerStatuses"] = [
            {
                "name": n,
                "state": state,
                "lastState": {},
                "restartCount": draw(st.integers(0, 2)),
                "image": draw(text),
            }
            for n in names
        ]
    return status


@st.composite
def pod_updates(draw: st.DrawFn) -> tuple[dict[str, Any], list[str]]:
    regular = [f"c{i}" for i in range(draw(st.integers(1, 3)))]
    init = [f"i{i}" for i in range(draw(st.integers(0, 2)))]
    pod = pods.pod(
        [draw(container_specs(n, False)) for n in regular],
        [draw(container_specs(n, True)) for n in init],
        uid=UID,
        node=NODE,
        restart_policy=draw(st.sampled_from([None, "Always", "OnFailure", "Never"])),
        readiness_gates=draw(st.sampled_from([(), ("example.com/gate",)])),
        source=draw(st.sampled_from([None, "file", "api"])),
        status=draw(api_statuses(regular)),
    )
    return pod, regular + init


@st.composite
def runtime_containers(draw: st.DrawFn, name: str, serial: int) -> dict[str, Any]:
    return {
        "id": f"{name}-{serial}",
        "name": name,
        "image": draw(st.none() | st.sampled_from(["", "example/x:1"])),
        "image_id": draw(st.none() | st.sampled_from(["", "sha256:abc"])),
        "state": draw(st.sampled_from(["created", "running", "exited", "unknown"])),
        "exit_code": draw(st.sampled_from([None, 0, 1, 137])),
        "reason": draw(maybe),
        "message": draw(maybe),
        "created_at": draw(times),
        "started_at": draw(times),
        "finished_at": draw(times),
        "restart_count": serial,
    }


@st.composite
def events(draw: st.DrawFn, pod: dict[str, Any], names: list[str], ts: int) -> dict[str, Any]:
    """One event of the pod's life: a runtime snapshot, a probe result, a pod worker fact or a pod
    update, sometimes made odd where its schema leaves room."""
    base: dict[str, Any] = {"uid": UID, "node": NODE, "ts_ms": ts}
    kind = draw(st.sampled_from(["pleg", "pleg", "probe", "sync", "terminating", "terminated", "update"]))
    if kind in ("pleg", "terminated"):
        chosen = draw(st.lists(st.sampled_from(names), max_size=len(names) + 1))
        runtime = {
            "containers": [draw(runtime_containers(n, i)) for i, n in enumerate(chosen)],
            "ips": draw(st.sampled_from([[], ["10.0.0.1"], ["", "fd00::1"]])),
            "runtime_type": draw(st.sampled_from(["sim", "process"])),
            "sandbox": draw(
                st.sampled_from([None, {"id": "sb", "ready": True}, {"id": "sb", "ready": False}])
            ),
        }
        if draw(st.booleans()):
            runtime["host_ips"] = draw(st.sampled_from([["192.168.0.1"], [""], [None, "fd00::2"]]))
        if kind == "terminated":
            value = {**base, "kind": "terminated", "runtime": draw(st.none() | st.just(runtime))}
            topic = Topic.POD_LIFECYCLE
        else:
            value = {**base, "type": "ContainerStarted", "container_id": None, "runtime": runtime}
            topic = Topic.PLEG
    elif kind == "probe":
        name = draw(st.sampled_from(names))
        serial = draw(st.integers(0, 3))
        value = {
            **base,
            "container_name": name,
            "container_id": f"{draw(st.sampled_from(['sim', 'process']))}://{name}-{serial}",
            "probe": draw(st.sampled_from(["readiness", "startup", "liveness"])),
            "result": draw(st.sampled_from(["Success", "Failure", "Unknown"])),
        }
        topic = Topic.PROBE_RESULTS
    elif kind == "sync":
        results = [
            {
                "container": n,
                "reason": draw(st.sampled_from(["", "CrashLoopBackOff"])),
                "message": draw(texts),
            }
            for n in draw(st.lists(st.sampled_from(names), max_size=2))
        ]
        value, topic = {**base, "kind": "sync_result", "sync_results": results}, Topic.POD_LIFECYCLE
    elif kind == "terminating":
        value, topic = {**base, "kind": "terminating", "grace_s": 30}, Topic.POD_LIFECYCLE
    else:
        changed = orjson.loads(orjson.dumps(pod))
        if draw(st.booleans()):
            changed["metadata"]["deletionTimestamp"] = "2026-01-01T10:00:00Z"
        if draw(st.booleans()):
            changed["spec"]["containers"] = changed["spec"]["containers"] * 2  # another message budget
        value = {"op": "UPDATE", "source": "api", "node": NODE, "pod": changed, "ts_ms": ts}
        topic = Topic.POD_UPDATES
    return draw(odd_values(value, topic)) if draw(st.integers(0, 5)) == 0 else value


@st.composite
def lives(draw: st.DrawFn) -> list[bytes]:
    pod, names = draw(pod_updates())
    add = {"op": "ADD", "source": "api", "node": NODE, "pod": pod, "ts_ms": T0}
    lines = [orjson.dumps(add)]
    ts = T0
    for _ in range(draw(st.integers(1, 12))):
        ts += draw(st.sampled_from([1, 400, 1500]))
        lines.append(orjson.dumps(draw(events(pod, names, ts))))
    return lines


@contextmanager
def built_canonical(on: bool) -> Iterator[None]:
    before = fold.BUILT_CANONICAL
    fold.BUILT_CANONICAL = on
    try:
        yield
    finally:
        fold.BUILT_CANONICAL = before


def published(lines: list[bytes], *, built: bool) -> list[tuple[str, str, bytes | None]]:
    with built_canonical(built):
        return [
            (out.topic, out.key, None if out.value is None else encode(out.value)) for out in replay(lines)
        ]


# Random lives are slow and large to draw: every property over them runs with these settings.
life_settings = settings(
    max_examples=max(EXAMPLES // 10, 200),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


@life_settings
@given(lives())
def test_built_canonical_statuses_equal_the_generic_canonical_form(lines: list[bytes]) -> None:
    fast = published(lines, built=True)
    assert fast == published(lines, built=False)
    for topic, _, value in fast:  # what was published is canonical: the generic walk changes nothing
        if topic == Topic.POD_STATUS and value is not None:
            status = orjson.loads(value)["status"]
            without_probe_times = {
                **status,
                "conditions": [
                    {k: v for k, v in c.items() if k != "lastProbeTime" or v is not None}
                    for c in status.get("conditions") or []
                ],
            }
            assert canonical.semantic(without_probe_times) == without_probe_times


def test_a_first_status_over_an_api_status_with_empty_fields_takes_the_plain_path() -> None:
    """An API status with an empty field is no canonical old status: the fast path is not taken,
    and the published status is the same either way."""
    pod = pods.pod(["app"], uid=UID, node=NODE, status={"phase": "Pending", "reason": "", "startTime": ""})
    lines = [orjson.dumps({"op": "ADD", "source": "api", "node": NODE, "pod": pod, "ts_ms": T0})]
    assert not canonical.is_canonical(pod["status"])
    assert published(lines, built=True) == published(lines, built=False)


def test_is_canonical_agrees_with_semantic() -> None:
    cases: list[Any] = [
        {},
        {"a": ""},
        {"a": None},
        {"a": []},
        {"a": [""]},
        {"a": {}},
        {"a": {"b": None}},
        {"a": [{"b": ""}]},
        {"a": 0, "b": False, "c": 0.0},
        {"a": [[]]},
        {"a": "x", "b": [1, None]},
    ]
    for value in cases:
        assert canonical.is_canonical(value) == (canonical.semantic(value) == value), value


def test_put_sets_what_semantic_keeps() -> None:
    for value in (None, "", "x", 0, False, 1.5, [], [""], {}, {"a": ""}, [{"a": None}]):
        target: dict[str, Any] = {}
        canonical.put(target, "k", value)
        assert target == canonical.semantic({"k": value}), value
