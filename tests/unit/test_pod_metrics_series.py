"""kube-state-metrics' pod series from one status (read/metrics/series.py), and the whole page over
the fold's own output for a synthetic workload.

The label tables below are kube-state-metrics' pod store (internal/store/pod.go): names and order
of the labels, with what the stream cannot give left out (docs/metrics.md lists it).
"""

from __future__ import annotations

import copy
from collections import Counter

import pytest
from prometheus_client.parser import text_string_to_metric_families

from podledger.read.metrics import series
from podledger.read.metrics.pods import FAMILIES, PodMetrics
from podledger.read.metrics.text import format_value
from podledger.schemas import encode
from podledger.streams.replay import replay
from podledger.types import JSONDict, PlegEventType, Topic
from podledger.workload import workload
from tests import pods

POD = pods.pod(("main",), name="web", namespace="shop", uid="uid-web")
BASE = ("namespace", "pod", "uid")
CONTAINER = (*BASE, "container")

KSM_LABELS: dict[str, tuple[str, ...]] = {
    "kube_pod_info": (*BASE, "host_ip", "pod_ip", "node"),
    "kube_pod_ips": (*BASE, "ip", "ip_family"),
    "kube_pod_start_time": BASE,
    "kube_pod_completion_time": BASE,
    "kube_pod_status_phase": (*BASE, "phase"),
    "kube_pod_status_qos_class": (*BASE, "qos_class"),
    "kube_pod_status_ready": (*BASE, "condition"),
    "kube_pod_status_scheduled": (*BASE, "condition"),
    "kube_pod_status_initialized_time": BASE,
    "kube_pod_status_ready_time": BASE,
    "kube_pod_status_container_ready_time": BASE,
    "kube_pod_status_reason": (*BASE, "reason"),
    "kube_pod_status_disruption_reason": (*BASE, "reason"),
}
for _prefix in ("kube_pod_container_", "kube_pod_init_container_"):
    KSM_LABELS |= {
        f"{_prefix}info": (*CONTAINER, "image", "image_id", "container_id"),
        f"{_prefix}state_started": CONTAINER,
        f"{_prefix}status_waiting": CONTAINER,
        f"{_prefix}status_waiting_reason": (*CONTAINER, "reason"),
        f"{_prefix}status_running": CONTAINER,
        f"{_prefix}status_terminated": CONTAINER,
        f"{_prefix}status_terminated_reason": (*CONTAINER, "reason"),
        f"{_prefix}status_last_terminated_reason": (*CONTAINER, "reason"),
        f"{_prefix}status_last_terminated_exitcode": CONTAINER,
        f"{_prefix}status_last_terminated_timestamp": CONTAINER,
        f"{_prefix}status_ready": CONTAINER,
        f"{_prefix}status_restarts_total": CONTAINER,
    }
PODLEDGER_LABELS = {
    "podledger_pod_container_terminations_total": (*CONTAINER, "reason"),
    "podledger_pod_ready_transitions_total": (*BASE, "to"),
    "podledger_pod_container_waits_total": (*CONTAINER, "reason"),
}


def rich_status() -> JSONDict:
    """A status that exercises every family: IPs, an init container, a restarted container, a
    terminated one, a disruption condition."""
    status = pods.running_status()
    status.update(hostIP="10.0.0.1", podIP="10.1.0.7", podIPs=[{"ip": "10.1.0.7"}, {"ip": "fd00::7"}])
    status["conditions"].append(pods.api_condition("DisruptionTarget", "True", reason="TerminationByKubelet"))
    main = status["containerStatuses"][0]
    main.update(
        containerID="process://b",
        restartCount=3,
        lastState={
            "terminated": {
                "exitCode": 137,
                "reason": "OOMKilled",
                "startedAt": "2026-01-01T00:00:00Z",
                "finishedAt": "2026-01-01T00:05:00Z",
                "containerID": "process://a",
            }
        },
    )
    done = {
        "exitCode": 0,
        "reason": "Completed",
        "startedAt": pods.API_TIME,
        "finishedAt": "2026-01-01T00:09:00Z",
    }
    status["containerStatuses"].append({**copy.deepcopy(main), "name": "job", "state": {"terminated": done}})
    status["initContainerStatuses"] = [
        {
            **copy.deepcopy(main),
            "name": "setup",
            "restartCount": 0,
            "lastState": {},
            "state": {"terminated": done},
        }
    ]
    return status


def page_of(*statuses: JSONDict) -> list:
    metrics = PodMetrics()
    for n, status in enumerate(statuses, start=1):
        metrics.apply(pods.versioned(POD, "node-a", n, status))
    return list(text_string_to_metric_families(metrics.render()))


def test_every_series_has_kube_state_metrics_labels_in_their_order() -> None:
    families = page_of(rich_status())
    seen = set()
    for family in families:
        for sample in family.samples:
            expected = {**KSM_LABELS, **PODLEDGER_LABELS}[sample.name]
            assert tuple(sample.labels) == expected, sample
            seen.add(sample.name)
    # Absent: the init container never waited nor restarted, nothing waits now.
    assert seen == (set(KSM_LABELS) | set(PODLEDGER_LABELS)) - {
        *(f"kube_pod_init_container_{s}" for s in ("status_waiting_reason", "status_last_terminated_reason")),
        *(f"kube_pod_init_container_status_last_terminated_{s}" for s in ("exitcode", "timestamp")),
        "kube_pod_container_status_waiting_reason",
        "podledger_pod_container_waits_total",
    }


def test_families_have_their_declared_types() -> None:
    kinds = {f.name.removesuffix("_total"): f.kind for f in FAMILIES}
    for family in page_of(rich_status()):
        assert family.type == kinds[family.name], family.name


def test_values_of_a_rich_status() -> None:
    rows = {
        (name, labels): v for name, labels, v in series.pod_series(pods.versioned(POD, "n", 1, rich_status()))
    }

    def get(name: str, **extra: str) -> float:
        found = [v for (n, ls), v in rows.items() if n == name and set(extra.items()) <= set(ls)]
        assert len(found) == 1, (name, extra, found)
        return found[0]

    assert get("kube_pod_info", host_ip="10.0.0.1", pod_ip="10.1.0.7", node="n") == 1
    assert get("kube_pod_ips", ip="fd00::7", ip_family="6") == 1
    assert get("kube_pod_ips", ip="10.1.0.7", ip_family="4") == 1
    assert get("kube_pod_start_time") == 1767225600  # 2026-01-01T00:00:00Z
    assert get("kube_pod_completion_time") == 1767225600 + 9 * 60  # the latest container finish
    assert get("kube_pod_container_status_last_terminated_timestamp", container="main") == 1767225600 + 300
    assert get("kube_pod_container_status_last_terminated_exitcode", container="main") == 137
    assert get("kube_pod_container_status_restarts_total", container="main") == 3
    assert get("kube_pod_container_status_terminated_reason", container="job", reason="Completed") == 1
    assert get("kube_pod_container_status_terminated", container="job") == 1
    assert get("kube_pod_container_status_running", container="job") == 0
    assert get("kube_pod_container_info", container="main", container_id="process://b") == 1
    assert get("kube_pod_status_disruption_reason", reason="TerminationByKubelet") == 1
    assert get("kube_pod_init_container_status_terminated_reason", reason="Completed") == 1


@pytest.mark.parametrize("phase", [*series.PHASES, ""])
def test_kube_pod_status_phase_is_one_hot_over_the_five_phases(phase: str) -> None:
    status = {**pods.running_status(), "phase": phase}
    rows = [
        (ls, v)
        for n, ls, v in series.pod_series(pods.versioned(POD, "n", 1, status))
        if n == "kube_pod_status_phase"
    ]
    if not phase:
        assert rows == []  # kube-state-metrics writes nothing for a pod without a phase
        return
    assert [dict(ls)["phase"] for ls, _ in rows] == list(series.PHASES)
    assert [dict(ls)["phase"] for ls, v in rows if v == 1] == [phase]


@pytest.mark.parametrize(
    ("reason", "expected"),
    [("Evicted", ["Evicted"]), ("NodeLost", ["NodeLost"]), ("SomethingElse", ["Other"]), ("", [])],
)
def test_kube_pod_status_reason(reason: str, expected: list[str]) -> None:
    status = {**pods.running_status(), "reason": reason}
    rows = series.pod_series(pods.versioned(POD, "n", 1, status))
    assert [dict(ls)["reason"] for n, ls, _ in rows if n == "kube_pod_status_reason"] == expected


@pytest.mark.parametrize(("ip", "family"), [("10.0.0.1", "4"), ("::ffff:10.0.0.1", "4"), ("fd00::1", "6")])
def test_kube_pod_ips_family(ip: str, family: str) -> None:
    status = {**pods.running_status(), "podIPs": [{"ip": ip}, {"ip": "not-an-ip"}]}
    rows = [
        dict(ls) for n, ls, _ in series.pod_series(pods.versioned(POD, "n", 1, status)) if n == "kube_pod_ips"
    ]
    assert rows == [{"namespace": "shop", "pod": "web", "uid": "uid-web", "ip": ip, "ip_family": family}]


def test_label_values_are_escaped() -> None:
    odd = pods.pod(("main",), name='we"b\\x', namespace="shop", uid="uid-odd")
    metrics = PodMetrics()
    metrics.apply(pods.versioned(odd, "n", 1, pods.running_status()))
    pod_names = {s.labels["pod"] for f in text_string_to_metric_families(metrics.render()) for s in f.samples}
    assert pod_names == {'we"b\\x'}


@pytest.mark.parametrize(
    ("value", "text"), [(1.0, "1"), (0.0, "0"), (1767225600, "1767225600"), (0.5, "0.5")]
)
def test_format_value(value: float, text: str) -> None:
    assert format_value(value) == text


def test_the_fold_s_own_history_of_a_workload() -> None:
    """A synthetic workload folded offline (the live fold's functions): every container death in
    the input is one termination on the page, and restarts match the runtime's counts."""
    events = list(workload(6, 300, nodes=2, seed=7))
    deaths = Counter(
        e.key for e in events if e.topic == Topic.PLEG and e.value.type == PlegEventType.CONTAINER_DIED
    )
    metrics = PodMetrics()
    for out in replay(encode(e.value) for e in events):
        if out.topic == Topic.POD_STATUS_HISTORY:
            metrics.apply(out.value)
        elif out.topic == Topic.POD_STATUS and out.value is not None:
            metrics.observe(out.value)
    terminations: Counter[str] = Counter()
    restarts: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics.render()):
        for sample in family.samples:
            if sample.name == "podledger_pod_container_terminations_total":
                terminations[sample.labels["uid"]] += sample.value
            if (
                sample.name == "kube_pod_container_status_restarts_total"
                and sample.labels["container"] == "app"
            ):
                restarts[sample.labels["uid"]] = sample.value
    assert sum(deaths.values()) > 10  # the workload does crash containers
    assert dict(terminations) == {uid: deaths.get(uid, 0) for uid in terminations}
    assert len(terminations) == 6
    for uid, died in deaths.items():
        assert (
            died - 1 <= restarts[uid] <= died
        )  # a death is followed by a restart, but the last may not be yet
